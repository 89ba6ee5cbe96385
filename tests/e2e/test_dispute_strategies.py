"""Every adversary of proofs.adversary, as a real cheating solver daemon, caught and slashed on anvil.

Six cheating solver daemons (``--cheat STRATEGY``, one job each) and four verifier daemons on one
chain, six tiny jobs at once: each job's verifier fails the replay and opens the dispute game on
the first failing segment; the defending cheaters post their (wrong) midpoints and lose at the
referees (the three other verifier daemons, re-executing the isolated step), the silent one
(``fake-final``) loses on its clock; each cheater's bond is slashed to the game, the challenger
is paid, and the job is reopened with its escrow.
"""

from __future__ import annotations

from pathlib import Path

from core.contracts import Event, GameId, GameStatus, JobId, JobState, SettleReason
from proofs.strategies import STRATEGIES
from solver.daemon import SILENT_CHEATS
from tests.e2e.conftest import Market, wait_for
from tests.e2e.disputes import post_tiny, settled, total_wealth, wealth

E2E_ACCOUNTS = 11  # the submitter, six cheaters, four verifiers
CHEATERS = range(1, 1 + len(STRATEGIES))  # accounts 1..6
VERIFIERS = range(7, 11)  # accounts 7..10: the job's verifier + a committee of three others


def test_every_adversary_strategy_is_caught_and_slashed(market: Market, tmp_path: Path) -> None:
    protocol = market.protocol()
    everyone = range(0, 11)
    before_total = total_wealth(protocol, market, everyone)
    before = {i: wealth(protocol, market.account(i).address) for i in everyone}
    for i in VERIFIERS:
        market.daemon("verifier", i, f"verifier{i}", "--stake", "200", "--duty-grace", "5", "--poll", "0.5")
    strategy_of = {}
    for i, strategy in zip(CHEATERS, STRATEGIES, strict=True):
        market.daemon("solver", i, f"cheater{i}", "--cheat", strategy, "--poll", "0.5")
        strategy_of[market.account(i).address] = strategy
    jobs = [post_tiny(market, tmp_path / f"job{n}") for n in range(len(STRATEGIES))]

    def every_game_settled() -> list[Event | None] | None:
        got = [settled(protocol, j) for j in jobs]
        return got if all(got) else None

    outcomes = wait_for("every game settled", every_game_settled, 420, market)

    params, deploy = protocol.game.params(), protocol.book.deploy_block
    caught = set()
    for job_id, event in zip(jobs, outcomes, strict=True):
        assert event is not None
        game = protocol.game.get_game(GameId(int(event.args["gameId"])))
        strategy = strategy_of[game.defender]
        caught.add(strategy)
        assert game.status is GameStatus.CHALLENGER_WON, strategy
        assert game.by_verifier and event.args["winner"] == game.challenger
        silent = strategy in SILENT_CHEATS
        assert SettleReason(event.args["reason"]) is (SettleReason.DEFENDER_CLOCK if silent else SettleReason.VERDICT), strategy
        if not silent:
            assert game.hi - game.lo == 1 and game.moves == 5  # ceil(log2 20) bisection moves to one step
            assert event.args["refereeFees"] == params.committee_size * params.referee_fee
        # the challenger gets its bond back plus the cheater's slashed bond, less the referees' fees
        bond = protocol.market.solver_bond(protocol.market.get_job(job_id).reward)
        assert event.args["payout"] == params.challenge_bond + bond - event.args["refereeFees"]
        assert before[CHEATERS[STRATEGIES.index(strategy)]] - wealth(protocol, game.defender) == bond, f"{strategy}: bond slashed"
        assert protocol.market.get_job(job_id).state is JobState.OPEN, "reopened with its escrow for another solver"
        assert len(protocol.market.events("JobReopened", deploy, jobId=JobId(job_id))) == 1
    assert caught == set(STRATEGIES)
    assert total_wealth(protocol, market, everyone) == before_total, "tokens are conserved"
    for process in market.processes:
        assert process.running, process.name
        assert "Traceback" not in process.log_path.read_text(), process.name
