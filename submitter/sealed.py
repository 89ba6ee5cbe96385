"""The submitter's side of a sealed job (issue 30, docs/sealing.md): its data key kept on disk, the job
sealed straight after its post, and the watch that hands the key to the parties the chain entitles,
answers demands for it and takes the key bond back once the job settled.

The data key is written to ``<data-dir>/data-keys/<sealed dataset CID>`` before the job is posted
(``submitter.datakeys``), so a crash at any later point loses nothing: the job's spec names that CID,
and :func:`seal_posted` (``submit seal``) or :class:`Watch` find the key from it. Nothing else is kept: every tick of the watch decides
from the chain alone (:func:`plan`), so a restart, or two watches, do nothing twice that the chain
already shows (a wrap is made once per key version, ``rolebase.keygame.to_wrap``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from core.agent import log_mined
from core.chain import Address, Receipt
from core.contracts import ZERO_ADDRESS, GameId, Job, JobId, JobState, KeyDemand, Protocol, RegisteredKey, Role, Sealing, SealingStatus, TokenAmount
from core.errors import ChainError
from core.sealing import key_hash
from core.storage import ContentStore
from proofs.errors import ProofError
from proofs.spec import load_spec
from rolebase.actions import ClaimCredit, creditor
from rolebase.keygame import AnswerDemand, KeyGame, KeyGameAction, PublishWraps, ReturnBond, to_wrap
from submitter import service
from submitter.datakeys import DataKeys, seal_job
from submitter.errors import SubmitError

log = logging.getLogger(__name__)

#: Solvers a sealed job's key is wrapped to before one claims it (``--max-readers``): each may read the
#: data and not claim, so a submitter bounds how many strangers read it for one claim.
MAX_READERS = 3


def _kept_key(protocol: Protocol, store: ContentStore, keys: DataKeys, job_id: int) -> bytes:
    """The data key of our job ``job_id`` whose spec is sealed, from the file its dataset CID names,
    checked against the job's commitment when it has one."""
    try:
        spec = load_spec(service.fetch_spec(protocol, store, job_id))
    except ProofError as exc:
        raise SubmitError(f"job {job_id}: its spec cannot be read: {exc}") from None
    if not spec.dataset.sealed:
        raise SubmitError(f"job {job_id}'s spec is not sealed (it was posted without --sealed)")
    data_key = keys.load(spec.dataset.cid)
    sealing = protocol.sealed_jobs.sealing_of(JobId(job_id))
    if sealing.status is not SealingStatus.NONE and key_hash(data_key) != sealing.key_hash:
        raise SubmitError(f"job {job_id}: the data key at {keys.path(spec.dataset.cid)} is not the one the job was sealed with")
    return data_key


def seal_posted(protocol: Protocol, store: ContentStore, keys: DataKeys, job_id: int) -> dict[str, Receipt]:
    """Seal our Open job posted with ``--sealed`` whose seal did not go through, from its kept key."""
    job = service.get_job(protocol, job_id)
    me = service._me(protocol)
    if job.submitter != me:
        raise SubmitError(f"job {job_id} was posted by {job.submitter}, not by {me}: only its submitter seals it")
    status = protocol.sealed_jobs.sealing_of(JobId(job_id)).status
    if status is not SealingStatus.NONE:
        raise SubmitError(f"job {job_id} is sealed already ({status.name})")
    if job.state is not JobState.OPEN:
        raise SubmitError(f"job {job_id} is {job.state.name}: a job is sealed only while OPEN")
    data_key = _kept_key(protocol, store, keys, job_id)
    bond = job.reward + job.verifier_fee
    if (have := protocol.token.balance_of(me)) < bond:
        raise SubmitError(f"insufficient balance: {me} holds {have} base units, the key bond is {bond}")
    return seal_job(protocol, me, JobId(job_id), data_key)


@dataclass(frozen=True)
class SealedView:
    """What the chain says of one of our sealed jobs, read at one tick (:func:`read_view`)."""

    job_id: JobId
    job: Job
    sealing: Sealing
    demand: KeyDemand
    now: int
    wrapped: Mapping[Address, int]
    """Recipient -> the newest key version a wrap was published for (``SealedJobs.wrapped``)."""
    solver_asks: tuple[Address, ...]
    """Solvers that asked while the job was Open and are eligible now, oldest ask first."""
    auditor_asks: tuple[Address, ...]
    """Whistleblowers that asked while it was Verified, eligible now, neither its solver nor its verifier."""
    referees: tuple[Address, ...]
    """The referees seated in the job's undecided dispute games."""
    registered: Mapping[Address, RegisteredKey]
    credit: TokenAmount
    """What ``SealedJobs`` owes us (a returned bond, until claimed)."""


Move = KeyGameAction | ClaimCredit


