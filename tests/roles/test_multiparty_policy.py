"""The multi-party duties' decisions (``rolebase.multiparty.multiparty_moves``): pure, so tested on views."""

from __future__ import annotations

from dataclasses import replace

from core.chain import Address
from core.contracts import (
    Ballot,
    Bytes32,
    DilocoParams,
    JobId,
    JobState,
    MultipartyAggregate,
    MultipartyContribution,
    MultipartyJob,
    MultipartyPhase,
    TokenAmount,
)
from rolebase.multiparty import LiveMultiparty, MultipartyAction, MultipartyMove, Plays, RoundFit, multiparty_moves
from solver.policy import HeldJob, Phase, SolverConfig, SolverPolicy, SolverView

ME = Address("0x" + "11" * 20)
OTHER = Address("0x" + "22" * 20)
ZERO = Address("0x" + "00" * 20)
NONE32 = Bytes32(bytes(32))
CID = Bytes32(b"\x01" * 32)
PARAMS = DilocoParams(TokenAmount(10), TokenAmount(10), TokenAmount(2), TokenAmount(10), 60, 30, 30, 20, 3, 8)
GRACE = 30
T0, DEADLINE = 1_000, 1_300  # the round opened at T0, contributions by DEADLINE (work window 300)


def _job(phase: MultipartyPhase = MultipartyPhase.WORKING, deadline: int = DEADLINE, anchor: int = 0) -> MultipartyJob:
    return MultipartyJob(
        OTHER, 2, 2, 3, 0, phase, deadline, anchor, 300, 600,
        TokenAmount(5), TokenAmount(1), TokenAmount(8), TokenAmount(2), TokenAmount(20), CID, CID, CID, TokenAmount(1_000),
    )  # fmt: skip


def _live(
    job: MultipartyJob,
    parties: tuple[Address, ...] = (ME, OTHER),
    contributions: tuple[MultipartyContribution, ...] | None = None,
    states: tuple[JobState | None, ...] = (None, None),
    aggregate: MultipartyAggregate | None = None,
    drawn: bool = False,
    ballot: Ballot = Ballot.VACANT,
    fit: RoundFit | None = RoundFit("", 10.0),
) -> LiveMultiparty:
    none = MultipartyContribution(0, NONE32, NONE32)
    agg = aggregate or MultipartyAggregate(ZERO, ZERO, NONE32, NONE32, 0, 0, ZERO, 0, 0, 0, 0)
    return LiveMultiparty(7, job, parties, contributions or (none, none), states, agg, drawn, ballot, 10, fit)


def _moves(live: LiveMultiparty, now: int, plays: Plays, block: int = 100, free: int = 0) -> list[tuple[MultipartyAction, int]]:
    return [(m.action, m.slot) for m in multiparty_moves(now, block, ME, [live], PARAMS, plays, GRACE, free)]


def _done(inner: int) -> MultipartyContribution:
    return MultipartyContribution(inner, CID, CID)


def test_a_party_begins_then_contributes_once_its_trace_is_committed_within_the_round() -> None:
    party = Plays.PARTY
    assert _moves(_live(_job(), fit=None), T0, party) == [(MultipartyAction.FIT, 0)]  # a slot held without a verdict (a restart): judged first
    assert _moves(_live(_job()), T0, party) == [(MultipartyAction.BEGIN, 0)]
    begun = (MultipartyContribution(5, NONE32, NONE32), MultipartyContribution(0, NONE32, NONE32))
    assert _moves(_live(_job(), contributions=begun, states=(JobState.CLAIMED, None)), T0 + 10, party) == []  # training
    assert _moves(_live(_job(), contributions=begun, states=(JobState.COMMITTED, None)), T0 + 20, party) == [(MultipartyAction.CONTRIBUTE, 0)]
    assert _moves(_live(_job(), contributions=(_done(5), begun[1]), states=(JobState.VERIFYING, None)), T0 + 30, party) == []  # contributed
    assert _moves(_live(_job()), DEADLINE + 1, party) == []  # past the deadline: nothing to begin
    assert _moves(_live(_job()), T0, Plays.JUDGE | Plays.KEEPER) == []  # a verifier holds no slot


