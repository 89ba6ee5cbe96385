from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from proofs.calibrate import calibrate
from proofs.checkpoint import decode_checkpoint, state_hash
from proofs.errors import ManifestError, SegmentOutOfRange
from proofs.manifest import is_float32, parse_manifest
from proofs.replay import LOSS_RTOL, Reason, check_loss, distances, replay_segment, verify_trace
from proofs.spec import Tolerance
from proofs.steps import execute_step, state_at
from proofs.train import Runtime, segment_loss, train_trace
from tests.proofs.conftest import replay_committed

KINDS = ["mlp", "cnn", "char-transformer", "gpt", "resnet"]


@pytest.mark.parametrize("kind", KINDS)
def test_training_is_reproducible_bit_for_bit(kind: str, jobs, traces) -> None:
    again = train_trace(jobs[kind].spec, jobs[kind].dataset)
    assert again.state_hashes == traces[kind].state_hashes
    assert again.root == traces[kind].root
    assert np.array(again.losses, np.float32).tobytes() == np.array(traces[kind].losses, np.float32).tobytes()
    assert len(again.state_hashes) == jobs[kind].spec.segments + 1


@pytest.mark.parametrize("kind", KINDS)
def test_honest_replay_is_exact_on_cpu(kind: str, jobs, traces) -> None:
    job, trace = jobs[kind], traces[kind]
    for seg in range(job.spec.segments):
        v = replay_committed(job.spec, job.dataset, trace, seg)
        assert v.passed and v.reason is Reason.OK, v.detail
        assert v.replayed_hash == trace.state_hashes[seg + 1]
        assert v.replayed_loss == trace.losses[seg] and is_float32(trace.losses[seg]) and trace.losses[seg] > 0
        assert v.params is not None and v.params.l2 == 0.0 and v.params.linf == 0.0


def test_checkpoints_record_the_step_and_spec(mlp, traces) -> None:
    k = mlp.spec.checkpoint_interval
    for i, data in enumerate(traces["mlp"].checkpoints):
        ckpt = decode_checkpoint(data, expect_hash=traces["mlp"].state_hashes[i], expect_spec=mlp.spec.spec_hash())
        assert ckpt.step == i * k


def test_verify_trace_passes_an_honest_trace_through_its_manifest(mlp, traces) -> None:
    trace = traces["mlp"]
    manifest = trace.manifest("QmSpec", [f"QmCkpt{i}" for i in range(len(trace.state_hashes))])
    parsed = parse_manifest(manifest.canonical_bytes(), mlp.spec)
    assert parsed == manifest and parsed.root == trace.root and parsed.final_cid == f"QmCkpt{mlp.spec.segments}"
    fetched: list[int] = []

    def fetch(i: int) -> bytes:
        fetched.append(i)
        return trace.checkpoints[i]

    verdict = verify_trace(mlp.spec, mlp.dataset, parsed, fetch, "0x" + "42" * 32)
    assert verdict.passed and not verdict.failures
    assert [v.segment for v in verdict.verdicts] == list(verdict.selection.segments)
    assert len(fetched) == len(set(fetched))


def test_manifest_with_wrong_root_or_spec_is_refused(mlp, traces, make_spec, datasets) -> None:
    trace = traces["mlp"]
    good = trace.manifest("QmSpec", ["QmC"] * len(trace.state_hashes))
    body = good.canonical_bytes().replace(trace.root.hex().encode(), b"00" * 32)
    with pytest.raises(ManifestError, match="root"):
        parse_manifest(body)
    other = make_spec("mlp", datasets["mlp"], seed=99)
    with pytest.raises(ManifestError, match="spec"):
        parse_manifest(good.canonical_bytes(), other)
    with pytest.raises(ManifestError):
        parse_manifest(b'{"version": 1}')
    with pytest.raises(ManifestError):
        parse_manifest(good.canonical_bytes()[:-5])


def test_served_bytes_that_differ_from_the_commitment_fail_with_hash_mismatch(mlp, traces) -> None:
    t = traces["mlp"]
    v = replay_segment(mlp.spec, mlp.dataset, 1, t.checkpoints[1], t.checkpoints[3], start_hash=t.state_hashes[1], end_hash=t.state_hashes[2])
    assert not v.passed and v.reason is Reason.HASH_MISMATCH and "segment 1" in v.detail and "checkpoint 2" in v.detail


