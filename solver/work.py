"""The solver's work: judge specs, train with checkpoints that survive a crash, upload the trace.

* :class:`SpecJudge` decides, before any claim, whether this solver can finish a job: it fetches
  the spec by CID (bounded, verified by the store), validates it, checks it against this
  solver's limits, fetches the dataset and loads it against the spec (tensors, shapes, dtypes,
  vocabulary; never a pickle), dry-runs a few steps and writes a checkpoint to measure its own
  speed, and estimates the training time (``fits_window`` then compares it with the job's
  commit window). The verdict is kept per spec CID in the records: a bad spec costs one fetch,
  across restarts too. A hostile submitter's job that cannot be run is never claimed, so never
  slashed (docs/roles.md, "A solver that cannot be drained").
* :class:`JobTrainer` trains a claimed job with the proofs engine's :class:`Trainer`,
  taking checkpoints through a :class:`proofs.train.Committer` (hashing and the file write off
  the training thread, one checkpoint in flight), writing each atomically (temporary file,
  fsync, rename) and recording its state hash, CID, loss and update norm in SQLite only once
  the file is durable. A restart resumes from the latest checkpoint whose file still hashes to
  its record (training is deterministic, so a re-trained segment gives the same bytes). Then it
  uploads the checkpoints (each must be stored under its recorded CID) and the manifest, and
  keeps them pinned until the job is final. In a dispute it recomputes the
  state at a bisection midpoint from the segment's checkpoint on disk (``proofs.state_at``)
  and stores it, so the challenger and the referees can fetch it by CID.
* A test and demo adversary (``solver.adversary.CheatingJobTrainer``) builds its trace with
  ``proofs.adversary.cheat`` instead of honest training; it is uploaded and committed like any
  other, and defended from its own (wrong) checkpoints.

Errors of the proofs engine (:class:`proofs.ProofError`) are re-raised as
:class:`JobWorkError` with the job id in the message.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from core.agent import StopFlag, Stopped
from core.cid import Cid, digest_to_cid
from core.contracts import JobId, Protocol
from core.errors import VeritrainError
from core.probe import Bytes32
from core.storage import ContentNotFound, ContentStore, StoreUnavailable, file_cid
from proofs import optim
from proofs.checkpoint import decode_checkpoint, state_hash
from proofs.data import Dataset, load_dataset
from proofs.datasets import reference_job
from proofs.errors import ProofError
from proofs.manifest import write_manifest
from proofs.merkle import TraceTree, hex32
from proofs.numerics import profile
from proofs.replay import run_watching
from proofs.sampling import needs_full_replay
from proofs.spec import JobSpec, load_spec
from proofs.spec import Limits as SpecLimits
from proofs.steps import state_at
from proofs.train import Committed, Committer, Runtime, Trace, Trainer, held_out_loss, model_held_out_loss, segment_loss
from rolebase.capabilities import ESTIMATE_SAFETY, claim_misfit, step_flop
from rolebase.events import SPEC_JUDGED, TRAINING_RESUMED, TRAINING_STARTED
from rolebase.inputs import fetch_dataset, fetch_inputs, input_names
from rolebase.watchers import MarketWatcher
from solver.files import read_bounded, write_durable
from solver.policy import Phase, SpecCheck
from solver.retention import Retention
from solver.state import CheckpointRecord, SolverDb, SpecVerdict

log = logging.getLogger(__name__)

#: ``progress(job_id, steps_done, steps_total)``: the CLI draws a bar with it when interactive.
ProgressHook = Callable[[JobId, int, int], None]


class JobWorkError(VeritrainError):
    """A job cannot be worked on as asked (its spec, data or checkpoints are unusable)."""


@dataclass(frozen=True)
class Limits:
    """This solver's own bounds on what it accepts: by default the protocol's (``proofs.spec.Limits``);
    what really bounds a job is the time it takes here against its commit window."""

    max_steps: int = SpecLimits.STEPS
    max_params: int = SpecLimits.PARAMS
    max_dataset_bytes: int = SpecLimits.DATASET_BYTES
    #: Training memory (``proofs.spec.training_memory_bytes``, from the spec alone) this solver gives a job.
    max_memory_bytes: int = SpecLimits.MEMORY_BYTES
    new_specs_per_tick: int = 2  # specs fetched, loaded and dry-run per tick (a flood of new jobs is judged a few at a time)


def machine_memory_bytes() -> int:
    """This machine's physical memory."""
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


