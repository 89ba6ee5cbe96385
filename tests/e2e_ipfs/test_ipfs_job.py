"""The honest job flow end to end on a real IPFS node: every byte between the parties moves through IPFS.

A throwaway offline js-ipfs daemon (deploy.jsipfs.JsIpfsNode) stands in for Kubo;
anvil runs the demo's market parameters at a block a second. The submitter posts a
tiny job with its spec and dataset added to the node, a solver daemon and a verifier
daemon run as real processes with ``--ipfs-api URL`` (no local store), and the job is
followed to FINALIZED. Then: every CID the parties committed to on chain (manifest,
final model, each checkpoint, the verifier's report) is held and pinned by the node,
the model fetched through IPFS is verified against its CID and scores on the held-out
split, and no daemon created a local store.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.contracts import JobId, JobState
from core.storage import IpfsStore, file_cid
from deploy.build import build
from deploy.devnet import Devnet
from deploy.jsipfs import JsIpfsNode
from proofs.manifest import parse_manifest
from rolebase.events import REPLAY_DONE
from submitter import service
from submitter.demo_job import build_demo_job, evaluate_model
from submitter.timeline import job_timeline
from veritrain.localnet import LocalNet, start_local_net

MAX_JSON = 1 << 20


@pytest.fixture(scope="module")
def ipfs_node() -> Iterator[JsIpfsNode]:
    with JsIpfsNode() as node:
        yield node


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Devnet, Path]]:
    build()
    root = tmp_path_factory.mktemp("e2e-ipfs")
    with start_local_net(root, accounts=3) as local:
        yield local.net, root


def test_job_finalized_with_all_content_on_ipfs(ipfs_node: JsIpfsNode, devnet: tuple[Devnet, Path], tmp_path: Path) -> None:
    net, root = devnet
    store = IpfsStore(ipfs_node.api_url, lookup_timeout=5)
    submitter = net.protocol(net.accounts[0])
    job = build_demo_job("tiny", tmp_path / "job")
    posted = service.post_job(submitter, store, job.spec_path, job.data_path, job.reward, job.fee, job.commit_window)
    assert store.stat(posted.dataset_cid).pinned and store.stat(posted.spec_cid).pinned
    assert posted.dataset_cid == file_cid(job.data_path.read_bytes())

    # daemons whose content store is the IPFS node (``--ipfs-api`` instead of ``--store-dir``)
    local = LocalNet(net, root, root / "unused", root / "deployments", poll=0.3, ipfs_api=ipfs_node.api_url)
    try:
        daemons = [local.daemon("solver", 1, "solver"), local.daemon("verifier", 2, "verifier")]
        deadline = time.monotonic() + 150
        state = JobState.OPEN
        while time.monotonic() < deadline:
            state = submitter.market.get_job(posted.job_id).state
            if state.final:
                break
            dead = [d for d in daemons if not d.running]
            if dead:
                pytest.fail(f"{dead[0].name} daemon exited:\n{dead[0].log_tail()}")
            time.sleep(0.3)
        tails = "\n".join(f"--- {d.name}\n{d.log_tail()}" for d in daemons)
        assert state is JobState.FINALIZED, f"job {posted.job_id} is {state.name}\n{tails}"
        records = {d.name: d.log_records() for d in daemons}
    finally:
        local.stop_daemons(timeout=10)

    # what the solver committed on chain is on the node, pinned, and consistent
    chain_job = submitter.market.get_job(posted.job_id)
    done = service.commitment(submitter, JobId(posted.job_id), chain_job)
    assert done is not None
    manifest = parse_manifest(store.get(done.manifest_cid, MAX_JSON))
    assert manifest.root == done.trace_root == chain_job.trace_root
    assert len(manifest.checkpoints) == done.checkpoint_count == 11  # tiny: 200 steps, k = 20
    for cid in (done.manifest_cid, done.final_model_cid, *(c.cid for c in manifest.checkpoints)):
        assert store.stat(cid).pinned, f"{cid} not pinned on the IPFS node"

    # the verifier fetched from IPFS and replayed; its report is on the node too
    report_event = next(e for e in job_timeline(submitter, JobId(posted.job_id)) if e.event == "ReportSubmitted")
    assert report_event.args["passed"] is True
    report = json.loads(store.get(report_event.args["reportCid"], MAX_JSON))
    assert report
    assert any(r.get("msg") == REPLAY_DONE for r in records["verifier"]), "the verifier logged no replay"

    # the model, fetched through IPFS, is the committed one and it learned
    model_path = tmp_path / "model.safetensors"
    cid, size = service.fetch_model(submitter, store, posted.job_id, model_path)
    assert cid == done.final_model_cid == file_cid(model_path.read_bytes()) and size == model_path.stat().st_size
    metric = evaluate_model(job, model_path, posted.dataset_cid)
    assert metric["test_accuracy"] > 0.5, metric

    # no daemon fell back to a local store
    for role in ("solver", "verifier"):
        assert not list((root / role).rglob("blobs")), f"the {role} daemon wrote a local store"
    assert not (root / "unused").exists()
