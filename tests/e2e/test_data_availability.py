"""The data-availability game with real daemons on anvil.

A solver that deletes its checkpoints once its commit is mined (``--cheat withhold``,
solver.adversary) loses its whole bond to the honest verifier, which cannot fetch a checkpoint,
challenges it on chain, and keeps its stake. (Before the game a withholding solver was paid: the
verifier reported a failure with no segment to open a game on, and ``forfeitUnopened`` handed the
solver the reward and the verifier's bond.)

An honest solver whose manifest the verifier cannot reach (its own store does not share it)
publishes it on chain when challenged; the verifier takes it from there, replays, passes, and
the job is paid as usual, the deposit going to the solver.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from core.cid import digest_to_cid
from core.contracts import MANIFEST_ITEM, JobId, JobState, Protocol, Role
from core.storage import LocalStore
from tests.e2e.conftest import Market, wait_for
from tests.e2e.disputes import post_tiny, total_wealth, wealth

E2E_ACCOUNTS = 4  # the submitter, the withholding solver, the verifier, an honest solver
#: The solver has 15 s to publish what its verifier challenged (the demo's windows otherwise).
E2E_MARKET = {"availabilityWindow": 15}
SUBMITTER, SOLVER, VERIFIER, HONEST = 0, 1, 2, 3


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
    assert challenged.args["challenger"] == verifier
    assert challenged.args["item"] < committed.args["checkpointCount"], "a checkpoint was missing, not the manifest"
    assert challenged.args["deposit"] == protocol.market.params().availability_deposit > 0
    assert (timed_out.args["solver"], timed_out.args["challenger"], timed_out.args["slashed"]) == (solver, verifier, bond)
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


def test_an_honest_solver_publishes_the_manifest_its_verifier_could_not_fetch(market: Market, tmp_path: Path) -> None:
    protocol = market.protocol()
    deploy = protocol.book.deploy_block
    submitter = protocol.with_signer(market.account(SUBMITTER))
    for job_id in range(1, protocol.market.job_count() + 1):  # an earlier test's reopened job
        if protocol.market.get_job(JobId(job_id)).state is JobState.OPEN:
            submitter.market.cancel(JobId(job_id))
    everyone = range(0, E2E_ACCOUNTS)
    before_total = total_wealth(protocol, market, everyone)
    before = {i: wealth(protocol, market.account(i).address) for i in everyone}
    market.daemon("verifier", VERIFIER, "verifier", "--stake", "200", "--duty-grace", "5", "--poll", "0.5")
    job_id = post_tiny(market, tmp_path / "job")
    # the solver's own store: a copy of the shared one (spec, dataset); what it stores stays there
    own = tmp_path / "solver-store"
    shutil.copytree(market.store_dir, own)
    market.daemon("solver", HONEST, "honest", "--store-dir", str(own), "--poll", "0.5")
    committed = wait_for("the commit", lambda: protocol.market.events("TraceCommitted", deploy, jobId=job_id), 240, market)[0]
    # its checkpoints reach the shared store, its manifest does not (an earlier test's withholder
    # trained the same spec: its identical manifest is dropped from the shared store too)
    manifest = digest_to_cid(committed.args["manifestCid"])
    shared, solver_store = market.store, LocalStore(own)
    shared.unpin(manifest)
    (market.store_dir / "blobs" / manifest).unlink(missing_ok=True)
    for blob in (own / "blobs").iterdir():
        if blob.name != manifest and not shared.has(blob.name):
            shared.put(solver_store.get(blob.name, blob.stat().st_size))
    assert not shared.has(manifest)

    wait_for("the job finalized", lambda: protocol.market.get_job(job_id).state is JobState.FINALIZED, 240, market)
    (challenged,) = protocol.market.events("AvailabilityChallenged", deploy, jobId=job_id)
    (answered,) = protocol.market.events("AvailabilityAnswered", deploy, jobId=job_id)
    solver, verifier = market.account(HONEST).address, market.account(VERIFIER).address
    assert challenged.args["item"] == answered.args["item"] == MANIFEST_ITEM
    assert answered.args["answerer"] == solver and shared.has(manifest), "the verifier kept the published manifest"
    (report,) = protocol.market.events("ReportSubmitted", deploy, jobId=job_id)
    assert report.args["passed"], "replayed on the published manifest and passed"
    job = protocol.market.get_job(job_id)
    deposit = protocol.market.params().availability_deposit
    assert wealth(protocol, solver) - before[HONEST] == job.reward + deposit
    assert wealth(protocol, verifier) - before[VERIFIER] == job.verifier_fee - deposit
    assert total_wealth(protocol, market, everyone) == before_total, "tokens are conserved"
    for process in market.processes:
        assert process.running, process.name
        assert "Traceback" not in process.log_path.read_text(), process.name
