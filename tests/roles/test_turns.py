"""The turns of a call the job's solver and its verifier both want (rolebase.turns): never the same
second, a margin between, and each side's turn comes back."""

from __future__ import annotations

import logging

from hypothesis import given
from hypothesis import strategies as st

from core.chain import BlockNumber, Receipt, TxHash, Wei
from core.contracts import JobId
from rolebase.turns import FREE_AFTER_TURNS, OTHER_SLOTS, TURN_MARGIN_S, TURN_S, AssignVerifier, Finalize, TurnTaker, first_moment, in_turn


@given(st.integers(min_value=0, max_value=FREE_AFTER_TURNS * TURN_S - TURN_MARGIN_S - 1))
def test_a_call_sent_in_one_sides_turn_is_in_the_pool_before_the_other_sides_turn(elapsed: int) -> None:
    for solver in (True, False):
        if in_turn(elapsed, solver=solver):
            assert not any(in_turn(elapsed + d, solver=not solver) for d in range(TURN_MARGIN_S + 1))


@given(st.integers(min_value=0, max_value=10**6))
def test_each_side_gets_a_turn_within_two_turns_of_any_moment(start: int) -> None:
    for solver in (True, False):
        assert any(in_turn(start + d, solver=solver) for d in range(2 * TURN_S))


@given(st.integers(min_value=1, max_value=60), st.integers(min_value=0, max_value=59))
def test_on_any_block_time_each_side_sees_a_block_in_its_turn(block_s: int, first: int) -> None:
    """Blocks every ``block_s`` seconds, the first ``first`` seconds after the call came due: each side
    reads some block in its turn within the free turns and one block (no call waits forever)."""
    seen = range(first, FREE_AFTER_TURNS * TURN_S + 2 * block_s, block_s)
    for solver in (True, False):
        assert any(in_turn(e, solver=solver) for e in seen)


def test_the_solver_goes_first_and_nobody_before_the_call_is_due() -> None:
    assert in_turn(0, solver=True) and not in_turn(0, solver=False)
    assert not in_turn(-1, solver=True) and not in_turn(-1, solver=False)
    assert [e for e in range(2 * TURN_S) if in_turn(e, solver=False)] == list(range(TURN_S, 2 * TURN_S - TURN_MARGIN_S))


def _receipt(block: int) -> Receipt:
    return Receipt(TxHash("0x" + "ab" * 32), BlockNumber(block), 50_000, Wei(1), 1, ())


class _Chain:
    """A fake of what TurnTaker reads and sends: a head that the test moves, and the calls sent."""

    def __init__(self, block: int, time: int) -> None:
        self.block, self.time = block, time
        self.sent: list[tuple[str, JobId]] = []

    @property
    def market(self) -> _Chain:
        return self

    @property
    def client(self) -> _Chain:
        return self

    def head(self) -> BlockNumber:
        return BlockNumber(self.block)

    def timestamp(self, block: int) -> int:
        return self.time

    def assign_verifier(self, job_id: JobId) -> Receipt:
        self.sent.append(("assignVerifier", job_id))
        return _receipt(self.block)

    def finalize(self, job_id: JobId) -> Receipt:
        self.sent.append(("finalize", job_id))
        return _receipt(self.block)


def test_a_call_decided_in_our_turn_is_not_sent_once_the_head_left_it() -> None:
    chain = _Chain(block=103, time=1_003)  # 3 blocks after the draw came due, 2 s after the deadline
    solver, other = TurnTaker(chain, solver=True, logger=logging.getLogger("t")), TurnTaker(chain, solver=False, logger=logging.getLogger("t"))
    solver.perform(AssignVerifier(JobId(1), 100))
    solver.perform(Finalize(JobId(2), 1_000))
    other.perform(AssignVerifier(JobId(1), 100))
    assert chain.sent == [("assignVerifier", JobId(1)), ("finalize", JobId(2))], "the solver's turn: only the solver sends"
    chain.sent.clear()
    chain.block, chain.time = 100 + TURN_S - 1, 1_000 + TURN_S  # a slow tick reached them at the end of the turn
    solver.perform(AssignVerifier(JobId(1), 100))
    solver.perform(Finalize(JobId(2), 1_000))
    assert chain.sent == [], "left to the next tick: the other side's turn is about to begin"
    chain.block, chain.time = 100 + TURN_S, 1_001 + TURN_S
    other.perform(AssignVerifier(JobId(1), 100))
    other.perform(Finalize(JobId(2), 1_000))
    assert chain.sent == [("assignVerifier", JobId(1)), ("finalize", JobId(2))]


@given(st.integers(min_value=0, max_value=10_000), st.integers(min_value=0, max_value=2**32))
def test_another_partys_first_moment_is_in_its_turn_after_its_wait(wait: int, spread: int) -> None:
    start = first_moment(wait, spread)
    assert start >= wait and in_turn(start, solver=False)
    assert start < wait + (2 * OTHER_SLOTS + 1) * TURN_S
