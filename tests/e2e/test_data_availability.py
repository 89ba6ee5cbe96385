"""The data-availability game with real daemons on anvil: a solver that deletes its checkpoints
once its commit is mined (``--cheat withhold``, solver.adversary) loses its whole bond to the
honest verifier, which cannot fetch a checkpoint, challenges it on chain, and keeps its stake.

Before the game a withholding solver was paid: the verifier reported a failure with no segment to
open a game on, and ``forfeitUnopened`` handed the solver the reward and the verifier's bond.
"""

from __future__ import annotations

from pathlib import Path

from core.contracts import JobState, Protocol, Role
from tests.e2e.conftest import Market, wait_for
from tests.e2e.disputes import post_tiny, total_wealth, wealth

E2E_ACCOUNTS = 3  # the submitter, the withholding solver, the verifier
#: The solver has 15 s to publish what its verifier challenged (the demo's windows otherwise).
E2E_MARKET = {"availabilityWindow": 15}
SUBMITTER, SOLVER, VERIFIER = 0, 1, 2


def test_a_solver_that_deletes_its_checkpoints_loses_its_bond_to_the_verifier(market: Market, tmp_path: Path) -> None:
    protocol = market.protocol()
    deploy = protocol.book.deploy_block
    everyone = range(0, E2E_ACCOUNTS)
    before_total = total_wealth(protocol, market, everyone)
    before = {i: wealth(protocol, market.account(i).address) for i in everyone}
    market.daemon("verifier", VERIFIER, "verifier", "--stake", "200", "--duty-grace", "5", "--poll", "0.5")
    market.daemon("solver", SOLVER, "withholder", "--cheat", "withhold", "--poll", "0.5")
    job_id = post_tiny(market, tmp_path / "job")

    timed_out = wait_for(
        "the availability challenge timed out",
        lambda: protocol.market.events("AvailabilityTimedOut", deploy, jobId=job_id),
        240,
        market,
    )[0]
    solver, verifier = market.account(SOLVER).address, market.account(VERIFIER).address
    job = protocol.market.get_job(job_id)
    bond = protocol.market.solver_bond(job.reward)
    (challenged,) = protocol.market.events("AvailabilityChallenged", deploy, jobId=job_id)
    committed = protocol.market.events("TraceCommitted", deploy, jobId=job_id)[-1]
    assert challenged.args["verifier"] == verifier
    assert challenged.args["item"] < committed.args["checkpointCount"], "a checkpoint was missing, not the manifest"
    assert challenged.args["deposit"] == protocol.market.params().availability_deposit > 0
    assert (timed_out.args["solver"], timed_out.args["verifier"], timed_out.args["slashed"]) == (solver, verifier, bond)
    assert not protocol.market.events("AvailabilityAnswered", deploy, jobId=job_id), "nothing was published"
    assert not protocol.market.events("ReportSubmitted", deploy, jobId=job_id), "no report on data it could not get"

    assert job.state is JobState.OPEN, "reopened with its escrow for another solver"
    assert before[SOLVER] - wealth(protocol, solver) == bond, "the withholder lost its whole bond"
    assert wealth(protocol, verifier) - before[VERIFIER] == bond, "the verifier got the bond and its deposit back"
    stake = protocol.stakes.stake_of(verifier, Role.VERIFIER)
    assert (stake.staked, stake.locked) == (200 * 10**18, 0), "the honest verifier keeps its whole stake"
    assert wealth(protocol, market.account(SUBMITTER).address) == before[SUBMITTER] - _escrow(protocol, job.reward, job.verifier_fee)
    assert total_wealth(protocol, market, everyone) == before_total, "tokens are conserved"
    for process in market.processes:
        assert process.running, process.name
        assert "Traceback" not in process.log_path.read_text(), process.name


def _escrow(protocol: Protocol, reward: int, fee: int) -> int:
    """What the submitter escrowed for the job (still held by the market for the next solver)."""
    return reward + fee + protocol.market.jackpot_tax(reward, fee)