def test_a_party_begins_only_a_round_it_can_finish_by_the_deadline() -> None:
    """A late begin commits the party to an inner job whose commit deadline is the round's: one it
    cannot train in time would be timed out and its bond slashed; the slot is left instead (released
    unslashed at the close)."""
    slow = RoundFit("", 200.0)
    assert _moves(_live(_job(), fit=slow), DEADLINE - 200, Plays.PARTY) == [(MultipartyAction.BEGIN, 0)]
    assert _moves(_live(_job(), fit=slow), DEADLINE - 199, Plays.PARTY) == []  # busy until now: too late
    misfit = RoundFit("takes at most 4 steps (the job has 5)", 1.0)
    assert _moves(_live(_job(), fit=misfit), T0, Plays.PARTY) == []  # a slot held that no longer fits (new limits): never begun
    # training already owed (one train lane) comes first: a held job's 100 s, then the round's 200 s
    owed = [(m.action, m.slot) for m in multiparty_moves(DEADLINE - 300, 100, ME, [_live(_job(), fit=slow)], PARAMS, Plays.PARTY, GRACE, 0, 100.0)]
    assert owed == [(MultipartyAction.BEGIN, 0)]
    late = [(m.action, m.slot) for m in multiparty_moves(DEADLINE - 299, 100, ME, [_live(_job(), fit=slow)], PARAMS, Plays.PARTY, GRACE, 0, 100.0)]
    assert late == []
    two = [_live(_job(), fit=slow), replace(_live(_job(), fit=slow), job_id=8)]  # two slots of ours: the second begins after the first's training
    assert [m.job_id for m in multiparty_moves(DEADLINE - 400, 100, ME, two, PARAMS, Plays.PARTY, GRACE)] == [7, 8]
    assert [m.job_id for m in multiparty_moves(DEADLINE - 399, 100, ME, two, PARAMS, Plays.PARTY, GRACE)] == [7]
    vacant = _live(_job(), parties=(OTHER, ZERO), fit=slow)  # nor is a slot joined whose round cannot be played
    assert _moves(vacant, DEADLINE - 200, Plays.PARTY, free=30) == [(MultipartyAction.JOIN, 1)]
    assert _moves(vacant, DEADLINE - 199, Plays.PARTY, free=30) == []


def test_a_vacant_slot_is_joined_once_a_tick_and_only_with_the_stake_it_locks() -> None:
    vacant = _live(_job(), parties=(OTHER, ZERO))
    assert _moves(vacant, T0, Plays.PARTY, free=29) == []  # slot bond 20 + inner bond 10
    assert _moves(vacant, T0, Plays.PARTY, free=30) == [(MultipartyAction.JOIN, 1)]
    two = [vacant, replace(vacant, job_id=8)]
    assert [(m.job_id, m.action) for m in multiparty_moves(T0, 100, ME, two, PARAMS, Plays.PARTY, GRACE, 1_000)] == [(7, MultipartyAction.JOIN)]
    assert _moves(vacant, DEADLINE + 1, Plays.PARTY, free=30) == []


def test_a_vacant_slot_is_judged_first_and_joined_only_when_a_round_fits() -> None:
    unjudged = _live(_job(), parties=(OTHER, ZERO), fit=None)
    assert _moves(unjudged, T0, Plays.PARTY, free=30) == [(MultipartyAction.FIT, -1)]  # read the document, then decide
    assert _moves(unjudged, T0, Plays.PARTY, free=29) == []  # nothing to judge for a slot the stake cannot take
    assert _moves(unjudged, T0, Plays.JUDGE | Plays.KEEPER, free=1_000) == []  # a verifier takes no slot
    slow = replace(unjudged, fit=RoundFit("would need about 900 s at its 1.00 GFLOP/s (doubled, as solvers estimate), more than the 300 s work window", 900.0))
    assert _moves(slow, T0, Plays.PARTY, free=1_000) == []  # never joined, never judged again
    fits = replace(unjudged, fit=RoundFit("", 10.0))
    too_slow_first = [replace(slow, job_id=6), fits]  # a misfit does not spend the tick's one join
    assert [(m.job_id, m.action) for m in multiparty_moves(T0, 100, ME, too_slow_first, PARAMS, Plays.PARTY, GRACE, 1_000)] == [(7, MultipartyAction.JOIN)]


def test_a_round_closes_after_its_deadline_or_early_once_everyone_contributed_and_was_verified() -> None:
    keeper = Plays.KEEPER | Plays.PARTY
    both = (_done(5), _done(6))
    verifying = _live(_job(), contributions=both, states=(JobState.FINALIZED, JobState.VERIFYING))
    assert (MultipartyAction.CLOSE, -1) not in _moves(verifying, DEADLINE + 1, keeper)  # waits for the verification
    assert (MultipartyAction.CLOSE, -1) in _moves(verifying, DEADLINE + 601, keeper)  # up to the verify window
    verified = _live(_job(), contributions=both, states=(JobState.FINALIZED, JobState.FINALIZED))
    assert _moves(verified, T0 + 50, keeper) == [(MultipartyAction.CLOSE, -1)]  # every slot in: no need to wait
    one = _live(_job(), contributions=(_done(5), MultipartyContribution(0, NONE32, NONE32)), states=(JobState.FINALIZED, None))
    assert (MultipartyAction.CLOSE, -1) not in _moves(one, T0 + 50, keeper)  # slot 1 may still contribute
    assert (MultipartyAction.CLOSE, -1) in _moves(one, DEADLINE + 1, keeper)  # a party closes at once
    stranger = _live(_job(), parties=(OTHER, OTHER), contributions=one.contributions, states=one.inner_states)
    assert _moves(stranger, DEADLINE + 1, Plays.KEEPER) == []  # anyone else after its grace
    assert _moves(stranger, DEADLINE + GRACE + 1, Plays.KEEPER) == [(MultipartyAction.CLOSE, -1)]


