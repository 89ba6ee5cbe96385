"""Whole disputes on anvil through the Python client, over a real trace of the proofs engine.

The solver's trace goes wrong at ONE step inside the disputed segment; the challenger and the
solver bisect with real state hashes (``proofs.state_at``), the referees re-execute the isolated
step (``proofs.execute_step``) and vote by commit-reveal. Payouts are checked to the token
against docs/dispute.md, and tokens are conserved.
"""

from __future__ import annotations

import logging

import pytest

from core.contracts import GameStatus, JobState, Role
from core.dispute import isolated_step, max_moves

from .arena import FEE, REWARD, SEGMENT, Arena, K, Played

log = logging.getLogger(__name__)


def _check_payouts(arena: Arena, before: dict[str, int], played: Played, challenger: str, verifier: str, verdict: bool) -> None:
    after = arena.wealth()
    want = arena.expected_deltas(played, verdict)
    assert after[arena.solver.address] - before[arena.solver.address] == want["solver"]
    assert after[challenger] - before[challenger] == want["challenger"]
    if not played.by_verifier:
        assert after[verifier] - before[verifier] == want["verifier"]
    assert sum(after.values()) == sum(before.values()), "tokens are conserved"
    assert after["DisputeGame"] == 0, "a settled game holds nothing"
    assert arena.base.stakes.stake_of(arena.solver.address, Role.SOLVER).locked == 0


@pytest.mark.parametrize("by_verifier", [False, True], ids=["whistleblower", "failing-verifier"])
def test_a_solver_wrong_at_one_step_is_isolated_slashed_and_the_challenger_paid(arena: Arena, by_verifier: bool) -> None:
    bad = 6  # the transition 5 -> 6 of segment 1 is the only wrong one
    cheat = arena.trained.cheating(bad)
    job_id, challenger, cids = arena.commit_job(cheat, by_verifier=by_verifier)
    verifier = arena.base.market.get_job(job_id).verifier
    before = arena.wealth()

    played = arena.open(job_id, challenger, cheat)
    arena.bisect(played, cheat, lambda i: "trace", lambda i: "truth")
    game = arena.base.game.get_game(played.game_id)
    assert game.status is GameStatus.ISOLATED
    assert game.moves == max_moves(K) == 4
    task = isolated_step(game, K, cids)
    assert (task.step, task.global_step) == (bad - 1, SEGMENT * K + bad - 1), "bisection found the wrong step"

    arena.arbitrate(played, cids)
    arena.finish(played)
    assert played.game is not None and played.game.status is GameStatus.CHALLENGER_WON
    job = arena.base.market.get_job(job_id)
    assert job.state is JobState.OPEN, "job reopened for another solver"
    escrow = REWARD + FEE + arena.base.market.jackpot_tax(REWARD, FEE)
    assert arena.base.token.balance_of(arena.base.market.address) == escrow + arena.base.market.jackpot(), "the submitter's escrow is kept"
    _check_payouts(arena, before, played, challenger.address, verifier, verdict=True)
    log.info("dispute gas %s", played.gas)


@pytest.mark.parametrize("by_verifier", [False, True], ids=["whistleblower", "failing-verifier"])
def test_a_false_accusation_costs_the_accuser_its_bond(arena: Arena, by_verifier: bool) -> None:
    honest = arena.trained.honest
    job_id, challenger, cids = arena.commit_job(honest, by_verifier=by_verifier)
    verifier = arena.base.market.get_job(job_id).verifier
    before = arena.wealth()

    played = arena.open(job_id, challenger, honest)
    arena.bisect(played, honest, lambda i: "trace", lambda i: "disagree")
    arena.arbitrate(played, cids)
    arena.finish(played)
    assert played.game is not None and played.game.status is GameStatus.DEFENDER_WON
    assert arena.base.market.get_job(job_id).state is JobState.FINALIZED, "the honest solver is paid"
    _check_payouts(arena, before, played, challenger.address, verifier, verdict=True)
    accuser_loss = before[challenger.address] - arena.wealth()[challenger.address]
    assert accuser_loss >= arena.params.challenge_bond


def test_a_lost_whistleblower_challenge_resumes_the_challenge_window(arena: Arena) -> None:
    """JobMarket patch 1: an accomplice losing on purpose cannot end the window; an honest
    whistleblower still challenges the bad segment afterwards and wins."""
    cheat = arena.trained.cheating(3)
    job_id, whistleblower, cids = arena.commit_job(cheat, by_verifier=False)
    window_left = arena.base.market.get_job(job_id).deadline - arena.net.client.timestamp()
    # the accomplice: a second whistleblower that agrees with everything and loses on its clock
    accomplice = arena.outsider
    p = arena.proto(accomplice)
    p.token.approve(arena.base.stakes.address, 100 * 10**18)
    p.stakes.stake(Role.WHISTLEBLOWER, 100 * 10**18)
    p.token.approve(arena.base.game.address, 100 * 10**18)
    played = arena.open(job_id, accomplice, cheat)
    arena.bisect(played, cheat, lambda i: "trace", lambda i: "silent")
    assert arena.base.game.get_game(played.game_id).status is GameStatus.DEFENDER_WON
    job = arena.base.market.get_job(job_id)
    assert job.state is JobState.VERIFIED, "window resumed, not finalized"
    assert job.deadline - arena.net.client.timestamp() >= window_left - 2, "with the time it had left"

    honest = arena.open(job_id, whistleblower, cheat)
    arena.bisect(honest, cheat, lambda i: "trace", lambda i: "truth")
    arena.arbitrate(honest, cids)
    assert arena.base.game.get_game(honest.game_id).status is GameStatus.CHALLENGER_WON
    assert arena.base.market.get_job(job_id).state is JobState.OPEN
