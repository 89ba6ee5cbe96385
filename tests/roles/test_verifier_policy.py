"""The verifier's decisions, from views built by hand: its own work, its forced seed, then the
anyone-may duties."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from core.availability import FETCH_DEADLINE_MARGIN_S, FETCH_STALL_S, Fetching
from core.chain import Address
from core.contracts import Bytes32, JobId, JobState, TokenAmount
from core.dispute import ZERO32
from rolebase.actions import ClaimCredit
from rolebase.turns import TURN_MARGIN_S, TURN_S, first_moment, in_turn
from verifier.policy import (
    LANES,
    Assignment,
    AssignVerifier,
    ChallengeStalled,
    CommitForcedSeed,
    Draw,
    Finalize,
    Forget,
    ForgetForcedSecret,
    MarketJob,
    Phase,
    Replay,
    Report,
    SeedView,
    Stake,
    Timeout,
    TimeoutKind,
    VerifierConfig,
    VerifierPolicy,
    VerifierView,
    stagger,
    work,
)

ME = Address("0x000000000000000000000000000000000000bEEF")
SOLVER = Address("0x0000000000000000000000000000000000000501")
OTHER = Address("0x0000000000000000000000000000000000000777")
SUBMITTER = Address("0x0000000000000000000000000000000000000999")
T = TokenAmount
POLICY = VerifierPolicy(VerifierConfig(stake_target=T(0), own_grace_s=5, duty_grace_s=30))


def view(**over: Any) -> VerifierView:
    base = VerifierView(
        now=1_000,
        block=100,
        me=ME,
        token_balance=T(0),
        staked=T(100),
        min_stake=T(100),
        assignments=(),
        jobs=(),
        forgettable=(),
    )
    return replace(base, **over)


def job(job_id: int, state: JobState, deadline: int = 900, verifier: Address = OTHER, ready_block: int = 0) -> MarketJob:
    return MarketJob(JobId(job_id), state, deadline, ready_block, SOLVER, verifier, SUBMITTER)


def test_stakes_first() -> None:
    assert POLICY.next_actions(view(staked=T(0), token_balance=T(1_000))) == [Stake(T(100))]


def test_assignments_replay_then_report_nearest_deadline_first() -> None:
    draw = Draw(Bytes32(b"\x01" * 32), Bytes32(b"\x02" * 32), forced=True)
    v = view(
        assignments=(
            Assignment(JobId(1), 1_500, Phase.ASSIGNED, draw),
            Assignment(JobId(2), 1_200, Phase.REPLAYED),
            Assignment(JobId(3), 1_100, Phase.REPORTED),  # in the records, yet VERIFYING on chain: the chain rules
            Assignment(JobId(4), 999, Phase.ASSIGNED),  # missed
        )
    )
    assert POLICY.next_actions(v) == [Report(JobId(3)), Report(JobId(2)), Replay(JobId(1), 1_500, draw)]  # the draw travels to the replay


A, B, C = (Bytes32(bytes([i]) * 32) for i in (0xA, 0xB, 0xC))


@pytest.mark.parametrize(("seed", "want"), [
    (SeedView(ZERO32, (), current_committed=False), [CommitForcedSeed(fresh=True)]),  # first start: make one, commit it
    (SeedView(ZERO32, (A,), current_committed=False), [CommitForcedSeed(fresh=False)]),  # made, crashed before the commit
    (SeedView(A, (A,), current_committed=True), []),  # on chain: nothing to do
    (SeedView(ZERO32, (A,), current_committed=True), [CommitForcedSeed(fresh=True)]),  # cleared by a concession: revealed
    (SeedView(C, (A,), current_committed=True), [CommitForcedSeed(fresh=True)]),  # replaced: not ours any more
    (SeedView(C, (A,), current_committed=False), [CommitForcedSeed(fresh=False)]),  # records lost and remade: ours again
])  # fmt: skip
def test_the_forced_seed_is_committed_and_rotated_once_revealed(seed: SeedView, want: list[object]) -> None:
    assert POLICY.next_actions(view(seed=seed)) == want


def test_old_forced_secrets_are_kept_while_a_live_job_snapshotted_them() -> None:
    seed = SeedView(C, (A, B, C), current_committed=True, snapshotted=frozenset({B, C}))
    assert POLICY.next_actions(view(seed=seed)) == [ForgetForcedSecret(A)]
    assert POLICY.next_actions(view(seed=replace(seed, snapshotted=frozenset()))) == [ForgetForcedSecret(A), ForgetForcedSecret(B)]


def test_the_seed_is_committed_before_the_replays_so_the_next_draws_snapshot_it() -> None:
    v = view(seed=SeedView(ZERO32, (), current_committed=False), assignments=(Assignment(JobId(1), 1_500, Phase.REPLAYED),))
    assert POLICY.next_actions(v) == [CommitForcedSeed(fresh=True), Report(JobId(1))]


def _first_turn(earliest: int) -> int:
    """The first elapsed time at or after ``earliest`` in a turn that is not the solver's (rolebase.turns)."""
    return next(e for e in range(earliest, earliest + 4 * TURN_S) if in_turn(e, solver=False))


