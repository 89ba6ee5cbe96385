"""The chain as the source of truth for every role daemon: what it reads, and what it sends.

* Reads: :class:`Confirmed` wraps a role's loader so that the whole view is read at
  ``head - confirmations`` (:meth:`core.chain.ChainClient.reading_at`): a daemon acts only on
  what is that deep, and a reorg shallower than that never reaches its decisions.
* Sends: :class:`Journal` wraps a role's responder. For the actions whose type says so
  (:class:`rolebase.actions.Journaled`: one contract call each, keyed by the action's type and fields: ``Commit:7``), it records the transaction's
  hash in the role's records before broadcast, and before sending the same action again it asks
  the chain about that transaction: still pending, it waits for it rather than send a duplicate
  that would revert; mined in a block the view has not reached yet (the view is ``confirmations``
  behind), it leaves it; unknown to the chain (rolled back, reorged out, dropped) or mined in a
  block the view already saw (the chain moved on and asks again), it sends.

Local records are hints, the chain rules: a policy acts again on a job whose record says "done"
while the chain does not show it, and the journal keeps that from ever sending a call twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, fields, is_dataclass
from typing import Generic, TypeVar

from core.agent import Loader, Responder
from core.chain import BlockNumber, ChainClient, TxHash
from rolebase.actions import Journaled
from rolebase.records import RoleDb

log = logging.getLogger(__name__)

V = TypeVar("V")
A = TypeVar("A")

#: The devnet's default: anvil mines what it is sent, and nothing reorganizes it.
DEFAULT_CONFIRMATIONS = 0

#: The log message of a call sent again because the chain lost the transaction it was sent in.
RESENT = "our transaction is gone from the chain (rolled back, reorged out or dropped): sending again"


@dataclass
class ReadHead:
    """The block the latest view was read at (shared by :class:`Confirmed` and :class:`Journal`)."""

    block: BlockNumber = BlockNumber(0)


class Confirmed(Generic[V]):
    """A loader whose whole view is read at ``head - confirmations``."""

    def __init__(self, inner: Loader[V], client: ChainClient, confirmations: int, head: ReadHead) -> None:
        if confirmations < 0:
            raise ValueError("confirmations must be >= 0")
        self.inner = inner
        self.client = client
        self.confirmations = confirmations
        self.head = head

    def load(self) -> V:
        block = BlockNumber(max(0, self.client.head() - self.confirmations))
        with self.client.reading_at(block):
            view = self.inner.load()
        self.head.block = block
        return view


def action_key(action: object) -> str:
    """``Type:field:field`` of a dataclass action (``Commit:7``, ``Timeout:7:timeoutSolver``)."""
    assert is_dataclass(action)
    values = (getattr(action, f.name) for f in fields(action))
    return ":".join([type(action).__name__, *(str(getattr(v, "value", v)) for v in values)])


class _Entry:
    """Records one action's transaction in the role's records (a :class:`core.chain.SendJournal`)."""

    def __init__(self, records: RoleDb, key: str, job_id: int) -> None:
        self.records = records
        self.key = key
        self.job_id = job_id

    def signed(self, tx_hash: TxHash, nonce: int) -> None:
        self.records.record_sent(self.key, self.job_id, tx_hash, nonce)


class Journal(Generic[A]):
    """A responder that records the transaction of each :class:`~rolebase.actions.Journaled` action and never sends one twice."""

    def __init__(self, inner: Responder[A], client: ChainClient, records: RoleDb, head: ReadHead) -> None:
        self.inner = inner
        self.client = client
        self.records = records
        self.head = head

    def perform(self, action: A) -> None:
        if not isinstance(action, Journaled):
            self.inner.perform(action)
            return
        key = action_key(action)
        sent = self.records.sent_tx(key)
        if sent is not None and not self._send_again(key, sent):
            return
        with self.client.journaled(_Entry(self.records, key, int(getattr(action, "job_id", 0)))):
            self.inner.perform(action)

    def _send_again(self, key: str, tx_hash: str) -> bool:
        """Whether the action may be sent again, given the transaction it was last sent in."""
        state = self.client.tx_state(tx_hash)
        if state.pending:
            log.info("waiting for our pending transaction instead of sending it again", extra={"call": key, "tx": tx_hash})
            receipt = self.client.wait_for(TxHash(tx_hash), key)
            log.info("pending transaction mined", extra={"call": key, "tx": tx_hash, "block": receipt.block_number})
            return False
        if state.known and state.ok and state.block is not None and state.block > self.head.block:
            log.debug("mined, the view has not reached its block", extra={"call": key, "tx": tx_hash, "block": state.block})
            return False
        if not state.known:
            log.warning(RESENT, extra={"call": key, "tx": tx_hash})
        return True
