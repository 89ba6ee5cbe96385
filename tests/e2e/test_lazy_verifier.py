"""A lazy verifier that passes a bad trace loses its stake to a whistleblower's report game, on anvil.

A cheating solver daemon (``--cheat tamper``) commits a bad trace; the only staked verifier when
the job's verifier is drawn is lazy (``verifier run --lazy``: passes without replaying, guessing
its probes). The whistleblower daemon audits the report: its probes are wrong (and segments are
bad); it challenges the wrong probe first (a report game: the verifier defends its probe), three
honest verifier daemons started after the draw sit as referees, the whistleblower wins, and the
lazy verifier's whole verifier bond is slashed to the game's winner (``ReportOverturned``); the job
goes back to a verifier draw. Forced errors are off on this chain, so the story has one ending.
"""

from __future__ import annotations

from pathlib import Path

from core.contracts import GameId, GameStatus, JobState, Role, SettleReason
from rolebase.events import AUDIT_RECORDED
from tests.e2e.conftest import Market, wait_for
from tests.e2e.disputes import post_tiny, total_wealth, wealth

E2E_ACCOUNTS = 7
E2E_MARKET = {"forcedErrorRateBps": 0, "challengeWindow": 45}  # no forced errors; time to audit and open
CHEATER, LAZY, WHISTLEBLOWER, REFEREES = 1, 2, 3, (4, 5, 6)


def test_a_lazy_verifier_passing_a_bad_trace_loses_its_bond_to_the_whistleblower(market: Market, tmp_path: Path) -> None:
    protocol = market.protocol()
    deploy = protocol.book.deploy_block
    everyone = range(0, E2E_ACCOUNTS)
    before_total = total_wealth(protocol, market, everyone)
    lazy, whistleblower = market.account(LAZY).address, market.account(WHISTLEBLOWER).address
    before = {a: wealth(protocol, a) for a in (lazy, whistleblower)}

    market.daemon("verifier", LAZY, "lazy", "--lazy", "--duty-grace", "5")
    wait_for("the lazy verifier staked", lambda: protocol.stakes.stake_of(lazy, Role.VERIFIER).staked > 0, 90, market)
    wb = market.daemon("whistleblower", WHISTLEBLOWER, "whistleblower")
    market.daemon("solver", CHEATER, "cheater", "--cheat", "tamper")
    job_id = post_tiny(market, tmp_path / "job")
    wait_for("the lazy verifier drawn", lambda: protocol.market.get_job(job_id).verifier == lazy, 120, market)
    staked_at_draw = protocol.stakes.stake_of(lazy, Role.VERIFIER).staked
    for i in REFEREES:
        market.daemon("verifier", i, f"referee{i}", "--duty-grace", "5")

    passed = wait_for("the lazy pass", lambda: protocol.market.events("ReportSubmitted", deploy, jobId=job_id, verifier=lazy), 120, market)
    assert passed[0].args["passed"] is True, "the lazy verifier passed the bad trace"
    overturned = wait_for("the lazy report overturned", lambda: protocol.market.events("ReportOverturned", deploy, jobId=job_id), 240, market)

    bond = protocol.market.verifier_bond(protocol.market.get_job(job_id).reward)
    assert overturned[0].args["verifier"] == lazy and overturned[0].args["slashed"] == bond
    (opened,) = protocol.game.events("DisputeOpened", deploy, jobId=job_id, challenger=whistleblower)
    game_id = GameId(int(opened.args["gameId"]))
    game = protocol.game.get_game(game_id)
    assert game.on_report and game.defender == lazy and game.status is GameStatus.CHALLENGER_WON
    settled = protocol.game.events("DisputeSettled", deploy, gameId=game_id)[0]
    assert settled.args["winner"] == whistleblower and SettleReason(settled.args["reason"]) is not SettleReason.FORCED_ERROR
    assert protocol.stakes.stake_of(lazy, Role.VERIFIER).staked == staked_at_draw - bond, "the lazy verifier lost its stake"
    assert before[lazy] - wealth(protocol, lazy) == bond  # and earned no fee
    params = protocol.game.params()
    fees = params.committee_size * params.referee_fee if SettleReason(settled.args["reason"]) is SettleReason.VERDICT else 0
    assert settled.args["payout"] == params.challenge_bond + bond - fees  # the pot: its bond back and the lazy bond, less the referees'
    assert wealth(protocol, whistleblower) - before[whistleblower] == bond - fees  # by verdict at devnet: 10 - 3 x 2 = +4 VERI
    assert bond > fees, "catching a lazy verifier pays (the DisputeGame requires minVerifierBond > committeeSize x refereeFee)"
    assert protocol.market.get_job(job_id).state in (JobState.COMMITTED, JobState.VERIFYING, JobState.VERIFIED, JobState.DISPUTED), "back to a verifier draw"
    assert protocol.market.get_job(job_id).verifier != lazy or protocol.market.get_job(job_id).state is JobState.COMMITTED
    faults = [r for r in wb.log_records() if r["msg"] == AUDIT_RECORDED and int(r["job"]) == job_id]
    assert faults and int(faults[0]["faults"]) == 1, "a wrong probe found"
    assert "stopped at the first fault" in faults[0]["summary"], "one fault opens the game: the audit replayed no further"
    assert total_wealth(protocol, market, everyone) == before_total