def test_draws_a_verifier_soon_when_it_could_be_drawn_itself() -> None:
    committed = job(1, JobState.COMMITTED, ready_block=100)
    due = first_moment(5, stagger(ME, JobId(1), 5))  # the solver goes first, in its own turns
    assert all(POLICY.next_actions(view(block=100 + e, jobs=(committed,))) == [] for e in range(due))
    assert POLICY.next_actions(view(block=100 + due, jobs=(committed,))) == [AssignVerifier(JobId(1), 100)]
    assert due <= 6 * TURN_S


def test_verifiers_that_may_draw_alike_start_in_different_turns_two_times_in_three() -> None:
    """20 verifiers on each of 30 jobs: each one's first moment is one of six (three turns of its own,
    two seconds apart in each), chosen by a hash of it and the job; a pair shares one in about a sixth
    of the cases (bounds for 5,700 pairs), and two that differ are two seconds apart or more."""
    first = {(i, j): first_moment(5, stagger(Address(f"0x{i:040x}"), JobId(j), 5)) for i in range(1, 21) for j in range(30)}
    starts = {t * TURN_S + d for t in (1, 3, 5) for d in (0, TURN_MARGIN_S)}
    assert set(first.values()) == starts and min(abs(a - b) for a in starts for b in starts if a != b) >= TURN_MARGIN_S
    shared = sum(first[i, j] == first[k, j] for j in range(30) for i in range(1, 21) for k in range(i + 1, 21))
    assert 0.10 < shared / (30 * 190) < 0.24


def test_verifiers_that_may_make_the_same_call_take_turns_seconds_apart() -> None:
    """The offsets of 20 verifiers on one job spread over 0..9 s: most pairs never send in the same block."""
    turns = [stagger(Address(f"0x{i:040x}"), JobId(7), 5) for i in range(1, 21)]
    assert all(0 <= t < 10 for t in turns) and len(set(turns)) >= 6
    assert stagger(ME, JobId(7), 5) == stagger(ME, JobId(7), 5)  # a restart keeps its turn


def test_draw_for_a_job_it_cannot_win_waits_for_the_grace() -> None:
    own = replace(job(1, JobState.COMMITTED, ready_block=100), solver=ME)
    due = first_moment(30, stagger(ME, JobId(1), 5))
    assert all(POLICY.next_actions(view(block=100 + e, jobs=(own,))) == [] for e in range(due))
    assert POLICY.next_actions(view(block=100 + due, jobs=(own,))) == [AssignVerifier(JobId(1), 100)]
    unstaked = view(block=105, staked=T(0), token_balance=T(0), jobs=(job(2, JobState.COMMITTED, ready_block=100),))
    assert POLICY.next_actions(unstaked) == []


