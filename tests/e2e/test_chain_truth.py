"""The chain, not the local records, says what a daemon did (issue 13 item 4).

The rollback test: a solver killed just after its commit was mined, and anvil restarted (same port)
from a state dump taken before that block; then the same for a verifier and its report. Each
restarted daemon's records say it acted, the chain says it did not: it acts again, and nobody is
slashed.

The reorg test: running daemons reading 3 blocks deep (``--confirmations 3``) whose commit, then
report, a 2-block reorg (``anvil_reorg``) takes off the chain: each sends it again, nobody is slashed.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from core.agent import ACTION_DROPPED, mined
from core.contracts import JobId, JobState
from rolebase.daemon import state_dir
from rolebase.deployment import Deployment
from rolebase.sent import RESENT
from submitter import service
from submitter.demo_job import build_demo_job
from tests.e2e.conftest import Market, wait_for

E2E_MARKET = {"forcedErrorRateBps": 0}  # an honest report every time


def _recorded(db_path: Path, sql: str, job_id: JobId) -> str | None:
    """One value of the role's records (read-only), None while the file or the row is missing."""
    if not db_path.exists():
        return None
    with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as conn:
        try:
            row = conn.execute(sql, (job_id,)).fetchone()
        except sqlite3.OperationalError:  # schema not created yet
            return None
    return None if row is None else str(row[0])


def _dump_until(market: Market, job_id: JobId, state: JobState, acted: Callable[[], bool]) -> str:
    """Dump anvil's state each block while the job is in ``state``; once ``acted()`` (the call mined and
    recorded), return the last dump taken in ``state``: the chain before that call's block."""
    client = market.net.client
    dump: str | None = None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        head = client.head()
        snapshot = client.rpc("anvil_dumpState")
        if client.head() == head and market.protocol().market.get_job(job_id).state is state:
            dump = str(snapshot)
        elif dump is not None and acted():
            return dump
        for p in market.processes:  # a daemon that died (not one this test killed) fails the test at once
            assert p.process is None or p.process.poll() in (None, -9), f"{p.name} exited:\n{p.log_tail()}"
        time.sleep(0.2)
    raise AssertionError(f"job {job_id} never left {state.name} with the call recorded")


def test_daemons_act_again_when_the_chain_restarts_from_a_dump_before_their_call(market: Market, tmp_path: Path) -> None:
    protocol = market.protocol()
    records = Deployment.of(protocol).data_dir
    solver_db = state_dir(records(market.root / "solver"), "solver", market.account(1).address) / "state.sqlite"
    verifier_db = state_dir(records(market.root / "verifier"), "verifier", market.account(2).address) / "state.sqlite"
    solver = market.daemon("solver", 1, "solver")
    verifier = market.daemon("verifier", 2, "verifier", "--duty-grace", "5")
    market.wait_staked(120)
    job = build_demo_job("tiny", tmp_path / "job")
    job_id = service.post_job(market.protocol(market.account(0)), market.store, job.spec_path, job.data_path, job.reward, job.fee, job.commit_window).job_id

    # the solver: killed once its commit is mined and recorded, the chain restarted from before it
    sql = "SELECT phase FROM jobs WHERE job_id = ?"
    dump = _dump_until(market, job_id, JobState.CLAIMED, lambda: _recorded(solver_db, sql, job_id) == "committed")
    solver.kill()
    market.net.anvil.restart_from(dump)
    market.net.client.rpc("evm_setIntervalMining", [1])
    assert protocol.market.get_job(job_id).state is JobState.CLAIMED  # the commit is gone, the records say committed
    solver = market.daemon("solver", 1, "solver", run=2)
    wait_for("the commit sent again", lambda: protocol.market.get_job(job_id).state is not JobState.CLAIMED, 120, market)
    # the chain shows the block before the daemon has its receipt and logs it
    wait_for("the solver's second commit in its log", lambda: [r for r in solver.log_records() if r["msg"] == mined("commit")], 30, market)
    assert [r for r in solver.log_records() if r["msg"] == RESENT and r["call"] == f"Commit:{job_id}"]  # the journal saw it lost

    # the verifier: killed once its report is mined and recorded, the chain restarted from before it
    sql = "SELECT phase FROM assignments WHERE job_id = ?"
    dump = _dump_until(market, job_id, JobState.VERIFYING, lambda: _recorded(verifier_db, sql, job_id) == "reported")
    verifier.kill()
    market.net.anvil.restart_from(dump)
    market.net.client.rpc("evm_setIntervalMining", [1])
    assert protocol.market.get_job(job_id).state is JobState.VERIFYING
    verifier = market.daemon("verifier", 2, "verifier", "--duty-grace", "5", run=2)
    wait_for("the job finalized", lambda: protocol.market.get_job(job_id).state is JobState.FINALIZED, 240, market)
    wait_for("the verifier's second report in its log", lambda: [r for r in verifier.log_records() if r["msg"] == mined("report")], 30, market)
    assert [r for r in verifier.log_records() if r["msg"] == RESENT and r["call"] == f"Report:{job_id}"]

    deploy = protocol.book.deploy_block
    assert protocol.market.events("SolverTimedOut", deploy, jobId=job_id) == []  # nobody slashed
    assert protocol.market.events("VerifierTimedOut", deploy, jobId=job_id) == []
    assert len(protocol.market.events("TraceCommitted", deploy, jobId=job_id)) == 1
    assert len(protocol.market.events("ReportSubmitted", deploy, jobId=job_id)) == 1