def plan(view: SealedView, max_readers: int) -> tuple[list[Move], bool]:
    """The moves on one sealed job now, and whether the watch is done with it (its bond back and claimed,
    or spent). An open first demand is answered by a wrap and a second by the key (else the bond is
    forfeited); it is answered before any other wrap, and its party is left to the answer."""
    status = view.sealing.status
    if status in (SealingStatus.RETURNED, SealingStatus.FORFEITED):
        return ([ClaimCredit("sealed_jobs")] if view.credit > 0 else []), True
    if view.job.state.final:
        return [ReturnBond(view.job_id)], False
    if status is not SealingStatus.ACTIVE:  # Revealed: the key is public, nothing to hand out
        return [], False
    moves: list[Move] = []
    answering = view.demand.party if view.demand.open and view.now <= view.demand.deadline else None
    if answering is not None:
        moves.append(AnswerDemand(view.job_id, answering))
    entitled: list[Address] = []
    if view.job.state is JobState.OPEN:
        readers = [a for a in view.solver_asks if a in view.wrapped]
        fresh = [a for a in view.solver_asks if a not in view.wrapped]
        entitled += readers + fresh[: max(0, max_readers - len(readers))]
    entitled += [a for a in (view.job.solver, view.job.verifier) if a != ZERO_ADDRESS]
    entitled += [*view.auditor_asks, *view.referees]
    recipients = to_wrap((a for a in entitled if a != answering), view.wrapped, view.registered)
    if recipients:
        moves.append(PublishWraps(view.job_id, recipients))
    return moves, False


def read_view(protocol: Protocol, job_id: JobId, me: Address) -> SealedView:
    """Read one sealed job's view: its job, sealing, demand, wraps, the asks by phase and the referees."""
    sealed, market, start = protocol.sealed_jobs, protocol.market, protocol.book.deploy_block
    job = market.get_job(job_id)
    claims = [e.block_number for e in market.events("JobClaimed", start, jobId=job_id)]
    reopens = [e.block_number for e in market.events("JobReopened", start, jobId=job_id)]
    solver_asks: list[Address] = []
    auditor_asks: list[Address] = []
    for ask in sealed.wrap_requests(job_id, start):
        # requestWrap is taken while Open (a solver) or Verified (a whistleblower): the job was Open at
        # an ask unless a claim came in an earlier block and no reopen since (a reopen may share its block)
        last_claim = max((b for b in claims if b < ask.block_number), default=-1)
        was_open = last_claim < 0 or any(last_claim < b <= ask.block_number for b in reopens)
        (solver_asks if was_open else auditor_asks).append(ask.party)
    solvers = [a for a in dict.fromkeys(solver_asks) if protocol.stakes.is_eligible(a, Role.SOLVER)]
    auditors = [a for a in dict.fromkeys(auditor_asks) if a not in (job.solver, job.verifier) and protocol.stakes.is_eligible(a, Role.WHISTLEBLOWER)]
    referees: list[Address] = []
    for opened in protocol.game.events("DisputeOpened", start, jobId=job_id):
        game_id = GameId(int(opened.args["gameId"]))
        if not protocol.game.get_game(game_id).status.final:
            referees += protocol.game.committee(game_id)
    candidates = dict.fromkeys([*solvers, job.solver, job.verifier, *auditors, *referees]).keys() - {ZERO_ADDRESS}
    return SealedView(
        job_id=job_id,
        job=job,
        sealing=sealed.sealing_of(job_id),
        demand=sealed.demand_of(job_id),
        now=protocol.client.timestamp(),
        wrapped=sealed.wrapped(job_id, start),
        solver_asks=tuple(solvers),
        auditor_asks=tuple(auditors),
        referees=tuple(dict.fromkeys(referees)),
        registered={a: protocol.keys.key_of(a) for a in candidates},
        credit=sealed.credit(me),
    )


class Watch:
    """Our sealed jobs, watched until each settled and its bond came back (``submit watch``): call
    :meth:`tick` every poll; :attr:`jobs` holds those still watched."""

    def __init__(self, protocol: Protocol, store: ContentStore, keys: DataKeys, jobs: Sequence[int], max_readers: int = MAX_READERS) -> None:
        if max_readers < 1:
            raise SubmitError("--max-readers must be at least 1: a sealed job needs a solver that can read it")
        self.protocol = protocol
        self.me = service._me(protocol)
        self.max_readers = max_readers
        self.data_keys: dict[JobId, bytes] = {}
        for job_id in dict.fromkeys(jobs):
            job = service.get_job(protocol, job_id)
            if job.submitter != self.me:
                raise SubmitError(f"job {job_id} was posted by {job.submitter}, not by {self.me}: only its submitter watches its key")
            sealing = protocol.sealed_jobs.sealing_of(JobId(job_id))
            if sealing.status is SealingStatus.NONE:
                raise SubmitError(f"job {job_id} is not sealed" + (f": veritrain submit seal {job_id}" if job.state is JobState.OPEN else ""))
            self.data_keys[JobId(job_id)] = _kept_key(protocol, store, keys, job_id)
        self.jobs: list[JobId] = list(self.data_keys)
        self.game = KeyGame(protocol, self.me, self.data_keys.get, log)

    def tick(self) -> list[Move]:
        """Read every watched job, make its moves; drop the jobs that are done. A chain error on one
        job is logged and that job tried again next tick. Returns the moves made."""
        made: list[Move] = []
        for job_id in list(self.jobs):
            try:
                moves, done = plan(read_view(self.protocol, job_id, self.me), self.max_readers)
                for move in moves:
                    self._perform(move)
                    made.append(move)
            except ChainError as exc:
                log.warning("sealed job not served this tick", extra={"job": job_id, "error": str(exc)})
                continue
            if done:
                self.jobs.remove(job_id)
                log.info("sealed job settled: no longer watched", extra={"job": job_id})
        return made

    def _perform(self, move: Move) -> None:
        if isinstance(move, ClaimCredit):
            log_mined(log, "claimCredit", creditor(self.protocol, move.source).claim_credit(self.me), source=move.source)
        else:
            self.game.perform(move)
