"""The turns of a call the job's solver and its verifier both want (rolebase.turns): never the same
second, a margin between, and each side's turn comes back."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from rolebase.turns import TURN_MARGIN_S, TURN_S, in_turn


@given(st.integers(min_value=0, max_value=10**6))
def test_a_call_sent_in_one_sides_turn_is_in_the_pool_before_the_other_sides_turn(elapsed: int) -> None:
    for solver in (True, False):
        if in_turn(elapsed, solver=solver):
            assert not any(in_turn(elapsed + d, solver=not solver) for d in range(TURN_MARGIN_S + 1))


@given(st.integers(min_value=0, max_value=10**6))
def test_each_side_gets_a_turn_within_two_turns_of_any_moment(start: int) -> None:
    for solver in (True, False):
        assert any(in_turn(start + d, solver=solver) for d in range(2 * TURN_S))


def test_the_solver_goes_first_and_nobody_before_the_call_is_due() -> None:
    assert in_turn(0, solver=True) and not in_turn(0, solver=False)
    assert not in_turn(-1, solver=True) and not in_turn(-1, solver=False)
    assert [e for e in range(2 * TURN_S) if in_turn(e, solver=False)] == list(range(TURN_S, 2 * TURN_S - TURN_MARGIN_S))
