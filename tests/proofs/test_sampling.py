from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from proofs.errors import ProofError
from proofs.sampling import DEFAULT_Q, DEFAULT_R, choose_segments, detection_probability, replay_fraction, required_random


def seed_of(i: int) -> str:
    return "0x" + i.to_bytes(32, "big").hex()


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(0, 100, allow_nan=False), min_size=1, max_size=200), st.integers(0, 5), st.integers(0, 60), st.integers(0, 2**64))
def test_selection_is_distinct_in_range_and_deterministic(norms: list[float], q: int, r: int, s: int) -> None:
    sel = choose_segments(norms, seed_of(s), q, r)
    assert sel.last is not None  # at least one segment: there is a last
    n = len(norms)
    picked = list(sel.top) + list(sel.random) + [sel.last]
    assert len(picked) == len(set(picked)) == min(n, q + r + 1)
    assert all(0 <= i < n for i in picked) and sel.last == n - 1
    assert sel == choose_segments(norms, seed_of(s), q, r)
    others = sorted((i for i in range(n - 1)), key=lambda i: (-norms[i], i))
    assert list(sel.top) == others[:q]


def test_random_part_depends_on_the_seed() -> None:
    norms = [1.0] * 1000
    assert choose_segments(norms, seed_of(1)).random != choose_segments(norms, seed_of(2)).random


def test_bad_inputs_raise() -> None:
    with pytest.raises(ProofError):
        choose_segments([], seed_of(1))
    with pytest.raises(ProofError):
        choose_segments([1.0, math.nan], seed_of(1))
    with pytest.raises(ProofError):
        choose_segments([1.0], "0x12")
    with pytest.raises(ProofError):
        detection_probability(5, 4)


@pytest.mark.parametrize(("n", "bad", "model"), [(50, 3, "worst"), (200, 20, "worst"), (200, 5, "uniform"), (30, 1, "uniform")])
def test_formula_matches_monte_carlo(n: int, bad: int, model: str) -> None:
    q, r, trials = 2, 6, 3000
    rng = random.Random(n * 1000 + bad)
    norms = [rng.random() + 1.0 for _ in range(n)]
    caught = 0
    for _ in range(trials):
        sel = choose_segments(norms, seed_of(rng.getrandbits(256)), q, r)
        if model == "worst":  # the cheater hides among small updates, away from the last segment
            bad_set = set(sorted(range(n - 1), key=lambda i: norms[i])[:bad])
        else:
            bad_set = set(rng.sample(range(n), bad))
        caught += bool(bad_set & set(sel.segments))
    p = detection_probability(bad, n, q, r, model=model)  # type: ignore[arg-type]
    sigma = math.sqrt(p * (1 - p) / trials) + 1e-9
    assert abs(caught / trials - p) < 4.5 * sigma + 1e-3


def test_defaults_meet_the_goals_for_large_jobs() -> None:
    for n in (1000, 2000, 10_000, 100_000):
        assert replay_fraction(n) < 0.05
        assert detection_probability(math.ceil(0.1 * n), n) >= 0.99
    assert required_random(0.1, 1000) <= DEFAULT_R
    assert DEFAULT_Q + DEFAULT_R + 1 < 0.05 * 1000


def test_detection_grows_with_bad_segments_and_samples() -> None:
    n = 1000
    ps = [detection_probability(b, n) for b in (1, 10, 100, 500)]
    assert ps == sorted(ps) and ps[-1] > 0.999999
    assert detection_probability(50, n, r=10) < detection_probability(50, n, r=40)
    assert detection_probability(0, n) == 0.0
