"""The verifier's work in dispute games: open on the first failing segment, answer the solver's
midpoints, defend its own probe in a whistleblower's report game, and re-execute an isolated
step as a referee.

Everything a move needs is re-read by CID and checked: the job's spec and dataset (from the
``JobPosted`` event), its manifest (from the latest ``TraceCommitted`` event, its root checked
against the job's committed root), checkpoint ``j`` (against the manifest's state hash), and a
referee's pre-state (against the agreed hash on chain). The truth at a midpoint is recomputed
with ``proofs.state_at`` from checkpoint ``j``, both to answer the solver and to post our own
midpoints as a report game's defender (stored, so that the challenger and the referees can
fetch them by CID: the solver's defence, from the checkpoint in the store rather than on disk);
a referee runs ``proofs.execute_step`` once.
The material of a job is cached in memory per committed root (a reopened job gets a new one).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from core.agent import MarketWatcher
from core.cid import Cid, digest_to_cid
from core.contracts import Game, GameId, JobId, Protocol
from core.dispute import Opening, global_step, isolated_step, midpoint, opening
from core.errors import VeritrainError
from core.storage import ContentStore, StorageError
from proofs import (
    Dataset,
    JobSpec,
    Limits,
    Manifest,
    ProofError,
    execute_step,
    load_dataset,
    load_spec,
    parse_manifest,
    probe_step,
    state_at,
    state_hash,
)
from proofs.checkpoint import MAX_CHECKPOINT_BYTES, decode_checkpoint
from proofs.manifest import MAX_MANIFEST_BYTES
from verifier.policy import vote_from_shape

log = logging.getLogger(__name__)


class DisputeWorkError(VeritrainError):
    """What a dispute move needs cannot be had or does not verify (the move is retried next tick)."""


@dataclass(frozen=True)
class JobMaterial:
    spec: JobSpec
    dataset: Dataset
    manifest: Manifest


def _hex(raw: bytes) -> str:
    return "0x" + bytes(raw).hex()


class DisputeDesk:
    """``lie``: a TEST adversary that accuses honest traces and answers every midpoint wrong."""

    def __init__(self, protocol: Protocol, store: ContentStore, watcher: MarketWatcher, *, lie: bool = False) -> None:
        self.protocol = protocol
        self.store = store
        self.watcher = watcher
        self.lie = lie
        self._material: dict[tuple[int, bytes], JobMaterial] = {}
        self._starts: dict[tuple[int, bytes, int], bytes] = {}

    def material(self, job_id: JobId) -> JobMaterial:
        job = self.protocol.market.get_job(job_id)
        key = (int(job_id), bytes(job.trace_root))
        if key not in self._material:
            self._material = {k: v for k, v in self._material.items() if k[0] != int(job_id)}
            committed = self.protocol.market.events("TraceCommitted", self.protocol.book.deploy_block, jobId=job_id)
            if not committed:
                raise DisputeWorkError(f"job {job_id}: no TraceCommitted event")
            try:
                spec = load_spec(self.store.get(digest_to_cid(self.watcher.spec_cid(job_id)), Limits.SPEC_BYTES))
                dataset = load_dataset(spec, self.store.get(spec.dataset.cid, spec.dataset.size_bytes))
                manifest = parse_manifest(self.store.get(digest_to_cid(committed[-1].args["manifestCid"]), MAX_MANIFEST_BYTES), spec)
            except (ProofError, StorageError) as exc:
                raise DisputeWorkError(f"job {job_id}: {exc}") from exc
            if manifest.root != _hex(job.trace_root):
                raise DisputeWorkError(f"job {job_id}: manifest root {manifest.root} is not the committed {_hex(job.trace_root)}")
            self._material[key] = JobMaterial(spec, dataset, manifest)
        return self._material[key]

    def opening(self, job_id: JobId, segment: int) -> Opening:
        """The arguments of ``open`` for ``segment``: both ends and their proofs, from the manifest."""
        m = self.material(job_id)
        return opening(m.manifest.state_hashes, m.manifest.tree(), segment, m.spec.checkpoint_interval)

    def _start(self, job_id: JobId, m: JobMaterial, segment: int) -> bytes:
        key = (int(job_id), bytes.fromhex(m.manifest.root[2:]), segment)
        if key not in self._starts:
            data = self.store.get(m.manifest.checkpoint_cids[segment], MAX_CHECKPOINT_BYTES)
            if state_hash(data) != m.manifest.state_hashes[segment]:
                raise DisputeWorkError(f"job {job_id}: checkpoint {segment} does not hash to the manifest's state hash")
            self._starts[key] = data
        return self._starts[key]

    def _truth(self, game: Game) -> bytes:
        """The state honest training gives at the game's next midpoint (from checkpoint ``segment``)."""
        m = self.material(game.job_id)
        step = global_step(game, m.spec.checkpoint_interval, midpoint(game.lo, game.hi))
        return state_at(m.spec, m.dataset, self._start(game.job_id, m, game.segment), step)

    def answer(self, game_id: GameId, game: Game) -> bool:
        """Agree with the solver's posted midpoint? True iff it is the state honest training gives."""
        agree = state_hash(self._truth(game)) == _hex(game.mid_hash)
        log.info("midpoint checked", extra={"game": game_id, "step": midpoint(game.lo, game.hi), "agree": agree, "lie": self.lie})
        return agree != self.lie

    def midpoint(self, game: Game) -> tuple[str, Cid]:
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

    def vote(self, game_id: GameId, game: Game) -> bool:
        """A referee's vote: is the defender's post-state what one step from the agreed state gives
        (and, in a report game, is the game at the probe's step)?"""
        m = self.material(game.job_id)
        k = m.spec.checkpoint_interval
        shaped = vote_from_shape(game, k, self._probe_step(game_id, k) if game.on_report else None)
        if shaped is not None:
            log.info("vote decided by the game's steps", extra={"game": game_id, "steps": game.steps, "solver_right": shaped})
            return shaped
        task = isolated_step(game, k, m.manifest.checkpoint_cids)
        try:
            pre = self.store.get(task.pre_cid, MAX_CHECKPOINT_BYTES)
        except StorageError as exc:
            raise DisputeWorkError(f"game {game_id}: agreed state {task.pre_cid}: {exc}") from exc
        if state_hash(pre) != _hex(task.pre_hash) or decode_checkpoint(pre).step != task.global_step:
            raise DisputeWorkError(f"game {game_id}: the agreed state at {task.pre_cid} is not the one on chain")
        after = execute_step(m.spec, m.dataset, pre)
        right = state_hash(after) == _hex(task.post_hash)
        log.info("isolated step re-executed", extra={"game": game_id, "step": task.global_step, "solver_right": right})
        return right
