"""A reader's side of the data-availability game (docs/protocol.md, "Data availability"), shared by
the verifier (during its report window) and the whistleblower (during a challenge window).

What a replay needs (the manifest, checkpoint i) comes from the store by CID, verified there.
When the store does not serve it, or serves bytes that are not the committed ones (another CID's,
or a checkpoint that does not hash to its committed state hash), the item is first looked up on
chain, where a solver publishes what was challenged (``AvailabilityAnswered``, checked by the chain
against the committed leaf or manifest CID, and checked again here). A copy found there is put into
our store, so every later reader (the replay, the dispute replayer) finds it by CID. Failing that, the
item is retried for :data:`AVAILABILITY_WAIT_S` (:class:`ContentPending`: content may still be on
its way) and then challenged: :class:`ContentUnavailable` carries every item the reader lacks
(:meth:`Availability.gather` tries them all first) to the role's responder, which opens one
``AvailabilityCourt`` case naming all of them with one deposit (:func:`challenge`): a committee drawn
by stake fetches them by CID and votes, whatever their size. Only a manifest the referees of a
manifest game need on chain (served, but not the committed trace's) is challenged on the JobMarket's
own path, where the solver publishes its bytes. Either way the challenger's clock (a report window, a
challenge window) is paused, and a solver that did not serve is slashed to the challenger.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol as Structural

from eth_utils import keccak

from core.agent import log_mined
from core.calls import Book, Located, Logs, TokenCalls
from core.chain import Address, Receipt
from core.cid import Cid
from core.contracts import MANIFEST_ITEM, Case, CourtParams, Job, JobId, MarketParams, Protocol, Role, StakeInfo, TokenAmount, lacking_bitmap
from core.errors import VeritrainError
from core.probe import Bytes32
from core.storage import ContentNotFound, ContentStore, StorageError
from core.storage.unixfs import CHUNK_SIZE, file_cid

log = logging.getLogger(__name__)

#: Seconds an item may stay missing before it is challenged (it may still be on its way to the store).
AVAILABILITY_WAIT_S = 10.0
#: Seconds a fetch may run before the reader's loop challenges the item it waits for (a gateway that
#: answers and then drips a byte now and then holds a fetch; the loop, not the fetch, decides), and the
#: seconds before its own deadline at which a fetch still running is challenged whatever its age.
FETCH_STALL_S = 30.0
FETCH_DEADLINE_MARGIN_S = 20.0


@dataclass(frozen=True)
class Fetching:
    """An item a worker is fetching for a job, and for how long (seconds)."""

    item: int
    seconds: float


def _state_hash(data: bytes) -> Bytes32:
    """keccak256 of a checkpoint's bytes: its leaf in the trace (``proofs.state_hash``)."""
    return Bytes32(keccak(data))


class ContentPending(VeritrainError):
    """An item is missing for less than :data:`AVAILABILITY_WAIT_S`: the next tick tries again."""


class ContentUnavailable(VeritrainError):
    """``items`` of the job (checkpoint indices, or the market's ``MANIFEST_ITEM``) cannot be had;
    ``item`` is the first. ``on_chain``: ``item`` is to be published on chain by the solver (the
    JobMarket's own path: one item, bounded by block gas), as the manifest the referees of a manifest
    game need there; otherwise a committee fetches them all (the court)."""

    def __init__(self, job_id: JobId, item: int, problem: str, *, items: Sequence[int] = (), on_chain: bool = False) -> None:
        super().__init__(f"job {job_id}: {problem}: challenging its availability")
        self.job_id = job_id
        self.item = item
        self.items = tuple(items) or (item,)
        self.on_chain = on_chain


@dataclass(frozen=True)
class Wanted:
    """One item a reader needs: its number (checkpoint index or ``MANIFEST_ITEM``), its CID, the
    largest size it may have, a name for messages, and a checkpoint's committed state hash."""

    item: int
    cid: str
    limit: int
    what: str
    expect_hash: Bytes32 | None = None


