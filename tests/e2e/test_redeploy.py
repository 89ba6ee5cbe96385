"""A new participant's journey from `wallet new` to `earnings`, and a devnet restarted (redeployed)
under its running daemon: local records are per deployment.

The participant's solver is three commands: ``wallet new``, ``init solver`` (funds it on the devnet and
stakes the minimum) and ``solver run --account``; ``earnings`` then shows the reward of its job.

The restarted devnet deploys the same contracts at the same addresses and numbers its jobs from 1
again; daemons that kept records by job id alone ignored the new job 1 (the solver's ``claimed``,
the verifier's ``final_jobs``) and the verifier was slashed for the timeout. Here the daemons
notice the new deployment, build themselves again over fresh records (the old kept), and the
new chain's job 1 is claimed, verified and finalized with nobody slashed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

from core.contracts import JobId, JobState, Role
from deploy.anvil import free_port
from deploy.build import build
from deploy.devnet import start_devnet
from rolebase.deployment import Deployment
from rolebase.events import DEPLOYMENT_CHANGED
from submitter import service
from submitter.demo_job import DemoJob, build_demo_job
from tests.e2e.conftest import Market, wait_for
from veritrain.localnet import DaemonKey, local_params


def _post_and_finalize(market: Market, folder: Path) -> tuple[JobId, DemoJob]:
    job = build_demo_job("tiny", folder)
    submitter = market.protocol(market.account(0))
    job_id = service.post_job(submitter, market.store, job.spec_path, job.data_path, job.reward, job.fee, job.commit_window).job_id
    wait_for(f"job {job_id} finalized", lambda: market.protocol().market.get_job(job_id).state is JobState.FINALIZED, 240, market)
    return job_id, job


def test_new_participant_earns_then_devnet_restarts_under_running_daemons(tmp_path: Path) -> None:
    build()
    port, book_dir = free_port(), tmp_path / "deployments"
    net = start_devnet(book_dir=book_dir, port=port, accounts=3, params=local_params())
    market = Market(net, tmp_path, tmp_path / "store", book_dir, poll=0.3)
    password = tmp_path / "password"
    password.write_text("a participant's password\n")
    keys = ("--data-dir", str(tmp_path / "solver"), "--password-file", str(password))

    def veritrain(*args: str) -> subprocess.CompletedProcess[str]:
        result = subprocess.run([sys.executable, "-m", "veritrain", *args, "--rpc-url", net.rpc_url, "--address-book-dir", str(book_dir)],
                                capture_output=True, text=True, timeout=120)  # fmt: skip
        assert result.returncode == 0, result.stderr
        return result

    try:
        net.client.rpc("evm_setIntervalMining", [1])
        created = subprocess.run([sys.executable, "-m", "veritrain", "wallet", "new", "solver", *keys, "--json"], capture_output=True, text=True, timeout=60)
        assert created.returncode == 0, created.stderr
        me = json.loads(created.stdout)["address"]
        assert "run it:  veritrain solver run --account solver" in veritrain("init", "solver", "--account", "solver", *keys).stdout
        assert market.protocol().stakes.stake_of(me, Role.SOLVER).staked == market.protocol().stakes.min_stake(Role.SOLVER)
        solver = market.daemon("solver", DaemonKey(("--account", "solver", "--password-file", str(password)), {}, me), "solver")
        verifier = market.daemon("verifier", 2, "verifier", "--duty-grace", "5")
        first = Deployment.of(market.protocol())
        job_id, job = _post_and_finalize(market, tmp_path / "job-a")
        assert job_id == 1
        earned = json.loads(veritrain("earnings", me, "--json").stdout)
        reward = market.protocol().market.get_job(JobId(1)).reward
        assert [(e["job"], e["amount"]) for e in earned["entries"]] == [(1, str(reward))] and earned["total"] == str(reward)

        # the model it trained, usable: exported, loaded with the documented line, scored as `model eval` scores it
        store = ("--store-dir", str(market.store_dir))
        veritrain("submit", "fetch", "1", "--spec", str(tmp_path / "posted-spec.json"), *store)
        assert json.loads((tmp_path / "posted-spec.json").read_text())["dataset"]["size_bytes"] == job.data_path.stat().st_size
        veritrain("model", "export", "1", "--out", str(tmp_path / "model"), *store)
        held_out = tmp_path / "held-out.safetensors"
        held_out.write_bytes(job.test_data)
        scored = subprocess.run([sys.executable, "-m", "veritrain", "model", "eval", str(tmp_path / "model"), "--data", str(held_out), "--json"],
                                capture_output=True, text=True, timeout=120)  # fmt: skip
        assert scored.returncode == 0, scored.stderr
        model = torch.export.load(str(tmp_path / "model" / "model.pt2")).module()  # the line docs/cli.md gives
        tensors = load_file(str(held_out))
        accuracy = float((model(tensors["x"]).argmax(dim=1) == tensors["y"].long()).double().mean())
        assert json.loads(scored.stdout)["accuracy"] == accuracy > 0.5  # three classes: it learned

        net.stop()  # the devnet restarts on the same port: same addresses, job ids from 1 again
        net = market.net = start_devnet(book_dir=book_dir, port=port, accounts=3, params=local_params())
        net.client.rpc("evm_setIntervalMining", [1])
        second = Deployment.of(market.protocol())
        assert second.market == first.market and second.key != first.key
        veritrain("init", "solver", "--account", "solver", *keys)  # the new chain has not funded the participant

        assert _post_and_finalize(market, tmp_path / "job-b")[0] == 1  # the new job 1, as on the old chain
        protocol = market.protocol()
        start = protocol.book.deploy_block
        assert protocol.stakes.events("StakeSlashed", start) == []
        assert protocol.market.events("VerifierTimedOut", start) == [] and protocol.market.events("SolverTimedOut", start) == []
        for process, name in ((solver, "solver"), (verifier, "verifier")):
            assert process.running
            assert any(r["msg"] == DEPLOYMENT_CHANGED for r in process.log_records())
            records = tmp_path / name / "deployments"
            assert {p.name for p in records.iterdir()} == {first.key, second.key}  # the old records are kept
    finally:
        market.stop_daemons(timeout=10)
        net.stop()
