"""The dispute replayer's rules for adaptive cheaters, on real tiny traces (the chain stood in for by a stub):
a referee finds a false start or a false norm without training and a false loss by replaying the
segment, and a challenger steers the bisection to the first step of a segment that did no learning work."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from core.chain import Address
from core.cid import Cid, cid_to_digest
from core.contracts import Bytes32, GameId, GameStatus, JobId, TraceCommitment
from core.storage import LocalStore
from proofs.adversary import cheat
from proofs.checkpoint import state_hash
from proofs.data import load_dataset
from proofs.datasets import reference_job
from proofs.numerics import profile
from proofs.steps import state_at
from proofs.train import Runtime, Trace, train_trace
from rolebase.dispute import DisputeReplayer, DisputeWorkError, JobMaterial

JOB = JobId(7)


class _Replayer(DisputeReplayer):
    """``material`` as checked against the chain, here the given trace's."""

    def __init__(self, store: LocalStore, material: JobMaterial) -> None:
        super().__init__(SimpleNamespace(), store, SimpleNamespace())  # type: ignore[arg-type]
        self.given = material

    def material(self, job_id: JobId) -> JobMaterial:
        return self.given


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Any:
    store = LocalStore(tmp_path_factory.mktemp("store"))
    ref = reference_job("mlp-spirals", steps=60, checkpoint_interval=10)
    spec = ref.spec(store.put(ref.dataset))
    return SimpleNamespace(store=store, spec=spec, dataset=load_dataset(spec, ref.dataset))


def _replayer(job: Any, trace: Trace, norms: list[float] | None = None) -> _Replayer:
    manifest = trace.manifest("QmSpec", [job.store.put(c) for c in trace.checkpoints])
    if norms is not None:
        manifest = manifest.model_copy(update={"update_norms": tuple(norms)})
    return _Replayer(job.store, JobMaterial(job.spec, job.dataset, manifest))


def test_the_referee_rule_on_commitments_passes_an_honest_trace_and_names_a_free_start(job: Any) -> None:
    honest = train_trace(job.spec, job.dataset)
    assert all(_replayer(job, honest).commitment_fault(JOB, s) is None for s in range(job.spec.segments))
    free = cheat("free-start", job.spec, job.dataset).trace
    replayer = _replayer(job, free)
    assert "seeded initialization" in (replayer.commitment_fault(JOB, 0) or "")
    assert replayer.commitment_fault(JOB, 1) is None  # the start is segment 0's business only


def test_the_referee_rule_on_commitments_names_a_false_norm(job: Any) -> None:
    honest = train_trace(job.spec, job.dataset)
    lie = list(honest.update_norms)
    lie[3] /= 4
    fault = _replayer(job, honest, lie).commitment_fault(JOB, 3)
    assert fault is not None and "manifest claims" in fault


def _game(job: Any, trace: Trace, segment: int, lo: int, hi: int) -> Any:
    k = job.spec.checkpoint_interval
    mid = (lo + hi) // 2
    truth = state_hash(state_at(job.spec, job.dataset, trace.checkpoints[segment], segment * k + mid))
    return SimpleNamespace(job_id=JOB, segment=segment, steps=k, lo=lo, hi=hi, mid_hash=truth)