def test_truncated_committed_checkpoint_fails_as_malformed(mlp, traces) -> None:
    t = traces["mlp"]
    cut = t.checkpoints[2][:-10]
    v = replay_segment(mlp.spec, mlp.dataset, 1, t.checkpoints[1], cut, end_hash=state_hash(cut))
    assert not v.passed and v.reason is Reason.MALFORMED and "truncated" in v.detail


def test_checkpoint_with_wrong_step_fails(mlp, traces) -> None:
    t = traces["mlp"]
    v = replay_segment(mlp.spec, mlp.dataset, 2, t.checkpoints[1], t.checkpoints[3])
    assert not v.passed and v.reason is Reason.WRONG_STEP


def test_false_update_norm_claim_fails(mlp, traces) -> None:
    t = traces["mlp"]
    v = replay_segment(mlp.spec, mlp.dataset, 0, t.checkpoints[0], t.checkpoints[1], claimed_norm=t.update_norms[0] * 0.5)
    assert not v.passed and v.reason is Reason.NORM_MISMATCH


def test_segment_loss_is_the_float32_of_the_exact_mean() -> None:
    assert segment_loss([1.0, 2.0]) == 1.5
    third = segment_loss([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])  # float64 sums in another order round differently; fsum does not
    assert third == float(np.float32(0.35)) and is_float32(third)
    assert segment_loss([0.6, 0.5, 0.4, 0.3, 0.2, 0.1]) == third


def test_manifest_losses_round_trip_bit_exactly_and_only_float32_counts(mlp, traces) -> None:
    trace = traces["mlp"]
    manifest = trace.manifest("QmSpec", ["QmC"] * len(trace.state_hashes))
    parsed = parse_manifest(manifest.canonical_bytes())
    assert np.array(parsed.losses, np.float32).tobytes() == np.array(trace.losses, np.float32).tobytes()
    assert parsed.canonical_bytes() == manifest.canonical_bytes()
    body = manifest.model_dump(mode="json")
    for losses, match in (([0.1] * len(trace.losses), "is not a float32"), (list(trace.losses[:-1]), "losses for"), ([1e39] * len(trace.losses), "float32")):
        with pytest.raises(ManifestError, match=match):
            parse_manifest(json.dumps({**body, "losses": losses}).encode())
    with pytest.raises(ManifestError, match="version"):  # version 1 had no losses: refused, not read as an empty curve
        parse_manifest(json.dumps({**{k: v for k, v in body.items() if k != "losses"}, "version": 1}).encode())


@pytest.mark.parametrize("kind", KINDS)
def test_a_false_loss_fails_with_wrong_loss_once_the_states_hold(kind: str, jobs, traces) -> None:
    job, t = jobs[kind], traces[kind]
    one_ulp_lower = float(np.nextafter(np.float32(t.losses[1]), np.float32(0)))
    v = replay_segment(job.spec, job.dataset, 1, t.checkpoints[1], t.checkpoints[2], claimed_loss=one_ulp_lower)
    assert not v.passed and v.reason is Reason.WRONG_LOSS and "segment 1" in v.detail and v.replayed_loss == t.losses[1]
    assert check_loss(job.spec, job.dataset, 1, t.checkpoints[1], t.losses[1]).passed  # a referee's check, from the start alone
    refereed = check_loss(job.spec, job.dataset, 1, t.checkpoints[1], one_ulp_lower)
    assert not refereed.passed and refereed.reason is Reason.WRONG_LOSS
    # a state that does not replay is named as such, whatever the loss claims
    v = replay_segment(job.spec, job.dataset, 1, t.checkpoints[1], t.checkpoints[2], claimed_norm=t.update_norms[1] * 2, claimed_loss=one_ulp_lower)
    assert v.reason is Reason.NORM_MISMATCH


