"""A reader's side of the data-availability game (docs/protocol.md, "Data availability"), shared by
the verifier (during its report window) and the whistleblower (during a challenge window).

What a replay needs (the manifest, checkpoint i) comes from the store by CID, verified there.
When the store does not serve it, or serves bytes that are not the committed ones (another CID's,
or a checkpoint that does not hash to its committed state hash), the item is first looked up on
chain, where a solver publishes what was challenged (``AvailabilityAnswered``, checked by the chain
against the committed leaf or manifest CID, and checked again here). A copy found there is put into
our store, so every later reader (the replay, the dispute replayer) finds it by CID. Failing that, the
item is retried for :data:`AVAILABILITY_WAIT_S` (:class:`ContentPending`: content may still be on
its way) and then challenged on chain: :class:`ContentUnavailable` carries the item to the role's
responder, which escrows the deposit and calls ``challengeAvailability`` (:func:`challenge`). The
challenger's clock (a report window, a challenge window) is paused until the solver publishes the
item; a solver that does not is slashed to the challenger.
"""

from __future__ import annotations

import logging
import time

from eth_utils import keccak

from core.agent import log_mined
from core.chain import Address
from core.cid import Cid
from core.contracts import JobId, Protocol
from core.errors import VeritrainError
from core.probe import Bytes32
from core.storage import ContentNotFound, ContentStore, StorageError
from core.storage.unixfs import CHUNK_SIZE, file_cid

log = logging.getLogger(__name__)

#: Seconds an item may stay missing before it is challenged (it may still be on its way to the store).
AVAILABILITY_WAIT_S = 10.0


def _state_hash(data: bytes) -> Bytes32:
    """keccak256 of a checkpoint's bytes: its leaf in the trace (``proofs.state_hash``)."""
    return Bytes32(keccak(data))


class ContentPending(VeritrainError):
    """An item is missing for less than :data:`AVAILABILITY_WAIT_S`: the next tick tries again."""


class ContentUnavailable(VeritrainError):
    """``item`` of the job (a checkpoint index, or the market's ``MANIFEST_ITEM``) cannot be had."""

    def __init__(self, job_id: JobId, item: int, problem: str) -> None:
        super().__init__(f"job {job_id}: {problem}: challenging its availability")
        self.job_id = job_id
        self.item = item


class Availability:
    """Published copies on chain and how long an item has been missing (a reader's side)."""

    def __init__(self, protocol: Protocol, store: ContentStore) -> None:
        self.protocol = protocol
        self.store = store
        self._missing_since: dict[str, float] = {}

    def fetch(self, job_id: JobId, item: int, cid: str, limit: int, deadline: int, what: str, expect_hash: Bytes32 | None = None) -> bytes:
        """``item`` of the job by its CID (and, for a checkpoint, its committed ``expect_hash``), or its
        copy published on chain; else :class:`ContentPending` a while, then :class:`ContentUnavailable`.
        ``deadline``: when the reader's own window ends (a challenge must be made before it)."""
        try:
            data = self.store.get(cid, limit)
            if expect_hash is None or _state_hash(data) == expect_hash:
                return data
            problem = f"{what} {cid} does not hash to its committed state hash"
        except ContentNotFound:
            problem = f"{what} {cid} is not served"
        except StorageError as exc:  # too large, forged: not the committed bytes
            problem = f"{what} {cid}: {exc}"
        published = self.published(job_id, item, cid, expect_hash)
        if published is not None:
            return published
        if self.patient(cid, deadline):
            raise ContentPending(f"{problem} yet")
        raise ContentUnavailable(job_id, item, problem)

    def published(self, job_id: JobId, item: int, cid: str, expect_hash: Bytes32 | None) -> bytes | None:
        """The copy of ``item`` published on chain, if there is one and it is the content we expect
        (``expect_hash`` for a checkpoint, else the CID), stored under its CID; else None."""
        published = self.protocol.market.published(job_id, item, self.protocol.book.deploy_block)
        # not another trace of this job (it was reopened), nor another job's content
        expected = (d for d in published if (_state_hash(d) == expect_hash if expect_hash is not None else file_cid(d) == cid))
        data = next(expected, None)
        if data is None:
            return None
        try:
            stored: Cid = self.store.put(data)
        except StorageError as exc:
            log.warning("cannot keep a published copy", extra={"job": job_id, "item": item, "error": str(exc)})
        else:
            log.info("took the published copy from the chain", extra={"job": job_id, "item": item, "cid": stored})
        self._missing_since.pop(cid, None)
        return data

    def manifest_page(self, cid: str, deadline: int) -> bytes:
        """One page of a long manifest by its CID (one block, verified by the store), for
        ``proofs.load_manifest``: :class:`ContentPending` while it has been missing for less than
        :data:`AVAILABILITY_WAIT_S`, then the store's error, which makes the manifest one that cannot
        be had whole (a manifest game, whose referees fetch the pages themselves, decides)."""
        try:
            return self.store.get(cid, CHUNK_SIZE)
        except ContentNotFound:
            if self.patient(cid, deadline):
                raise ContentPending(f"manifest page {cid} is not served yet") from None
            raise

    def patient(self, cid: str, deadline: int) -> bool:
        """Whether to wait longer for ``cid`` before challenging: it has been missing for less than
        :data:`AVAILABILITY_WAIT_S` and ``deadline`` is not upon us."""
        first = self._missing_since.setdefault(cid, time.monotonic())
        near = self.protocol.client.timestamp() >= deadline - AVAILABILITY_WAIT_S
        return not near and time.monotonic() - first < AVAILABILITY_WAIT_S


def challenge(p: Protocol, me: Address, unavailable: ContentUnavailable) -> None:
    """Escrow the deposit and challenge the item (the market refuses it if the job moved on)."""
    deposit = p.market.params().availability_deposit
    if deposit and p.token.allowance(me, p.market.address) < deposit:
        log_mined(log, "approve", p.token.approve(p.market.address, deposit), job=unavailable.job_id)
    receipt = p.market.challenge_availability(unavailable.job_id, unavailable.item)
    log_mined(log, "challengeAvailability", receipt, job=unavailable.job_id, item=unavailable.item, reason=str(unavailable))