def test_finalizes_its_own_job_soon_and_others_after_the_grace() -> None:
    mine = job(1, JobState.VERIFIED, deadline=1_000, verifier=ME)
    theirs = job(2, JobState.VERIFIED, deadline=1_000)
    own_due = 1_001 + _first_turn(5)  # the contract wants now > deadline; the solver's turns are not ours
    assert all(POLICY.next_actions(view(now=t, jobs=(mine,))) == [] for t in range(990, own_due))
    assert POLICY.next_actions(view(now=own_due, jobs=(mine, theirs))) == [Finalize(JobId(1), 1_000)]
    theirs_due = 1_001 + first_moment(30, stagger(ME, JobId(2), 5))
    assert all(Finalize(JobId(2), 1_000) not in POLICY.next_actions(view(now=t, jobs=(theirs,))) for t in range(990, theirs_due))
    assert POLICY.next_actions(view(now=theirs_due, jobs=(theirs,))) == [Finalize(JobId(2), 1_000)]


def test_timeouts_after_the_grace() -> None:
    jobs = (
        job(1, JobState.OPEN, deadline=960),
        job(2, JobState.CLAIMED, deadline=969),
        job(3, JobState.VERIFYING, deadline=900),
        job(4, JobState.DISPUTED, deadline=970),
        job(5, JobState.VERIFYING, deadline=900, verifier=ME),  # never time ourselves out
    )
    assert POLICY.next_actions(view(jobs=jobs)) == [
        Timeout(JobId(1), TimeoutKind.EXPIRE),
        Timeout(JobId(2), TimeoutKind.SOLVER),
        Timeout(JobId(3), TimeoutKind.VERIFIER),
    ]


def test_duties_can_be_turned_off() -> None:
    policy = VerifierPolicy(VerifierConfig(stake_target=T(0), duties=False))
    assert policy.next_actions(view(jobs=(job(1, JobState.COMMITTED), job(2, JobState.CLAIMED, deadline=0)))) == []


def test_final_jobs_are_forgotten() -> None:
    assert POLICY.next_actions(view(forgettable=(JobId(2),))) == [Forget(JobId(2))]


def test_claims_what_the_game_and_the_court_owe_after_its_duties() -> None:
    actions = POLICY.next_actions(view(forgettable=(JobId(2),), credits={"game": T(7), "court": T(0)}))
    assert actions == [ClaimCredit("game"), Forget(JobId(2))]
    both = POLICY.next_actions(view(credits={"game": T(1), "court": T(3)}))
    assert both == [ClaimCredit("game"), ClaimCredit("court")]


def test_a_stalled_fetch_is_challenged_by_the_loop_in_time() -> None:
    """The replay worker has fetched item 3 for FETCH_STALL_S, or fetches anything with the deadline
    FETCH_DEADLINE_MARGIN_S away: the loop challenges that item instead of waiting on the worker."""
    young = Fetching(3, FETCH_STALL_S - 1)
    assert POLICY.next_actions(view(assignments=(Assignment(JobId(1), 1_500, Phase.ASSIGNED, fetching=young),))) == [Replay(JobId(1), 1_500, Draw(ZERO32))]
    old = Fetching(3, FETCH_STALL_S)
    assert POLICY.next_actions(view(assignments=(Assignment(JobId(1), 1_500, Phase.ASSIGNED, fetching=old),))) == [ChallengeStalled(JobId(1), 3)]
    near = 1_000 + int(FETCH_DEADLINE_MARGIN_S)
    assert POLICY.next_actions(view(assignments=(Assignment(JobId(1), near, Phase.ASSIGNED, fetching=young),))) == [ChallengeStalled(JobId(1), 3)]


def test_a_replay_runs_on_a_worker_grouped_by_job_and_transactions_in_the_loop() -> None:
    v = view(now=1_000)
    replay = work(v, Replay(JobId(1), 1_500, Draw(ZERO32)))
    assert replay is not None and replay.lane in LANES and replay.group == "replay:1" and replay.due_in_s == 500
    assert work(v, Report(JobId(1))) is None and work(v, ChallengeStalled(JobId(1), 3)) is None
