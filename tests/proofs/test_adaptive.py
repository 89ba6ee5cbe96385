"""Adaptive cheaters (issue 10): every class and mixes of them fail, honest traces of every model never.

Deterministic defences (the bound start, zero work, the tolerance rule, a false norm) are checked
segment by segment; what rests on sampling is checked against its formula over 400 seeds, with a
bound of four binomial standard deviations.
"""

from __future__ import annotations

import math

import pytest
from eth_utils import keccak

from proofs.adversary import cheat, mix
from proofs.calibrate import calibrate
from proofs.checkpoint import decode_checkpoint
from proofs.data import load_dataset
from proofs.datasets import REFERENCE_JOBS, reference_job
from proofs.replay import Reason, check_norm, check_start, distances, first_idle_step, initial_state, referee_step, replay_segment, verify_trace
from proofs.sampling import choose_segments, detection_probability
from proofs.spec import Tolerance
from proofs.steps import execute_step
from proofs.train import Runtime, train_trace

KINDS = ("mlp", "cnn", "char-transformer", "gpt", "resnet")
#: The thresholds calibrated for char-text under the old whole-vector rule (docs/proofs.md).
OLD_WINDOW = Tolerance(mode="tolerance", l2=6.4e-4, linf=5e-3, cosine=2e-8)


def _reasons(spec, dataset, trace, norms=None) -> list[Reason]:
    """The start's verdict, then every segment's, as a verifier replaying everything sees them."""
    claimed = norms if norms is not None else trace.update_norms
    out = [check_start(spec, dataset, trace.state_hashes[0]).reason]
    for seg in range(spec.segments):
        v = replay_segment(
            spec,
            dataset,
            seg,
            trace.checkpoints[seg],
            trace.checkpoints[seg + 1],
            start_hash=trace.state_hashes[seg],
            end_hash=trace.state_hashes[seg + 1],
            claimed_norm=claimed[seg],
        )
        assert v.passed == (v.reason is Reason.OK)
        out.append(v.reason)
    return out


@pytest.mark.parametrize("kind", KINDS)
def test_honest_traces_of_every_model_pass_every_check(kind: str, jobs, traces) -> None:
    job, trace = jobs[kind], traces[kind]
    assert trace.checkpoints[0] == initial_state(job.spec, job.dataset)
    assert set(_reasons(job.spec, job.dataset, trace)) == {Reason.OK}
    assert all(first_idle_step(job.spec, job.dataset, c, job.spec.checkpoint_interval) is None for c in trace.checkpoints[:-1])


@pytest.mark.parametrize("name", REFERENCE_JOBS)
def test_honest_registry_jobs_never_do_an_idle_step(name: str) -> None:
    ref = reference_job(name, steps=60, checkpoint_interval=10)
    spec = ref.spec("QmData")
    data = load_dataset(spec, ref.dataset)
    trace = train_trace(spec, data)
    assert set(_reasons(spec, data, trace)) == {Reason.OK}


