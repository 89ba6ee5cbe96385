"""The solver's work on a claimed job: train with checkpoints that survive a crash, upload the trace,
defend it. (Which jobs to claim is :mod:`solver.judge`'s.)

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
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from core.agent import StopFlag, Stopped
from core.cid import Cid, digest_to_cid
from core.contracts import JobId, Protocol
from core.errors import VeritrainError
from core.probe import Bytes32
from core.storage import ContentStore
from proofs.checkpoint import decode_checkpoint, state_hash
from proofs.data import Dataset
from proofs.errors import ProofError
from proofs.manifest import write_manifest
from proofs.merkle import TraceTree, hex32
from proofs.spec import JobSpec, load_spec
from proofs.spec import Limits as SpecLimits
from proofs.steps import state_at
from proofs.train import Committed, Committer, Runtime, Trace, Trainer, held_out_loss, model_held_out_loss, segment_loss
from rolebase.events import TRAINING_RESUMED, TRAINING_STARTED
from rolebase.inputs import fetch_dataset, fetch_inputs, input_names
from rolebase.watchers import MarketWatcher
from solver.files import read_bounded, write_durable
from solver.policy import Phase
from solver.retention import Retention
from solver.state import CheckpointRecord, SolverDb

log = logging.getLogger(__name__)

#: ``progress(job_id, steps_done, steps_total)``: the CLI draws a bar with it when interactive.
ProgressHook = Callable[[JobId, int, int], None]


class JobWorkError(VeritrainError):
    """A job cannot be worked on as asked (its spec, data or checkpoints are unusable)."""


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
        what the submitter stops serving after our claim cannot then stop our training. A sealed
        dataset is opened with this job's data key first (``SealingError`` without one, or with
        another): nothing pauses a claimed job's clock, so no claim is sent on data we cannot read."""
        spec_cid = digest_to_cid(self.watcher.spec_cid(job_id))
        spec = load_spec(self.store.get(spec_cid, SpecLimits.SPEC_BYTES))
        if spec.dataset.sealed:
            fetch_inputs(self.store, spec, self.db.data_key(job_id))
        self.store.pin(spec_cid)
        for _, cid in input_names(spec):
            self.store.pin(cid)

    def _dataset(self, spec: JobSpec, job_id: JobId) -> Dataset:
        """The job's dataset, verified against its CID; a sealed one opened with the job's data key."""
        return fetch_dataset(self.store, spec, self.db.data_key(job_id))

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
            hashes = self._build_trace(job_id, spec, self._dataset(spec, job_id), deadline)
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
                trainer.load(decode_checkpoint(read_bounded(last.path), expect_hash=last.state_hash, expect_spec=spec.spec_hash(), data_key=dataset.data_key))
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
            held_out_loss=None
            if spec.eval is None
            else model_held_out_loss(spec, self._dataset(spec, job_id), self.checkpoint(job_id, spec.segments), self.rt),
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
        return self.retention.checkpoint(job_id, spec, self._dataset(spec, job_id), index, held=held)

    def midpoint(self, job_id: JobId, segment: int, step: int) -> tuple[Bytes32, Cid]:
        """Our state ``step`` steps into ``segment``, recomputed from checkpoint ``segment`` (on
        disk, or regenerated), stored (the challenger and referees fetch it by CID): ``(state hash, CID)``."""
        _, spec = self._spec(job_id)
        records = self.db.checkpoints(job_id)
        if not 0 <= segment < len(records) or records[segment].index != segment:
            raise JobWorkError(f"job {job_id}: no checkpoint {segment} on record to defend segment {segment}")
        dataset = self._dataset(spec, job_id)  # fetched and checked against its CID once, for both
        start = self.retention.checkpoint(job_id, spec, dataset, segment)
        if state_hash(start) != records[segment].state_hash:
            raise JobWorkError(f"job {job_id}: checkpoint {segment} on disk does not match its recorded hash")
        try:
            state = state_at(spec, dataset, start, segment * spec.checkpoint_interval + step, self.rt)
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
