"""The dashboard's chain index and page data on a real anvil: incremental scans, jobs by state,
a job's timeline with gas and its spec from the store, an account's stakes; and the vendored uPlot."""

from __future__ import annotations

import hashlib
from pathlib import Path

from core.contracts import JobId, Role
from core.storage import LocalStore
from deploy.devnet import Devnet
from submitter import service
from submitter.demo_job import build_demo_job
from tests.conftest import Parties
from veritrain.dashboard.index import ChainIndex
from veritrain.dashboard.views import Views

ROOT = Path(__file__).resolve().parents[2]
STATIC = ROOT / "veritrain" / "dashboard" / "static"
#: uPlot 1.6.32 from npm (dist/uPlot.iife.min.js, dist/uPlot.min.css, LICENSE), vendored unchanged.
UPLOT_SHA256 = {
    "uPlot.iife.min.js": "19c8d4c6ad88929a79f4ae49d6f7161566dfd0ba3d15cc495e974f787eb78f1f",
    "uPlot.min.css": "df630c6a8d6f8eeaff264b50f73ce5b114f646ffd9a0bb74f049b0a00135fa04",
    "uPlot.LICENSE": "8f989229699b4fe2f1a0432d0e9edc338a8a911e250e2d1b01ecd770a5f5b1bd",
}


def _post(devnet: Devnet, parties: Parties, store: LocalStore, folder: Path) -> JobId:
    job = build_demo_job("tiny", folder)
    return service.post_job(devnet.protocol(parties.submitter), store, job.spec_path, job.data_path, job.reward, job.fee, job.commit_window).job_id


def test_the_index_follows_new_blocks_without_rescanning(devnet: Devnet, parties: Parties, tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    index = ChainIndex(devnet.protocol())
    views = Views(index, store)
    index.advance()
    before = views.network()["total_jobs"]
    first = _post(devnet, parties, store, tmp_path / "a")
    protocol = devnet.protocol(parties.solver)
    stake = protocol.stakes.min_stake(Role.SOLVER) * 10
    protocol.token.approve(protocol.stakes.address, stake)
    protocol.stakes.stake(Role.SOLVER, stake)
    assert index.advance() and not index.advance()  # a second call with no new block reads nothing

    scanned = index.head
    second = _post(devnet, parties, store, tmp_path / "b")
    protocol.market.claim(second)
    index.advance()
    assert index.head > scanned
    page = views.network()
    assert page["total_jobs"] == before + 2
    assert page["counts"]["OPEN"] >= 1 and page["counts"]["CLAIMED"] >= 1
    assert [j["id"] for j in page["jobs"]][:2] == [second, first]  # newest first
    assert {j["id"]: j["state"] for j in page["jobs"]}[second] == "CLAIMED"
    assert views.network("CLAIMED")["jobs"][0]["id"] == second
    solvers = {a["address"]: a for a in page["actors"]["solver"]}
    assert solvers[parties.solver.address]["locked"] != "0"  # the claim's bond, locked without a StakeManager event

    job = views.job(second)
    assert job is not None
    assert [e["event"] for e in job["timeline"]] == ["JobPosted", "JobClaimed"]
    assert all(e["gas_used"] > 21_000 for e in job["timeline"])
    assert job["spec"]["fields"]["steps"] == 200 and job["spec"]["fields"]["checkpoint_interval"] == 20
    assert job["spec"]["kind"] == "mlp" and job["spec"]["size"]["segments"] == 10 and job["spec"]["size"]["parameters"] > 4000
    assert views.job(JobId(10_000)) is None

    account = views.address(parties.solver.address)
    assert account["stakes"]["solver"]["locked"] != "0"
    assert second in account["jobs"]["solved"] and account["earnings"] == []


def test_the_vendored_uplot_is_the_pinned_npm_release() -> None:
    for name, digest in UPLOT_SHA256.items():
        assert hashlib.sha256((STATIC / name).read_bytes()).hexdigest() == digest, name
    npm = ROOT / "node_modules" / "uplot"
    if npm.is_dir():  # once package.json pins it: the served files are the npm package's, byte for byte
        assert (STATIC / "uPlot.iife.min.js").read_bytes() == (npm / "dist" / "uPlot.iife.min.js").read_bytes()
        assert (STATIC / "uPlot.min.css").read_bytes() == (npm / "dist" / "uPlot.min.css").read_bytes()
        assert '"version": "1.6.32"' in (npm / "package.json").read_text()
