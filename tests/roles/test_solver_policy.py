"""The solver's decisions, from views built by hand: no chain, no storage."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from core.chain import Address
from core.contracts import Capabilities, Device, JobId, JobState, TokenAmount
from rolebase.actions import ClaimCredit
from rolebase.turns import SOLVER_TURN, TURN_S
from solver.policy import (
    CLAIM_TURN_S,
    MAX_CLAIM_TURN,
    Advertise,
    AssignVerifier,
    Claim,
    Commit,
    Finalize,
    Forget,
    HeldJob,
    OpenJob,
    Phase,
    Regenerate,
    Rival,
    SolverConfig,
    SolverPolicy,
    SolverView,
    SpecCheck,
    Stake,
    TimeoutVerifier,
    Train,
    Upload,
    claim_turn,
    fits_window,
    peak_memory,
)

ME = Address("0x000000000000000000000000000000000000bEEF")
OK = SpecCheck(runnable=True, steps=100)
T = TokenAmount


def view(**over: Any) -> SolverView:
    base = SolverView(
        now=1_000,
        block=50,
        me=ME,
        token_balance=T(0),
        staked=T(100),
        free_stake=T(100),
        min_stake=T(100),
        open_jobs=(),
        held_jobs=(),
        forgettable=(),
    )
    return replace(base, **over)


def open_job(job_id: int, reward: int = 10, bond: int = 20, spec: SpecCheck = OK, expires_at: int = 5_000) -> OpenJob:
    return OpenJob(JobId(job_id), T(reward), T(bond), expires_at, 600, spec)


def held(job_id: int, state: JobState, phase: Phase = Phase.CLAIMED, deadline: int = 2_000, ready_block: int = 0) -> HeldJob:
    return HeldJob(JobId(job_id), state, deadline, ready_block, phase)


POLICY = SolverPolicy(SolverConfig(stake_target=T(0)))


def test_stakes_up_to_the_minimum_before_claiming() -> None:
    actions = POLICY.next_actions(view(staked=T(0), free_stake=T(0), token_balance=T(500), open_jobs=(open_job(1),)))
    assert actions == [Stake(T(100))]


def test_does_not_stake_what_cannot_reach_the_minimum() -> None:
    assert POLICY.next_actions(view(staked=T(0), free_stake=T(0), token_balance=T(99))) == []


def test_claims_the_best_paying_runnable_job_it_can_bond() -> None:
    jobs = (
        open_job(1, reward=10),
        open_job(2, reward=50, spec=SpecCheck(False, "unknown architecture")),
        open_job(3, reward=30, bond=500),  # bond above free stake
        open_job(4, reward=20),
        open_job(5, reward=99, expires_at=1_002),  # expires before a claim could matter
    )
    assert POLICY.next_actions(view(open_jobs=jobs)) == [Claim(JobId(4))]


def test_regenerates_what_the_verifiers_draw_needs_one_a_tick_in_order() -> None:
    for state in (JobState.VERIFYING, JobState.VERIFIED):  # the verifier's replay, then the whistleblowers' audits
        job = replace(held(9, state, Phase.COMMITTED), regenerate=(7, 8, 40))
        assert POLICY.next_actions(view(held_jobs=(job,))) == [Regenerate(JobId(9), 7, held=True)]
        asked = replace(job, requested=(3, 40))  # asked of our gateway: first, in a serving slot unless the draw needs it
        assert POLICY.next_actions(view(held_jobs=(asked,))) == [Regenerate(JobId(9), 3, held=False)]
        assert POLICY.next_actions(view(held_jobs=(replace(asked, requested=(40,)),))) == [Regenerate(JobId(9), 40, held=True)]
    ended = replace(held(9, JobState.VERIFIED, Phase.COMMITTED, deadline=999), regenerate=(7,))
    assert POLICY.next_actions(view(held_jobs=(ended,))) == [Finalize(JobId(9), 999, SOLVER_TURN)]  # the window is over: paid first


def test_a_claim_keeps_memory_for_the_duties_of_the_jobs_held() -> None:
    """Training one job and a duty on each duty worker for the jobs held (an availability answer or a
    midpoint recomputes a state, holding its job's training memory) must fit the solver's memory; a
    claim that would not is not made, however well it pays (issue 25: a duty that cannot run misses its
    deadline, and a committed job's bond is at stake in it)."""
    gib = 2**30
    policy = SolverPolicy(SolverConfig(stake_target=T(0), max_active=3, memory_bytes=10 * gib))
    big, small = replace(OK, memory_bytes=4 * gib), replace(OK, memory_bytes=1 * gib)
    committed = replace(held(9, JobState.VERIFYING, Phase.COMMITTED), memory_bytes=4 * gib)
    jobs = (open_job(1, reward=50, spec=big), open_job(2, reward=10, spec=small))
    # the big one: 4 training + duties of the two largest held, 4 + 4 = 12 GiB > 10; the small one: 1 + 4 + 1 = 6
    assert policy.next_actions(view(open_jobs=jobs, held_jobs=(committed,))) == [Claim(JobId(2))]
    assert policy.next_actions(view(open_jobs=jobs)) == [Claim(JobId(1)), Claim(JobId(2))]  # nothing held: 4 + 4 + 1 = 9
    assert peak_memory([4 * gib, gib], [4 * gib, 4 * gib, gib]) == 12 * gib
    unreserved = SolverPolicy(SolverConfig(stake_target=T(0), max_active=3))
    assert unreserved.next_actions(view(open_jobs=jobs, held_jobs=(committed,))) == [Claim(JobId(1)), Claim(JobId(2))]


def test_claims_only_up_to_capacity() -> None:
    busy = view(open_jobs=(open_job(1),), held_jobs=(held(9, JobState.CLAIMED, Phase.TRAINING),))
    assert POLICY.next_actions(busy) == [Train(JobId(9), 2_000)]
    roomy = SolverPolicy(SolverConfig(stake_target=T(0), max_active=3))
    assert roomy.next_actions(view(free_stake=T(45), open_jobs=(open_job(1), open_job(2), open_job(3)))) == [
        Claim(JobId(2)),  # equal pay: in this solver's own order (rolebase.turns.party_order)
        Claim(JobId(3)),
    ]


def test_solvers_seeing_the_same_equally_paid_jobs_claim_different_ones_first() -> None:
    jobs = tuple(open_job(i) for i in range(1, 9))
    other = Address("0x000000000000000000000000000000000000dEaD")
    mine, theirs = (POLICY.next_actions(view(me=me, open_jobs=jobs)) for me in (ME, other))
    assert mine == [Claim(JobId(6))] and theirs == [Claim(JobId(5))]  # no collision, so no reverted claim
    assert POLICY.next_actions(view(open_jobs=(*jobs, open_job(9, reward=11)))) == [Claim(JobId(9))]  # pay first


def test_competing_solvers_claim_one_job_in_turns_and_wait_for_no_rival_that_cannot_take_it() -> None:
    """Two staked solvers see job 4 open at once: only the first in its claim order claims at once, the
    other one turn later, when the first's claim is mined and the job is no longer open: no claim of
    the two reverts. A rival without the free stake, the steps or the speed for the job has no turn."""
    other = Address("0x000000000000000000000000000000000000dEaD")
    job = replace(open_job(4, spec=replace(OK, train_s=100.0)), opened_at=1_000)
    rival_of = {ME: Rival(other, 10**6, 10**9, T(100)), other: Rival(ME, 10**6, 10**9, T(100))}
    offer = Capabilities(10**6, 10**9, 10**6, 10**9, Device.CPU, 0)

    def claims(me: Address, now: int, rival: Rival) -> list[Any]:
        return [a for a in POLICY.next_actions(view(me=me, now=now, open_jobs=(job,), rivals=(rival,), offer=offer)) if isinstance(a, Claim)]

    first, second = sorted((ME, other), key=lambda me: claim_turn(me, job, (rival_of[me],), offer.flops))
    assert claims(first, 1_000, rival_of[first]) == [Claim(JobId(4))] and claims(second, 1_000, rival_of[second]) == []
    assert claims(second, 1_000 + CLAIM_TURN_S - 1, rival_of[second]) == []
    assert claims(second, 1_000 + CLAIM_TURN_S, rival_of[second]) == [Claim(JobId(4))]  # the first did not claim: its turn passed
    for unable in (replace(rival_of[second], free_stake=T(19)), replace(rival_of[second], max_steps=99), replace(rival_of[second], flops=10**9 // 7)):
        assert claims(second, 1_000, unable) == [Claim(JobId(4))]  # bond 20, 100 steps, 700 s > the 600 s window


@given(st.lists(st.integers(1, 2**160 - 1), min_size=1, max_size=MAX_CLAIM_TURN + 1, unique=True), st.integers(1, 10**6))
def test_every_competing_solver_has_its_own_turn_on_a_job(accounts: list[int], job_id: int) -> None:
    """However many solvers (up to the last turn) and whatever the job, their turns on it are 0, 1, 2...:
    two honest solvers never claim one job in the same turn."""
    solvers = [Address(f"0x{a:040x}") for a in accounts]
    job = open_job(job_id)
    rivals = {s: tuple(Rival(r, 10**6, 10**9, T(100)) for r in solvers if r != s) for s in solvers}
    assert sorted(claim_turn(s, job, rivals[s], 10**9) for s in solvers) == list(range(len(solvers)))


def test_a_claimed_job_moves_one_stage_per_tick() -> None:
    stages = {
        Phase.CLAIMED: Train(JobId(1), 2_000),
        Phase.TRAINING: Train(JobId(1), 2_000),
        Phase.TRAINED: Upload(JobId(1)),
        Phase.UPLOADED: Commit(JobId(1)),
    }
    for phase, expected in stages.items():
        assert POLICY.next_actions(view(held_jobs=(held(1, JobState.CLAIMED, phase),), free_stake=T(0))) == [expected]
    # committed in the records, not on chain (rolled back, reorged out): the chain rules, it commits again
    committed_locally = view(held_jobs=(held(1, JobState.CLAIMED, Phase.COMMITTED),), free_stake=T(0))
    assert POLICY.next_actions(committed_locally) == [Commit(JobId(1))]


def test_no_work_on_a_job_past_its_commit_deadline() -> None:
    late = view(now=2_000, held_jobs=(held(1, JobState.CLAIMED, Phase.TRAINING),), free_stake=T(0))
    assert POLICY.next_actions(late) == []


def test_after_commit_the_solver_asks_for_a_verifier_once_randomness_exists() -> None:
    job = held(1, JobState.COMMITTED, Phase.COMMITTED, ready_block=52)
    assert POLICY.next_actions(view(block=51, held_jobs=(job,), free_stake=T(0))) == []
    assert POLICY.next_actions(view(block=52, held_jobs=(job,), free_stake=T(0))) == [AssignVerifier(JobId(1), 52, SOLVER_TURN)]
    # the verifier's turns (rolebase.turns) are left to it: two parties never send the draw in one second
    assert POLICY.next_actions(view(block=52 + TURN_S, held_jobs=(job,), free_stake=T(0))) == []
    assert POLICY.next_actions(view(block=52 + 2 * TURN_S, held_jobs=(job,), free_stake=T(0))) == [AssignVerifier(JobId(1), 52, SOLVER_TURN)]


def test_silent_verifier_is_timed_out_and_pay_is_collected_after_the_window() -> None:
    verifying = held(1, JobState.VERIFYING, Phase.COMMITTED, deadline=1_500)
    verified = held(2, JobState.VERIFIED, Phase.COMMITTED, deadline=1_500)
    assert POLICY.next_actions(view(now=1_500, held_jobs=(verifying, verified), free_stake=T(0))) == []
    assert POLICY.next_actions(view(now=1_501, held_jobs=(verifying, verified), free_stake=T(0))) == [
        TimeoutVerifier(JobId(1)),
        Finalize(JobId(2), 1_500, SOLVER_TURN),
    ]


def test_final_jobs_are_forgotten() -> None:
    assert POLICY.next_actions(view(forgettable=(JobId(3), JobId(1)), free_stake=T(0))) == [Forget(JobId(1)), Forget(JobId(3))]


def test_claims_what_the_game_and_the_court_owe_after_its_duties() -> None:
    actions = POLICY.next_actions(view(forgettable=(JobId(2),), free_stake=T(0), credits={"game": T(7), "court": T(0)}))
    assert actions == [ClaimCredit("game"), Forget(JobId(2))]
    both = POLICY.next_actions(view(free_stake=T(0), credits={"game": T(1), "court": T(3)}))
    assert both == [ClaimCredit("game"), ClaimCredit("court")]


@given(
    st.lists(st.tuples(st.integers(1, 50), st.integers(0, 100), st.integers(1, 60), st.booleans()), max_size=12, unique_by=lambda t: t[0]),
    st.integers(0, 200),
    st.integers(1, 4),
)
def test_claims_never_exceed_free_stake_or_capacity(jobs, free, capacity) -> None:
    policy = SolverPolicy(SolverConfig(stake_target=T(0), max_active=capacity))
    v = view(free_stake=T(free), open_jobs=tuple(open_job(i, r, b, SpecCheck(ok)) for i, r, b, ok in jobs))
    claims = [a for a in policy.next_actions(v) if isinstance(a, Claim)]
    by_id = {i: (b, ok) for i, _, b, ok in jobs}
    assert len(claims) <= capacity
    assert sum(by_id[c.job_id][0] for c in claims) <= free
    assert all(by_id[c.job_id][1] for c in claims)
    assert len({c.job_id for c in claims}) == len(claims)


def test_a_job_it_cannot_finish_in_its_commit_window_is_refused_for_good() -> None:
    quick = SpecCheck(runnable=True, steps=100, train_s=50.0)
    assert fits_window(quick, commit_window=600, margin_s=5) == quick
    short = fits_window(quick, commit_window=54, margin_s=5)  # 50 s of training and 5 s of margin do not fit in 54
    assert not short.runnable and short.final and "commit window is 54 s" in short.reason


def test_a_claim_must_finish_after_the_training_already_owed() -> None:
    spec = SpecCheck(runnable=True, steps=100, train_s=300.0)
    owed = replace(held(1, JobState.CLAIMED, phase=Phase.TRAINING), train_s=300.0)
    policy = SolverPolicy(SolverConfig(stake_target=T(0), max_active=2))
    jobs = (open_job(2, spec=spec), replace(open_job(3, reward=5, spec=spec), commit_window=700))
    # job 2's 600 s window cannot hold 300 s owed + 300 s + margin; job 3's 700 s can
    assert policy.next_actions(view(held_jobs=(owed,), open_jobs=jobs)) == [Train(JobId(1), 2_000), Claim(JobId(3))]
    # with nothing owed, two jobs of 600 s windows do not both fit one after the other
    assert policy.next_actions(view(open_jobs=(open_job(2, spec=spec), open_job(4, reward=5, spec=spec)))) == [Claim(JobId(2))]


OFFER = Capabilities(max_params=1_000_000, max_dataset_bytes=64 << 20, max_steps=10_000, flops=2_000_000_000, device=Device.CPU, advertised_at=0)
NEVER = Capabilities(0, 0, 0, 0, Device.CPU, 0)


def test_advertises_its_offer_once_staked() -> None:
    assert POLICY.next_actions(view(offer=OFFER, advertised=NEVER)) == [Advertise(OFFER)]
    unstaked = view(staked=T(0), free_stake=T(0), token_balance=T(500), offer=OFFER, advertised=NEVER)
    assert POLICY.next_actions(unstaked) == [Stake(T(100))]  # the chain takes adverts from eligible solvers only
    assert POLICY.next_actions(view(offer=None, advertised=None)) == []  # an offer of nothing is never sent


def test_an_advert_on_chain_that_says_the_same_is_not_sent_again() -> None:
    on_chain = replace(OFFER, advertised_at=1_000)
    assert POLICY.next_actions(view(offer=OFFER, advertised=on_chain)) == []
    for speed in (1_400_000_000, 2_900_000_000):  # measured again at a restart: within 1.5x is the same offer
        assert POLICY.next_actions(view(offer=replace(OFFER, flops=speed), advertised=on_chain)) == []


def test_a_changed_limit_or_a_speed_off_by_more_than_the_tolerance_is_advertised_again() -> None:
    on_chain = replace(OFFER, advertised_at=1_000)
    for offer in (
        replace(OFFER, max_params=500_000),
        replace(OFFER, max_dataset_bytes=1 << 20),
        replace(OFFER, max_steps=100),
        replace(OFFER, device=Device.CUDA),
        replace(OFFER, flops=1_000_000_000),
        replace(OFFER, flops=3_100_000_000),
    ):
        assert POLICY.next_actions(view(offer=offer, advertised=on_chain)) == [Advertise(offer)]
