"""Real solver and verifier daemons on anvil: competing for claims, and surviving kill -9."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from core.agent import ACTION_DROPPED
from core.contracts import JobId, JobState
from deploy.anvil import dev_private_key
from rolebase.deployment import Deployment
from rolebase.events import TRAINING_RESUMED, TRAINING_STARTED
from solver.daemon import state_dir
from submitter import service
from submitter.demo_job import build_demo_job
from tests.e2e.conftest import Market, wait_for


def _post(market: Market, folder: Path, **shape: int) -> JobId:
    job = build_demo_job("tiny", folder, **shape)
    submitter = market.protocol(market.account(0))
    return service.post_job(submitter, market.store, job.spec_path, job.data_path, job.reward, job.fee, job.commit_window).job_id


def _state(market: Market, job_id: JobId) -> JobState:
    return market.protocol().market.get_job(job_id).state


def test_two_solvers_compete_and_exactly_one_wins_each_claim(market: Market, tmp_path: Path) -> None:
    verifier = market.daemon("verifier", 2, "verifier", "--duty-grace", "5", keystore=True)
    solvers = [market.daemon("solver", 1, "solver_a"), market.daemon("solver", 3, "solver_b")]
    jobs = [_post(market, tmp_path / f"job{i}") for i in range(2)]

    wait_for("both jobs finalized", lambda: all(_state(market, j) is JobState.FINALIZED for j in jobs), 240, market)

    protocol = market.protocol()
    deploy = protocol.book.deploy_block
    for job_id in jobs:
        claims = protocol.market.events("JobClaimed", deploy, jobId=job_id)
        assert len(claims) == 1, f"job {job_id} claimed {len(claims)} times"
        assert protocol.market.events("JobReopened", deploy, jobId=job_id) == []
    winners = {protocol.market.events("JobClaimed", deploy, jobId=j)[0].args["solver"] for j in jobs}
    assert winners <= {market.account(1).address, market.account(3).address}
    # both solvers kept running and logged no error: a lost race is a dropped action, nothing more
    for solver in solvers:
        assert solver.running
        records = solver.log_records()
        assert not [r for r in records if r["level"] in ("ERROR", "CRITICAL")]
        assert "Traceback" not in solver.log_path.read_text()
    # keys never reach a log: neither the env-var keys nor the keystore's
    for process, account in ((solvers[0], 1), (solvers[1], 3), (verifier, 2)):
        assert dev_private_key(account + 1)[2:] not in process.log_path.read_text()
    status = subprocess.run(
        [sys.executable, "-m", "veritrain", "verifier", "status", "--rpc", market.net.rpc_url, "--address-book-dir", str(market.book_dir),
         "--data-dir", str(market.root / "verifier"), "--address", market.account(2).address, "--json"],
        cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert status.returncode == 0, status.stderr
    report = json.loads(status.stdout)
    assert report["daemon"]["running"] is True and report["daemon"]["ticks"] > 0
    assert {a["job_id"] for a in report["assignments"]} <= set(jobs)  # final jobs are forgotten
    dropped = [r for s in solvers for r in s.log_records() if r["msg"] == ACTION_DROPPED and r["action"] == "Claim"]
    for record in dropped:  # a lost claim says which precondition failed
        assert "WrongState" in str(record["error"]) or "TransactionFailed" in str(record["error"])


def test_solver_killed_mid_training_resumes_and_finishes(market: Market, tmp_path: Path) -> None:
    market.daemon("verifier", 2, "verifier", "--duty-grace", "5")
    solver = market.daemon("solver", 1, "solver")
    job_id = _post(market, tmp_path / "job", steps=3000, checkpoint_interval=100)
    records = Deployment.of(market.protocol()).data_dir(market.root / "solver")  # one directory per deployment
    db_path = state_dir(records, market.account(1).address) / "state.sqlite"

    def checkpoints_on_record() -> int:
        if not db_path.exists():
            return 0
        with sqlite3.connect(f"file:{db_path}?mode=ro", uri=True) as conn:
            try:
                return int(conn.execute("SELECT COUNT(*) FROM checkpoints WHERE job_id = ?", (job_id,)).fetchone()[0])
            except sqlite3.OperationalError:  # schema not created yet
                return 0

    wait_for("a few checkpoints on record", lambda: checkpoints_on_record() >= 4, 120, market)
    solver.kill()  # SIGKILL: no cleanup runs
    assert _state(market, job_id) is JobState.CLAIMED
    kept = checkpoints_on_record()
    assert 4 <= kept < 31

    restarted = market.daemon("solver", 1, "solver", run=2)  # same key, same state directory
    wait_for("job finalized after the restart", lambda: _state(market, job_id) is JobState.FINALIZED, 240, market)

    after_restart = restarted.log_records()
    resumed = [r for r in after_restart if r["msg"] == TRAINING_RESUMED]
    assert resumed and int(resumed[0]["checkpoint"]) == kept - 1  # from the last checkpoint on record
    assert not [r for r in after_restart if r["msg"] == TRAINING_STARTED]  # not from scratch
    protocol = market.protocol()
    assert len(protocol.market.events("JobClaimed", protocol.book.deploy_block, jobId=job_id)) == 1
    assert protocol.market.events("SolverTimedOut", protocol.book.deploy_block, jobId=job_id) == []
