"""The multi-party duties' performer (:mod:`rolebase.multiparty` has the view and the decisions): it
fetches every input by CID, checks it against what the chain committed and judges rounds with
:func:`proofs.diloco.judge_round`. A module of its own because it loads the training stack, which a
command line that only reads the chain does not."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
from eth_utils import keccak

from core.agent import log_mined
from core.chain import Address
from core.cid import Cid, cid_to_digest, digest_to_cid
from core.contracts import Ballot, JobId, JobState, MultipartyJob, MultipartyPhase, Protocol, court_commitment
from core.dispute import committed_vote, derive_salt
from core.errors import TransientRPCError
from core.probe import Bytes32
from core.storage import ContentStore, StorageError, file_cid
from proofs.checkpoint import decode_checkpoint, state_hash
from proofs.data import Dataset
from proofs.diloco import (
    MAX_CONTRIBUTION_BYTES,
    MAX_DOCUMENT_BYTES,
    MultipartyConfig,
    OuterState,
    PartyRound,
    check_round,
    contribution_hash,
    contribution_of,
    decode_document,
    judge_round,
    party_job,
    residual_after,
)
from proofs.errors import ProofError
from proofs.manifest import MAX_MANIFEST_BYTES, committed_manifest
from proofs.spec import JobSpec, Limits, load_spec
from rolebase.capabilities import round_spec
from rolebase.inputs import fetch_dataset
from rolebase.multiparty import MultipartyAction, MultipartyMove, RoundFit
from rolebase.watchers import MarketWatcher

log = logging.getLogger(__name__)
T = TypeVar("T")

#: A multi-party job whose document the store did not serve is asked for again after this long.
FIT_RETRY_S = 30.0


@dataclass(frozen=True)
class JobInputs:
    """What a multi-party job's document names, fetched and checked: the base spec, its dataset, the
    settings and the stamp of its global states (the base spec's hash)."""

    spec: JobSpec
    dataset: Dataset
    cfg: MultipartyConfig

    @property
    def stamp(self) -> str:
        return self.spec.spec_hash()


class MultipartyDuty:
    """Carries out :class:`MultipartyMove` for one account. ``salt_secret`` (a judge's): at least 32
    secret bytes kept in the role's records (a vote's salt is derived from it, so nothing about a vote
    is stored); ``begun`` (a party's): told each inner job this account began and its spec's CID, so
    that the role trains it as a job it holds; ``fit`` (a party's): its verdict on a round of
    ``rolebase.capabilities.round_spec`` in a work window of so many seconds, the one check before it
    joins a slot or begins a round, kept in :attr:`fits` (which its watcher reads)."""

    def __init__(
        self,
        protocol: Protocol,
        store: ContentStore,
        watcher: MarketWatcher,
        me: Address,
        *,
        salt_secret: Callable[[], bytes] | None = None,
        begun: Callable[[JobId, Cid], None] | None = None,
        fit: Callable[[JobSpec, int], RoundFit] | None = None,
    ) -> None:
        self.protocol = protocol
        self.store = store
        self.watcher = watcher
        self.me = me
        self._salt_secret = salt_secret
        self._begun = begun
        self._fit = fit
        self.fits: dict[int, RoundFit] = {}  # job -> our verdict on its rounds (final: the spec and the windows are fixed)
        self._fit_retry: dict[int, float] = {}  # job -> when to fetch its document again after the store failed
        self._inputs: dict[int, JobInputs] = {}
        self._checked: set[tuple[int, int, str, bytes]] = set()
        self._derived: dict[tuple[int, int, int], bytes] = {}  # (job, round, slot) -> the inner spec's CID digest
        self._residuals: dict[tuple[int, int, int, Address], Mapping[str, torch.Tensor] | None] = {}  # (job, slot, round, party) -> residual in
        self._paid: dict[tuple[int, int], int] = {}  # (job, round) -> the final aggregate's included mask
        self._opened: dict[tuple[int, int], tuple[bytes, bytes]] = {}  # (job, round) -> its global model's CID digest and state hash

    def perform(self, move: MultipartyMove) -> None:
        d = self.protocol.diloco
        job = d.get_job(move.job_id)
        if job.round != move.round and move.action not in (MultipartyAction.FIT, MultipartyAction.JOIN):
            log.debug("multi-party move no longer due", extra={"job": move.job_id, "move": move.action.value})
            return
        fields = {"job": move.job_id, "round": job.round}
        match move.action, job.phase:
            case MultipartyAction.FIT, MultipartyPhase.WORKING:
                self._judge_fit(move.job_id, job)
            case MultipartyAction.JOIN, MultipartyPhase.WORKING:
                log_mined(log, "multi-party join", d.join(move.job_id, move.slot), slot=move.slot, **fields)
            case MultipartyAction.BEGIN, MultipartyPhase.WORKING:
                self._begin(move.job_id, job, move.slot)
            case MultipartyAction.CONTRIBUTE, MultipartyPhase.WORKING:
                self._contribute(move.job_id, job, move.slot)
            case MultipartyAction.CLOSE, MultipartyPhase.WORKING:
                log_mined(log, "multi-party closeRound", d.close_round(move.job_id), **fields)
            case MultipartyAction.DRAW, MultipartyPhase.DRAWING:
                log_mined(log, "multi-party drawAggregator", d.draw_aggregator(move.job_id), **fields)
            case MultipartyAction.AGGREGATE, MultipartyPhase.AGGREGATING:
                self._aggregate(move.job_id, job)
            case MultipartyAction.TIMEOUT, MultipartyPhase.AGGREGATING:
                log_mined(log, "multi-party timeoutAggregator", d.timeout_aggregator(move.job_id), **fields)
            case MultipartyAction.CHECK, MultipartyPhase.PROPOSED:
                self._check(move.job_id, job)
            case MultipartyAction.FINALIZE, MultipartyPhase.PROPOSED:
                log_mined(log, "multi-party finalizeRound", d.finalize_round(move.job_id), **fields)
            case MultipartyAction.DRAW_COMMITTEE, MultipartyPhase.CONTESTED:
                log_mined(log, "multi-party drawCommittee", d.draw_committee(move.job_id), **fields)
            case MultipartyAction.COMMIT, MultipartyPhase.CONTESTED:
                self._vote(move.job_id, job)
            case MultipartyAction.REVEAL, MultipartyPhase.CONTESTED:
                self._reveal(move.job_id)
            case MultipartyAction.SETTLE, MultipartyPhase.CONTESTED:
                log_mined(log, "multi-party settleChallenge", d.settle_challenge(move.job_id), **fields)
            case _:
                log.debug("multi-party move no longer due", extra={"job": move.job_id, "move": move.action.value})

    # ------------------------------------------------------------------ content

    def document(self, job: MultipartyJob) -> tuple[JobSpec, MultipartyConfig]:
        """The job's base spec and settings: its document and the spec it names, fetched by CID and
        checked against the chain's shape."""
        spec_cid, cfg = decode_document(self.store.get(digest_to_cid(job.spec_cid), MAX_DOCUMENT_BYTES))
        if (cfg.parties, cfg.rounds, cfg.quorum) != (job.parties, job.rounds, job.min_parties):
            raise ProofError(
                f"the job's document says {cfg.parties} parties, {cfg.rounds} rounds, quorum {cfg.quorum}; the chain {job.parties}, {job.rounds}, {job.min_parties}"
            )
        return load_spec(self.store.get(spec_cid, Limits.SPEC_BYTES)), cfg

    def inputs(self, job_id: int, job: MultipartyJob) -> JobInputs:
        """The job's base spec, settings and dataset, fetched once (:meth:`document`)."""
        cached = self._inputs.get(job_id)
        if cached is not None:
            return cached
        spec, cfg = self.document(job)
        inputs = JobInputs(spec, fetch_dataset(self.store, spec), cfg)
        self._inputs[job_id] = inputs
        return inputs

    def global_state(self, job: MultipartyJob) -> OuterState:
        """The round's global model, fetched by its CID and checked against its committed state hash."""
        return self._checked_state(bytes(job.global_cid), bytes(job.global_hash))

    def _checked_state(self, cid_digest: bytes, committed: bytes) -> OuterState:
        data = self.store.get(digest_to_cid(cid_digest), Limits.CHECKPOINT_BYTES)
        if state_hash(data) != committed:
            raise ProofError(f"the global model at {digest_to_cid(cid_digest)} is not the committed state {committed.hex()}")
        return OuterState.from_checkpoint(decode_checkpoint(data))

    def final_checkpoint(self, inner_job_id: int) -> bytes | None:
        """An inner trace's last checkpoint, checked against the trace's last leaf (None: not served, or
        no trace committed any more: a job reopened after its solver lost it keeps no root)."""
        inner = self.protocol.market.get_job(JobId(inner_job_id))
        if not any(inner.trace_root):
            return None
        try:
            committed = self.watcher.commitment(JobId(inner_job_id), inner.trace_root)
            manifest = committed_manifest(self.store.get(committed.manifest_cid, MAX_MANIFEST_BYTES), inner.trace_root)
            data = self.store.get(committed.final_model_cid, Limits.CHECKPOINT_BYTES)
        except (StorageError, ProofError) as exc:
            log.info("inner trace's final checkpoint not served", extra={"inner": inner_job_id, "error": str(exc)})
            return None
        return data if state_hash(data) == manifest.state_hashes[-1] else None

    def read_round(self, job_id: int, job: MultipartyJob, inputs: JobInputs, state: OuterState) -> dict[int, PartyRound]:
        """What the chain and the store hold of each party that contributed this round."""
        d, market = self.protocol.diloco, self.protocol.market
        begun = {
            int(e.args["slot"]): bytes(e.args["innerSpecCid"])
            for e in d.events("InnerJobBegun", self.protocol.book.deploy_block, jobId=job_id)
            if e.args["round"] == job.round
        }
        rounds: dict[int, PartyRound] = {}
        for slot in range(job.parties):
            c = d.contribution_of(job_id, job.round, slot)
            if not any(c.cid):
                continue
            try:
                data = self.store.get(digest_to_cid(c.cid), MAX_CONTRIBUTION_BYTES)
            except StorageError as exc:
                log.info("contribution not served", extra={"job": job_id, "slot": slot, "error": str(exc)})
                continue
            if contribution_hash(data) != bytes(c.content_hash):
                data = b""  # the CID's bytes are not the committed hash's: not what any trace gives
            inner = market.get_job(JobId(c.inner_job_id))
            derived = self._inner_spec(job_id, inputs, state, slot)
            party = d.party_of(job_id, slot)
            verified = inner.state is JobState.FINALIZED and inner.solver == party
            final = self.final_checkpoint(c.inner_job_id)
            residual = None
            try:
                residual = self.residual(job_id, inputs.cfg, slot, job.round, party)
            except (StorageError, ProofError) as exc:  # a previous final checkpoint not served: judged as an unserved one
                log.info("party's residual not derivable", extra={"job": job_id, "slot": slot, "error": str(exc)})
                final = None
            rounds[slot] = PartyRound(data, final, begun.get(slot) == derived, verified, residual)
        return rounds

    def residual(self, job_id: int, cfg: MultipartyConfig, slot: int, round_: int, party: Address) -> Mapping[str, torch.Tensor] | None:
        """The residual ``party`` came into ``round_`` with in ``slot`` (top-k error feedback; None: zero,
        always for dense int8): :func:`proofs.diloco.residual_after` of its previous round when it held
        the slot then (that round's inner job was its) and its contribution was included, else zero.
        Derived from the chain and the store (each round's global model from its RoundOpened event,
        checked against its state hash; the traces' final checkpoints): back to the first round of the
        party's run of included rounds (or the last one derived), then forward, one round at a time, so
        a judge that follows the job derives one round per round; only the last two are kept."""
        key = (job_id, slot, round_, party)
        if cfg.keep is None or round_ == 0:
            return None
        if key in self._residuals:  # every later read of the round (the aggregate, a check, a vote)
            return self._residuals[key]
        d, market = self.protocol.diloco, self.protocol.market
        runs: list[tuple[int, int]] = []  # (round, its inner job) whose carried residual is still to derive, newest first
        carried: Mapping[str, torch.Tensor] | None = None
        at = round_
        while at > 0 and (job_id, slot, at, party) not in self._residuals:
            c = d.contribution_of(job_id, at - 1, slot)
            if not (c.inner_job_id and market.get_job(JobId(c.inner_job_id)).solver == party and self._included(job_id, at - 1) >> slot & 1):
                break  # zero coming into `at`: the slot was not the party's then, or its round did not count
            runs.append((at - 1, c.inner_job_id))
            at -= 1
        if at > 0:
            carried = self._residuals.get((job_id, slot, at, party))
        for prev, inner in reversed(runs):
            final = self.final_checkpoint(inner)
            if final is None:
                raise StorageError(f"the final checkpoint of inner job {inner} (round {prev}, slot {slot}) is not served")
            carried = residual_after(self._state_of(job_id, prev), final, cfg, carried)
        self._residuals = {k: v for k, v in self._residuals.items() if (k[0], k[1], k[3]) != (job_id, slot, party) or k[2] >= round_ - 1}
        self._residuals[key] = carried
        return carried

    def _included(self, job_id: int, round_: int) -> int:
        """The included mask of past round ``round_``'s final aggregate (its RoundFinalized event). Every
        round before the current one has one: a node whose logs lack it yet is behind, and the move is
        tried again (never judged as if nobody had been included)."""
        return self._round_event(self._paid, "RoundFinalized", job_id, round_, lambda a: int(a["paid"]))

    def _state_of(self, job_id: int, round_: int) -> OuterState:
        """Round ``round_``'s global model, from its RoundOpened event, checked against its state hash."""
        cid, committed = self._round_event(self._opened, "RoundOpened", job_id, round_, lambda a: (bytes(a["globalCid"]), bytes(a["globalHash"])))
        return self._checked_state(cid, committed)

    def _round_event(self, seen: dict[tuple[int, int], T], name: str, job_id: int, round_: int, value: Callable[[Mapping[str, Any]], T]) -> T:
        """``value`` of the job's ``name`` event of ``round_`` (the last one), every such event read at once
        and kept; :class:`TransientRPCError` while the node's logs lack it."""
        if (job_id, round_) not in seen:
            for e in self.protocol.diloco.events(name, self.protocol.book.deploy_block, jobId=job_id):
                seen[(job_id, int(e.args["round"]))] = value(e.args)
        if (job_id, round_) not in seen:
            raise TransientRPCError(f"job {job_id}'s {name} event of round {round_} is not in the node's logs yet")
        return seen[(job_id, round_)]

    def forget(self, job_id: int) -> None:
        """Drop what is kept of a finished job (its dataset, derived specs, residuals, events read, checks
        made, its fit): called by the watcher, on the loop, once it sees the job Finished; each map is
        replaced, never changed under a worker reading it, but :attr:`fits`, which the watcher holds."""
        self.fits.pop(job_id, None)
        self._fit_retry = {j: v for j, v in self._fit_retry.items() if j != job_id}
        self._checked = {k for k in self._checked if k[0] != job_id}
        self._inputs = {j: v for j, v in self._inputs.items() if j != job_id}
        self._derived = {k: v for k, v in self._derived.items() if k[0] != job_id}
        self._residuals = {k: v for k, v in self._residuals.items() if k[0] != job_id}
        self._paid = {k: v for k, v in self._paid.items() if k[0] != job_id}
        self._opened = {k: v for k, v in self._opened.items() if k[0] != job_id}

    def _inner_spec(self, job_id: int, inputs: JobInputs, state: OuterState, slot: int) -> bytes:
        """The CID digest of the inner spec ``party_job`` derives for ``slot`` in ``state``'s round, derived
        once (it packs the shard and the whole model): the aggregate, the check and a vote read it alike."""
        key = (job_id, state.round, slot)
        if key not in self._derived:
            self._derived[key] = cid_to_digest(file_cid(party_job(inputs.spec, inputs.dataset, inputs.cfg, state, slot).spec.canonical_bytes()))
        return self._derived[key]

    # ------------------------------------------------------------------ moves

    def _judge_fit(self, job_id: int, job: MultipartyJob) -> None:
        """Our verdict on a round of the job (``fit``), once per job: a document or spec that does not
        load never fits (a hostile submitter's job is never joined, so never costs a slot bond); a
        store that does not serve them is asked again after ``FIT_RETRY_S``."""
        if self._fit is None or job_id in self.fits or time.monotonic() < self._fit_retry.get(job_id, 0.0):
            return
        try:
            spec, cfg = self.document(job)
        except StorageError as exc:
            self._fit_retry[job_id] = time.monotonic() + FIT_RETRY_S
            log.info("multi-party job's document not served", extra={"job": job_id, "error": str(exc)})
            return
        except ProofError as exc:
            fit = RoundFit(f"its document does not load: {exc}", 0.0)
        else:
            fit = self._fit(round_spec(spec, cfg.inner_steps), job.work_window)
        self.fits[job_id] = fit
        log.info("multi-party job judged", extra={"job": job_id, "fits": not fit.why, "reason": fit.why, "train_s": round(fit.train_s, 1)})

    def _begin(self, job_id: int, job: MultipartyJob, slot: int) -> None:
        inputs = self.inputs(job_id, job)
        state = self.global_state(job)
        if job.round == 0:
            from proofs.train import Trainer  # the training stack, only where a party starts

            start = OuterState.start(Trainer(inputs.spec, inputs.dataset).params)
            if start.state_hash(inputs.stamp) != bytes(job.global_hash):
                raise ProofError(f"job {job_id}'s G_0 is not its spec's seeded initialization: not beginning")
        pj = party_job(inputs.spec, inputs.dataset, inputs.cfg, state, slot)
        self.store.put(pj.shard)
        self.store.put(pj.init)
        spec_cid = self.store.put(pj.spec.canonical_bytes())
        inner, receipt = self.protocol.diloco.begin(job_id, slot, cid_to_digest(spec_cid))
        if self._begun is not None:
            self._begun(inner, spec_cid)
        log_mined(log, "multi-party begin", receipt, job=job_id, round=job.round, slot=slot, inner=inner, spec=spec_cid)

    def _contribute(self, job_id: int, job: MultipartyJob, slot: int) -> None:
        c = self.protocol.diloco.contribution_of(job_id, job.round, slot)
        final = self.final_checkpoint(c.inner_job_id)
        if final is None:
            return  # our own trace's checkpoint not in the store yet: next tick
        inputs = self.inputs(job_id, job)
        data, _ = contribution_of(self.global_state(job), final, inputs.cfg, self.residual(job_id, inputs.cfg, slot, job.round, self.me))
        cid = self.store.put(data)
        receipt = self.protocol.diloco.contribute(job_id, slot, cid_to_digest(cid), contribution_hash(data))
        log_mined(log, "multi-party contribute", receipt, job=job_id, round=job.round, slot=slot, cid=cid, bytes=len(data))

    def _aggregate(self, job_id: int, job: MultipartyJob) -> None:
        inputs = self.inputs(job_id, job)
        state = self.global_state(job)
        verdict = judge_round(state, self.read_round(job_id, job, inputs, state), inputs.cfg)
        cid = self.store.put(verdict.state.to_bytes(inputs.stamp)) if verdict.state is not None else None
        included, wrong = verdict.masks()
        receipt = self.protocol.diloco.commit_aggregate(job_id, verdict.state_hash(inputs.stamp), cid_to_digest(cid) if cid else bytes(32), included, wrong)
        log_mined(log, "multi-party commitAggregate", receipt, job=job_id, round=job.round, included=included, wrong=wrong, void=verdict.state is None)

    def judge(self, job_id: int, job: MultipartyJob) -> str | None:
        """What is wrong with the round's committed aggregate (None: it is the round's)."""
        inputs = self.inputs(job_id, job)
        state = self.global_state(job)
        a = self.protocol.diloco.aggregate_of(job_id)
        return check_round(state, self.read_round(job_id, job, inputs, state), inputs.cfg, inputs.stamp, a.state_hash, a.included, a.wrong)

    def _check(self, job_id: int, job: MultipartyJob) -> None:
        a = self.protocol.diloco.aggregate_of(job_id)
        key = (job_id, job.round, a.aggregator, bytes(a.state_hash))
        if key in self._checked:
            return
        reason = self.judge(job_id, job)
        self._checked.add(key)
        if reason is None:
            log.info("multi-party aggregate checked: right", extra={"job": job_id, "round": job.round})
            return
        deposit = self.protocol.diloco.params().challenge_deposit
        if self.protocol.token.allowance(self.me, self.protocol.diloco.address) < deposit:
            self.protocol.token.approve(self.protocol.diloco.address, deposit)
        case_id, receipt = self.protocol.diloco.challenge(job_id)
        log_mined(log, "multi-party challenge", receipt, job=job_id, round=job.round, case=case_id, reason=reason)

    def _salt(self, case_id: int) -> Bytes32:
        if self._salt_secret is None:
            raise ProofError("this role keeps no salt secret: it cannot vote on a committee")
        # a domain of its own, so a case's salt is unrelated to a game's or a court case's of the same number
        return derive_salt(keccak(b"veritrain multi-party aggregate" + self._salt_secret()), case_id)

    def _vote(self, job_id: int, job: MultipartyJob) -> None:
        d = self.protocol.diloco
        case_id = d.aggregate_of(job_id).case_id
        if d.ballot_of(case_id, self.me)[0] is not Ballot.SEATED:
            return
        right = self.judge(job_id, job) is None
        receipt = d.commit_vote(job_id, court_commitment(case_id, right, self._salt(case_id), self.me))
        log_mined(log, "multi-party commitVote", receipt, job=job_id, case=case_id, aggregate_right=right)

    def _reveal(self, job_id: int) -> None:
        d = self.protocol.diloco
        case_id = d.aggregate_of(job_id).case_id
        ballot, commitment = d.ballot_of(case_id, self.me)
        if ballot is not Ballot.COMMITTED:
            return
        salt = self._salt(case_id)
        right = committed_vote(commitment, case_id, salt, self.me)
        if right is None:
            log.error("committed vote matches no salt of ours (the salt secret was lost): cannot reveal", extra={"job": job_id, "case": case_id})
            return
        log_mined(log, "multi-party revealVote", d.reveal_vote(job_id, right, salt), job=job_id, case=case_id, aggregate_right=right)
