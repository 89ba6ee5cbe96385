"""The verifier's work in dispute games: open on the first failing segment, answer the solver's
midpoints, defend its own probe in a whistleblower's report game, and re-execute an isolated
step as a referee.

Everything a move needs is re-read by CID and checked: the job's spec and dataset (from the
``JobPosted`` event), its manifest (from the ``TraceCommitted`` event under the job's committed
root; both read through the role's :class:`rolebase.watchers.MarketWatcher`), checkpoint ``j`` (against the manifest's state hash), and a
referee's pre-state (against the agreed hash on chain). The truth at a midpoint is recomputed
with ``proofs.state_at`` from checkpoint ``j``, both to answer the solver and to post our own
midpoints as a report game's defender (stored, so that the challenger and the referees can
fetch them by CID: the solver's defence, from the checkpoint in the store rather than on disk);
a referee runs ``proofs.referee_step`` once.

What the solver committed besides the states is settled without training, by any referee of a
trace game on segment ``j``: its manifest (fetched by the committed CID; it must be the committed
trace of the spec: ``proofs.check_manifest``, on any segment, so a verifier that found it
inconsistent opens on segment 0 from the manifest's own leaves), its start (``j = 0``: leaf 0 must be the spec's (seeded or pretrained)
initialization, ``proofs.check_start``) and its update norm (the manifest's norm for ``j`` must be
the one checkpoints ``j`` and ``j + 1`` give, ``proofs.check_norm``); either false, the solver is
wrong whatever the isolated step shows. A manifest game (0 steps: the manifest gave the opener no
leaves) is voted on the manifest alone, read from the chain where the solver had to publish it
(``proofs.check_committed_manifest``): it must parse, name the committed root and be the committed
trace of the spec; a long manifest's pages (proofs.manifest) are fetched by the CIDs its root lists,
and one that no gateway serves makes the solver wrong: its whole manifest must be available. A step that did no learning work (a parameter tensor
with an exactly zero gradient: ``proofs.referee_step``) is wrong too, and a challenger steers the
bisection to the first such step of the segment (:meth:`DisputeReplayer.answer`).
The one commitment a referee cannot settle without training is the segment's mean training loss
(the manifest's ``losses``; the final model's held-out loss, a function of the last checkpoint
alone, is checked with the norms, by evaluation rather than training): it is a function of checkpoint ``j`` alone, so once the isolated step
holds, a referee of a trace game on ``j`` replays the segment's ``k`` steps from checkpoint ``j``
(``proofs.check_loss``, cached per segment) and a false loss makes the solver wrong. It is checked
last, so that a game any cheaper rule decides costs no replay (docs/dispute.md, "The loss").
The material of a job is cached in memory per committed root (a reopened job gets a new one).
A sealed job's dataset (docs/sealing.md) is opened with the data key its ``key_of`` finds for us (a
verifier's: a wrap to it that opened, or the revealed key); without one, only unsealed jobs are played.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from core.availability import Availability
from core.cid import Cid, digest_to_cid
from core.contracts import MANIFEST_ITEM, Game, GameId, JobId, Protocol
from core.dispute import Opening, global_step, isolated_step, midpoint, opening
from core.errors import SealingError, VeritrainError
from core.probe import Bytes32
from core.storage import ContentStore, StorageError
from proofs.checkpoint import decode_checkpoint, state_hash
from proofs.data import Dataset
from proofs.errors import ProofError
from proofs.manifest import MANIFEST_BLOCK, Manifest, load_manifest
from proofs.merkle import hex32
from proofs.probes import probe_step
from proofs.replay import check_committed_manifest, check_held_out, check_loss, check_manifest, check_norm, check_start, first_idle_step, referee_step
from proofs.spec import JobSpec, Limits, load_spec
from proofs.steps import state_at
from proofs.train import Runtime
from rolebase.device import job_fault
from rolebase.inputs import fetch_dataset
from rolebase.watchers import MarketWatcher, NotInLogs

log = logging.getLogger(__name__)


def vote_from_shape(game: Game, checkpoint_interval: int, probe_step: int | None) -> bool | None:
    """A referee's vote when the game's shape alone decides it, else None (the isolated step does).

    A trace game must bisect the spec's k steps: with any other ``steps`` the challenger is trying
    to frame the solver, so the solver is right (docs/dispute.md, "Opening"). A report game must
    bisect up to the probe's step fixed by the draw (``probe_step``: ``proofs.probe_step`` of the
    game's assign seed and probe slot): the verifier put the step in its own probe leaf, so a
    leaf at another step is the defender's fault and the defender is wrong.
    """
    if game.on_report:
        return None if game.steps == probe_step else False
    return None if game.steps == checkpoint_interval else True


class DisputeWorkError(VeritrainError):
    """What a dispute move needs cannot be had or does not verify (the move is retried next tick)."""


@dataclass(frozen=True)
class JobMaterial:
    spec: JobSpec
    dataset: Dataset
    manifest: Manifest
    manifest_fault: str | None = None  # what makes the manifest not the committed trace of the spec (None: it is)


class DisputeReplayer:
    """Replays what a dispute move needs: the opening, answers to the solver's midpoints, a defender's
    own midpoints, and a referee's vote (a lying TEST adversary overrides :meth:`answer`:
    ``verifier.adversary``)."""

    def __init__(
        self,
        protocol: Protocol,
        store: ContentStore,
        watcher: MarketWatcher,
        *,
        rt: Runtime = Runtime(),
        key_of: Callable[[JobId], bytes | None] | None = None,
    ) -> None:
        """``key_of``: a sealed job's data key as we hold it (None: we take part in no sealed job)."""
        self.protocol = protocol
        self.store = store
        self.watcher = watcher
        self.rt = rt  # where steps are replayed (--device)
        self.key_of = key_of
        self._material: dict[tuple[int, bytes], JobMaterial] = {}
        self._starts: dict[tuple[int, bytes, int], bytes] = {}
        self._idle_steps: dict[tuple[int, bytes, int, int], int | None] = {}
        self._loss_faults: dict[tuple[int, bytes, int], str | None] = {}

    def material(self, job_id: JobId) -> JobMaterial:
        job = self.protocol.market.get_job(job_id)
        key = (int(job_id), bytes(job.trace_root))
        if key not in self._material:
            self._material = {k: v for k, v in self._material.items() if k[0] != int(job_id)}
            try:
                committed = self.watcher.commitment(job_id, job.trace_root)
                spec = self._spec(job_id)
                data_key = self.key_of(job_id) if spec.dataset.sealed and self.key_of is not None else None
                dataset = fetch_dataset(self.store, spec, data_key)
                manifest = load_manifest(self.store.get(committed.manifest_cid, MANIFEST_BLOCK), self._page)
            except (ProofError, StorageError, SealingError, NotInLogs) as exc:
                raise DisputeWorkError(f"job {job_id}: {exc}") from exc
            fault = job_fault(job_id, spec, self.rt)
            if fault is not None:  # not the solver's fault: nothing is replayed, nothing voted
                raise DisputeWorkError(fault)
            if manifest.root != job.trace_root:
                raise DisputeWorkError(f"job {job_id}: manifest root {hex32(manifest.root)} is not the committed {hex32(job.trace_root)}")
            consistent = check_manifest(spec, manifest, committed.checkpoint_count, committed.final_model_cid)
            self._material[key] = JobMaterial(spec, dataset, manifest, None if consistent.passed else consistent.detail)
        return self._material[key]

    def _page(self, cid: str) -> bytes:
        """A page of a long manifest, by its CID from our store or the gateways (verified): one the
        solver does not serve makes its manifest one that cannot be had whole (proofs.load_manifest)."""
        return self.store.get(cid, MANIFEST_BLOCK)

    def _spec(self, job_id: JobId) -> JobSpec:
        return load_spec(self.store.get(digest_to_cid(self.watcher.spec_cid(job_id)), Limits.SPEC_BYTES))

    def manifest_vote(self, game_id: GameId, game: Game) -> bool:
        """A referee's vote in a manifest game: is the manifest the chain holds (the contract opened the
        game only once it was published) the committed trace of the spec?"""
        p = self.protocol
        root = p.market.get_job(game.job_id).trace_root
        try:
            committed = self.watcher.commitment(game.job_id, root)
            spec = self._spec(game.job_id)
        except (ProofError, StorageError, NotInLogs) as exc:
            raise DisputeWorkError(f"game {game_id}, job {game.job_id}: {exc}") from exc
        data = Availability(p, self.store).published(game.job_id, MANIFEST_ITEM, committed.manifest_cid, None)
        if data is None:
            raise DisputeWorkError(f"game {game_id}: the committed manifest is not published on chain")
        verdict = check_committed_manifest(spec, data, root, committed.checkpoint_count, committed.final_model_cid, self._page)
        log.info("manifest judged", extra={"game": game_id, "detail": verdict.detail, "defender_right": verdict.passed})
        return verdict.passed

    def opening(self, job_id: JobId, segment: int) -> Opening:
        """The arguments of ``open`` for ``segment``: both ends and their proofs, from the manifest."""
        m = self.material(job_id)
        return opening(m.manifest.state_hashes, m.manifest.tree(), segment, m.spec.checkpoint_interval)

    def _start(self, job_id: JobId, m: JobMaterial, segment: int) -> bytes:
        key = (int(job_id), m.manifest.root, segment)
        if key not in self._starts:
            data = self.store.get(m.manifest.checkpoint_cids[segment], Limits.CHECKPOINT_BYTES)
            if state_hash(data) != m.manifest.state_hashes[segment]:
                raise DisputeWorkError(f"job {job_id}: checkpoint {segment} does not hash to the manifest's state hash")
            self._starts[key] = data
        return self._starts[key]

    def _truth(self, game: Game) -> bytes:
        """The state honest training gives at the game's next midpoint (from checkpoint ``segment``)."""
        m = self.material(game.job_id)
        step = global_step(game, m.spec.checkpoint_interval, midpoint(game.lo, game.hi))
        return state_at(m.spec, m.dataset, self._start(game.job_id, m, game.segment), step, self.rt)

    def _idle(self, game: Game) -> int | None:
        """The first step of the game's range (0-based from checkpoint ``segment``) that did no
        learning work, from one replay of the range, cached per game position's segment."""
        m = self.material(game.job_id)
        key = (int(game.job_id), m.manifest.root, game.segment, game.steps)
        if key not in self._idle_steps:
            self._idle_steps[key] = first_idle_step(m.spec, m.dataset, self._start(game.job_id, m, game.segment), game.steps, self.rt)
        return self._idle_steps[key]

    def answer(self, game_id: GameId, game: Game) -> bool:
        """Agree with the solver's posted midpoint? True iff it is the state honest training gives and
        it is not past a step that did no learning work (disagreeing there keeps that step inside the
        disputed range, so the game isolates it and the referees see the idle step)."""
        mid = midpoint(game.lo, game.hi)
        idle = self._idle(game)
        agree = state_hash(self._truth(game)) == game.mid_hash and (idle is None or mid <= idle)
        log.info("midpoint checked", extra={"game": game_id, "step": mid, "agree": agree, "idle_step": idle})
        return agree

    def midpoint(self, game: Game) -> tuple[Bytes32, Cid]:
        """Our midpoint as a report game's defender: the true state, stored; ``(state hash, CID)``."""
        truth = self._truth(game)
        return state_hash(truth), self.store.put(truth)

    def _probe_step(self, game_id: GameId, checkpoint_interval: int) -> int:
        """The step the draw fixed for the disputed probe (its slot and assign seed are in the
        game's ``ReportDisputeOpened`` event)."""
        events = self.protocol.game.events("ReportDisputeOpened", self.protocol.book.deploy_block, gameId=game_id)
        if not events:
            raise DisputeWorkError(f"game {game_id}: a report game without its ReportDisputeOpened event")
        opened = events[-1].args
        return probe_step(bytes(opened["assignSeed"]), int(opened["probeIndex"]), checkpoint_interval)

    def commitment_fault(self, job_id: JobId, segment: int) -> str | None:
        """What is false, without training, in the solver's commitments for ``segment``: its manifest
        (not the committed trace of the spec: any segment), its start (segment 0), its update norm or
        (the last segment) the final model's held-out loss; None when all hold."""
        m = self.material(job_id)
        if m.manifest_fault is not None:
            return m.manifest_fault
        if segment == 0 and not (bound := check_start(m.spec, m.dataset, m.manifest.state_hashes[0])).passed:
            return bound.detail
        try:
            start, end = self._start(job_id, m, segment), self._start(job_id, m, segment + 1)
        except StorageError as exc:
            raise DisputeWorkError(f"job {job_id}: checkpoints of segment {segment}: {exc}") from exc
        norm = check_norm(segment, start, end, m.manifest.update_norms[segment], m.dataset.data_key)
        if not norm.passed:
            return norm.detail
        claimed = m.manifest.held_out_loss
        if segment == m.spec.segments - 1 and claimed is not None:  # the final model's held-out loss: its end alone, no training
            held = check_held_out(m.spec, m.dataset, end, m.manifest.state_hashes[segment + 1], claimed, self.rt)
            return None if held.passed else held.detail
        return None

    def loss_fault(self, job_id: JobId, segment: int) -> str | None:
        """What is false in the manifest's mean training loss of ``segment``, from a replay of its ``k``
        steps from checkpoint ``segment`` (cached per segment); None when it is the replayed one."""
        m = self.material(job_id)
        key = (int(job_id), m.manifest.root, segment)
        if key not in self._loss_faults:
            try:
                start = self._start(job_id, m, segment)
            except StorageError as exc:
                raise DisputeWorkError(f"job {job_id}: checkpoint {segment}: {exc}") from exc
            verdict = check_loss(m.spec, m.dataset, segment, start, m.manifest.losses[segment], self.rt)
            self._loss_faults[key] = None if verdict.passed else verdict.detail
        return self._loss_faults[key]

    def vote(self, game_id: GameId, game: Game) -> bool:
        """A referee's vote: is the defender's post-state what one step from the agreed state gives,
        did that step do learning work, (in a trace game) are the segment's start, norm and mean loss
        what the solver committed, and (in a report game) is the game at the probe's step? A manifest
        game (0 steps) is voted on the manifest alone."""
        if game.steps == 0 and not game.on_report:
            return self.manifest_vote(game_id, game)
        m = self.material(game.job_id)
        k = m.spec.checkpoint_interval
        shaped = vote_from_shape(game, k, self._probe_step(game_id, k) if game.on_report else None)
        if shaped is not None:
            log.info("vote decided by the game's steps", extra={"game": game_id, "steps": game.steps, "defender_right": shaped})
            return shaped
        if not game.on_report and (fault := self.commitment_fault(game.job_id, game.segment)) is not None:
            log.info("vote decided by the solver's commitments", extra={"game": game_id, "fault": fault, "defender_right": False})
            return False
        task = isolated_step(game, k, m.manifest.checkpoint_cids)
        try:
            pre = self.store.get(task.pre_cid, Limits.CHECKPOINT_BYTES)
        except StorageError as exc:
            raise DisputeWorkError(f"game {game_id}: agreed state {task.pre_cid}: {exc}") from exc
        if state_hash(pre) != task.pre_hash or decode_checkpoint(pre, data_key=m.dataset.data_key).step != task.global_step:
            raise DisputeWorkError(f"game {game_id}: the agreed state at {task.pre_cid} is not the one on chain")
        after, idle = referee_step(m.spec, m.dataset, pre, self.rt)
        right = state_hash(after) == task.post_hash and idle is None
        log.info("isolated step re-executed", extra={"game": game_id, "step": task.global_step, "idle_tensor": idle, "defender_right": right})
        if right and not game.on_report and (fault := self.loss_fault(game.job_id, game.segment)) is not None:
            log.info("vote decided by the solver's loss", extra={"game": game_id, "fault": fault, "defender_right": False})
            return False
        return right
