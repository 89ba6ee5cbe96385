"""A false accusation against an honest solver daemon costs the accuser, with restarts mid-game, while
the solver trains another, long job (issue 25: no duty waits behind long work).

A verifier daemon in its test-only ``--lie`` mode is the only staked verifier when the job's
verifier is drawn; it fails the honest trace, opens the game and answers every midpoint wrong.
The honest solver daemon, by then training a long second job, defends (killed with SIGKILL after
its first move and restarted: it re-reads the game from the chain, goes on, and trains the long
job again); three honest verifier daemons, started after the
draw, are the committee (one is killed after its commit and restarted: its vote salt comes back
from its SQLite secret and it reveals). The solver wins by verdict and is paid the reward plus
the pot; the liar loses its challenge bond and its verifier bond. Run with ``-s`` to see how long
each of the solver's moves took (docs/performance.md, "Duties while busy").
"""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path

from core.agent import mined
from core.contracts import Ballot, GameId, GameStatus, JobId, JobState, Protocol, Role, SettleReason
from rolebase.earnings import earnings_of
from rolebase.events import TRAINING_RESUMED, TRAINING_STARTED
from submitter import service
from submitter.demo_job import build_demo_job
from tests.e2e.conftest import LONG_JOB_WINDOW, Market, wait_for
from tests.e2e.disputes import post_tiny, settled, total_wealth, wealth
from veritrain.localnet import RoleProcess

SOLVER, LIAR, REFEREES = 1, 2, (3, 4, 5)
#: The long job's window: a day, as a busy machine estimates it.
E2E_MARKET = {"maxCommitWindow": LONG_JOB_WINDOW}


