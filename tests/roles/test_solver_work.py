"""The solver's training survives a crash: it resumes from the last checkpoint whose file still verifies."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from core.agent import StopFlag, Stopped
from core.cid import cid_to_digest
from core.contracts import JobId
from core.storage import LocalStore
from deploy.devnet import Devnet
from proofs import JobSpec, load_dataset, parse_manifest, train_trace
from proofs.datasets import reference_job
from rolebase.watchers import MarketWatcher
from solver.policy import Phase
from solver.state import SolverDb
from solver.work import JobTrainer, JobWorkError, Limits, SpecJudge
from tests.roles.test_solver_judge import gas_30m

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
    assert manifest.losses == train_trace(spec, load_dataset(spec, store.get(spec.dataset.cid, spec.dataset.size_bytes))).losses  # the curve, bit for bit


def test_judge_rejects_specs_over_the_solvers_limits_and_caches_the_verdict(bench: Bench) -> None:
    _, db, store, spec, _ = bench
    digest = cid_to_digest(store.put(spec.canonical_bytes()))
    assert SpecJudge(store, db, Limits(max_steps=100), "31337:0xM", gas_30m).check(digest).runnable is False
    # cached: a more generous judge over the same records gives the same verdict without refetching
    assert SpecJudge(store, db, Limits(), "31337:0xM", gas_30m).check(digest).reason.startswith("200 steps")
    unknown = SpecJudge(store, db, Limits(), "31337:0xM", gas_30m).check(bytes(32))  # a CID nobody stored: not runnable, not final
    assert unknown.runnable is False and not unknown.final and "not in storage" in unknown.reason


def test_upload_of_a_trace_recorded_without_its_losses_trains_again(bench: Bench) -> None:
    workshop, db, _, _, _ = bench
    workshop.train(JOB, FAR)
    db.db.execute("UPDATE checkpoints SET loss = NULL WHERE job_id = ? AND idx = 3", (JOB,))  # as records from before the column
    with pytest.raises(JobWorkError, match="without their segment's loss"):
        workshop.upload(JOB)
    record = db.job(JOB)
    assert record is not None and record.phase is Phase.CLAIMED and record.manifest_cid is None and db.checkpoints(JOB) == []