def test_a_challenger_steers_a_coasting_segment_to_its_first_idle_step(job: Any) -> None:
    """Every posted midpoint of a coasting segment is the true state; the challenger still disagrees
    past the first idle step, so the game isolates a step the referees find did no work."""
    faked = cheat("coast", job.spec, job.dataset, segments=[1, 2, 3])
    replayer = _replayer(job, faked.trace)
    k = job.spec.checkpoint_interval
    lo, hi = 0, k
    while hi - lo > 1:
        game = _game(job, faked.trace, 2, lo, hi)
        lo, hi = ((lo + hi) // 2, hi) if replayer.answer(GameId(1), game) else (lo, (lo + hi) // 2)
    assert (lo, hi) == (0, 1)
    trace = train_trace(job.spec, job.dataset)
    assert _replayer(job, trace).answer(GameId(1), _game(job, trace, 2, 0, k))  # an honest segment: agree with the truth


def _committed_replayer(job: Any, trace: Trace, final_cid: str | None = None, rt: Runtime = Runtime()) -> DisputeReplayer:
    """A replayer reading the real ``material`` from a stub chain on which ``trace`` was committed (its
    manifest and checkpoints stored), with ``final_cid`` as the committed model if given."""
    spec_cid = job.store.put(job.spec.canonical_bytes())
    manifest = trace.manifest(spec_cid, [job.store.put(c) for c in trace.checkpoints])
    committed = TraceCommitment(
        Address("0x" + "11" * 20), trace.root, len(trace.state_hashes), Cid(final_cid or manifest.final_cid), job.store.put(manifest.canonical_bytes())
    )
    market = SimpleNamespace(get_job=lambda _: SimpleNamespace(trace_root=trace.root))
    protocol = SimpleNamespace(market=market, book=SimpleNamespace(deploy_block=0))
    watcher = SimpleNamespace(spec_cid=lambda _: cid_to_digest(spec_cid), commitment=lambda job_id, root: committed)  # the job's two events
    return DisputeReplayer(protocol, job.store, watcher, rt=rt)  # type: ignore[arg-type]


@pytest.mark.skipif(profile("repro-v1").fault("cuda") is None, reason="this machine runs repro-v1 on cuda")
def test_a_replayer_whose_device_cannot_run_the_jobs_numerics_refuses_the_job_naming_it(job: Any) -> None:
    """``--device cuda`` and a repro-v1 job where numba's CUDA target finds no GPU: no material, so no move, vote or audit on it (no GPU
    needed: refused before anything runs)."""
    replayer = _committed_replayer(job, train_trace(job.spec, job.dataset), rt=Runtime(device="cuda"))
    with pytest.raises(DisputeWorkError, match=r"^job 7: numerics repro-v1 cannot run on cuda here: .*; this role runs with --device cuda$"):
        replayer.material(JOB)


def test_a_referee_votes_against_a_manifest_that_is_not_the_committed_trace_without_training(job: Any) -> None:
    honest = train_trace(job.spec, job.dataset)
    assert _committed_replayer(job, honest).commitment_fault(JOB, 0) is None
    replayer = _committed_replayer(job, honest, final_cid=job.store.put(honest.checkpoints[0]))  # the submitter would get the untrained model
    assert all("is not the committed model" in (replayer.commitment_fault(JOB, s) or "") for s in (0, 3))
    game = SimpleNamespace(job_id=JOB, on_report=False, steps=job.spec.checkpoint_interval, segment=0)
    assert replayer.vote(GameId(1), game) is False  # type: ignore[arg-type]  # decided before the isolated step is fetched or run


def _isolated(job: Any, trace: Trace, segment: int, lo: int) -> Any:
    """A trace game on ``segment`` isolated at step ``lo`` -> ``lo + 1``, with the true states (the
    agreed one stored, as the defender's midpoint would be)."""
    k = job.spec.checkpoint_interval
    agreed = state_at(job.spec, job.dataset, trace.checkpoints[segment], segment * k + lo)
    disputed = state_hash(state_at(job.spec, job.dataset, trace.checkpoints[segment], segment * k + lo + 1))
    return SimpleNamespace(
        job_id=JOB, segment=segment, steps=k, on_report=False, status=GameStatus.ISOLATED, lo=lo, hi=lo + 1,
        agreed_hash=state_hash(agreed), agreed_cid=Bytes32(cid_to_digest(job.store.put(agreed))),
        disputed_hash=disputed,
    )  # fmt: skip


def test_a_referee_replays_the_segment_and_rules_against_a_false_loss(job: Any) -> None:
    """A false loss over honest states: every midpoint is true, so the game isolates the segment's last
    step, which holds; the referee then replays the segment's k steps and finds the loss false."""
    k = job.spec.checkpoint_interval
    faked = cheat("false-loss", job.spec, job.dataset, segments=[2])
    liar, honest = _replayer(job, faked.trace), _replayer(job, train_trace(job.spec, job.dataset))
    assert liar.commitment_fault(JOB, 2) is None  # nothing false that needs no training
    assert liar.answer(GameId(1), _game(job, faked.trace, 2, 0, k))  # the challenger agrees with every true midpoint
    last = _isolated(job, faked.trace, 2, k - 1)
    assert liar.vote(GameId(1), last) is False
    assert "manifest claims" in (liar.loss_fault(JOB, 2) or "")
    assert liar.loss_fault(JOB, 1) is None  # it lied about segment 2 only
    assert honest.vote(GameId(1), last) is True  # the honest trace's same game: the solver is right
