"""Storage that fits a disk (solver.retention): the pure plan, and a solver job trained under a budget."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.agent import StopFlag
from core.availability import Availability, ContentUnavailable, challenge
from core.cid import Cid, cid_to_digest
from core.contracts import JobId, JobState, Role, TokenAmount
from core.storage import LocalStore, file_cid
from deploy.devnet import Devnet
from proofs.checkpoint import state_hash
from proofs.data import load_dataset
from proofs.datasets import reference_job
from proofs.manifest import parse_manifest
from proofs.merkle import hex32
from proofs.probes import probe_positions
from proofs.sampling import choose_segments
from proofs.spec import JobSpec
from proofs.steps import state_at
from proofs.train import Trace, train_trace
from rolebase.watchers import MarketWatcher
from solver import files
from solver.availability import publication
from solver.judge import SpecJudge
from solver.loader import SolverLoader
from solver.policy import Limits, Phase, SolverConfig, SpecCheck
from solver.retention import (
    COPIES,
    PUBLISH_MARGIN_S,
    SERVE_SLOTS,
    BudgetError,
    RegenerationError,
    draw_checkpoints,
    draw_size,
    fits_budget,
    parse_size,
    plan_retention,
    regeneration_source,
)
from solver.state import SolverDb
from solver.work import JobTrainer
from tests.chain.test_lifecycle import post, stake

if TYPE_CHECKING:
    from tests.conftest import Parties

JOB = JobId(1)
FAR = 2**32 - 1
PROBES = 4  # the devnet's probeCount

# -- the pure plan -----------------------------------------------------------------------------


def test_without_a_budget_or_with_room_for_all_every_checkpoint_is_kept() -> None:
    assert plan_retention(1001, 10**9, None, PROBES).kept == frozenset(range(1001))
    assert plan_retention(11, 100, COPIES * 100 * (11 + SERVE_SLOTS), PROBES).kept == frozenset(range(11))
    assert plan_retention(11, 100, None, PROBES).worst_segments == 0


def test_a_budget_keeps_checkpoint_0_the_model_and_evenly_spaced_anchors() -> None:
    size = 1_200_000_000  # a 100M-parameter Adam checkpoint
    budget = COPIES * size * (SERVE_SLOTS + draw_size(1001, PROBES) + 11)
    plan = plan_retention(1001, size, budget, PROBES)
    assert plan.kept == frozenset(range(0, 1001, 100))  # 11 anchors, 100 segments apart
    assert plan.worst_segments == 99


@given(count=st.integers(2, 3000), size=st.integers(1, 10**9), slots=st.integers(1, 4000))
def test_the_plan_never_needs_more_than_the_budget(count: int, size: int, slots: int) -> None:
    budget = slots * COPIES * size + size  # not a whole number of slots
    try:
        plan = plan_retention(count, size, budget, PROBES)
    except BudgetError:
        assert slots < count + SERVE_SLOTS and slots - SERVE_SLOTS - draw_size(count, PROBES) < 2
        return
    assert {0, count - 1} <= plan.kept
    if plan.kept != frozenset(range(count)):
        anchors = slots - SERVE_SLOTS - draw_size(count, PROBES)
        assert COPIES * size * (len(plan.kept) + draw_size(count, PROBES) + SERVE_SLOTS) <= budget
        assert plan.worst_segments <= math.ceil((count - 1) / (anchors - 1)) - 1
    else:
        assert slots >= count + SERVE_SLOTS


def test_a_regeneration_starts_from_the_nearest_checkpoint_on_disk_below() -> None:
    assert regeneration_source([0, 10, 20, 13], 17) == 13
    assert regeneration_source([0, 10, 20], 20) == 20


def test_the_draw_is_what_the_verifier_fetches() -> None:
    norms = [float(i % 7) for i in range(150)]
    seed = bytes(range(32))
    picked = set(choose_segments(norms, seed).segments) | {s for _, s, _ in probe_positions(seed, PROBES, 151, 2)}
    assert draw_checkpoints(norms, seed, PROBES) == {i for s in picked for i in (s, s + 1)}
    assert len(draw_checkpoints(norms, seed, PROBES)) <= draw_size(151, PROBES)


def test_a_job_whose_worst_regeneration_misses_the_availability_window_is_refused() -> None:
    check = SpecCheck(True, "", 300, 10.0, checkpoints=151, checkpoint_bytes=1000, segment_s=2.0)
    budget = COPIES * 1000 * (SERVE_SLOTS + draw_size(151, PROBES) + 6)  # 6 anchors: 30 segments apart, 29 to regenerate
    assert fits_budget(check, None, PROBES, 10) is check
    assert fits_budget(check, budget, PROBES, int(2 * 29 * 2.0 + PUBLISH_MARGIN_S)) is check
    refused = fits_budget(check, budget, PROBES, int(2 * 29 * 2.0 + PUBLISH_MARGIN_S) - 1)
    assert not refused.runnable and refused.final and "29 segments" in refused.reason and "availability window" in refused.reason
    too_small = fits_budget(check, COPIES * 1000 * (SERVE_SLOTS + draw_size(151, PROBES) + 1), PROBES, 10**6)
    assert not too_small.runnable and "fewer than 2 anchors" in too_small.reason


def test_sizes_parse_in_decimal_and_binary_units() -> None:
    assert [parse_size(t) for t in ("50GB", "512MiB", "1.5 TB", "4096", "2kb")] == [50 * 10**9, 512 << 20, 1_500_000_000_000, 4096, 2000]
    for bad in ("", "GB", "5 parsecs", "-3GB"):
        with pytest.raises(BudgetError, match="is not a size"):
            parse_size(bad)


# -- a job trained under a budget -------------------------------------------------------------

Setup = tuple[JobTrainer, SolverDb, LocalStore, JobSpec, Trace, Path]


@pytest.fixture
def budgeted(tmp_path: Path, devnet: Devnet) -> Iterator[Setup]:
    """A 150-segment job (k = 2) under a budget of 6 anchors beside the draw and the serving slots."""
    store = LocalStore(tmp_path / "store")
    ref = reference_job("mlp-spirals", steps=300, checkpoint_interval=2)
    spec = ref.spec(store.put(ref.dataset))
    db = SolverDb(tmp_path / "state.sqlite")
    db.start_job(JOB, store.put(spec.canonical_bytes()))
    protocol = devnet.protocol()
    full = train_trace(spec, load_dataset(spec, ref.dataset))
    budget = COPIES * len(full.checkpoints[0]) * (SERVE_SLOTS + draw_size(spec.segments + 1, PROBES) + 6)
    jobs = tmp_path / "jobs"
    workshop = JobTrainer(protocol, store, db, MarketWatcher(protocol.market, protocol.book.deploy_block), jobs, StopFlag(), disk_budget=budget)
    yield workshop, db, store, spec, full, jobs
    db.close()


def on_disk(db: SolverDb, store: LocalStore, jobs: Path) -> int:
    """The job's bytes on disk: every file under its folder and the store's blobs of its checkpoints."""
    files = sum(_size(f) for f in jobs.rglob("*"))
    blobs = {c.cid for c in db.checkpoints(JOB) if c.cid is not None}
    return files + sum(_size(store.root / "blobs" / cid) for cid in blobs)


def _size(path: Path) -> int:
    """A file's size; 0 for a folder or a file gone (the commit thread renames ``.tmp`` files and the
    budget deletes dropped ones while training measures)."""
    try:
        return path.stat().st_size if path.is_file() else 0
    except FileNotFoundError:
        return 0


def test_a_job_trained_under_a_budget_stays_within_it_and_commits_the_same_trace(budgeted: Setup) -> None:
    workshop, db, store, spec, full, jobs = budgeted
    budget = workshop.retention.budget
    assert budget is not None and budget < COPIES * sum(len(c) for c in full.checkpoints), "the budget cannot keep every checkpoint"
    peak = [0]
    workshop.progress = lambda job, done, total: peak.__setitem__(0, max(peak[0], on_disk(db, store, jobs)))
    workshop.train(JOB, FAR)
    workshop.upload(JOB)
    peak[0] = max(peak[0], on_disk(db, store, jobs))
    assert 0 < peak[0] <= budget

    record = db.job(JOB)
    assert record is not None and record.manifest_cid is not None and record.trace_root == full.root
    manifest = parse_manifest(store.get(record.manifest_cid, 1 << 20), spec)
    assert manifest.checkpoint_cids == tuple(file_cid(c) for c in full.checkpoints), "every CID listed, dropped ones too"
    assert (manifest.update_norms, manifest.losses) == (full.update_norms, full.losses)
    plan = workshop.retention.plan(JOB, spec)
    assert {c.index for c in db.checkpoints(JOB) if not c.dropped} == plan.kept and len(plan.kept) == 6
    assert not any(store.has(c.cid) for c in db.checkpoints(JOB) if c.dropped and c.cid is not None), "dropped: not in the store either"

    # the farthest dropped checkpoint is regenerated to its committed leaf and CID, and stored to be served
    worst = max((i for i in range(spec.segments + 1) if i not in plan.kept), key=lambda i: i - regeneration_source(plan.kept, i))
    assert worst - regeneration_source(plan.kept, worst) == plan.worst_segments
    data = workshop.checkpoint(JOB, worst)
    assert state_hash(data) == manifest.state_hashes[worst] == full.state_hashes[worst]
    assert store.get(manifest.checkpoint_cids[worst], 1 << 20) == data
    assert db.checkpoints(JOB)[worst].dropped is False

    # the whole draw regenerated and held, and more checkpoints served: still within the budget
    seed = bytes(range(32))
    draw = draw_checkpoints(full.update_norms, seed, PROBES)
    for index in sorted(draw):
        workshop.checkpoint(JOB, index, held=True)
    for index in (3, 5, 9, 11):
        if index not in draw:
            workshop.checkpoint(JOB, index)
    assert on_disk(db, store, jobs) <= budget
    assert all(store.get(manifest.checkpoint_cids[i], 1 << 20) == full.checkpoints[i] for i in draw), "the draw is served, every byte"

    # a dispute's midpoint in a dropped segment is recomputed from the regenerated start
    segment = next(i for i in range(spec.segments) if db.checkpoints(JOB)[i].dropped)
    state, cid = workshop.midpoint(JOB, segment, 1)
    assert state == state_hash(state_at(spec, workshop._dataset(spec, JOB), full.checkpoints[segment], segment * 2 + 1))
    assert store.has(cid)


def test_a_crash_or_a_wrong_result_during_regeneration_serves_nothing(budgeted: Setup, monkeypatch: pytest.MonkeyPatch) -> None:
    workshop, db, store, spec, full, _ = budgeted
    workshop.train(JOB, FAR)
    workshop.upload(JOB)
    target = next(c for c in db.checkpoints(JOB) if c.dropped)
    assert target.cid is not None

    def killed(src: object, dst: object) -> None:
        raise KeyboardInterrupt("killed between the write and the rename")

    monkeypatch.setattr(files.os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        workshop.checkpoint(JOB, target.index)
    monkeypatch.undo()
    assert not target.path.exists() and not store.has(target.cid) and db.checkpoints(JOB)[target.index].dropped

    # a record that another state was committed there (as if the anchor had been another trace's): nothing is written
    db.db.execute("UPDATE checkpoints SET state_hash = ? WHERE job_id = ? AND idx = ?", ("0x" + "11" * 32, JOB, target.index))
    with pytest.raises(RegenerationError, match="does not hash to its committed leaf"):
        workshop.checkpoint(JOB, target.index)
    assert not target.path.exists() and not store.has(target.cid)

    db.db.execute("UPDATE checkpoints SET state_hash = ? WHERE job_id = ? AND idx = ?", (hex32(full.state_hashes[target.index]), JOB, target.index))
    assert workshop.checkpoint(JOB, target.index) == full.checkpoints[target.index]
    assert store.has(target.cid) and target.path.read_bytes() == full.checkpoints[target.index]


def test_training_resumes_across_dropped_checkpoints(budgeted: Setup) -> None:
    workshop, db, _, spec, full, _ = budgeted
    workshop.train(JOB, FAR)
    records = db.checkpoints(JOB)
    last_dropped = max(c.index for c in records if c.dropped and c.index < spec.segments - 1)
    db.drop_checkpoints_from(JOB, last_dropped + 1)  # as if killed just after dropping it
    db.set_phase(JOB, Phase.TRAINING)
    workshop.train(JOB, FAR)
    again = db.job(JOB)
    assert again is not None and again.trace_root == full.root
    assert [c.state_hash for c in db.checkpoints(JOB)] == list(full.state_hashes)


def test_an_availability_challenge_on_a_dropped_checkpoint_is_answered_by_regenerating_it(
    budgeted: Setup, devnet: Devnet, parties: Parties, tmp_path: Path
) -> None:
    workshop, db, store, _, full, _ = budgeted
    workshop.train(JOB, FAR)
    workshop.upload(JOB)
    record = db.job(JOB)
    assert record is not None and record.trace_root is not None and record.final_model_cid and record.manifest_cid
    proto = devnet.protocol()
    stake(proto, parties.solver, Role.SOLVER)
    stake(proto, parties.verifier, Role.VERIFIER)
    job_id, _ = post(proto, parties.submitter)
    assert job_id == JOB, "the solver's records are keyed by the chain's job id"
    solver = proto.with_signer(parties.solver)
    solver.market.claim(job_id)
    solver.market.commit(job_id, record.trace_root, len(db.checkpoints(JOB)), cid_to_digest(record.final_model_cid), cid_to_digest(record.manifest_cid))
    devnet.chain.mine(2)
    proto.market.with_signer(parties.submitter).assign_verifier(job_id)

    dropped = max(c.index for c in db.checkpoints(JOB) if c.dropped)
    # the solver's view: the draw's dropped checkpoints (from VerifierAssigned), and one asked of its gateway
    asked = db.checkpoints(JOB)[dropped].cid
    assert asked is not None
    judge = SpecJudge(store, db, Limits(), "31337:0xM")
    config = SolverConfig(stake_target=TokenAmount(0), disk_budget=workshop.retention.budget)
    loader = SolverLoader(proto, MarketWatcher(proto.market, proto.book.deploy_block), db, judge, parties.solver.address, config, wanted=lambda: [Cid(asked)])
    (job,) = loader.load().held_jobs
    seed = bytes(proto.market.events("VerifierAssigned", proto.book.deploy_block, jobId=job_id)[-1].args["assignSeed"])
    draw = draw_checkpoints(full.update_norms, seed, proto.market.params().probe_count)
    assert job.regenerate == tuple(sorted(i for i in draw if db.checkpoints(JOB)[i].dropped)) and job.regenerate
    assert job.requested == (dropped,)

    verifier = proto.with_signer(parties.verifier)
    challenge(verifier, parties.verifier.address, ContentUnavailable(job_id, dropped, "not served", on_chain=True))
    assert proto.market.get_job(job_id).state is JobState.DATA_CHALLENGED
    content, proof = publication(db, store, job_id, dropped, lambda i: workshop.checkpoint(job_id, i))
    solver.market.answer_availability(job_id, content, proof)  # the chain checks the leaf under the committed root
    assert proto.market.get_job(job_id).state is JobState.VERIFYING
    taken = Availability(verifier, LocalStore(tmp_path / "verifier-store")).published(job_id, dropped, file_cid(content), full.state_hashes[dropped])
    assert taken == full.checkpoints[dropped]
