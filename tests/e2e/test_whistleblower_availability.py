"""The whistleblower daemon in the data-availability game, and with a pool too thin for a committee, on anvil.

A solver whose job an honest verifier passed stops serving its checkpoints (gone from its disk and
the store) while the challenge window runs: the whistleblower cannot fetch what its audit needs,
challenges a checkpoint's availability after its grace, the solver has nothing to publish, and the
whistleblower times it out and takes its whole bond; the verifier's bond is released, its fee not
paid, and the job reopens.

A lazy verifier passes an honest trace with guessed probes; the whistleblower finds them wrong, but
no other verifier could sit as a referee: it holds the challenge (one WARNING saying why), opens no
game and loses nothing, and the job finalizes.
"""

from __future__ import annotations

from pathlib import Path

from core.agent import mined
from core.contracts import JobId, JobState, Role
from core.storage.unixfs import file_cid
from rolebase.events import AUDIT_RECORDED, CHALLENGE_HELD
from tests.e2e.conftest import Market, wait_for
from tests.e2e.disputes import post_tiny, total_wealth, wealth

E2E_ACCOUNTS = 6
#: No forced errors (one story per test); room to audit and wait the grace; 15 s to publish.
E2E_MARKET = {"forcedErrorRateBps": 0, "challengeWindow": 30, "availabilityWindow": 15}
SUBMITTER, SOLVER, VERIFIER, WHISTLEBLOWER, LAZY, HONEST = range(6)


def test_a_solver_that_stops_serving_after_verification_loses_its_bond_to_the_whistleblower(market: Market, tmp_path: Path) -> None:
    protocol = market.protocol()
    deploy = protocol.book.deploy_block
    everyone = range(E2E_ACCOUNTS)
    before_total = total_wealth(protocol, market, everyone)
    solver, verifier, whistleblower = (market.account(i).address for i in (SOLVER, VERIFIER, WHISTLEBLOWER))
    before = {a: wealth(protocol, a) for a in (solver, verifier, whistleblower)}
    market.daemon("verifier", VERIFIER, "verifier", "--duty-grace", "5")
    market.daemon("solver", SOLVER, "solver")
    job_id = post_tiny(market, tmp_path / "job")
    wait_for("the job verified", lambda: protocol.market.get_job(job_id).state is JobState.VERIFIED, 180, market)

    files = sorted((market.root / "solver").rglob("checkpoint-*.safetensors"))
    assert files, "the solver's checkpoints on its disk"
    shared = market.store
    for path in files:  # the solver stops serving them: gone from its disk and from the store
        shared.unpin(file_cid(path.read_bytes()))
        path.unlink()
    shared.gc()
    wb = market.daemon("whistleblower", WHISTLEBLOWER, "whistleblower")

    timed_out = wait_for("the availability challenge timed out", lambda: protocol.market.events("AvailabilityTimedOut", deploy, jobId=job_id), 120, market)[0]
    job = protocol.market.get_job(job_id)
    bond = protocol.market.solver_bond(job.reward)
    (challenged,) = protocol.market.events("AvailabilityChallenged", deploy, jobId=job_id)
    assert challenged.args["challenger"] == whistleblower and challenged.args["item"] < len(files), "a checkpoint it could not fetch"
    assert (timed_out.args["solver"], timed_out.args["challenger"], timed_out.args["slashed"]) == (solver, whistleblower, bond)
    assert not protocol.market.events("AvailabilityAnswered", deploy, jobId=job_id), "the solver had nothing to publish"
    assert job.state is JobState.OPEN, "reopened with its escrow for another solver"
    assert before[solver] - wealth(protocol, solver) == bond, "the solver lost its whole bond"
    assert wealth(protocol, whistleblower) - before[whistleblower] == bond, "to the whistleblower, its deposit back"
    assert wealth(protocol, verifier) == before[verifier], "the verifier's bond released, its fee not paid"
    assert total_wealth(protocol, market, everyone) == before_total, "tokens are conserved"
    assert not protocol.game.events("DisputeOpened", deploy, jobId=job_id), "no game on data nobody could fetch"
    for process in market.processes:
        assert process.running, process.name
        assert "Traceback" not in process.log_path.read_text(), process.name
    assert [int(r["item"]) for r in wb.log_records() if r["msg"] == mined("challengeAvailability")] == [challenged.args["item"]]


def test_no_game_is_opened_when_no_committee_can_be_seated(market: Market, tmp_path: Path) -> None:
    protocol = market.protocol()
    deploy = protocol.book.deploy_block
    submitter = protocol.with_signer(market.account(SUBMITTER))
    for job_id in range(1, protocol.market.job_count() + 1):  # the reopened job of the test before
        if protocol.market.get_job(JobId(job_id)).state is JobState.OPEN:
            submitter.market.cancel(JobId(job_id))
    honest = protocol.with_signer(market.account(VERIFIER))  # leaves: the lazy verifier is the only one
    honest.stakes.request_unstake(Role.VERIFIER, protocol.stakes.stake_of(market.account(VERIFIER).address, Role.VERIFIER).staked)
    lazy, whistleblower = market.account(LAZY).address, market.account(WHISTLEBLOWER).address
    market.daemon("verifier", LAZY, "lazy", "--lazy", "--duty-grace", "5")
    wait_for("the lazy verifier staked", lambda: protocol.stakes.stake_of(lazy, Role.VERIFIER).staked > 0, 90, market)
    wb = market.daemon("whistleblower", WHISTLEBLOWER, "whistleblower", run=2)
    market.daemon("solver", HONEST, "honest")
    before = wealth(protocol, whistleblower)
    job_id = post_tiny(market, tmp_path / "job")

    wait_for("the job finalized", lambda: protocol.market.get_job(job_id).state is JobState.FINALIZED, 240, market)
    (report,) = protocol.market.events("ReportSubmitted", deploy, jobId=job_id)
    assert report.args["verifier"] == lazy and report.args["passed"], "the lazy pass"
    (audited,) = [r for r in wb.log_records() if r["msg"] == AUDIT_RECORDED and int(r["job"]) == job_id]
    assert int(audited["faults"]) > 0, "the whistleblower found its probes wrong"
    held = [r for r in wb.log_records() if r["msg"] == CHALLENGE_HELD and int(r["job"]) == job_id]
    assert len(held) == 1 and "0 eligible referees" in held[0]["reason"], "said once, and why"
    assert not protocol.game.events("DisputeOpened", deploy, jobId=job_id), "no game it would lose its bond on"
    assert wealth(protocol, whistleblower) == before
    assert "Traceback" not in wb.log_path.read_text()
