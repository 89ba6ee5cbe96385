"""A solver under a disk budget (``--disk-budget``, solver.retention), with real daemons on anvil.

It keeps 6 of its 151 checkpoints and the room the verifier's draw needs; once the verifier is
drawn it regenerates the draw's dropped checkpoints (each checked against its committed leaf before
it is stored); any the verifier misses meanwhile it challenges on chain, and the solver answers by
regenerating it. The job passes and is paid as usual: nothing the solver committed goes missing.
"""

from __future__ import annotations

import json
from pathlib import Path

from core.contracts import JobState
from rolebase.events import REPLAY_DONE
from solver.retention import COPIES, SERVE_SLOTS, draw_size
from submitter import service
from submitter.demo_job import build_demo_job
from tests.e2e.conftest import Market, wait_for
from tests.e2e.disputes import wealth

E2E_ACCOUNTS = 3  # the submitter, the solver, the verifier
SUBMITTER, SOLVER, VERIFIER = 0, 1, 2
STEPS, K = 300, 2  # 150 segments of the tiny job's model
CHECKPOINT_BYTES = 37_552  # mlp-spirals with momentum SGD, at any step


def test_a_solver_under_a_disk_budget_serves_every_checkpoint_its_verifier_needs(market: Market, tmp_path: Path) -> None:
    protocol = market.protocol()
    deploy = protocol.book.deploy_block
    count = STEPS // K + 1
    budget = COPIES * CHECKPOINT_BYTES * (SERVE_SLOTS + draw_size(count, protocol.market.params().probe_count) + 6)
    before = {i: wealth(protocol, market.account(i).address) for i in (SOLVER, VERIFIER)}
    market.daemon("verifier", VERIFIER, "verifier", "--stake", "200", "--duty-grace", "5", "--poll", "0.5")
    solver = market.daemon("solver", SOLVER, "solver", "--disk-budget", str(budget), "--poll", "0.5")
    job = build_demo_job("tiny", tmp_path / "job", steps=STEPS, checkpoint_interval=K)
    submitter = market.protocol(market.account(SUBMITTER))
    job_id = service.post_job(submitter, market.store, job.spec_path, job.data_path, job.reward, job.fee, job.commit_window).job_id

    wait_for("the job finalized", lambda: protocol.market.get_job(job_id).state is JobState.FINALIZED, 400, market)
    (report,) = protocol.market.events("ReportSubmitted", deploy, jobId=job_id)
    assert report.args["passed"]
    assert not protocol.market.events("AvailabilityTimedOut", deploy, jobId=job_id)
    answered = protocol.market.events("AvailabilityAnswered", deploy, jobId=job_id)
    assert all(a.args["answerer"] == market.account(SOLVER).address for a in answered)
    lines = [json.loads(line) for line in solver.log_path.read_text().splitlines() if line.startswith("{")]
    regenerated = {line["index"] for line in lines if line.get("msg") == "checkpoint regenerated" and line.get("job") == job_id}
    assert regenerated, "dropped checkpoints were regenerated for the verifier"
    assert len(regenerated) < count - 6, "not every checkpoint: only what was asked for"
    finished = protocol.market.get_job(job_id)
    assert wealth(protocol, market.account(SOLVER).address) - before[SOLVER] == finished.reward + len(answered) * protocol.market.params().availability_deposit
    verifier_log = (market.root / "logs" / "verifier.log").read_text()
    assert REPLAY_DONE in verifier_log
    for process in market.processes:
        assert process.running, process.name
        assert "Traceback" not in process.log_path.read_text(), process.name