def test_tolerance_mode_bounds_the_loss_by_loss_rtol(mlp, traces) -> None:
    t = traces["mlp"]
    spec = mlp.spec.model_copy(update={"tolerance": Tolerance(mode="tolerance", l2=1e-6, linf=1e-6, cosine=1e-9)})
    honest = train_trace(spec, mlp.dataset)
    loss = honest.losses[2]
    for claimed, passed in ((loss * (1 + LOSS_RTOL / 2), True), (loss * (1 - LOSS_RTOL / 2), True), (loss * (1 - 2 * LOSS_RTOL), False)):
        v = replay_segment(spec, mlp.dataset, 2, honest.checkpoints[2], honest.checkpoints[3], claimed_loss=float(np.float32(claimed)))
        assert v.passed is passed and v.reason is (Reason.OK if passed else Reason.WRONG_LOSS), v.detail
    assert t.losses[2] == loss  # the tolerance takes no part in training: the same curve as exact mode


def test_segment_out_of_range_raises(mlp, traces) -> None:
    t = traces["mlp"]
    with pytest.raises(SegmentOutOfRange):
        replay_segment(mlp.spec, mlp.dataset, mlp.spec.segments, t.checkpoints[0], t.checkpoints[1])


def test_state_at_and_execute_step_agree_with_the_trace(jobs, traces) -> None:
    job, trace = jobs["cnn"], traces["cnn"]
    k = job.spec.checkpoint_interval
    start = trace.checkpoints[2]
    assert state_at(job.spec, job.dataset, start, 3 * k) == trace.checkpoints[3]
    mid = state_at(job.spec, job.dataset, start, 2 * k + k // 2)
    assert decode_checkpoint(mid).step == 2 * k + k // 2
    stepped = mid
    for _ in range(k - k // 2):
        stepped = execute_step(job.spec, job.dataset, stepped)
    assert stepped == trace.checkpoints[3]


def test_tolerance_mode_passes_honest_drift_and_fails_real_change(jobs, traces) -> None:
    job, trace = jobs["char-transformer"], traces["char-transformer"]
    cal = calibrate(job.spec, job.dataset, trace.checkpoints[:3], perturbations=[("threads=2", Runtime(threads=2))])
    assert cal.tolerance.mode == "tolerance"
    assert all(getattr(cal.tolerance, f) >= getattr(p.params, f) * cal.safety_factor for p in cal.perturbations for f in ("l2", "linf", "cosine"))
    assert all(p.loss < LOSS_RTOL / 100 for p in cal.perturbations)
    spec = job.spec.model_copy(update={"tolerance": cal.tolerance})
    honest = train_trace(spec, job.dataset)
    drifted = replay_segment(spec, job.dataset, 1, honest.checkpoints[1], honest.checkpoints[2], rt=Runtime(threads=2))
    assert drifted.passed, drifted.detail
    other = train_trace(spec.model_copy(update={"optimizer": spec.optimizer.model_copy(update={"lr": 0.02})}), job.dataset)
    wrong = decode_checkpoint(other.checkpoints[2])
    forged = type(wrong)(wrong.step, spec.spec_hash(), wrong.tensors).to_bytes()
    v = replay_segment(spec, job.dataset, 1, honest.checkpoints[1], forged)
    assert not v.passed and v.reason is Reason.OUT_OF_TOLERANCE


vectors = st.lists(st.floats(-1e3, 1e3, allow_nan=False, width=32).filter(lambda v: v == 0 or abs(v) > 1e-6), min_size=1, max_size=30)


@settings(max_examples=100, deadline=None)
@given(vectors, st.floats(0.01, 100.0))
def test_distance_properties(values: list[float], scale: float) -> None:
    a = {"w": torch.tensor(values, dtype=torch.float32)}
    d0 = distances(a, a)
    assert (d0.l2, d0.linf, d0.cosine) == (0.0, 0.0, 0.0)
    scaled = {"w": a["w"] * scale}
    d = distances(scaled, a)
    if torch.any(a["w"] != 0):
        assert d.cosine < 1e-6
        assert math.isclose(d.l2, abs(scale - 1), rel_tol=1e-4, abs_tol=1e-5)
    shifted = {"w": a["w"].clone()}
    shifted["w"][0] += 1.0
    assert distances(shifted, a).linf == pytest.approx(1.0, abs=1e-3)
