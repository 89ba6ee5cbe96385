"""The chain as the source of truth (rolebase.sent) on a real anvil: reads pinned at head - N, and the
send journal that never sends one call twice: it waits for a pending transaction, leaves one mined
past the view's block, and sends again one that a revert took off the chain."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from eth_utils import to_checksum_address

from core.chain import Receipt
from core.contracts import JobId, Protocol
from core.errors import TransientRPCError
from deploy.anvil import free_port
from deploy.devnet import Devnet
from rolebase.actions import Journaled
from rolebase.records import SENT_MIGRATION, RoleDb
from rolebase.sent import Confirmed, Journal, ReadHead, action_key

if TYPE_CHECKING:
    from tests.conftest import Parties


@dataclass(frozen=True)
class Pay(Journaled):
    """A stand-in for a one-call action: pay the outsider ``amount`` base units."""

    job_id: JobId
    amount: int


class Payer:
    """The inner responder: one transfer per action, every receipt kept."""

    def __init__(self, protocol: Protocol, to: str) -> None:
        self.protocol = protocol
        self.to = to
        self.receipts: list[Receipt] = []

    def perform(self, action: Pay) -> None:
        self.receipts.append(self.protocol.token.transfer(self.to, action.amount))


def records(tmp_path: Path) -> RoleDb:
    return RoleDb(tmp_path / "state.sqlite", ("CREATE TABLE final_jobs (job_id INTEGER PRIMARY KEY);", SENT_MIGRATION))


def test_action_keys_name_the_call_and_its_fields() -> None:
    assert action_key(Pay(JobId(7), 3)) == "Pay:7:3"


def test_a_confirmed_view_is_read_at_head_minus_n(devnet: Devnet, parties: Parties) -> None:
    token = devnet.protocol(parties.submitter).token
    before = token.balance_of(parties.outsider.address)
    token.transfer(parties.outsider.address, 5)
    token.transfer(parties.outsider.address, 6)
    head = ReadHead()
    seen = Confirmed(_Balance(devnet.protocol(), parties.outsider.address), devnet.client, 2, head).load()
    assert seen == before  # two blocks deep: neither transfer yet
    assert head.block == devnet.client.head() - 2
    assert Confirmed(_Balance(devnet.protocol(), parties.outsider.address), devnet.client, 0, head).load() == before + 11
    assert devnet.client.block_number() == devnet.client.head()  # the pin ends with the load


class _Balance:
    def __init__(self, protocol: Protocol, who: str) -> None:
        self.protocol = protocol
        self.who = who

    def load(self) -> int:
        return self.protocol.token.balance_of(self.who)


def test_the_journal_sends_again_only_what_the_chain_lost(devnet: Devnet, parties: Parties, tmp_path: Path) -> None:
    db = records(tmp_path)
    payer = Payer(devnet.protocol(parties.submitter), parties.outsider.address)
    head = ReadHead()
    journal = Journal(payer, devnet.client, db, head)
    action = Pay(JobId(1), 7)
    snapshot = devnet.chain.snapshot()
    head.block = devnet.client.head()
    journal.perform(action)
    first = payer.receipts[-1]
    assert db.sent_tx(action_key(action)) == first.tx_hash  # recorded (before broadcast)

    # the view has not reached the block it was mined in (confirmations): not sent again
    journal.perform(action)
    assert len(payer.receipts) == 1

    # the view saw that block and still asks (the chain moved on, and back to where this call is due): sent
    head.block = devnet.client.head()
    journal.perform(action)
    assert len(payer.receipts) == 2

    # rolled back (a snapshot reverted: as a restart from an older dump, or a reorg): the chain forgot it, so it is sent again
    devnet.client.rpc("evm_revert", [snapshot])
    devnet.client.reset_nonces()
    assert not devnet.client.tx_state(payer.receipts[-1].tx_hash).known
    head.block = devnet.client.head()
    journal.perform(action)
    assert len(payer.receipts) == 3 and devnet.client.tx_state(payer.receipts[-1].tx_hash).ok


def test_the_journal_waits_for_a_pending_transaction_instead_of_sending_it_twice(devnet: Devnet, parties: Parties, tmp_path: Path) -> None:
    db = records(tmp_path)
    protocol = devnet.protocol(parties.submitter)
    payer = Payer(protocol, parties.outsider.address)
    head = ReadHead(devnet.client.head())
    action = Pay(JobId(2), 9)
    before = protocol.token.balance_of(parties.outsider.address)
    devnet.client.rpc("evm_setAutomine", [False])
    try:
        # a daemon killed after the broadcast, before the receipt: its send is in the mempool
        sender = to_checksum_address(parties.submitter.address)
        nonce = devnet.client.w3.eth.get_transaction_count(sender, "pending")
        unsigned = protocol.token.contract.functions.transfer(parties.outsider.address, 9).build_transaction({"from": sender, "nonce": nonce})
        tx_hash = "0x" + bytes(devnet.client.w3.eth.send_raw_transaction(parties.submitter.sign_transaction(unsigned).raw_transaction)).hex()
        db.record_sent(action_key(action), 2, tx_hash, nonce)
        assert devnet.client.tx_state(tx_hash).pending
        devnet.client.rpc("evm_setIntervalMining", [1])  # the node mines it a second later
        Journal(payer, devnet.client, db, head).perform(action)  # the restarted daemon
    finally:
        devnet.client.rpc("evm_setIntervalMining", [0])
        devnet.client.rpc("evm_setAutomine", [True])
    assert payer.receipts == []  # nothing sent: it waited for the pending one
    assert protocol.token.balance_of(parties.outsider.address) == before + 9


def test_a_read_past_the_head_is_transient(devnet: Devnet) -> None:
    """A view pinned at a block the chain no longer has (it went back under the read) backs off and reloads."""
    beyond = devnet.client.head() + 50
    with pytest.raises(TransientRPCError, match="went back"):
        devnet.client.timestamp(beyond)
    with devnet.client.reading_at(beyond), pytest.raises(TransientRPCError, match="went back"):
        devnet.protocol().market.job_count()


def test_a_chain_that_is_not_there_is_one_clear_line(tmp_path: Path) -> None:
    port = free_port()  # nothing listens there
    run = subprocess.run(
        [sys.executable, "-m", "veritrain", "verifier", "status", "--rpc", f"http://127.0.0.1:{port}", "--address-book-dir", str(tmp_path),
         "--address", "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"],
        cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert run.returncode != 0
    assert run.stderr.strip().splitlines() == [
        f"error: TransientRPCError: no chain at http://127.0.0.1:{port}: eth_chainId could not connect (5 attempts); is the node running?"
    ]