#: Steps of the dry run that measures this solver's speed on a spec, and the longest full step it runs.
DRY_RUN_STEPS = 2
DRY_RUN_STEP_CAP_S = 10.0
#: The measured times are multiplied by ESTIMATE_SAFETY (a loaded machine, noise); then the fixed seconds are added.
ESTIMATE_FIXED_S = 2.0
#: The reference job whose step time gives the speed a solver advertises, and the steps timed on it.
SPEED_REFERENCE = "char-text"
SPEED_STEPS = 10
#: Content not in storage is looked for again after this long, doubling up to the maximum.
RETRY_FIRST_S = 30.0
RETRY_MAX_S = 3600.0


class SpecJudge:
    """``deployment`` (chain id and market address) keys the verdicts kept in the records, with the
    device when it is not the CPU (a speed estimate, a numerics refusal hold on one device only).
    No spec is refused for its checkpoints' size or count: a challenged checkpoint of any size is
    answered through the availability court, and a manifest of any length is a root of about 2 KB
    and pages (proofs.manifest), far under what a block holds."""

    def __init__(
        self,
        store: ContentStore,
        db: SolverDb,
        limits: Limits,
        deployment: str,
        *,
        rt: Runtime = Runtime(),
        clock: Callable[[], float] = time.time,
        background: bool = False,
    ) -> None:
        """``background``: judge on a thread of its own, one spec at a time, and answer "being judged" until
        the verdict is in the records (the daemon: a spec whose fetch stalls, or a long dry run, never holds
        its loop); else judge in the call (tests, ``submit post --dry-run``)."""
        self.store = store
        self.background = background
        self._judging: threading.Thread | None = None
        self.db = db
        self.limits = limits
        self.deployment = deployment if rt.device == "cpu" else f"{deployment}@{rt.device}"
        self.rt = rt  # where jobs train (--device): a spec whose numerics cannot run there is refused
        self.clock = clock
        self._budget = limits.new_specs_per_tick

    def new_tick(self) -> None:
        """A new tick: ``new_specs_per_tick`` more specs may be judged."""
        self._budget = self.limits.new_specs_per_tick

    def check(self, spec_digest: bytes) -> SpecCheck:
        """The verdict on a spec: from the records, else judged now (within this tick's budget)."""
        cid = digest_to_cid(spec_digest)
        cached = self.db.spec_verdict(self.deployment, cid)
        if cached is not None and (cached.check.final or self.clock() < cached.retry_at):
            return cached.check
        if self._budget <= 0 or (self._judging is not None and self._judging.is_alive()):
            return SpecCheck(False, "not judged yet", final=False)  # next tick
        self._budget -= 1
        if self.background:
            self._judging = threading.Thread(target=self._verdict_logged, args=(cid, cached), name=f"judge {cid}", daemon=True)
            self._judging.start()
            return SpecCheck(False, "being judged", final=False)
        return self._verdict(cid, cached)

    def _verdict_logged(self, cid: Cid, cached: SpecVerdict | None) -> None:
        try:
            self._verdict(cid, cached)
        except Exception as exc:  # noqa: BLE001 - a transient RPC error, say: judged again at a later tick
            log.warning("spec judgement failed, judged again later", extra={"spec": cid, "error": f"{type(exc).__name__}: {exc}"})

    def _verdict(self, cid: Cid, cached: SpecVerdict | None) -> SpecCheck:
        """Judge the spec now and record the verdict (not our store's trouble: that says nothing of it)."""
        try:
            check = self._judge(cid)
        except StoreUnavailable as exc:  # our store's trouble says nothing about the spec: not recorded
            return SpecCheck(False, f"{type(exc).__name__}: {exc}", final=False)
        retry_s = 0.0 if check.final else min(RETRY_MAX_S, 2 * cached.retry_s if cached is not None and cached.retry_s else RETRY_FIRST_S)
        self.db.set_spec_verdict(self.deployment, cid, SpecVerdict(check, retry_s, self.clock() + retry_s))
        if cached is None or cached.check.reason != check.reason:  # once per spec (and when the reason changes)
            log.info(SPEC_JUDGED, extra={"spec": cid, "runnable": check.runnable, "reason": check.reason, "train_s": round(check.train_s, 1)})
        return check

    def _judge(self, cid: Cid) -> SpecCheck:
        try:
            spec = load_spec(self.store.get(cid, SpecLimits.SPEC_BYTES))
        except StoreUnavailable:
            raise
        except ContentNotFound:
            return SpecCheck(False, f"spec {cid} is not in storage", final=False)
        except VeritrainError as exc:  # too large, forged, malformed
            return SpecCheck(False, f"{type(exc).__name__}: {exc}")
        over = self._over_limits(spec) or profile(spec.numerics).fault(self.rt.device)
        if over:
            return SpecCheck(False, over, spec.steps)
        try:
            data, init = fetch_inputs(self.store, spec)  # each verified against its CID
        except StoreUnavailable:
            raise
        except ContentNotFound as exc:
            what = next((what for what, cid in input_names(spec) if cid == exc.cid), "job input")
            return SpecCheck(False, f"{what} {exc.cid} is not in storage", spec.steps, final=False)
        except VeritrainError as exc:  # larger than the spec says, forged, not a CID
            return SpecCheck(False, f"dataset or pretrained model: {type(exc).__name__}: {exc}", spec.steps)
        try:
            dry = _estimate(spec, load_dataset(spec, data, init), self.rt)
        except IdleTraining as exc:
            return SpecCheck(False, f"training does no learning work, which verifiers fail: {exc}", spec.steps)
        except ProofError as exc:
            return SpecCheck(False, f"dataset does not fit the spec: {exc}", spec.steps)
        except Exception as exc:  # noqa: BLE001 - any failure of the engine on a stranger's spec and data: not runnable
            return SpecCheck(False, f"dry run failed: {type(exc).__name__}: {str(exc)[:200]}", spec.steps)
        return SpecCheck(
            True,
            "",
            spec.steps,
            dry.train_s,
            checkpoints=spec.segments + 1,
            checkpoint_bytes=dry.checkpoint_bytes,
            segment_s=dry.segment_s,
            full_replay=needs_full_replay(spec),
        )

    def _over_limits(self, spec: JobSpec) -> str:
        """Why this solver refuses ``spec`` from its limits alone: the one check a submitter's fit runs
        against its advert too (``rolebase.capabilities.claim_misfit``), with our memory."""
        lim = self.limits
        return claim_misfit(
            spec,
            max_params=lim.max_params,
            max_dataset_bytes=lim.max_dataset_bytes,
            max_steps=lim.max_steps,
            max_memory_bytes=lim.max_memory_bytes,
        )


