"""No duty waits behind long work (issue 25): real daemons on anvil, each busy when a deadline comes.

* A solver training a long job answers the availability challenge on its committed job in time (its
  training runs on a worker; the loop answers): before the workers, the challenge waited behind the
  whole training and the solver lost its bond.
* A verifier whose fetch is held by a gateway that answers 200 and then drips one byte every few seconds
  (a test adversary: :class:`tests.e2e.conftest.DripGateway`) challenges the item's availability once the fetch has run
  ``FETCH_STALL_S``: the loop decides, not the fetch, so its report clock stops in time.

Run with ``-s`` to see the latencies measured (docs/performance.md, "Duties while busy").
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from core.availability import FETCH_STALL_S
from core.cid import digest_to_cid
from core.contracts import MANIFEST_ITEM, JobId, JobState, Role
from core.storage import LocalStore
from rolebase.events import TRAINING_STARTED
from submitter import service
from submitter.demo_job import build_demo_job
from tests.e2e.conftest import LONG_JOB_WINDOW, DripGateway, Market, wait_for

E2E_ACCOUNTS = 4
#: The solver has 15 s to publish what its verifier challenged; a long job may take hours.
E2E_MARKET = {"availabilityWindow": 15, "maxCommitWindow": LONG_JOB_WINDOW}
SUBMITTER, SOLVER, VERIFIER, OTHER_SOLVER = 0, 1, 2, 3


def _post(market: Market, folder: Path, commit_window: int | None = None, **shape: int) -> JobId:
    job = build_demo_job("tiny", folder, **shape)
    submitter = market.protocol(market.account(SUBMITTER))
    return service.post_job(submitter, market.store, job.spec_path, job.data_path, job.reward, job.fee, commit_window or job.commit_window).job_id


def _log_ts(path: Path, msg: str, job_id: int) -> float | None:
    """The time of the first JSON log line ``msg`` about ``job_id``, if any."""
    for line in path.read_text().splitlines():
        if line.startswith("{"):
            entry = json.loads(line)
            if entry.get("msg") == msg and entry.get("job") == job_id:
                return float(entry["ts"])
    return None


def test_a_solver_training_a_long_job_answers_an_availability_challenge_in_time(market: Market, tmp_path: Path) -> None:
    protocol = market.protocol()
    deploy = protocol.book.deploy_block
    # the verifier's stake is fixed before the commit (a draw reads stakes as of it), but its daemon starts
    # only once the solver is training the long job: the challenge then meets a busy solver on any machine
    verifier = protocol.with_signer(market.account(VERIFIER))
    verifier.token.approve(verifier.stakes.address, 200 * 10**18)
    verifier.stakes.stake(Role.VERIFIER, 200 * 10**18)
    first = _post(market, tmp_path / "first")
    own = tmp_path / "solver-store"  # the solver's own store: its manifest never reaches the verifier's
    shutil.copytree(market.store_dir, own)
    solver = market.daemon("solver", SOLVER, "solver", "--store-dir", str(own), "--poll", "0.5")
    wait_for("the first claim", lambda: protocol.market.events("JobClaimed", deploy, jobId=first), 300, market)
    # long (many minutes on any machine: the test ends long before it does), claimed once the first is
    # committed; a window of a day, as a busy machine estimates high
    second = _post(market, tmp_path / "second", LONG_JOB_WINDOW, steps=200_000, checkpoint_interval=20_000)
    for blob in (market.store_dir / "blobs").iterdir():
        if not (own / "blobs" / blob.name).exists():
            shutil.copy2(blob, own / "blobs")
    committed = wait_for("the first commit", lambda: protocol.market.events("TraceCommitted", deploy, jobId=first), 240, market)[0]
    manifest = digest_to_cid(committed.args["manifestCid"])
    shared, solver_store = market.store, LocalStore(own)
    shared.unpin(manifest)
    (market.store_dir / "blobs" / manifest).unlink(missing_ok=True)
    for blob in (own / "blobs").iterdir():
        if blob.name != manifest and not shared.has(blob.name):
            shared.put(solver_store.get(blob.name, blob.stat().st_size))

    wait_for("the long job's training", lambda: _log_ts(solver.log_path, TRAINING_STARTED, int(second)), 300, market)
    market.daemon("verifier", VERIFIER, "verifier", "--stake", "200", "--duty-grace", "5", "--poll", "0.5")
    answered = wait_for("the answer", lambda: protocol.market.events("AvailabilityAnswered", deploy, jobId=first), 180, market)[0]
    (challenged,) = protocol.market.events("AvailabilityChallenged", deploy, jobId=first)
    assert challenged.args["item"] == answered.args["item"] == MANIFEST_ITEM
    latency = protocol.client.timestamp(answered.block_number) - protocol.client.timestamp(challenged.block_number)
    assert latency <= 15, f"answered {latency} s after the challenge, the window is 15 s"
    finished = _log_ts(solver.log_path, "training finished", int(second))
    answered_at = protocol.client.timestamp(answered.block_number)
    assert finished is None or finished > answered_at, "the long job's training was still running at the answer"
    print(f"\navailability answer while training another job: {latency} s after the challenge (window 15 s)")
    assert protocol.market.events("AvailabilityTimedOut", deploy, jobId=first) == [], "the solver kept its bond"
    assert protocol.market.get_job(second).state is JobState.CLAIMED  # still training: never timed out
    for process in market.processes:
        assert process.running, process.name
        assert "Traceback" not in process.log_path.read_text(), process.name


def test_a_verifier_whose_fetch_a_gateway_drips_challenges_in_time(market: Market, tmp_path: Path, drip: DripGateway) -> None:
    protocol = market.protocol()
    deploy = protocol.book.deploy_block
    submitter = protocol.with_signer(market.account(SUBMITTER))
    for job_id in range(1, protocol.market.job_count() + 1):  # an earlier test's long job
        if protocol.market.get_job(JobId(job_id)).state is JobState.OPEN:
            submitter.market.cancel(JobId(job_id))
    # not the first test's job: its manifest (the same bytes for the same spec) was published on chain
    # there, and a copy published for any job is taken (JobMarket.published), so the drip would go unasked
    job_id = _post(market, tmp_path / "job", steps=220)
    own = tmp_path / "verifier-store"  # spec and dataset only: the trace comes from its peer, the drip
    shutil.copytree(market.store_dir, own)
    market.daemon("solver", OTHER_SOLVER, "solver", "--poll", "0.5")  # the first test's solver still owes its long job
    verifier = market.daemon(
        "verifier", VERIFIER, "verifier", "--store-dir", str(own), "--peer", drip.url, "--stake", "200", "--duty-grace", "5", "--poll", "0.5"
    )
    assigned = wait_for("the draw", lambda: protocol.market.events("VerifierAssigned", deploy, jobId=job_id), 240, market)[0]
    assert assigned.args["verifier"] == market.account(VERIFIER).address
    challenged = wait_for("the challenge", lambda: protocol.market.events("AvailabilityChallenged", deploy, jobId=job_id), 120, market)[0]
    assert drip.requests >= 1, "the verifier asked the dripping gateway"
    assert challenged.args["challenger"] == market.account(VERIFIER).address
    after_s = protocol.client.timestamp(challenged.block_number) - protocol.client.timestamp(assigned.block_number)
    deadline = int(assigned.args["deadline"])
    assert protocol.client.timestamp(challenged.block_number) < deadline, "challenged before its report deadline"
    assert after_s < FETCH_STALL_S + 30, f"challenged {after_s} s after the draw"
    print(f"\nstalled fetch challenged {after_s} s after the draw (stall limit {FETCH_STALL_S:.0f} s)")
    wait_for("the published item", lambda: protocol.market.events("AvailabilityAnswered", deploy, jobId=job_id), 60, market)
    assert protocol.market.get_job(job_id).state in (JobState.VERIFYING, JobState.DATA_CHALLENGED), "the verifier was not timed out"
    assert verifier.running
    assert "Traceback" not in verifier.log_path.read_text()