class Availability:
    """Published copies on chain and how long an item has been missing (a reader's side)."""

    def __init__(self, protocol: Protocol, store: ContentStore) -> None:
        self.protocol = protocol
        self.store = store
        self._missing_since: dict[str, float] = {}
        self._fetching: dict[int, tuple[int, float, int]] = {}  # job -> (item, since, thread) of the fetch in flight

    def fetching(self, job_id: JobId) -> Fetching | None:
        """The item a worker is fetching for ``job_id`` right now, and for how long (read by the loop)."""
        entry = self._fetching.get(int(job_id))
        return None if entry is None else Fetching(entry[0], time.monotonic() - entry[1])

    def _get(self, job_id: JobId, item: int, cid: str, limit: int) -> bytes:
        """``store.get``, registered as in flight while it runs (:meth:`fetching`)."""
        me = threading.get_ident()
        self._fetching[int(job_id)] = (item, time.monotonic(), me)
        try:
            return self.store.get(cid, limit)
        finally:
            if self._fetching.get(int(job_id), (0, 0.0, 0))[2] == me:
                self._fetching.pop(int(job_id), None)

    def fetch(self, job_id: JobId, item: int, cid: str, limit: int, deadline: int, what: str, expect_hash: Bytes32 | None = None) -> bytes:
        """``item`` of the job by its CID (and, for a checkpoint, its committed ``expect_hash``), or its
        copy published on chain; else :class:`ContentPending` a while, then :class:`ContentUnavailable`.
        ``deadline``: when the reader's own window ends (a challenge must be made before it). An item
        published on chain (challenged before, and answered) is read from there first: the source that
        failed us once is not asked again."""
        if self.protocol.market.is_published(job_id, item):
            published = self.published(job_id, item, cid, expect_hash)
            if published is not None:
                return published
        asked = time.monotonic()
        try:
            data = self._get(job_id, item, cid, limit)
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
        if self.patient(cid, deadline, asked):
            raise ContentPending(f"{problem} yet")
        raise ContentUnavailable(job_id, item, problem)

    def gather(self, job_id: JobId, wanted: Sequence[Wanted], deadline: int) -> None:
        """Fetch every wanted item (each is then in our store, or on chain); if any is still
        missing past the wait, :class:`ContentUnavailable` names all of those, so one challenge
        covers them. :class:`ContentPending` while any may still come."""
        lacking: list[int] = []
        problem = ""
        pending: ContentPending | None = None
        for w in wanted:
            try:
                self.fetch(job_id, w.item, w.cid, w.limit, deadline, w.what, w.expect_hash)
            except ContentPending as exc:
                pending = exc
            except ContentUnavailable as exc:
                lacking.append(w.item)
                problem = problem or str(exc).split(": challenging")[0].removeprefix(f"job {job_id}: ")
        if pending is not None:
            raise pending
        if lacking:
            raise ContentUnavailable(job_id, lacking[0], f"{problem} ({len(lacking)} items lacking)", items=lacking)

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
        asked = time.monotonic()
        try:
            return self.store.get(cid, CHUNK_SIZE)
        except ContentNotFound:
            if self.patient(cid, deadline, asked):
                raise ContentPending(f"manifest page {cid} is not served yet") from None
            raise

    def patient(self, cid: str, deadline: int, asked: float) -> bool:
        """Whether to wait longer for ``cid`` before challenging: it has been missing for less than
        :data:`AVAILABILITY_WAIT_S` and ``deadline`` is not upon us. Missing since the first fetch that
        failed was ``asked`` (its start, ``time.monotonic()``): a fetch that a gateway held until the
        fetcher's deadline has waited long enough already, and is not asked again for that long."""
        first = self._missing_since.setdefault(cid, asked)
        near = self.protocol.client.timestamp() >= deadline - AVAILABILITY_WAIT_S
        return not near and time.monotonic() - first < AVAILABILITY_WAIT_S