class IdleTraining(ProofError):
    """A dry-run step did no learning work (a parameter tensor's gradient exactly zero): every
    verifier fails such a step (``no-work``, proofs.replay), so an honest solver must not claim it."""


@dataclass(frozen=True)
class DryRun:
    """What a dry run measured: the estimated training time, the estimated time of one segment (what
    regenerating a dropped checkpoint costs per segment: solver.retention) and checkpoint 0's size."""

    train_s: float
    segment_s: float
    checkpoint_bytes: int


def _estimate(spec: JobSpec, dataset: Dataset, rt: Runtime = Runtime()) -> DryRun:
    """Seconds to train ``spec`` here, and one segment of it, and checkpoint 0's size, from a dry
    run: a checkpoint encoded and hashed (each is written, re-read for upload and stored: three
    times that; any size: a challenged checkpoint is answered through the availability court,
    docs/protocol.md), then steps on one example (the
    first untimed: kernels compile on first use, once per process). A full step that this puts
    above ``DRY_RUN_STEP_CAP_S`` is not run (a stranger's spec must not stall the solver, whose
    other jobs have clocks): the one-example time times the batch size stands for it; else one
    full step untimed and ``DRY_RUN_STEPS`` timed. A full step that did no learning work, or steps
    that leave every parameter bit-identical (a learning rate that underflows: verifiers fail a
    segment whose parameters and slots do not change), raise :class:`IdleTraining` (a submitter's
    data or learning rate that kills training at once)."""
    trainer = Trainer(spec, dataset, rt)
    started = time.monotonic()
    first = trainer.to_bytes()
    state_hash(first)
    checkpoint_s = time.monotonic() - started
    single = Trainer(spec.model_copy(update={"batch_size": 1}), dataset, rt)
    single.run(1)
    started = time.monotonic()
    single.run(1)
    step_s = (time.monotonic() - started) * spec.batch_size
    if step_s <= DRY_RUN_STEP_CAP_S:
        start = {name: p.detach().clone() for name, p in trainer.params.items()}
        idle = run_watching(trainer, 1).idle
        started = time.monotonic()
        idle = run_watching(trainer, DRY_RUN_STEPS).idle or idle
        step_s = (time.monotonic() - started) / DRY_RUN_STEPS
        if idle is not None:
            raise IdleTraining(f"{idle[1]} has an exactly zero gradient in a dry-run step")
        if all(torch.equal(p, start[name]) for name, p in trainer.params.items()):
            lr = optim.learning_rate(spec.schedule, spec.optimizer.lr, spec.steps, 0)
            raise IdleTraining(f"{1 + DRY_RUN_STEPS} dry-run steps leave every parameter bit-identical (learning rate {lr:g} underflows)")
    train_s = ESTIMATE_FIXED_S + ESTIMATE_SAFETY * (spec.steps * step_s + 3 * (spec.segments + 1) * checkpoint_s)
    return DryRun(train_s, ESTIMATE_SAFETY * (spec.checkpoint_interval * step_s + checkpoint_s), len(first))


