"""`veritrain up`, for real: a local network started as a process, a job posted against it with
`veritrain submit post`, finalized by its daemons; then Ctrl-C stops every process and exits 0."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from core.address_book import AddressBook
from core.chain import ChainClient
from core.contracts import JobId, JobState, Protocol, Role
from core.storage import LocalStore
from deploy.anvil import free_port
from deploy.build import build
from submitter.curve import job_curve
from submitter.demo_job import build_demo_job
from tests.e2e.conftest import gone, wait_for

ROOT = Path(__file__).resolve().parents[2]


def _dashboard_state(url: str, job_id: JobId) -> str | None:
    try:
        with urllib.request.urlopen(f"{url}/api/job/{job_id}", timeout=5) as reply:
            return str(json.loads(reply.read())["state"])
    except (OSError, KeyError, ValueError):
        return None  # not up yet, or the job not indexed yet


def test_up_runs_a_network_that_finalizes_a_posted_job_and_ctrl_c_stops_it(tmp_path: Path) -> None:
    build()
    workdir = tmp_path / "net"
    port = free_port()
    up = subprocess.Popen(
        [sys.executable, "-m", "veritrain", "up", "--solvers", "1", "--verifiers", "1", "--whistleblowers", "1", "--workdir", str(workdir),
         "--dashboard", str(port), "--json"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert up.stdout is not None
        line = up.stdout.readline()  # printed once every daemon is staked
        assert line, up.stderr.read() if up.stderr else ""
        info = json.loads(line)
        daemons = info["daemons"]
        assert [(d["name"], d["role"]) for d in daemons] == [
            ("solver1", "solver"),
            ("verifier1", "verifier"),
            ("whistleblower1", "whistleblower"),
            ("dashboard", "dashboard"),
        ]
        assert info["dashboard_url"] == f"http://127.0.0.1:{port}" and daemons[-1]["address"] is None
        assert info["store_dir"] == str(workdir / "store") and info["rpc_url"].endswith(f":{info['port']}")
        client = ChainClient(info["rpc_url"])
        assert client.chain_id == info["chain_id"]
        book = AddressBook.for_chain(Path(info["address_book_dir"]), client)
        assert {name: c.address for name, c in book.contracts.items()} == info["contracts"]
        protocol = Protocol.connect(client, book)
        for d in daemons[:-1]:  # running, staked, logging where it says
            assert not gone(d["pid"]) and Path(d["log_file"]).exists() and Path(d["state_dir"]).is_dir()
            role = {"solver": Role.SOLVER, "verifier": Role.VERIFIER, "whistleblower": Role.WHISTLEBLOWER}[d["role"]]
            assert protocol.stakes.stake_of(d["address"], role).staked >= protocol.stakes.min_stake(role) > 0

        # a submitter posts a job with the CLI, against what the JSON says
        me = info["accounts"][0]
        job = build_demo_job("tiny", tmp_path / "job")
        posted = subprocess.run(
            [sys.executable, "-m", "veritrain", "submit", "post", str(job.spec_path), "--data", str(job.data_path), "--reward", "10", "--fee", "2",
             "--commit-window", str(job.commit_window), "--rpc-url", info["rpc_url"], "--address-book-dir", info["address_book_dir"],
             "--store-dir", info["store_dir"], "--key-env", "VT_UP_SUBMITTER_KEY", "--json"],
            cwd=ROOT, env={**os.environ, "VT_UP_SUBMITTER_KEY": me["private_key"]}, capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert posted.returncode == 0, posted.stderr
        job_id = JobId(int(json.loads(posted.stdout)["job_id"]))
        wait_for(f"job {job_id} finalized", lambda: protocol.market.get_job(job_id).state is JobState.FINALIZED, 240)
        assert protocol.market.get_job(job_id).solver == daemons[0]["address"]
        # the network's dashboard shows the job finalized (it reads the chain a block behind at most)
        wait_for("the dashboard to show the job FINALIZED", lambda: _dashboard_state(info["dashboard_url"], job_id) == "FINALIZED", 120)
        # its training curve is the committed one, loss for loss
        with urllib.request.urlopen(f"{info['dashboard_url']}/api/job/{job_id}", timeout=10) as reply:
            shown = json.loads(reply.read())["curve"]["series"]["mean training loss"]
        committed = job_curve(protocol, LocalStore(Path(info["store_dir"])), job_id)
        assert committed is not None and shown == [p.loss for p in committed.points] and len(shown) >= 2

        up.send_signal(signal.SIGINT)  # Ctrl-C
        _, err = up.communicate(timeout=60)
        assert up.returncode == 0, err
        assert "stopped every daemon and the chain" in err
        assert all(gone(pid) for pid in (info["anvil_pid"], *(d["pid"] for d in daemons)))  # the dashboard too
        assert (workdir / "logs" / "verifier1.log").stat().st_size > 0  # the workdir stays, with the logs
    finally:
        if up.poll() is None:
            up.kill()
            up.wait()
