"""The turns of a call the job's solver and its verifier both want (rolebase.turns): never the same
second, a margin between, and each side's turn comes back; the parties that are not the solver each in
the turns of its rank, never two of the first three in one turn."""

from __future__ import annotations

import logging

from hypothesis import given
from hypothesis import strategies as st

from core.chain import BlockNumber, Receipt, TxHash, Wei
from core.contracts import JobId
from rolebase.turns import FREE_AFTER_TURNS, OTHER_SLOTS, SOLVER_TURN, TURN_MARGIN_S, TURN_S, AssignVerifier, Finalize, Turn, TurnTaker, in_turn


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
    seen = range(first, max(first, FREE_AFTER_TURNS * TURN_S) + 2 * block_s, block_s)
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
    taker = TurnTaker(chain, logger=logging.getLogger("t"))
    first, second = Turn(solver=False, wait=5, spread=0), Turn(solver=False, wait=5, spread=1)
    taker.perform(AssignVerifier(JobId(1), 100, SOLVER_TURN))
    taker.perform(Finalize(JobId(2), 1_000, SOLVER_TURN))
    taker.perform(AssignVerifier(JobId(1), 100, first))
    assert chain.sent == [("assignVerifier", JobId(1)), ("finalize", JobId(2))], "the solver's turn: only the solver sends"
    chain.sent.clear()
    chain.block, chain.time = 100 + TURN_S - 1, 1_000 + TURN_S  # a slow tick reached them at the end of the turn
    taker.perform(AssignVerifier(JobId(1), 100, SOLVER_TURN))
    taker.perform(Finalize(JobId(2), 1_000, SOLVER_TURN))
    assert chain.sent == [], "left to the next tick: the other side's turn is about to begin"
    chain.block, chain.time = 100 + TURN_S, 1_001 + TURN_S
    taker.perform(AssignVerifier(JobId(1), 100, second))
    assert chain.sent == [], "the first rank's turn: the second rank leaves it"
    taker.perform(AssignVerifier(JobId(1), 100, first))
    taker.perform(Finalize(JobId(2), 1_000, first))
    assert chain.sent == [("assignVerifier", JobId(1)), ("finalize", JobId(2))]
    chain.sent.clear()
    chain.block = 100 + 3 * TURN_S  # the first rank missed its turn: the next odd turn is the second rank's
    taker.perform(AssignVerifier(JobId(1), 100, first))
    assert chain.sent == []
    taker.perform(AssignVerifier(JobId(1), 100, second))
    assert chain.sent == [("assignVerifier", JobId(1))]


@given(st.integers(min_value=0, max_value=10_000), st.integers(min_value=0, max_value=2**32))
def test_another_partys_first_moment_is_in_its_sides_turn_after_its_wait(wait: int, spread: int) -> None:
    start = Turn(solver=False, wait=wait, spread=spread).first()
    assert start >= wait and in_turn(start, solver=False)
    assert start < max(wait, FREE_AFTER_TURNS * TURN_S) + TURN_S


@given(st.lists(st.integers(min_value=0, max_value=60), min_size=2, max_size=2), st.integers(min_value=0, max_value=FREE_AFTER_TURNS * TURN_S - 1))
def test_two_of_the_first_three_ranks_never_send_in_one_turn_whatever_they_wait(waits: list[int], elapsed: int) -> None:
    """Ranks 0 to 2, whatever each waits (the job's own verifier 5 s, the others a grace): at no moment
    before the free turns may two send in the same turn, nor a rank 3 to 5 within its partner's first
    two seconds."""
    for a in range(OTHER_SLOTS):
        for b in range(2 * OTHER_SLOTS):
            if a == b:
                continue
            one, two = Turn(solver=False, wait=waits[0], spread=a), Turn(solver=False, wait=waits[1], spread=b)
            turn = elapsed // TURN_S
            in_one = [e for e in range(turn * TURN_S, (turn + 1) * TURN_S) if one.allows(e)]
            in_two = [e for e in range(turn * TURN_S, (turn + 1) * TURN_S) if two.allows(e)]
            if b < OTHER_SLOTS:
                assert not (in_one and in_two)
            elif in_one and in_two:
                assert b == a + OTHER_SLOTS and min(in_two) >= min(in_one) + TURN_MARGIN_S


def test_each_rank_gets_a_turn_before_the_free_turns_and_everyone_after() -> None:
    for spread in range(2 * OTHER_SLOTS):
        turn = Turn(solver=False, wait=5, spread=spread)
        assert turn.first() < FREE_AFTER_TURNS * TURN_S
        assert all(turn.allows(e) for e in range(FREE_AFTER_TURNS * TURN_S, FREE_AFTER_TURNS * TURN_S + 3 * TURN_S))
    assert Turn(solver=False, wait=5, spread=0).first() == TURN_S and SOLVER_TURN.first() == 0


@given(st.integers(min_value=0, max_value=256))
def test_the_draw_counted_in_blocks_is_never_free_and_each_party_gets_its_turn_back(block: int) -> None:
    """Up to the 256 blocks a draw's entropy lives: at no block do the solver and a rank 0 to 2, or two of
    those ranks, both may send; and each of them gets a block of its own within 36 blocks of any block."""
    parties = [SOLVER_TURN, *(Turn(solver=False, wait=5, spread=r) for r in range(OTHER_SLOTS))]
    for i, one in enumerate(parties):
        for two in parties[i + 1 :]:
            assert not (one.allows(block, blocks=True) and two.allows(block, blocks=True))
    for party in parties:
        assert any(party.allows(b, blocks=True) for b in range(max(block, 6), max(block, 6) + 2 * OTHER_SLOTS * TURN_S))
    assert Turn(solver=False, wait=5, spread=1).allows(FREE_AFTER_TURNS * TURN_S)  # the finalize, counted in seconds, is free
    assert not Turn(solver=False, wait=5, spread=1).allows(FREE_AFTER_TURNS * TURN_S, blocks=True)
