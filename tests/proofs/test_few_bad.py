"""The cheats of issue 31: one bad segment or a few (``proofs.strategies.FEW_BAD``).

Each trace is not the honest one (so a full replay, which compares every leaf with its own replay
from the seeded initialization, catches it whatever n), fails replay exactly on its faked segments
and nowhere else, and is caught, when a job is fully replayed with probability p and sampled
otherwise, at p + (1 - p) * P(sampled) over 400 seeds, within four binomial standard deviations,
and so at least at rate p. The full-replay coin is simulated with the engine's
``full_replay_drawn`` (the contract's ``isFullReplayDraw``).
"""

from __future__ import annotations

import math

import pytest
import torch
from eth_utils import keccak

from proofs.adversary import MOVES, cheat, dead_units_saving
from proofs.checkpoint import decode_checkpoint
from proofs.data import load_dataset
from proofs.datasets import blobs
from proofs.replay import Reason, check_start, replay_segment
from proofs.sampling import caught_probability, choose_segments, detection_probability, full_replay_drawn, needs_full_replay
from proofs.train import train_trace

N = 30  # segments of k = 2 steps: a few seconds per attack
#: quiet jumps each move at most half an honest segment, so fewer of them at k = 10
N_QUIET, K_QUIET = 60, 10
WINDOW_L2 = 1e-4
TOLERANCE = {"mode": "tolerance", "l2": WINDOW_L2, "linf": 1e-3, "cosine": 1e-8}
SEEDS = 400
RATE_BPS = 1000  # p = 0.1
Q, R = 2, 3


@pytest.fixture(scope="module")
def jobs(make_spec, datasets):
    """attack -> (spec, dataset): MLP jobs; tiny-gradient on blobs (it needs data the model fits),
    tolerance-backdoor under torch numerics with windows."""
    out = {}
    for attack in ("dead-units", "quiet-jumps", "tiny-gradient", "tolerance-backdoor"):
        data = blobs(1) if attack == "tiny-gradient" else datasets["mlp"]
        extra = {"numerics": "torch", "tolerance": TOLERANCE} if attack == "tolerance-backdoor" else {}
        n, k = (N_QUIET, K_QUIET) if attack == "quiet-jumps" else (N, 2)
        spec = make_spec("mlp", data, steps=n * k, checkpoint_interval=k, **extra)
        out[attack] = (spec, load_dataset(spec, data))
    return out


@pytest.fixture(scope="module")
def attacks(jobs):
    """attack -> (cheat trace, honest trace, the reason of every segment's replay)."""
    out = {}
    for attack, (spec, dataset) in jobs.items():
        faked = cheat(attack, spec, dataset)
        t = faked.trace
        assert check_start(spec, dataset, t.state_hashes[0]).passed  # every one starts where the spec says
        reasons = [
            replay_segment(spec, dataset, s, t.checkpoints[s], t.checkpoints[s + 1], claimed_norm=t.update_norms[s], claimed_loss=t.losses[s]).reason
            for s in range(spec.segments)
        ]
        out[attack] = (faked, train_trace(spec, dataset), reasons)
    return out


def _first_difference(faked, honest) -> int | None:
    """Where a full replay (the honest trace, leaf by leaf) first disagrees with the committed leaves."""
    return next((i for i, (a, b) in enumerate(zip(faked.trace.state_hashes, honest.state_hashes)) if a != b), None)


@pytest.mark.parametrize(
    ("attack", "reasons"),
    [
        ("dead-units", {0: Reason.NORM_MISMATCH}),  # a small norm claimed for the jump
        ("quiet-jumps", None),  # every jump: STATE_MISMATCH, its norm true
        ("tiny-gradient", {2: Reason.NORM_MISMATCH}),
    ],
)
def test_a_few_faked_segments_fail_and_every_other_replays(attack: str, reasons, attacks, jobs) -> None:
    spec, _ = jobs[attack]
    faked, honest, got = attacks[attack]
    expected = reasons if reasons is not None else dict.fromkeys(faked.bad_segments, Reason.STATE_MISMATCH)
    assert {s: r for s, r in enumerate(got) if r is not Reason.OK} == expected
    assert faked.bad_segments == tuple(expected)
    assert _first_difference(faked, honest) == faked.bad_segments[0] + 1  # a full replay's first mismatch
    assert len(faked.bad_segments) < spec.segments // 2
    assert Reason.NO_WORK not in got  # every later segment gives every tensor a gradient


