"""The KeyRegistry on anvil: an unstaked account refused with the decoded custom error, a staked one
registers, rotates and reads back; the `veritrain keys` commands as real subprocesses."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from eth_utils import to_checksum_address

from core.contracts import Role
from core.reverts import revert_class
from core.sealing import EncryptionKey, new_data_key, unwrap, wrap
from deploy.anvil import dev_private_key
from deploy.devnet import Devnet
from rolebase.actions import stake

if TYPE_CHECKING:
    from tests.conftest import Parties

CLI = [sys.executable, "-m", "veritrain"]


def test_deployed_registry_reads_the_protocols_stakes(devnet: Devnet) -> None:
    proto = devnet.protocol()
    assert proto.keys.stake_manager() == proto.stakes.address
    assert proto.keys.address == devnet.book.address("KeyRegistry")
    assert devnet.book.contracts["KeyRegistry"].block >= devnet.book.contracts["AvailabilityCourt"].block  # deployed after the court


def test_unstaked_account_is_refused_and_a_staked_one_registers_and_rotates(devnet: Devnet, parties: Parties) -> None:
    proto = devnet.protocol(parties.verifier)
    first, second = EncryptionKey.generate(), EncryptionKey.generate()
    me = parties.verifier.address
    with pytest.raises(revert_class("NotStaked")) as refused:
        proto.keys.register_key(first.public_key)
    assert refused.value.values == {"account": me}
    assert not proto.keys.key_of(me).registered

    stake(proto, me, Role.VERIFIER, proto.stakes.min_stake(Role.VERIFIER))
    with pytest.raises(revert_class("ZeroKey")):
        proto.keys.register_key(bytes(32))
    receipt = proto.keys.register_key(first.public_key)
    (event,) = proto.keys.decode_events(receipt, "KeyRegistered")
    assert event.args == {"account": me, "key": first.public_key, "version": 1}
    read = devnet.protocol().keys.key_of(me)  # anyone reads it back
    assert (read.key, read.version) == (first.public_key, 1)

    proto.keys.register_key(second.public_key)
    rotated = devnet.protocol().keys.key_of(me)
    assert (rotated.key, rotated.version) == (second.public_key, 2)
    assert devnet.protocol().keys.key_of(parties.solver.address).version == 0

    # what the registry is for: a data key wrapped to the registered key opens with the private key only
    data_key = new_data_key()
    assert unwrap(wrap(data_key, rotated.key), second) == data_key


def test_keys_commands(devnet: Devnet, tmp_path: Path) -> None:
    devnet.book.save(tmp_path / f"{devnet.client.chain_id}.json")
    me = devnet.accounts[0].address
    env = {**os.environ, "MY_KEY": dev_private_key(1), "ETH_RPC_URL": devnet.rpc_url}
    env.pop("VERITRAIN_RPC_URL", None)
    data = ["--data-dir", str(tmp_path / "data")]

    def veritrain(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*CLI, "keys", *args], capture_output=True, text=True, timeout=600, env=env)

    made = veritrain("new", "k1", *data, "--json")
    assert made.returncode == 0, made.stderr
    info = json.loads(made.stdout)
    path = tmp_path / "data" / "encryption-keys" / "k1"
    assert info["file"] == str(path) and stat.S_IMODE(path.stat().st_mode) == 0o600
    assert info["public_key"] == "0x" + EncryptionKey.load(path).public_key.hex()
    assert path.read_bytes().hex() not in made.stdout + made.stderr  # the private key is never shown
    again = veritrain("new", "k1", *data)
    assert again.returncode == 2 and "exists already" in again.stderr and len(again.stderr.strip().splitlines()) == 1

    book = ["--address-book-dir", str(tmp_path)]
    nonce = devnet.client.w3.eth.get_transaction_count(to_checksum_address(me))
    refused = veritrain("register", "k1", *data, *book, "--key-env", "MY_KEY")
    line = refused.stderr.strip()
    assert refused.returncode == 5 and len(line.splitlines()) == 1, refused.stderr
    assert line.startswith(f"error: NotStaked(account={me})") and "may register an encryption key" in line, line
    assert devnet.client.w3.eth.get_transaction_count(to_checksum_address(me)) == nonce  # refused at the estimate

    stake(devnet.protocol(devnet.accounts[0]), me, Role.WHISTLEBLOWER, devnet.protocol().stakes.min_stake(Role.WHISTLEBLOWER))
    registered = veritrain("register", "k1", *data, *book, "--key-env", "MY_KEY", "--json")
    assert registered.returncode == 0, registered.stderr
    assert {k: json.loads(registered.stdout)[k] for k in ("address", "public_key", "version")} == {
        "address": me,
        "public_key": info["public_key"],
        "version": 1,
    }
    unchanged = veritrain("register", "k1", *data, *book, "--key-env", "MY_KEY")
    assert unchanged.returncode == 0 and "nothing sent" in unchanged.stdout, unchanged.stderr

    assert veritrain("new", "k2", *data).returncode == 0
    rotated = veritrain("register", "k2", *data, *book, "--key-env", "MY_KEY")
    assert rotated.returncode == 0 and "version 2" in rotated.stdout, rotated.stderr
    k2 = "0x" + EncryptionKey.load(tmp_path / "data" / "encryption-keys" / "k2").public_key.hex()
    shown = veritrain("show", me, *book, "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout) == {"address": me, "public_key": k2, "version": 2}
    assert k2 in veritrain("show", me, *book).stdout
    nobody = veritrain("show", devnet.accounts[1].address, *book)
    assert nobody.returncode == 0 and "no encryption key registered" in nobody.stdout

    (tmp_path / "data" / "encryption-keys" / "k2").chmod(0o644)
    loose = veritrain("register", "k2", *data, *book, "--key-env", "MY_KEY")
    assert loose.returncode == 2 and "open to group or others" in loose.stderr and len(loose.stderr.strip().splitlines()) == 1
    bad = veritrain("show", "0x123", *book)
    assert bad.returncode == 2 and "not an address" in bad.stderr
    helped = veritrain("--help")
    assert helped.returncode == 0 and all(c in helped.stdout for c in ("new", "register", "show"))
