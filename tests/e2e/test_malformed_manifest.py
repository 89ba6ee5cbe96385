"""A solver whose served manifest is not the trace it committed loses its bond in the trace game.

The solver daemon (``--cheat stale-model``, solver.adversary) trains, stores and serves an honest
trace and manifest, then commits checkpoint 0 (the untrained model) as its final model. The honest
verifier fetches the manifest by its committed CID: its root is the committed root, its final
checkpoint is not the committed model. It fails segment 0 as ``malformed-manifest`` and opens the
trace game there from the manifest's own leaves; the solver defends with its true states, and the
referees (three other verifier daemons) vote against it without training. Before this rule the
verifier reported a failure with no segment to open, and ``forfeitUnopened`` paid the solver the
reward and the verifier's bond.

Two solvers (``--cheat garbage-manifest``, ``--cheat foreign-root``) commit an honest trace under a
manifest that gives no leaves for a trace game: bytes that do not parse, and a manifest of other
states (its root is not the committed root). Four verifier daemons run; the one drawn for each job
challenges the manifest's availability (the solver publishes it on chain), fails its report on the
manifest and opens a manifest game (``openOnManifest``); the three others are its referees and
vote against the solver on the bytes the chain holds. Each solver loses its bond (less the
deposit it earned by answering), each verifier is paid the bond less the referees' fees and the
deposit, each referee its fee, and the submitter, whose jobs reopened with their escrow, gets all
of it back by cancelling.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path

from core.cid import digest_to_cid
from core.contracts import MANIFEST_ITEM, GameId, GameStatus, JobId, JobState, Role, SettleReason
from tests.e2e.conftest import Market, wait_for
from tests.e2e.disputes import assert_cheater_slashed, catch_cheat, post_tiny, settled, total_wealth, wealth

E2E_ACCOUNTS = 7
SUBMITTER, SOLVER, VERIFIER, REFEREES, SOLVER_B = 0, 1, 2, (3, 4, 5), 6


def test_a_solver_committing_another_model_than_its_manifest_loses_its_bond_to_the_verifier(market: Market, tmp_path: Path) -> None:
    protocol = market.protocol()
    deploy = protocol.book.deploy_block
    verifier = market.account(VERIFIER).address
    caught = catch_cheat(market, tmp_path / "job", "stale-model", solver=SOLVER, verifier=VERIFIER, referees=REFEREES, accounts=range(0, 6))
    job_id, event, before = caught.job_id, caught.settled, caught.before
    (report,) = protocol.market.events("ReportSubmitted", deploy, jobId=job_id)
    body = json.loads(market.store.get(digest_to_cid(report.args["reportCid"]), 1 << 20))
    assert not report.args["passed"] and [v["reason"] for v in body["verdicts"]] == ["malformed-manifest"]
    game = protocol.game.get_game(GameId(int(event.args["gameId"])))
    assert (game.status, game.segment, game.by_verifier, game.challenger) == (GameStatus.CHALLENGER_WON, 0, True, verifier)
    assert SettleReason(event.args["reason"]) is SettleReason.VERDICT, "the referees voted, the solver defended"
    assert not protocol.game.events("UnopenedDisputeForfeited", deploy, jobId=job_id)

    assert_cheater_slashed(market, caught, solver=SOLVER, accounts=range(0, 6))
    params = protocol.game.params()
    bond, fees = protocol.market.solver_bond(protocol.market.get_job(job_id).reward), params.committee_size * params.referee_fee
    assert wealth(protocol, verifier) - before[VERIFIER] == bond - fees, "the verifier got the bond, less the referees' fees"
    stake = protocol.stakes.stake_of(verifier, Role.VERIFIER)
    assert (stake.staked, stake.locked) == (200 * 10**18, 0), "the honest verifier keeps its whole stake"


def test_solvers_whose_manifest_gives_no_leaves_lose_their_bond_in_a_manifest_game(market: Market, tmp_path: Path) -> None:
    protocol = market.protocol()
    deploy = protocol.book.deploy_block
    submitter = protocol.with_signer(market.account(SUBMITTER))
    for old in range(1, protocol.market.job_count() + 1):  # the earlier test's reopened job
        if protocol.market.get_job(JobId(old)).state is JobState.OPEN:
            submitter.market.cancel(JobId(old))
    everyone = range(0, 7)
    before_total = total_wealth(protocol, market, everyone)
    before = {i: wealth(protocol, market.account(i).address) for i in everyone}
    verifiers = (VERIFIER, *REFEREES)  # any of them may be drawn (the earlier test staked them all)
    for i in verifiers:
        market.daemon("verifier", i, f"verifier{i}", "--stake", "200", "--duty-grace", "5", "--poll", "0.5")
    wait_for("the verifiers staked", lambda: all(protocol.stakes.stake_of(market.account(i).address, Role.VERIFIER).staked > 0 for i in verifiers), 60, market)
    cheats = {market.account(SOLVER).address: "garbage-manifest", market.account(SOLVER_B).address: "foreign-root"}
    market.daemon("solver", SOLVER, "garbage", "--cheat", "garbage-manifest", "--poll", "0.5")
    market.daemon("solver", SOLVER_B, "foreign", "--cheat", "foreign-root", "--poll", "0.5")
    jobs = [post_tiny(market, tmp_path / f"job{n}") for n in range(2)]

    events = [wait_for(f"job {job_id}'s game settled", partial(settled, protocol, job_id), 360, market) for job_id in jobs]
    params, deposit = protocol.game.params(), protocol.market.params().availability_deposit
    fees = params.committee_size * params.referee_fee
    expected = dict.fromkeys(everyone, 0)
    for job_id, event in zip(jobs, events, strict=True):
        game = protocol.game.get_game(GameId(int(event.args["gameId"])))
        solver, verifier = game.defender, game.challenger
        (challenged,) = protocol.market.events("AvailabilityChallenged", deploy, jobId=job_id)
        (answered,) = protocol.market.events("AvailabilityAnswered", deploy, jobId=job_id)
        assert (challenged.args["challenger"], challenged.args["item"], challenged.args["deposit"]) == (verifier, MANIFEST_ITEM, deposit)
        assert (answered.args["answerer"], answered.args["item"]) == (solver, MANIFEST_ITEM), "the solver published its manifest"
        (report,) = protocol.market.events("ReportSubmitted", deploy, jobId=job_id)
        body = json.loads(market.store.get(digest_to_cid(report.args["reportCid"]), 1 << 20))
        assert not report.args["passed"] and [v["reason"] for v in body["verdicts"]] == ["malformed-manifest"]
        problem = "invalid manifest" if cheats[solver] == "garbage-manifest" else "is not the committed root"
        assert problem in body["summary"], body["summary"]
        assert protocol.game.events("ManifestDisputeOpened", deploy, jobId=job_id)
        assert (game.status, game.segment, game.steps, game.by_verifier) == (GameStatus.CHALLENGER_WON, 0, 0, True)
        assert SettleReason(event.args["reason"]) is SettleReason.VERDICT, "the referees voted on the published manifest"
        assert not protocol.game.events("UnopenedDisputeForfeited", deploy, jobId=job_id)
        job = protocol.market.get_job(job_id)
        bond = protocol.market.solver_bond(job.reward)
        assert event.args["payout"] == params.challenge_bond + bond - fees
        assert job.state is JobState.OPEN, "reopened with its escrow: the submitter pays for no model"
        referees = protocol.game.committee(GameId(int(event.args["gameId"])))
        assert sorted(referees) == sorted(market.account(i).address for i in verifiers if market.account(i).address != verifier)
        index = {market.account(i).address: i for i in everyone}
        expected[index[solver]] += deposit - bond
        expected[index[verifier]] += bond - fees - deposit
        for referee in referees:
            expected[index[referee]] += params.referee_fee
        submitter.market.cancel(job_id)
    for i in everyone:  # the submitter's expected change is 0: it got all its escrow back
        assert wealth(protocol, market.account(i).address) - before[i] == expected[i], f"account {i}"
    for i in verifiers:
        stake = protocol.stakes.stake_of(market.account(i).address, Role.VERIFIER)
        assert (stake.staked, stake.locked) == (200 * 10**18, 0), "no honest verifier was slashed"
    assert total_wealth(protocol, market, everyone) == before_total, "tokens are conserved"
    for process in market.processes:
        assert process.running, process.name
        assert "Traceback" not in process.log_path.read_text(), process.name
