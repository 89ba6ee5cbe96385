"""The solver's training survives a crash: it resumes from the last checkpoint whose file still verifies."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from core.agent import StopFlag, Stopped
from core.cid import cid_to_digest
from core.contracts import JobId
from core.storage import LocalStore, file_cid
from deploy.devnet import Devnet
from proofs.adversary import cheat
from proofs.data import load_dataset
from proofs.datasets import reference_job
from proofs.manifest import parse_manifest
from proofs.spec import JobSpec
from proofs.train import train_trace
from rolebase.watchers import MarketWatcher
from solver.adversary import CheatingJobTrainer
from solver.judge import SpecJudge
from solver.policy import Limits, Phase
from solver.state import SolverDb
from solver.work import JobTrainer, JobWorkError

JOB = JobId(1)
FAR = 2**32 - 1
Bench = tuple[JobTrainer, SolverDb, LocalStore, JobSpec, StopFlag]


@pytest.fixture
def bench(tmp_path: Path, devnet: Devnet) -> Iterator[Bench]:
    store = LocalStore(tmp_path / "store")
    ref = reference_job("mlp-spirals", steps=200, checkpoint_interval=20)
    spec = ref.spec(store.put(ref.dataset))
    spec_cid = store.put(spec.canonical_bytes())
    db = SolverDb(tmp_path / "state.sqlite")
    db.start_job(JOB, spec_cid)
    protocol = devnet.protocol()
    stop = StopFlag()
    workshop = JobTrainer(protocol, store, db, MarketWatcher(protocol.market, protocol.book.deploy_block), tmp_path / "jobs", stop)
    yield workshop, db, store, spec, stop
    db.close()


def test_resume_after_a_crash_drops_a_tampered_checkpoint_and_rebuilds_the_same_trace(bench: Bench) -> None:
    workshop, db, _, spec, _ = bench
    workshop.train(JOB, FAR)
    honest = db.job(JOB)
    assert honest is not None and honest.phase is Phase.TRAINED and honest.checkpoint_count == spec.segments + 1
    curve = [c.loss for c in db.checkpoints(JOB)]
    assert curve[0] is None and None not in curve[1:]  # each checkpoint past 0 records its segment's mean loss

    # as if killed after checkpoint 6 was recorded, with checkpoint 4's file torn on disk
    db.drop_checkpoints_from(JOB, 7)
    db.set_phase(JOB, Phase.TRAINING)
    torn = db.checkpoints(JOB)[4].path
    torn.write_bytes(torn.read_bytes()[:-7])

    workshop.train(JOB, FAR)
    again = db.job(JOB)
    assert again is not None and again.trace_root == honest.trace_root
    assert [c.index for c in db.checkpoints(JOB)] == list(range(spec.segments + 1))
    assert [c.loss for c in db.checkpoints(JOB)] == curve

    # records from before the loss column: a checkpoint without its segment's loss is not resumed from
    db.db.execute("UPDATE checkpoints SET loss = NULL WHERE job_id = ? AND idx >= 5", (JOB,))
    db.set_phase(JOB, Phase.TRAINING)
    workshop.train(JOB, FAR)
    assert [c.loss for c in db.checkpoints(JOB)] == curve


def test_stop_interrupts_training_and_keeps_what_is_on_disk(bench: Bench) -> None:
    workshop, db, _, _, stop = bench

    def progress(job_id: JobId, done: int, total: int) -> None:
        if done == 50:
            stop.set()

    workshop.progress = progress
    with pytest.raises(Stopped):
        workshop.train(JOB, FAR)
    assert [c.index for c in db.checkpoints(JOB)] == [0, 1, 2]  # steps 0, 20, 40 written; 41..50 lost
    record = db.job(JOB)
    assert record is not None and record.phase is Phase.TRAINING


def test_upload_stores_a_manifest_that_matches_the_trace(bench: Bench) -> None:
    workshop, db, store, spec, _ = bench
    workshop.train(JOB, FAR)
    workshop.upload(JOB)
    record = db.job(JOB)
    assert record is not None and record.phase is Phase.UPLOADED and record.manifest_cid is not None
    manifest = parse_manifest(store.get(record.manifest_cid, 1 << 20), spec)
    assert manifest.root == record.trace_root
    assert manifest.final_cid == record.final_model_cid
    assert all(store.has(cid) for cid in manifest.checkpoint_cids)
    trace = train_trace(spec, load_dataset(spec, store.get(spec.dataset.cid, spec.dataset.size_bytes)), put=file_cid)
    assert manifest.losses == trace.losses  # the curve, bit for bit
    assert manifest.update_norms == trace.update_norms and manifest.checkpoint_cids == trace.cids and manifest.root == trace.root


def test_a_write_that_fails_mid_commit_fails_the_job_and_a_resume_gives_the_same_trace(bench: Bench, monkeypatch: pytest.MonkeyPatch) -> None:
    workshop, db, _, spec, _ = bench
    write = JobTrainer._write_checkpoint

    def torn(folder: Path, index: int, data: bytes | memoryview) -> None:
        if index == 5:  # killed while writing checkpoint 5: a partial temporary file, nothing renamed
            (folder / f"checkpoint-{index:06d}.tmp").write_bytes(bytes(data)[:100])
            raise OSError("No space left on device")
        write(folder, index, data)

    monkeypatch.setattr(JobTrainer, "_write_checkpoint", staticmethod(torn))
    with pytest.raises(OSError, match="No space left"):
        workshop.train(JOB, FAR)
    assert [c.index for c in db.checkpoints(JOB)] == [0, 1, 2, 3, 4]  # only what is durable counts
    monkeypatch.setattr(JobTrainer, "_write_checkpoint", staticmethod(write))
    workshop.train(JOB, FAR)
    record = db.job(JOB)
    trace = train_trace(spec, load_dataset(spec, workshop.store.get(spec.dataset.cid, spec.dataset.size_bytes)), put=file_cid)
    assert record is not None and record.trace_root == trace.root
    assert [(c.state_hash, c.cid, c.loss, c.norm) for c in db.checkpoints(JOB)] == list(
        zip(trace.state_hashes, trace.cids, (None, *trace.losses), (None, *trace.update_norms))
    )


def test_upload_catches_a_checkpoint_changed_on_disk_since_it_was_written(bench: Bench) -> None:
    workshop, db, _, _, _ = bench
    workshop.train(JOB, FAR)
    changed = db.checkpoints(JOB)[3].path
    data = bytearray(changed.read_bytes())
    data[-1] ^= 1
    changed.write_bytes(bytes(data))
    with pytest.raises(JobWorkError, match="checkpoint 3 on disk is not the one written"):
        workshop.upload(JOB)
    record = db.job(JOB)
    assert record is not None and record.phase is Phase.CLAIMED and db.checkpoints(JOB) == []


def test_judge_rejects_specs_over_the_solvers_limits_and_caches_the_verdict(bench: Bench) -> None:
    _, db, store, spec, _ = bench
    digest = cid_to_digest(store.put(spec.canonical_bytes()))
    assert SpecJudge(store, db, Limits(max_steps=100), "31337:0xM").check(digest).runnable is False
    # cached: a more generous judge over the same records gives the same verdict without refetching
    assert SpecJudge(store, db, Limits(), "31337:0xM").check(digest).reason == "takes at most 100 steps (the job has 200)"
    unknown = SpecJudge(store, db, Limits(), "31337:0xM").check(bytes(32))  # a CID nobody stored: not runnable, not final
    assert unknown.runnable is False and not unknown.final and "not in storage" in unknown.reason


def test_upload_of_a_trace_recorded_without_its_losses_trains_again(bench: Bench) -> None:
    workshop, db, _, _, _ = bench
    workshop.train(JOB, FAR)
    db.db.execute("UPDATE checkpoints SET loss = NULL WHERE job_id = ? AND idx = 3", (JOB,))  # as records from before the column
    with pytest.raises(JobWorkError, match="without their segment's loss, CID or norm"):
        workshop.upload(JOB)
    record = db.job(JOB)
    assert record is not None and record.phase is Phase.CLAIMED and record.manifest_cid is None and db.checkpoints(JOB) == []


def test_a_cheating_trainers_trace_is_recorded_and_uploaded_like_any_other(bench: Bench) -> None:
    honest, db, store, spec, stop = bench
    workshop = CheatingJobTrainer(honest.protocol, store, db, honest.watcher, honest.jobs_dir, stop, strategy="wrong-lr")
    workshop.train(JOB, FAR)
    workshop.upload(JOB)
    record = db.job(JOB)
    assert record is not None and record.manifest_cid is not None
    manifest = parse_manifest(store.get(record.manifest_cid, 1 << 20), spec)
    faked = cheat("wrong-lr", spec, load_dataset(spec, store.get(spec.dataset.cid, spec.dataset.size_bytes))).trace
    assert manifest.root == faked.root and manifest.update_norms == faked.update_norms and manifest.losses == faked.losses