def measure_flops(rt: Runtime = Runtime()) -> int:
    """This machine's training speed in FLOP/s as rolebase.capabilities counts it: the fastest of
    ``SPEED_STEPS`` steps of the ``SPEED_REFERENCE`` job (after one untimed step: kernels compile on
    first use), trained as the solver trains (``rt``, the job's numerics: repro-v1, or torch's on a
    device repro-v1 does not run on). The fastest step, since other processes only ever slow a step
    down: it is what is measured again after a restart on a busy machine."""
    job = reference_job(SPEED_REFERENCE)
    spec = job.spec(file_cid(job.dataset))
    if profile(spec.numerics).fault(rt.device) is not None:
        spec = spec.model_copy(update={"numerics": "torch"})
    trainer = Trainer(spec, load_dataset(spec, job.dataset), rt)
    trainer.run(1)
    times = []
    for _ in range(SPEED_STEPS):
        started = time.monotonic()
        trainer.run(1)
        times.append(time.monotonic() - started)
    return max(1, round(step_flop(spec) / min(times)))


class JobTrainer:
    """Trains a claimed job and keeps its checkpoints. A cheating TEST solver overrides
    :meth:`_build_trace` (``solver.adversary.CheatingJobTrainer``)."""

    def __init__(
        self,
        protocol: Protocol,
        store: ContentStore,
        db: SolverDb,
        watcher: MarketWatcher,
        jobs_dir: Path,
        stop: StopFlag,
        *,
        progress: ProgressHook | None = None,
        rt: Runtime = Runtime(),
        disk_budget: int | None = None,
    ) -> None:
        """``disk_budget``: bytes of checkpoints kept per job (None: all of them; solver.retention)."""
        self.protocol = protocol
        self.store = store
        self.db = db
        self.watcher = watcher
        self.jobs_dir = jobs_dir
        self.stop = stop
        self.progress = progress
        self.rt = rt
        self.retention = Retention(db, store, disk_budget, lambda: protocol.market.params().probe_count, rt)

    # -- inputs ------------------------------------------------------------------------------

    def _spec_cid(self, job_id: JobId) -> Cid:
        record = self.db.job(job_id)
        if record is not None:
            return Cid(record.spec_cid)
        cid = digest_to_cid(self.watcher.spec_cid(job_id))  # records lost: the chain still knows
        self.db.start_job(job_id, cid)
        return cid

    def _spec(self, job_id: JobId) -> tuple[Cid, JobSpec]:
        spec_cid = self._spec_cid(job_id)
        try:
            return spec_cid, load_spec(self.store.get(spec_cid, SpecLimits.SPEC_BYTES))
        except ProofError as exc:
            raise JobWorkError(f"job {job_id}: {exc}") from exc

    def keep_inputs(self, job_id: JobId) -> None:
        """Pin the job's spec and inputs in our store before claiming it: the judge fetched them, and
        what the submitter stops serving after our claim cannot then stop our training."""
        spec_cid = digest_to_cid(self.watcher.spec_cid(job_id))
        spec = load_spec(self.store.get(spec_cid, SpecLimits.SPEC_BYTES))
        self.store.pin(spec_cid)
        for _, cid in input_names(spec):
            self.store.pin(cid)

    def _dataset(self, spec: JobSpec) -> Dataset:
        return fetch_dataset(self.store, spec)  # verified against its CID

    def _dir(self, job_id: JobId) -> Path:
        return self.jobs_dir / str(int(job_id))

    # -- training ----------------------------------------------------------------------------

    def _resume_point(self, job_id: JobId) -> list[Bytes32]:
        """State hashes of the checkpoints 0..i on disk that still verify (and have their CID and,
        past 0, their segment's loss and norm on record), or that the disk budget dropped; later ones
        are dropped, and dropped ones at the end (training resumes from a file)."""
        hashes: list[Bytes32] = []
        records = self.db.checkpoints(job_id)
        for record in records:
            ok = record.index == len(hashes) and _complete(record)
            if ok and not record.dropped:
                try:
                    ok = state_hash(read_bounded(record.path)) == record.state_hash
                except OSError:
                    ok = False
            if not ok:
                log.warning("checkpoint on disk does not verify; re-training from the one before", extra={"job": job_id, "index": record.index})
                self.db.drop_checkpoints_from(job_id, record.index)
                break
            hashes.append(record.state_hash)
        while hashes and records[len(hashes) - 1].dropped:
            hashes.pop()
            self.db.drop_checkpoints_from(job_id, len(hashes))
        return hashes

    def train(self, job_id: JobId, deadline: int) -> None:
        """Train (or resume) until every checkpoint is on disk; then record the trace root."""
        started = time.monotonic()
        _, spec = self._spec(job_id)
        try:
            hashes = self._build_trace(job_id, spec, self._dataset(spec), deadline)
        except ProofError as exc:
            raise JobWorkError(f"job {job_id}: {exc}") from exc
        root = TraceTree(hashes).root
        self.db.set_trained(job_id, root, len(hashes))
        log.info("training finished", extra={"job": job_id, "root": hex32(root), "checkpoints": len(hashes), "seconds": round(time.monotonic() - started, 2)})

    def _build_trace(self, job_id: JobId, spec: JobSpec, dataset: Dataset, deadline: int) -> list[Bytes32]:
        """Train from the last checkpoint on disk that verifies (or from the start), writing every
        checkpoint; the state hashes of checkpoints 0..n."""
        trainer = Trainer(spec, dataset, self.rt)
        hashes = self._resume_point(job_id)
        folder = self._dir(job_id)
        folder.mkdir(parents=True, exist_ok=True)

        with Committer(lambda index, data: self._write_checkpoint(folder, index, data), self._recorder(job_id, spec, folder, hashes)) as committer:
            if hashes:
                last = self.db.checkpoints(job_id)[len(hashes) - 1]
                trainer.load(decode_checkpoint(read_bounded(last.path), expect_hash=last.state_hash, expect_spec=spec.spec_hash()))
                committer.hold(trainer)
                log.info(TRAINING_RESUMED, extra={"job": job_id, "checkpoint": len(hashes) - 1, "step": trainer.step})
            else:
                committer.commit(0, trainer, None)
                log.info(TRAINING_STARTED, extra={"job": job_id, "steps": spec.steps, "k": spec.checkpoint_interval})
            for index in range(trainer.step // spec.checkpoint_interval + 1, spec.segments + 1):
                loss = segment_loss(trainer.run(spec.checkpoint_interval, self._step_hook(job_id, deadline)))
                committer.commit(index, trainer, loss)
                if spec.eval is not None and trainer.step % spec.eval.every == 0:
                    log.info("held-out loss", extra={"job": job_id, "step": trainer.step, "loss": held_out_loss(trainer)})
        return hashes

    def _recorder(self, job_id: JobId, spec: JobSpec, folder: Path, hashes: list[Bytes32]) -> Callable[[Committed], None]:
        """Records each checkpoint once its file is durable (only then does it count), appending its hash
        to ``hashes``; the disk budget may then drop the one before."""

        def record(done: Committed) -> None:
            self.db.add_checkpoint(job_id, done.index, done.state_hash, _checkpoint_path(folder, done.index), done.cid, done.loss, done.norm)
            hashes.append(done.state_hash)
            self.retention.after_checkpoint(job_id, spec, done.index)
            log.info("checkpoint written", extra={"job": job_id, "index": done.index, "state_hash": hex32(done.state_hash), "loss": done.loss})

        return record

    def _step_hook(self, job_id: JobId, deadline: int) -> Callable[[int, int], None]:
        last_check = [time.monotonic()]

        def hook(done: int, total: int) -> None:
            if self.stop.is_set():
                raise Stopped(f"job {job_id}: stopped at step {done}; resumes from the last checkpoint")
            if self.progress is not None:
                self.progress(job_id, done, total)
            if time.monotonic() - last_check[0] > 10.0:  # every 10 s: is the commit still reachable?
                last_check[0] = time.monotonic()
                if self.protocol.client.timestamp() >= deadline:
                    raise JobWorkError(f"job {job_id}: commit deadline {deadline} passed at step {done}")

        return hook

    @staticmethod
    def _write_checkpoint(folder: Path, index: int, data: bytes | memoryview) -> None:
        """Checkpoint ``index``'s file, written atomically (:func:`solver.files.write_durable`)."""
        write_durable(_checkpoint_path(folder, index), data)

    # -- upload ------------------------------------------------------------------------------

    def upload(self, job_id: JobId) -> None:
        """Store every checkpoint on disk (each must get the CID recorded when it was written: a file
        that changed on disk since is caught) and the manifest; record the CIDs to commit (a checkpoint
        the disk budget dropped has its CID and norm on record)."""
        started = time.monotonic()
        record = self.db.job(job_id)
        if record is None or record.trace_root is None:
            raise JobWorkError(f"job {job_id}: nothing trained to upload")
        spec_cid, spec = self._spec(job_id)
        checkpoints = self.db.checkpoints(job_id)
        if len(checkpoints) != spec.segments + 1:
            self.db.set_phase(job_id, Phase.TRAINING)  # records and disk disagree: train again
            raise JobWorkError(f"job {job_id}: {len(checkpoints)} checkpoints on record, the spec makes {spec.segments + 1}")
        if not all(_complete(c) for c in checkpoints):  # records from before the losses, CIDs or norms: train again
            self._retrain(job_id)
            raise JobWorkError(f"job {job_id}: checkpoints on record without their segment's loss, CID or norm, re-training")
        for ckpt in (c for c in checkpoints if not c.dropped):
            try:
                stored = self.store.put(read_bounded(ckpt.path))
            except OSError as exc:
                stored, reason = None, str(exc)
            else:
                reason = f"stored as {stored}, written as {ckpt.cid}"
            if stored != ckpt.cid:
                if stored is not None:
                    self.store.unpin(stored)  # bytes that are not our checkpoint: nothing to keep
                self._retrain(job_id)
                raise JobWorkError(f"job {job_id}: checkpoint {ckpt.index} on disk is not the one written ({reason}), re-training")
        hashes = tuple(c.state_hash for c in checkpoints)
        trace = Trace(
            spec=spec,
            state_hashes=hashes,
            update_norms=tuple(c.norm for c in checkpoints[1:] if c.norm is not None),
            losses=tuple(c.loss for c in checkpoints[1:] if c.loss is not None),
            tree=TraceTree(hashes),
            cids=tuple(c.cid for c in checkpoints if c.cid is not None),
            held_out_loss=None if spec.eval is None else model_held_out_loss(spec, self._dataset(spec), self.checkpoint(job_id, spec.segments), self.rt),
        )
        if trace.root != record.trace_root:
            raise JobWorkError(f"job {job_id}: trace root {hex32(trace.root)} differs from the recorded {hex32(record.trace_root)}")
        manifest = trace.manifest(spec_cid)
        manifest_cid = write_manifest(self.store.put, manifest)
        self.db.set_uploaded(job_id, manifest.final_cid, manifest_cid)
        log.info(
            "upload finished",
            extra={"job": job_id, "manifest": manifest_cid, "model": manifest.final_cid, "seconds": round(time.monotonic() - started, 2)},
        )

    def _retrain(self, job_id: JobId) -> None:
        self.db.drop_checkpoints_from(job_id, 0)
        self.db.set_phase(job_id, Phase.CLAIMED)

    # -- disputes ----------------------------------------------------------------------------

    def checkpoint(self, job_id: JobId, index: int, *, held: bool = False) -> bytes:
        """Checkpoint ``index`` of the job: from disk, or regenerated if the disk budget dropped it
        (``held``: for the verifier's draw, kept until the job is final)."""
        _, spec = self._spec(job_id)
        return self.retention.checkpoint(job_id, spec, self._dataset(spec), index, held=held)

    def midpoint(self, job_id: JobId, segment: int, step: int) -> tuple[Bytes32, Cid]:
        """Our state ``step`` steps into ``segment``, recomputed from checkpoint ``segment`` (on
        disk, or regenerated), stored (the challenger and referees fetch it by CID): ``(state hash, CID)``."""
        _, spec = self._spec(job_id)
        records = self.db.checkpoints(job_id)
        if not 0 <= segment < len(records) or records[segment].index != segment:
            raise JobWorkError(f"job {job_id}: no checkpoint {segment} on record to defend segment {segment}")
        start = self.retention.checkpoint(job_id, spec, self._dataset(spec), segment)
        if state_hash(start) != records[segment].state_hash:
            raise JobWorkError(f"job {job_id}: checkpoint {segment} on disk does not match its recorded hash")
        try:
            state = state_at(spec, self._dataset(spec), start, segment * spec.checkpoint_interval + step, self.rt)
        except ProofError as exc:
            raise JobWorkError(f"job {job_id}: cannot recompute step {step} of segment {segment}: {exc}") from exc
        return state_hash(state), self.store.put(state)

    # -- after the job is final --------------------------------------------------------------

    def release(self, job_id: JobId) -> None:
        """Unpin the intermediate checkpoints (the job is final: no dispute can ask for them) and
        delete the local files. The final checkpoint is the submitter's model: it stays pinned."""
        checkpoints = self.db.checkpoints(job_id)
        for ckpt in checkpoints[:-1]:
            if ckpt.cid is not None:
                self.store.unpin(ckpt.cid)
        shutil.rmtree(self._dir(job_id), ignore_errors=True)


def _checkpoint_path(folder: Path, index: int) -> Path:
    return folder / f"checkpoint-{index:06d}.safetensors"


def _complete(record: CheckpointRecord) -> bool:
    """Whether a checkpoint's record has all that upload needs: its CID and, past checkpoint 0, its
    segment's loss and update norm (records from before those columns do not)."""
    return record.cid is not None and (record.index == 0 or (record.loss is not None and record.norm is not None))