EXPECTED = {  # strategy -> reason of each bad segment, in order (the start's verdict first for free-start)
    "free-start": lambda bad: {0: Reason.WRONG_START},
    "coast": lambda bad: {1 + s: Reason.STATE_MISMATCH if s == bad[0] else Reason.NO_WORK for s in bad},
    "quiet-jump": lambda bad: {1 + s: Reason.STATE_MISMATCH for s in bad},  # a move of mix(): issue 31's quiet-jumps is tested in test_few_bad
    "half-batch": lambda bad: {1 + s: Reason.STATE_MISMATCH for s in bad},
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("strategy", sorted(EXPECTED))
def test_each_adaptive_cheater_fails_exactly_where_it_cheated(kind: str, strategy: str, jobs) -> None:
    job = jobs[kind]
    n = job.spec.segments
    faked = mix(job.spec, job.dataset, dict.fromkeys({n // 3, 2 * n // 3}, strategy)) if strategy == "quiet-jump" else cheat(strategy, job.spec, job.dataset)
    assert faked.bad_segments and faked.trace.tree.root  # a self-consistent commitment
    reasons = _reasons(job.spec, job.dataset, faked.trace)
    wrong = {i: r for i, r in enumerate(reasons) if r is not Reason.OK}
    assert wrong == EXPECTED[strategy](faked.bad_segments), (kind, strategy, reasons)


def test_a_wrong_start_fails_whatever_the_sample(mlp) -> None:
    faked = cheat("free-start", mlp.spec, mlp.dataset)
    manifest = faked.trace.manifest("QmSpec", ["QmC"] * len(faked.trace.state_hashes))
    verdict = verify_trace(mlp.spec, mlp.dataset, manifest, lambda i: faked.trace.checkpoints[i], "0x" + "01" * 32, q=0, r=0)
    assert 0 not in verdict.selection.segments
    assert [(v.segment, v.reason) for v in verdict.failures] == [(0, Reason.WRONG_START)]
    assert "seeded initialization" in verdict.failures[0].detail


def test_mixes_of_the_classes_fail_on_every_faked_segment(jobs) -> None:
    job = jobs["char-transformer"]
    plan = {1: "quiet-jump", 2: "coast-in", 3: "coast", 4: "coast-out"}
    faked = mix(job.spec, job.dataset, plan, free_start=True)
    reasons = _reasons(job.spec, job.dataset, faked.trace)
    assert faked.bad_segments == (0, 1, 2, 3, 4) and faked.work_saved == pytest.approx(4 / 6)
    assert reasons[0] is Reason.WRONG_START and reasons[6] is Reason.OK
    assert reasons[2] is Reason.STATE_MISMATCH and {reasons[3], reasons[4], reasons[5]} <= {Reason.STATE_MISMATCH, Reason.NO_WORK}
    tol = job.spec.model_copy(update={"tolerance": OLD_WINDOW})
    drifted = mix(tol, job.dataset, {0: "half-batch", 2: "drift", 3: "drift", 5: "drift"})
    reasons = _reasons(tol, job.dataset, drifted.trace)
    assert [i - 1 for i, r in enumerate(reasons) if r is not Reason.OK] == [0, 2, 3, 5]


def test_a_false_norm_fails_replay_and_the_referees_check_without_training(mlp, traces) -> None:
    trace = traces["mlp"]
    lie = list(trace.update_norms)
    lie[2] *= 0.5  # a small claim keeps a segment out of top-Q
    assert _reasons(mlp.spec, mlp.dataset, trace, lie)[3] is Reason.NORM_MISMATCH
    assert check_norm(2, trace.checkpoints[2], trace.checkpoints[3], trace.update_norms[2]).passed
    false = check_norm(2, trace.checkpoints[2], trace.checkpoints[3], lie[2])
    assert not false.passed and false.reason is Reason.NORM_MISMATCH


def test_the_referee_step_names_a_step_without_learning_work(mlp, traces) -> None:
    honest = traces["mlp"].checkpoints[2]
    after, idle = referee_step(mlp.spec, mlp.dataset, honest)
    assert idle is None and after == execute_step(mlp.spec, mlp.dataset, honest)
    coasting = cheat("coast", mlp.spec, mlp.dataset).trace.checkpoints[2]  # after the jump into the dead state
    _, idle = referee_step(mlp.spec, mlp.dataset, coasting)
    assert idle == "layers.0.bias"  # the first tensor: nothing before the output layer learns
    assert first_idle_step(mlp.spec, mlp.dataset, coasting, mlp.spec.checkpoint_interval) == 0


def test_drift_the_old_window_let_through_fails_the_update_relative_rule(jobs) -> None:
    job = jobs["char-transformer"]
    spec = job.spec.model_copy(update={"tolerance": OLD_WINDOW})
    faked = cheat("tolerance-drift", spec, job.dataset)
    t = faked.trace
    first, last = decode_checkpoint(t.checkpoints[0]).params(), decode_checkpoint(t.checkpoints[-1]).params()
    honest = decode_checkpoint(train_trace(spec, job.dataset).checkpoints[-1]).params()
    frozen = {n: (first[n] == honest[n]) for n in first}  # never moved by honest training
    pushed = max(float((last[n] - first[n])[frozen[n]].abs().max()) for n in first if frozen[n].any())
    assert pushed > 0, "the cheater moved coordinates honest training never moves"
    for seg in range(spec.segments):
        v = replay_segment(spec, job.dataset, seg, t.checkpoints[seg], t.checkpoints[seg + 1])
        ours = {f"param.{n}": p for n, p in decode_checkpoint(t.checkpoints[seg + 1]).params().items()}
        # the old rule (whole-vector distances to the committed state) would have passed it ...
        replayed = _replayed_params(spec, job.dataset, t.checkpoints[seg])
        assert distances(replayed, ours).within(OLD_WINDOW)
        # ... the new rule does not
        assert not v.passed and v.reason is Reason.OUT_OF_TOLERANCE and "leaves unchanged" in v.detail


def _replayed_params(spec, dataset, start: bytes):
    from proofs.train import Trainer

    trainer = Trainer(spec, dataset)
    trainer.load(decode_checkpoint(start))
    trainer.run(spec.checkpoint_interval)
    return {f"param.{n}": p.detach().clone() for n, p in trainer.params.items()}


@pytest.mark.parametrize("kind", KINDS)
def test_honest_tolerance_replays_under_other_numerics_pass_the_new_rule(kind: str, jobs) -> None:
    """Other numerics never move a coordinate the reference replay leaves unchanged, so the exact
    rule on those costs honest solvers nothing: every segment, replayed under each perturbation,
    passes thresholds calibrated on the job's own segments (as test_replay does)."""
    job = jobs[kind]
    perturbations = [("threads=2", Runtime(threads=2)), ("matmul=medium", Runtime(matmul_precision="medium"))]
    trace = train_trace(job.spec, job.dataset)
    cal = calibrate(job.spec, job.dataset, trace.checkpoints[:-1], perturbations=perturbations)
    assert all(p.moved_frozen == 0 for p in cal.perturbations)
    spec = job.spec.model_copy(update={"tolerance": cal.tolerance})
    trace = train_trace(spec, job.dataset)
    for name, rt in perturbations:
        for seg in range(spec.segments):
            v = replay_segment(spec, job.dataset, seg, trace.checkpoints[seg], trace.checkpoints[seg + 1], rt=rt)
            assert v.passed, (name, v.detail)


SEEDS = 400


def _seed(i: int) -> bytes:
    return keccak(b"adaptive-test" + i.to_bytes(4, "big"))


@pytest.mark.parametrize("attack", ["coast-lying-norms", "quiet-jumps"])
def test_sampled_defences_catch_at_the_predicted_rate(attack: str, make_spec, datasets) -> None:
    """100 segments, 8 of them bad, kept out of top-Q (the coaster claims honest-looking norms for
    its jumps, the quiet jumper's true norms are small): caught exactly when the sample holds a bad
    segment, at the worst-case hypergeometric rate."""
    spec = make_spec("mlp", datasets["mlp"], steps=200, checkpoint_interval=2)
    dataset = load_dataset(spec, datasets["mlp"])
    bad = tuple(range(40, 48)) if attack == "coast-lying-norms" else tuple(range(30, 94, 8))
    faked = cheat("coast", spec, dataset, segments=bad) if attack == "coast-lying-norms" else mix(spec, dataset, dict.fromkeys(bad, "quiet-jump"))
    norms = list(faked.trace.update_norms)
    if attack == "coast-lying-norms":
        typical = sorted(norms)[len(norms) // 2]
        for s in bad:
            norms[s] = typical
    reasons = _reasons(spec, dataset, faked.trace, norms)
    assert [i - 1 for i, r in enumerate(reasons) if r is not Reason.OK] == list(bad)  # every bad segment fails when replayed
    q, r = 2, 10
    caught = 0
    for i in range(SEEDS):
        picks = choose_segments(norms, _seed(i), q, r)
        assert not set(picks.top) & set(bad), "the cheater stays out of top-Q"
        caught += bool(set(picks.segments) & set(bad))
    predicted = detection_probability(len(bad), spec.segments, q, r)
    sigma = math.sqrt(predicted * (1 - predicted) / SEEDS)
    assert abs(caught / SEEDS - predicted) <= 4 * sigma, (caught / SEEDS, predicted)
