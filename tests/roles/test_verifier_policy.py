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
from rolebase.turns import TURN_MARGIN_S, TURN_S, Turn, in_turn, rank
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


def test_draws_a_verifier_soon_when_it_could_be_drawn_itself() -> None:
    committed = job(1, JobState.COMMITTED, ready_block=100)
    turn = Turn(solver=False, wait=5, spread=0)  # no rival verifier: the first rank
    due = turn.first(blocks=True)  # the solver goes first, in its own turns
    assert all(POLICY.next_actions(view(block=100 + e, jobs=(committed,))) == [] for e in range(due))
    assert POLICY.next_actions(view(block=100 + due, jobs=(committed,))) == [AssignVerifier(JobId(1), 100, turn)]
    assert due <= 6 * TURN_S


def _first_draw(me: Address, rivals: tuple[Address, ...], committed: MarketJob) -> int:
    """The first block after ``committed``'s ready block at which verifier ``me``, knowing ``rivals``, draws."""
    return next(e for e in range(20 * TURN_S) if POLICY.next_actions(view(me=me, rivals=rivals, block=100 + e, jobs=(committed,))))


def test_verifiers_that_may_draw_alike_each_start_at_a_moment_of_their_own() -> None:
    """Six staked verifiers on each of 60 jobs, each knowing the other five: their first moments are six
    different ones, each two seconds or more from the others (the later one's estimate sees the
    earlier call in the pool), and each verifier is first on some jobs and last on others."""
    verifiers = tuple(Address(f"0x{i:040x}") for i in range(1, 7))
    firsts: dict[Address, set[int]] = {v: set() for v in verifiers}
    for j in range(1, 61):
        committed = job(j, JobState.COMMITTED, ready_block=100)
        moments = {v: _first_draw(v, tuple(r for r in verifiers if r != v), committed) for v in verifiers}
        ordered = sorted(moments.values())
        assert len(set(ordered)) == 6 and min(b - a for a, b in zip(ordered, ordered[1:], strict=False)) >= TURN_MARGIN_S
        assert all(in_turn(m, solver=False) for m in ordered)
        for v in verifiers:
            firsts[v].add(moments[v])
    ends = (Turn(solver=False, wait=5, spread=0).first(blocks=True), Turn(solver=False, wait=5, spread=5).first(blocks=True))
    assert all((min(seen), max(seen)) == ends for seen in firsts.values())


def test_a_verifiers_rank_counts_only_its_rivals_and_a_restart_keeps_it() -> None:
    """The job's solver, submitter and drawn verifier are no rivals on its draw or its finalize; a verifier
    knowing no rival starts first; the same rivals give the same moment after a restart."""
    others = tuple(Address(f"0x{i:040x}") for i in range(1, 6))
    committed = job(7, JobState.COMMITTED, ready_block=100)
    alone = _first_draw(ME, (), committed)
    assert alone == _first_draw(ME, (SOLVER, SUBMITTER, OTHER), committed) == Turn(solver=False, wait=5, spread=0).first(blocks=True)
    assert _first_draw(ME, others, committed) == _first_draw(ME, tuple(reversed(others)), committed)
    ahead = rank(ME, others, JobId(7))
    assert _first_draw(ME, others, committed) == Turn(solver=False, wait=5, spread=ahead).first(blocks=True)
    assert sorted(rank(v, (*others, ME), JobId(7)) for v in (*others, ME)) == list(range(6))  # each knows the others: a permutation


def test_draw_for_a_job_it_cannot_win_waits_for_the_grace() -> None:
    own = replace(job(1, JobState.COMMITTED, ready_block=100), solver=ME)
    turn = Turn(solver=False, wait=30, spread=0)
    due = turn.first(blocks=True)
    assert all(POLICY.next_actions(view(block=100 + e, jobs=(own,))) == [] for e in range(due))
    assert POLICY.next_actions(view(block=100 + due, jobs=(own,))) == [AssignVerifier(JobId(1), 100, turn)]
    unstaked = view(block=105, staked=T(0), token_balance=T(0), jobs=(job(2, JobState.COMMITTED, ready_block=100),))
    assert POLICY.next_actions(unstaked) == []


def test_finalizes_its_own_job_soon_and_others_after_the_grace() -> None:
    mine = job(1, JobState.VERIFIED, deadline=1_000, verifier=ME)
    theirs = job(2, JobState.VERIFIED, deadline=1_000)
    own, others = Turn(solver=False, wait=5, spread=0), Turn(solver=False, wait=30, spread=1)  # the job's verifier ranks first
    own_due = 1_001 + own.first()  # the contract wants now > deadline; the solver's turns are not ours
    assert all(POLICY.next_actions(view(now=t, jobs=(mine,))) == [] for t in range(990, own_due))
    assert POLICY.next_actions(view(now=own_due, jobs=(mine, theirs))) == [Finalize(JobId(1), 1_000, own)]
    theirs_due = 1_001 + others.first()
    assert all(Finalize(JobId(2), 1_000, others) not in POLICY.next_actions(view(now=t, jobs=(theirs,))) for t in range(990, theirs_due))
    assert POLICY.next_actions(view(now=theirs_due, jobs=(theirs,))) == [Finalize(JobId(2), 1_000, others)]


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
