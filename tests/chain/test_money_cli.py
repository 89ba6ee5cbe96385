"""The money commands as real subprocesses on anvil: each one's refusal decoded to its custom error,
values and meaning in one line (nothing sent), and the happy paths they guard."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

from eth_utils import to_checksum_address

from core.chain import Signer
from core.contracts import Protocol
from deploy.anvil import dev_private_key
from deploy.devnet import Devnet
from rolebase.earnings import gas_spent

CLI = [sys.executable, "-m", "veritrain"]


def test_money_commands_and_their_decoded_refusals(devnet: Devnet, tmp_path: Path) -> None:
    devnet.book.save(tmp_path / f"{devnet.client.chain_id}.json")
    me, other = devnet.accounts[0].address, devnet.accounts[1].address
    protocol = Protocol.connect(devnet.client, devnet.book)
    eth_before, gas_before = devnet.client.balance(me), int(gas_spent(protocol, me)["wei"])
    env = {**os.environ, "MY_KEY": dev_private_key(1), "ETH_RPC_URL": devnet.rpc_url}  # foundry's variable is enough
    env.pop("VERITRAIN_RPC_URL", None)

    def veritrain(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*CLI, *args, "--address-book-dir", str(tmp_path)], capture_output=True, text=True, timeout=600, env=env)

    def refused(*args: str, error: str, meaning: str) -> None:
        nonce = devnet.client.w3.eth.get_transaction_count(to_checksum_address(me))
        result = veritrain(*args, "--key-env", "MY_KEY")
        assert result.returncode == 5, result.stderr
        line = result.stderr.strip()
        assert len(line.splitlines()) == 1 and line.startswith(f"error: {error}(") and meaning in line, line
        assert devnet.client.w3.eth.get_transaction_count(to_checksum_address(me)) == nonce  # refused at the estimate: nothing sent

    refused("stake", "solver", "1", error="StakeBelowMinimum", meaning="below the role's `minimum`")
    refused("unstake", "solver", "5", error="InsufficientStake", meaning="Not enough stake")
    refused("withdraw", "solver", error="NothingToWithdraw", meaning="nothing unbonding")
    refused("transfer", other, "999999999", error="ERC20InsufficientBalance", meaning="current `balance` of a `sender`")

    assert veritrain("stake", "solver", "150", "--key-env", "MY_KEY").returncode == 0
    unstaked = veritrain("unstake", "solver", "40", "--key-env", "MY_KEY", "--json")
    assert unstaked.returncode == 0, unstaked.stderr
    release_at = json.loads(unstaked.stdout)["release_at"]
    refused("withdraw", "solver", error="UnbondingNotElapsed", meaning="before the unbonding delay elapsed")

    raw = json.loads(veritrain("balance", me, "--json").stdout)  # --json: base units
    assert raw["stakes"]["solver"] == {"staked": str(110 * 10**18), "locked": "0", "unbonding": str(40 * 10**18), "release_at": release_at}
    assert int(raw["gas"]) > 0
    assert raw["credits"] == {"game": "0", "court": "0", "sealed_jobs": "0", "diloco": "0"}, "no game, case, forfeit or multi-party job paid it"
    nothing = veritrain("claim", "--key-env", "MY_KEY")
    assert nothing.returncode == 0 and "nothing to claim" in nothing.stdout, nothing.stderr
    human = veritrain("balance", me).stdout  # default: VERI and a date
    assert "110" in human and " UTC" in human
    status = veritrain("solver", "status", "--address", me, "--data-dir", str(tmp_path / "data"), "--json")
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)  # a role's status says the same, with the gas and the net earnings
    assert report["stake"]["unbonding"] == str(40 * 10**18) and report["unbonding_release_at"] == release_at
    assert report["gas"] == raw["gas"] and report["earnings_net"] == "0"

    sent = veritrain("transfer", other, "2.5", "--key-env", "MY_KEY")
    assert sent.returncode == 0, sent.stderr
    fresh = "0x000000000000000000000000000000000000dEaD"
    assert veritrain("fund", fresh, "--amount", "7").returncode == 0
    assert json.loads(veritrain("balance", fresh, "--json").stdout)["veri"] == str(7 * 10**18)
    env["POOR_KEY"] = "0x" + "42" * 32  # no gas: said in one line, with what to do
    poor = veritrain("transfer", other, "0", "--key-env", "POOR_KEY")
    assert poor.returncode == 3 and "NoGas" in poor.stderr and "not enough gas" in poor.stderr and len(poor.stderr.strip().splitlines()) == 1
    earned = json.loads(veritrain("earnings", me, "--json").stdout)
    assert {k: earned[k] for k in ("address", "total", "entries")} == {"address": me, "total": "0", "entries": []}
    # the wallet reconciles: its native balance fell by exactly the gas earnings counts (VERI moves cost only gas)
    assert earned["gas_spent"]["transactions"] >= 4 and eth_before - devnet.client.balance(me) == int(earned["gas_spent"]["wei"]) - gas_before > 0
    assert "ETH over" in veritrain("earnings", me).stdout


def test_a_keystore_password_is_asked_once_on_a_terminal(devnet: Devnet, tmp_path: Path) -> None:
    """A command that signs and reads its own address (``claim``) opens the keystore once: one prompt
    on its terminal (a pseudo-terminal it controls, as a shell's)."""
    devnet.book.save(tmp_path / f"{devnet.client.chain_id}.json")
    keystore = tmp_path / "key.json"
    keystore.write_text(json.dumps(Signer.from_env("K", env={"K": dev_private_key(2)}).encrypt("correct horse")))
    env = {k: v for k, v in os.environ.items() if k != "VERITRAIN_KEYSTORE_PASSWORD"} | {"VERITRAIN_RPC_URL": devnet.rpc_url}
    argv = [*CLI, "claim", "--keystore", str(keystore), "--address-book-dir", str(tmp_path)]
    pid, terminal = pty.fork()
    if pid == 0:  # the child: the command, on the pseudo-terminal
        os.execve(sys.executable, argv, env)
    # click writes "keystore password:", then getpass flushes what was typed and writes " ": answer after it
    seen, prompts = b"", 0
    while True:
        ready, _, _ = select.select([terminal], [], [], 600)
        assert ready, f"no output for 600 s: {seen!r}"
        try:
            chunk = os.read(terminal, 4096)
        except OSError:  # the terminal closed: the command exited
            break
        if not chunk:
            break
        seen += chunk
        if seen.count(b"keystore password: ") > prompts:
            prompts += 1
            os.write(terminal, b"correct horse\n")
    os.close(terminal)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0, seen
    assert prompts == 1, seen
    assert b"nothing to claim" in seen, seen
