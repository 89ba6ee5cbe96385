from __future__ import annotations

import pytest

from proofs.adversary import cheat
from proofs.errors import ProofError
from proofs.replay import Reason, replay_segment, verify_trace
from proofs.sampling import choose_segments
from proofs.strategies import ALL_STRATEGIES, FALSE_CLAIMS, STRATEGIES
from tests.proofs.conftest import replay_committed


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_each_adversary_is_caught_at_its_bad_segments_and_only_there(strategy: str, mlp) -> None:
    faked = cheat(strategy, mlp.spec, mlp.dataset)
    t = faked.trace
    assert faked.bad_segments
    for seg in range(mlp.spec.segments):
        v = replay_committed(mlp.spec, mlp.dataset, t, seg)
        if seg in faked.bad_segments:
            assert not v.passed and v.reason is Reason.STATE_MISMATCH, (strategy, seg, v.detail)
            assert f"segment {seg}" in v.detail
        else:
            assert v.passed, (strategy, seg, v.detail)


@pytest.mark.parametrize("kind", ["mlp", "cnn", "char-transformer"])
def test_false_loss_trains_honestly_and_fails_exactly_on_the_segments_it_lied_about(kind: str, jobs, traces) -> None:
    job, honest = jobs[kind], traces[kind]
    assert "false-loss" in FALSE_CLAIMS and "false-loss" in ALL_STRATEGIES
    faked = cheat("false-loss", job.spec, job.dataset, segments=[1, 4])
    t = faked.trace
    assert faked.bad_segments == (1, 4) and faked.work_saved == 0.0
    assert t.state_hashes == honest.state_hashes and t.update_norms == honest.update_norms  # the states are honest work
    for seg in range(job.spec.segments):
        v = replay_segment(job.spec, job.dataset, seg, t.checkpoints[seg], t.checkpoints[seg + 1], claimed_norm=t.update_norms[seg], claimed_loss=t.losses[seg])
        if seg in faked.bad_segments:
            assert t.losses[seg] < honest.losses[seg]  # a prettier curve
            assert not v.passed and v.reason is Reason.WRONG_LOSS and v.replayed_loss == honest.losses[seg], (seg, v.detail)
        else:
            assert v.passed and t.losses[seg] == honest.losses[seg], (seg, v.detail)
    default = cheat("false-loss", job.spec, job.dataset)
    assert default.bad_segments == tuple(range(job.spec.segments // 2, job.spec.segments))


@pytest.mark.parametrize("strategy", ["wrong-lr", "fake-final"])
def test_verify_trace_names_the_bad_segment_when_sampled(strategy: str, mlp) -> None:
    faked = cheat(strategy, mlp.spec, mlp.dataset)
    manifest = faked.trace.manifest("QmSpec", ["QmC"] * len(faked.trace.state_hashes))
    verdict = verify_trace(mlp.spec, mlp.dataset, manifest, lambda i: faked.trace.checkpoints[i], "0x" + "07" * 32, q=1, r=10)
    assert not verdict.passed
    assert {v.segment for v in verdict.failures} == set(faked.bad_segments) & set(verdict.selection.segments)


def test_a_cheat_outside_the_sample_is_not_seen_so_sampling_matters(mlp) -> None:
    faked = cheat("wrong-data", mlp.spec, mlp.dataset, segments=[1])
    seed = next(
        "0x" + bytes([s]).hex() * 32 for s in range(256) if 1 not in choose_segments(faked.trace.update_norms, "0x" + bytes([s]).hex() * 32, q=0, r=1).segments
    )
    manifest = faked.trace.manifest("QmSpec", ["QmC"] * len(faked.trace.state_hashes))
    verdict = verify_trace(mlp.spec, mlp.dataset, manifest, lambda i: faked.trace.checkpoints[i], seed, q=0, r=1)
    assert verdict.passed


def test_unknown_strategy_and_bad_segments_raise(mlp) -> None:
    with pytest.raises(ProofError, match="skip-steps"):
        cheat("bribe", mlp.spec, mlp.dataset)
    with pytest.raises(ProofError):
        cheat("wrong-lr", mlp.spec, mlp.dataset, segments=[mlp.spec.segments])