class ChallengeMarket(Located, Structural):
    def get_job(self, job_id: JobId) -> Job: ...

    def params(self) -> MarketParams: ...

    def challenge_availability(self, job_id: JobId, item: int) -> Receipt: ...


class ChallengeCourt(Logs, Located, Structural):
    def params(self) -> CourtParams: ...

    def get_case(self, case_id: int) -> Case: ...

    def challenge(self, job_id: JobId, lacking: bytes) -> tuple[int, Receipt]: ...


class ChallengeStakes(Logs, Structural):
    def min_stake(self, role: Role) -> TokenAmount: ...

    def stake_of(self, account: str, role: Role) -> StakeInfo: ...

    def free_stake(self, account: str, role: Role) -> TokenAmount: ...


class ChallengeCalls(Structural):
    """What :func:`challenge` reads and sends (``core.contracts.Protocol`` has it all): the job, who
    could sit on a court's committee, our cases on the job, the approval and the challenge."""

    @property
    def market(self) -> ChallengeMarket: ...

    @property
    def court(self) -> ChallengeCourt: ...

    @property
    def stakes(self) -> ChallengeStakes: ...

    @property
    def token(self) -> TokenCalls: ...

    @property
    def book(self) -> Book: ...


def court_open(p: ChallengeCalls, me: Address, job_id: JobId, names_manifest: bool) -> bool:
    """Whether a court case can decide for us: we opened no case of this kind on the job's trace
    (one naming the manifest, one naming only checkpoints), and enough verifiers other than the job's
    parties and us have the member bond free to seat a committee (else the case would end undecided
    and the clock would resume with nothing fetched)."""
    job = p.market.get_job(job_id)
    params = p.court.params()
    count = job.checkpoint_count
    for opened in p.court.events("CaseOpened", p.book.deploy_block, jobId=job_id, challenger=me):
        case = p.court.get_case(int(opened.args["caseId"]))
        lacking = bytes(opened.args["lacking"])
        if bytes(case.trace_root) == bytes(job.trace_root) and bool(lacking[-1] >> (count % 8) & 1) == names_manifest:
            return False
    verifiers = {Address(e.args["account"]) for e in p.stakes.events("Staked", p.book.deploy_block, role=int(Role.VERIFIER))}
    verifiers -= {job.solver, job.verifier, job.submitter, me}
    minimum = p.stakes.min_stake(Role.VERIFIER)
    seatable = [v for v in verifiers if p.stakes.stake_of(v, Role.VERIFIER).staked >= minimum and p.stakes.free_stake(v, Role.VERIFIER) >= params.referee_bond]
    return len(seatable) >= params.committee_size


def challenge(p: ChallengeCalls, me: Address, unavailable: ContentUnavailable) -> None:
    """One challenge naming every lacking item, one approve: an ``AvailabilityCourt`` case; the
    JobMarket's own path (the solver publishes one item on chain) for a manifest the referees need on
    chain, and where no court case can decide (:func:`court_open`). The chain refuses either if the
    job moved on."""
    job_id = unavailable.job_id
    if unavailable.on_chain or not court_open(p, me, job_id, MANIFEST_ITEM in unavailable.items):
        deposit = p.market.params().availability_deposit
        if deposit and p.token.allowance(me, p.market.address) < deposit:
            log_mined(log, "approve", p.token.approve(p.market.address, deposit), job=job_id)
        receipt = p.market.challenge_availability(job_id, unavailable.item)
        log_mined(log, "challengeAvailability", receipt, job=job_id, item=unavailable.item, reason=str(unavailable))
        return
    count = p.market.get_job(job_id).checkpoint_count
    deposit = p.court.params().deposit(len(set(unavailable.items)))
    if deposit and p.token.allowance(me, p.court.address) < deposit:
        log_mined(log, "approve", p.token.approve(p.court.address, deposit), job=job_id)
    case_id, receipt = p.court.challenge(job_id, lacking_bitmap(count, unavailable.items))
    log_mined(log, "court challenge", receipt, job=job_id, case=case_id, items=len(set(unavailable.items)), reason=str(unavailable))