def test_dead_units_leave_one_unit_per_layer_and_save_their_multiply_adds(attacks, jobs) -> None:
    spec, _ = jobs["dead-units"]
    faked, _, _ = attacks["dead-units"]
    for ckpt in (faked.trace.checkpoints[1], faked.trace.checkpoints[-1]):  # after the jump, and trained to the end
        params = decode_checkpoint(ckpt).params()
        live = params["layers.0.weight"].abs().sum(dim=1) > 0
        assert int(live.sum()) == 1 and int((params["layers.0.bias"] != 0).sum()) == 1
        assert int((params["layers.1.weight"].abs().sum(dim=0) > 0).sum()) == 1
    assert dead_units_saving(spec) == pytest.approx(1 - 5 / 80)  # 2-16-3 against 2-1-3
    assert faked.work_saved == pytest.approx((1 + (spec.segments - 1) * dead_units_saving(spec)) / spec.segments)
    quiet, _, _ = attacks["quiet-jumps"]
    assert quiet.trace.checkpoints[-1] != faked.trace.checkpoints[-1]  # another path into the same kind of state
    params = decode_checkpoint(quiet.trace.checkpoints[len(quiet.bad_segments)]).params()
    assert int((params["layers.0.weight"].abs().sum(dim=1) > 0).sum()) == 1


def test_quiet_jumps_claim_true_norms_that_stay_out_of_top_q(attacks, jobs) -> None:
    spec, _ = jobs["quiet-jumps"]
    faked, _, _ = attacks["quiet-jumps"]
    top = choose_segments(faked.trace.update_norms, b"\x01" * 32, Q, R).top
    assert not set(top) & set(faked.bad_segments)
    # true: recomputed from the checkpoints, as a referee does
    assert all(
        replay_segment(spec, jobs["quiet-jumps"][1], s, faked.trace.checkpoints[s], faked.trace.checkpoints[s + 1]).reason is Reason.STATE_MISMATCH
        for s in faked.bad_segments[:2]
    )


def test_tiny_gradient_keeps_the_parameters_while_only_the_slots_move(attacks) -> None:
    faked, _, _ = attacks["tiny-gradient"]
    states = [decode_checkpoint(c) for c in faked.trace.checkpoints[faked.bad_segments[-1] + 1 :]]
    for a, b in zip(states, states[1:]):
        assert all(torch.equal(a.params()[n], b.params()[n]) for n in a.params())
        assert any(not torch.equal(x, b.optimizer_state()[n]) for n, x in a.optimizer_state().items())
    assert faked.bad_segments == (2,)  # after two honest segments, whose true norms top-Q takes
    assert faked.work_saved > 0.5 * MOVES["stationary"]


def test_tolerance_backdoor_passes_every_window_but_is_not_the_honest_trace(attacks, jobs) -> None:
    spec, _ = jobs["tolerance-backdoor"]
    faked, honest, reasons = attacks["tolerance-backdoor"]
    assert set(reasons) == {Reason.OK} and faked.bad_segments == ()  # sampled replay never catches it
    assert _first_difference(faked, honest) == 1
    end, ref = decode_checkpoint(faked.trace.checkpoints[-1]).params(), decode_checkpoint(honest.checkpoints[-1]).params()
    moved = math.sqrt(sum(float(((end[n] - ref[n]).double() ** 2).sum()) for n in ref))
    size = math.sqrt(sum(float((ref[n].double() ** 2).sum()) for n in ref))
    assert moved / size > 10 * WINDOW_L2  # the pushes add up far past one window
    assert needs_full_replay(spec)


def test_only_hardware_bound_or_windowed_specs_need_a_full_replay(jobs) -> None:
    exact, _ = jobs["dead-units"]
    assert not needs_full_replay(exact)
    assert not needs_full_replay(exact.model_copy(update={"numerics": "repro-v2"}))  # portable: sampled as repro-v1 is
    assert needs_full_replay(exact.model_copy(update={"numerics": "torch"}))
    assert needs_full_replay(jobs["tolerance-backdoor"][0])


def _assign(i: int) -> bytes:
    return keccak(b"few-bad-test" + i.to_bytes(4, "big"))


@pytest.mark.parametrize("attack", ["dead-units", "quiet-jumps", "tiny-gradient", "tolerance-backdoor"])
def test_caught_at_least_at_the_full_replay_rate(attack: str, attacks, jobs) -> None:
    spec, _ = jobs[attack]
    faked, honest, reasons = attacks[attack]
    fails = {s for s, r in enumerate(reasons) if r is not Reason.OK}
    differs = _first_difference(faked, honest) is not None
    always = needs_full_replay(spec)
    norms = faked.trace.update_norms
    caught = fully = 0
    for i in range(SEEDS):
        assign = _assign(i)
        full = always or full_replay_drawn(assign, RATE_BPS)
        fully += full
        picks = choose_segments(norms, keccak(assign), Q, R)
        assert not set(picks.top) & fails, "the cheater stays out of top-Q"
        caught += (full and differs) or bool(set(picks.segments) & fails)
    p = 1.0 if always else RATE_BPS / 1e4
    predicted = caught_probability(detection_probability(len(fails), spec.segments, Q, R), p)
    sigma = math.sqrt(max(predicted * (1 - predicted), 1e-12) / SEEDS)
    assert abs(caught / SEEDS - predicted) <= 4 * sigma + 1e-9, (caught / SEEDS, predicted)
    assert caught / SEEDS >= p - 4 * math.sqrt(p * (1 - p) / SEEDS)
    assert abs(fully / SEEDS - p) <= 4 * math.sqrt(p * (1 - p) / SEEDS) + 1e-9  # the coin lands at its rate