def _reorg_out(market: Market, event: str, job_id: JobId, depth: int) -> None:
    """Once ``event`` of the job is mined, reorganize the chain's last blocks (at most ``depth``) so that
    its block is replaced by an empty one: the transaction is gone."""
    client, protocol = market.net.client, market.protocol()
    found = wait_for(event, lambda: protocol.market.events(event, protocol.book.deploy_block, jobId=job_id), 240, market)
    reorg = client.head() - found[0].block_number + 1
    assert reorg <= depth, f"{event} mined {reorg} blocks ago: too deep to reorganize in this test"
    client.rpc("anvil_reorg", [reorg, []])
    assert protocol.market.events(event, protocol.book.deploy_block, jobId=job_id) == []


def test_running_daemons_survive_a_reorg_shallower_than_their_confirmations(market: Market, tmp_path: Path) -> None:
    protocol = market.protocol()
    solver = market.daemon("solver", 1, "solver", "--confirmations", "3")
    verifier = market.daemon("verifier", 2, "verifier", "--duty-grace", "5", "--confirmations", "3")
    market.wait_staked(120)
    job = build_demo_job("tiny", tmp_path / "job")
    job_id = service.post_job(market.protocol(market.account(0)), market.store, job.spec_path, job.data_path, job.reward, job.fee, job.commit_window).job_id

    _reorg_out(market, "TraceCommitted", job_id, depth=2)
    assert protocol.market.get_job(job_id).state is JobState.CLAIMED
    _reorg_out(market, "ReportSubmitted", job_id, depth=2)
    assert protocol.market.get_job(job_id).state is JobState.VERIFYING
    wait_for("the job finalized", lambda: protocol.market.get_job(job_id).state is JobState.FINALIZED, 240, market)

    deploy = protocol.book.deploy_block
    assert protocol.market.events("SolverTimedOut", deploy, jobId=job_id) == []  # nobody slashed
    assert protocol.market.events("VerifierTimedOut", deploy, jobId=job_id) == []
    assert len(protocol.market.events("TraceCommitted", deploy, jobId=job_id)) == 1
    assert len(protocol.market.events("ReportSubmitted", deploy, jobId=job_id)) == 1
    # a reorged-out transaction may come back from anvil's pool (the daemon waits for it) or be sent
    # again (RESENT): either way it lands once, as asserted above
    for daemon in (solver, verifier):  # the reorgs cost no error and no reverted call
        assert not [r for r in daemon.log_records() if r["level"] in ("ERROR", "CRITICAL") or r["msg"] == ACTION_DROPPED]
