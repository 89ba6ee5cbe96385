"""A solver whose served manifest is not the trace it committed loses its bond in the trace game.

The solver daemon (``--cheat stale-model``, solver.adversary) trains, stores and serves an honest
trace and manifest, then commits checkpoint 0 (the untrained model) as its final model. The honest
verifier fetches the manifest by its committed CID: its root is the committed root, its final
checkpoint is not the committed model. It fails segment 0 as ``malformed-manifest`` and opens the
trace game there from the manifest's own leaves; the solver defends with its true states, and the
referees (three other verifier daemons) vote against it without training. Before this rule the
verifier reported a failure with no segment to open, and ``forfeitUnopened`` paid the solver the
reward and the verifier's bond.
"""

from __future__ import annotations

import json
from pathlib import Path

from core.cid import digest_to_cid
from core.contracts import GameId, GameStatus, JobState, Role, SettleReason
from tests.e2e.conftest import Market, wait_for
from tests.e2e.disputes import post_tiny, settled, total_wealth, wealth

SUBMITTER, SOLVER, VERIFIER, REFEREES = 0, 1, 2, (3, 4, 5)


def test_a_solver_committing_another_model_than_its_manifest_loses_its_bond_to_the_verifier(market: Market, tmp_path: Path) -> None:
    protocol = market.protocol()
    deploy = protocol.book.deploy_block
    everyone = range(0, 6)
    before_total = total_wealth(protocol, market, everyone)
    before = {i: wealth(protocol, market.account(i).address) for i in everyone}
    solver, verifier = market.account(SOLVER).address, market.account(VERIFIER).address
    market.daemon("verifier", VERIFIER, "verifier", "--stake", "200", "--duty-grace", "5", "--poll", "0.5")
    wait_for("the verifier staked", lambda: protocol.stakes.stake_of(verifier, Role.VERIFIER).staked > 0, 60, market)
    market.daemon("solver", SOLVER, "stale", "--cheat", "stale-model", "--poll", "0.5")
    job_id = post_tiny(market, tmp_path / "job")
    wait_for("the verifier drawn", lambda: protocol.market.get_job(job_id).verifier == verifier, 240, market)
    for i in REFEREES:
        market.daemon("verifier", i, f"referee{i}", "--stake", "200", "--duty-grace", "5", "--poll", "0.5")

    event = wait_for("the game settled", lambda: settled(protocol, job_id), 300, market)
    (report,) = protocol.market.events("ReportSubmitted", deploy, jobId=job_id)
    body = json.loads(market.store.get(digest_to_cid(report.args["reportCid"]), 1 << 20))
    assert not report.args["passed"] and [v["reason"] for v in body["verdicts"]] == ["malformed-manifest"]
    game = protocol.game.get_game(GameId(int(event.args["gameId"])))
    assert (game.status, game.segment, game.by_verifier, game.challenger) == (GameStatus.CHALLENGER_WON, 0, True, verifier)
    assert SettleReason(event.args["reason"]) is SettleReason.VERDICT, "the referees voted, the solver defended"
    assert not protocol.game.events("UnopenedDisputeForfeited", deploy, jobId=job_id)

    params = protocol.game.params()
    job = protocol.market.get_job(job_id)
    bond, fees = protocol.market.solver_bond(job.reward), params.committee_size * params.referee_fee
    assert event.args["payout"] == params.challenge_bond + bond - fees
    assert before[SOLVER] - wealth(protocol, solver) == bond, "the solver lost its whole bond"
    assert wealth(protocol, verifier) - before[VERIFIER] == bond - fees, "the verifier got the bond, less the referees' fees"
    stake = protocol.stakes.stake_of(verifier, Role.VERIFIER)
    assert (stake.staked, stake.locked) == (200 * 10**18, 0), "the honest verifier keeps its whole stake"
    assert job.state is JobState.OPEN, "reopened with its escrow for another solver"
    assert total_wealth(protocol, market, everyone) == before_total, "tokens are conserved"
    for process in market.processes:
        assert process.running, process.name
        assert "Traceback" not in process.log_path.read_text(), process.name