def test_the_drawn_aggregator_commits_and_anyone_else_times_it_out_after_the_grace() -> None:
    drawing = _live(_job(MultipartyPhase.DRAWING, 0, anchor=100))
    assert _moves(drawing, 2_000, Plays.KEEPER, block=101) == []  # blockhash(anchor + 1) not there yet
    assert _moves(drawing, 2_000, Plays.KEEPER, block=102) == [(MultipartyAction.DRAW, -1)]
    drawn = MultipartyAggregate(ME, ZERO, NONE32, NONE32, 0, 0, ZERO, 0, 0, 0, 0)
    aggregating = _live(_job(MultipartyPhase.AGGREGATING, 2_060), aggregate=drawn)
    assert _moves(aggregating, 2_000, Plays.JUDGE | Plays.KEEPER) == [(MultipartyAction.AGGREGATE, -1)]
    theirs = _live(_job(MultipartyPhase.AGGREGATING, 2_060), aggregate=replace(drawn, aggregator=OTHER))
    assert _moves(theirs, 2_061, Plays.JUDGE | Plays.KEEPER) == []
    assert _moves(theirs, 2_061 + GRACE, Plays.KEEPER) == [(MultipartyAction.TIMEOUT, -1)]


def test_every_judge_checks_an_aggregate_and_a_seated_one_votes_then_reveals() -> None:
    committed = MultipartyAggregate(OTHER, ZERO, CID, CID, 3, 0, ZERO, 0, 0, 0, 0)
    proposed = _live(_job(MultipartyPhase.PROPOSED, 3_000), aggregate=committed)
    assert _moves(proposed, 2_990, Plays.JUDGE) == [(MultipartyAction.CHECK, -1)]
    assert _moves(replace(proposed, aggregate=replace(committed, aggregator=ME)), 2_990, Plays.JUDGE) == []  # not its own
    assert _moves(proposed, 3_001 + GRACE, Plays.JUDGE | Plays.KEEPER) == [(MultipartyAction.FINALIZE, -1)]
    contested = _live(_job(MultipartyPhase.CONTESTED, 0, anchor=200), aggregate=replace(committed, challenger=OTHER, case_id=1))
    assert _moves(contested, 3_100, Plays.KEEPER, block=202) == [(MultipartyAction.DRAW_COMMITTEE, -1)]
    voting = replace(contested, job=replace(contested.job, deadline=3_200), committee_drawn=True, ballot=Ballot.SEATED)
    assert _moves(voting, 3_150, Plays.JUDGE) == [(MultipartyAction.COMMIT, -1)]
    assert _moves(replace(voting, ballot=Ballot.COMMITTED), 3_150, Plays.JUDGE) == []  # others may still commit
    assert _moves(replace(voting, ballot=Ballot.COMMITTED), 3_201, Plays.JUDGE) == [(MultipartyAction.REVEAL, -1)]
    everyone = replace(voting, ballot=Ballot.COMMITTED, aggregate=replace(voting.aggregate, commits=3))
    assert _moves(everyone, 3_150, Plays.JUDGE) == [(MultipartyAction.REVEAL, -1)]
    assert _moves(replace(voting, ballot=Ballot.REVEALED_DEFENDER_RIGHT), 3_221 + GRACE, Plays.KEEPER) == [(MultipartyAction.SETTLE, -1)]


def test_a_solver_judges_and_joins_vacant_slots_only_with_multiparty_but_always_plays_a_slot_it_holds() -> None:
    def solver_moves(live: LiveMultiparty, taking: bool, held: tuple[HeldJob, ...] = ()) -> list[tuple[MultipartyAction, int]]:
        view = SolverView(
            T0, 100, ME, TokenAmount(0), TokenAmount(500), TokenAmount(500), TokenAmount(100), (), held, (), multiparty=(live,), multiparty_params=PARAMS
        )
        policy = SolverPolicy(SolverConfig(stake_target=TokenAmount(0), multiparty=taking))
        return [(a.action, a.slot) for a in policy.next_actions(view) if isinstance(a, MultipartyMove)]

    vacant = _live(_job(), parties=(OTHER, ZERO), fit=None)
    assert solver_moves(vacant, taking=True) == [(MultipartyAction.FIT, -1)]
    assert solver_moves(vacant, taking=False) == []
    assert solver_moves(replace(vacant, fit=RoundFit("", 10.0)), taking=True) == [(MultipartyAction.JOIN, 1)]
    assert solver_moves(replace(vacant, fit=RoundFit("", 10.0)), taking=False) == []
    held = _live(_job(), fit=None)  # slot 0 ours, e.g. joined before a restart without --multiparty
    assert solver_moves(held, taking=False) == [(MultipartyAction.FIT, 0)]
    assert solver_moves(replace(held, fit=RoundFit("", 10.0)), taking=False) == [(MultipartyAction.BEGIN, 0)]
    training = HeldJob(JobId(3), JobState.CLAIMED, DEADLINE + 600, 0, Phase.TRAINING, train_s=290.0)  # a claimed job still training
    assert solver_moves(replace(held, fit=RoundFit("", 10.0)), taking=False, held=(training,)) == []  # 290 + 10 + margin 5 > 300 s left