def test_false_accusation_costs_the_accuser_its_bonds_and_pays_the_honest_solver(market: Market, tmp_path: Path) -> None:
    protocol = market.protocol()
    deploy = protocol.book.deploy_block
    before_total = total_wealth(protocol, market, range(0, 6))
    solver_addr, liar_addr = market.account(SOLVER).address, market.account(LIAR).address
    before = {a: wealth(protocol, a) for a in (solver_addr, liar_addr)}

    market.daemon("verifier", LIAR, "liar", "--lie", "--duty-grace", "5")
    wait_for("the liar staked", lambda: protocol.stakes.stake_of(liar_addr, Role.VERIFIER).staked > 0, 60, market)
    solver = market.daemon("solver", SOLVER, "solver")
    job_id = post_tiny(market, tmp_path / "job")
    wait_for("the tiny job committed", lambda: protocol.market.events("TraceCommitted", deploy, jobId=job_id), 240, market)
    # many minutes of training on any machine (the test ends long before), claimed while the game runs
    long = build_demo_job("tiny", tmp_path / "long", steps=200_000, checkpoint_interval=20_000)
    long_id = service.post_job(market.protocol(market.account(0)), market.store, long.spec_path, long.data_path, long.reward, long.fee, LONG_JOB_WINDOW).job_id
    wait_for("the liar drawn as the job's verifier", lambda: protocol.market.get_job(job_id).verifier == liar_addr, 120, market)
    referees = {i: market.daemon("verifier", i, f"referee{i}", "--duty-grace", "5") for i in REFEREES}

    game_id = GameId(int(wait_for("the game opened", lambda: protocol.game.active_game(job_id), 120, market)))
    wait_for("the solver's first move", lambda: protocol.game.events("MidpointPosted", deploy, gameId=game_id), 60, market)
    solver.kill()  # SIGKILL mid-game
    restarted_solver = market.daemon("solver", SOLVER, "solver", run=2)

    committed = wait_for("a referee committed", lambda: protocol.game.events("VoteCommitted", deploy, gameId=game_id), 180, market)
    referee_addr = committed[0].args["referee"]
    index = next(i for i in REFEREES if market.account(i).address == referee_addr)
    ballot_at_kill = protocol.game.ballot_of(game_id, referee_addr)[0]
    referees[index].kill()  # between its commit and its reveal
    block_at_kill = protocol.client.block_number()
    restarted = market.daemon("verifier", index, f"referee{index}", "--duty-grace", "5", run=2)

    event = wait_for("the game settled", lambda: settled(protocol, job_id), 240, market)
    moves = _solver_moves(market, game_id)
    busy = [waited for at, waited in moves if at > _training_since(restarted_solver, long_id)]
    print(f"\nthe solver's moves, seconds after the move before each: {[waited for _, waited in moves]}; {len(busy)} while training another job")
    assert busy, "the restarted solver resumed training the long job, then moved in the game"
    assert protocol.market.get_job(long_id).state is JobState.CLAIMED and all(
        r["msg"] != "training finished" or r.get("job") != long_id for r in restarted_solver.log_records()
    ), "the long job's training still ran when the game settled"
    game = protocol.game.get_game(game_id)
    assert game.status is GameStatus.DEFENDER_WON and SettleReason(event.args["reason"]) is SettleReason.VERDICT
    assert game.hi - game.lo == 1 and game.lo == 0, "answered wrong every time: isolated at the segment's first step"
    assert protocol.game.ballot_of(game_id, referee_addr)[0] is Ballot.REVEALED_DEFENDER_RIGHT
    if ballot_at_kill is Ballot.COMMITTED:  # killed before its reveal was mined: the restarted daemon revealed,
        # unless the killed one had sent it already (mined in the next block, while a restart takes seconds of blocks)
        (revealed,) = protocol.game.events("VoteRevealed", deploy, gameId=game_id, referee=referee_addr)
        assert revealed.block_number <= block_at_kill + 1 or any(r["msg"] == mined("revealVote") for r in restarted.log_records())
    assert any(r["msg"] == mined("postMidpoint") for p in market.processes if p.name == "solver#2" for r in p.log_records()), "the restarted solver moved"

    job = protocol.market.get_job(job_id)
    assert job.state is JobState.FINALIZED
    params = protocol.game.params()
    reward = job.reward
    v_bond = protocol.market.verifier_bond(reward)
    fees = params.committee_size * params.referee_fee
    assert event.args["winner"] == solver_addr and event.args["payout"] == params.challenge_bond + v_bond - fees
    assert wealth(protocol, solver_addr) - before[solver_addr] == reward + params.challenge_bond + v_bond - fees
    assert before[liar_addr] - wealth(protocol, liar_addr) == params.challenge_bond + v_bond
    assert total_wealth(protocol, market, range(0, 6)) == before_total
    # `veritrain earnings` reads the same from the chain's events: the solver's whole gain, and each
    # majority referee's fee
    assert sum(int(e["amount"]) for e in earnings_of(protocol, solver_addr)) == reward + params.challenge_bond + v_bond - fees
    assert [(e["game"], int(e["amount"])) for e in earnings_of(protocol, referee_addr) if e["what"].startswith("referee fee")] == [
        (game_id, params.referee_fee)
    ]
    # the game pays by credit: the winner's and the referee's daemons claim theirs as their last duty
    for payee in (solver_addr, referee_addr):
        wait_for("the credit claimed", partial(_claimed, protocol, payee), 60, market)
    # the chain shows the claim as soon as it is mined, the daemon logs it once its receipt arrives
    wait_for("the solver's claim logged", lambda: any(r["msg"] == mined("claimCredit") for r in restarted_solver.log_records()), 30, market)
    assert total_wealth(protocol, market, range(0, 6)) == before_total


def _claimed(protocol: Protocol, payee: str) -> bool:
    return protocol.game.credit(payee) == 0


def _training_since(solver: RoleProcess, job_id: JobId) -> float:
    """When ``solver`` logged that it started (or resumed) training ``job_id`` (inf: it has not)."""
    logged = [float(r["ts"]) for r in solver.log_records() if r["msg"] in (TRAINING_STARTED, TRAINING_RESUMED) and r.get("job") == job_id]
    return min(logged, default=math.inf)


def _solver_moves(market: Market, game_id: GameId) -> list[tuple[int, int]]:
    """Each of the solver's posted midpoints: its block time, and the seconds since the move before it (the
    opening or the liar's answer)."""
    protocol = market.protocol()
    start = protocol.book.deploy_block
    names = ("DisputeOpened", "MidpointPosted", "MidpointAnswered")
    moves = sorted((e.block_number, e.log_index, e.name) for name in names for e in protocol.game.events(name, start, gameId=game_id))
    times = [protocol.client.timestamp(block) for block, _, _ in moves]
    return [(times[i], times[i] - times[i - 1]) for i, (_, _, name) in enumerate(moves) if name == "MidpointPosted" and i > 0]
