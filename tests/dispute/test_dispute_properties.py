"""Properties of the game on anvil (hypothesis), against real training states:

* an HONEST solver never loses, whatever the challenger does at each move (lie, agree or
  disagree blindly, answer slowly, late, or never) and whoever opened (whistleblower or failing
  verifier), with an honest referee majority (one referee may stay silent);
* a solver with ONE wrong step (anywhere in the segment) never wins against an honest
  challenger, whatever it posts at each move (its own trace, the true state, made-up states)
  or however it plays the clock.

Each example runs from an evm snapshot of the staked devnet; payouts are checked exactly and
tokens are conserved.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.contracts import GameStatus, JobState, Role

from .arena import CHALLENGER_MOVES, SOLVER_MOVES, Arena, K

EXAMPLES = settings(max_examples=20, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
moves = st.lists  # per-move strategies, one per bisection move (log2 k = 4)
silences = st.sampled_from([(False, False, False), (True, False, False), (False, True, False), (False, False, True)])


def _play(arena: Arena, states, solver_moves, challenger_moves, by_verifier: bool, silent) -> tuple:
    snapshot = arena.net.chain.snapshot()
    try:
        job_id, challenger, cids = arena.commit_job(states, by_verifier=by_verifier)
        verifier = arena.base.market.get_job(job_id).verifier
        before = arena.wealth()
        played = arena.open(job_id, challenger, states)
        arena.bisect(played, states, lambda i: solver_moves[i], lambda i: challenger_moves[i])
        arena.arbitrate(played, cids, silent)
        arena.finish(played)
        after = arena.wealth()
        assert played.game is not None
        verdict = played.game.status is not GameStatus.UNDECIDED and arena.base.game.committee(played.game_id) != []
        want = arena.expected_deltas(played, verdict)
        assert after[arena.solver.address] - before[arena.solver.address] == want["solver"]
        assert after[challenger.address] - before[challenger.address] == want["challenger"]
        if not played.by_verifier:
            assert after[verifier] - before[verifier] == want["verifier"]
        assert sum(after.values()) == sum(before.values()), "tokens are conserved"
        assert after["DisputeGame"] == 0
        job = arena.base.market.get_job(job_id)
        solver_locked = arena.base.stakes.stake_of(arena.solver.address, Role.SOLVER).locked
        return played.game, job, solver_locked
    finally:
        arena.net.chain.revert(snapshot)


@EXAMPLES
@given(
    challenger_moves=moves(st.sampled_from(CHALLENGER_MOVES), min_size=4, max_size=4),
    solver_pace=moves(st.sampled_from(("trace", "slow")), min_size=4, max_size=4),
    by_verifier=st.booleans(),
    silent=silences,
)
def test_an_honest_solver_never_loses(arena: Arena, challenger_moves, solver_pace, by_verifier, silent) -> None:
    game, job, locked = _play(arena, arena.trained.honest, solver_pace, challenger_moves, by_verifier, silent)
    assert game.status is GameStatus.DEFENDER_WON
    assert job.state is JobState.FINALIZED, "and is paid"
    assert locked == 0, "its bond released, never slashed"


@EXAMPLES
@given(
    bad=st.integers(1, K),
    solver_moves=moves(st.sampled_from(SOLVER_MOVES), min_size=4, max_size=4),
    by_verifier=st.booleans(),
    silent=silences,
)
def test_a_solver_with_one_wrong_step_never_wins(arena: Arena, bad, solver_moves, by_verifier, silent) -> None:
    cheat = arena.trained.cheating(bad)
    game, job, locked = _play(arena, cheat, solver_moves, ["truth"] * 4, by_verifier, silent)
    assert game.status is GameStatus.CHALLENGER_WON
    assert job.state is JobState.OPEN, "the job is reopened for another solver"
    assert locked == 0, "its bond was slashed"
