"""A GPT-2-small job (124M parameters, AdamW) on a mainnet-sized devnet, honest and withheld (issue 26).

    .venv/bin/python -m bench.gpt2_small [--job gpt2-small] [--steps N] [--part honest|withheld|both]

Both parts run on anvil with its default blocks of 30M gas, where a solver can publish at most
487 KiB while each checkpoint of this job is about 1.49 GB (weights and AdamW's two moments).

1. **honest**: the ``veritrain demo`` machinery (``veritrain.demo.run_demo``: submitter, solver,
   verifier and whistleblower daemons, one shared store): the job is claimed, trained, verified and
   finalized. Reported: wall time, the gas of every call, the model's bytes, the bytes the store
   holds at the end (every checkpoint uploaded once) and the disk the whole run used.
2. **withheld**: a solver commits a trace of the job's checkpoints (checkpoint 0 of the spec, then
   copies of its size made distinct) and serves only its manifest, through a real gateway; the
   verifier names every checkpoint its replay needs in one court case; a committee of three fetches
   from the solver's gateway, finds them withheld and votes; the solver loses its bond. Reported: the
   gas of each call, the bytes the committee moved and the wall time.

``--job gpt-tiny`` runs both in about a minute on a laptop (the CPU run in docs/protocol.md);
the full ``--job gpt2-small`` needs about 8 GiB of memory for training, 6 GB of disk per copy of the
trace and hours of CPU: it is to be run on a bigger machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from core.availability import Availability, ContentPending, ContentUnavailable, Wanted, challenge
from core.cid import cid_to_digest
from core.contracts import CaseStatus, JobState, Role
from core.storage import LocalStore
from core.storage.gateway import GatewayServer
from core.storage.peers import FetchingStore
from deploy.devnet import start_devnet
from proofs.checkpoint import state_hash
from proofs.data import load_dataset
from proofs.manifest import parse_manifest
from proofs.merkle import TraceTree, hex32
from proofs.replay import initial_state
from proofs.spec import Limits
from rolebase.court import CourtDuty, CourtWatcher, court_moves
from rolebase.watchers import MarketWatcher
from submitter.demo_job import build_demo_job, posted_spec
from veritrain.demo import run_demo

SEGMENTS = 2  # the withheld trace: checkpoints 0, 1, 2
#: The honest run's market windows over the demo's: a CPU trains and replays a 124M job for an hour
#: or more (the solver sizes its commit window from its measured speed; the verifier replays it all).
BENCH_MARKET = {"maxCommitWindow": 6 * 3600, "reportWindow": 6 * 3600}


def _disk(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def honest(workdir: Path, job: str, steps: int | None, timeout_s: float) -> dict[str, Any]:
    started = time.monotonic()
    figures = run_demo(workdir / "honest", timeout_s, job, steps=steps, market=BENCH_MARKET, score=False)  # scoring 124M outlasts the job
    stores = [d for d in (workdir / "honest").rglob("blobs") if d.is_dir()]
    return {
        "state": figures["state"],
        "wall_s": round(time.monotonic() - started, 1),
        "gas": figures["gas"],  # by event: events of one transaction (JobFinalized, JackpotTaxed) show its gas each
        "model_bytes": figures["model"]["bytes"],
        "store_bytes": sum(_disk(d) for d in stores),
        "disk_bytes": _disk(workdir / "honest"),
    }


def _gas(client: Any, tx_hash: str) -> int:
    return int(client.rpc("eth_getTransactionReceipt", [tx_hash])["gasUsed"], 16)


def withheld(workdir: Path, job_name: str, steps: int | None) -> dict[str, Any]:
    """The court against a solver that serves its manifest and withholds the job's checkpoints."""
    started = time.monotonic()
    job = build_demo_job(job_name, workdir / "withheld-job", steps=steps)
    data = job.data_path.read_bytes()
    spec = posted_spec(job, LocalStore(workdir / "spec-store").put(data))
    first = initial_state(spec, load_dataset(spec, data))
    checkpoints = [first + i.to_bytes(8, "big") if i else first for i in range(SEGMENTS + 1)]
    with ExitStack() as stack:
        net = stack.enter_context(start_devnet(book_dir=workdir / "deployments", accounts=6))
        proto = net.protocol()
        sub, sol, ver, *members = net.accounts
        for who, role in ((sol, Role.SOLVER), (ver, Role.VERIFIER)):
            p = proto.with_signer(who)
            p.token.approve(p.stakes.address, p.stakes.min_stake(role))
            p.stakes.stake(role, p.stakes.min_stake(role))
        p = proto.with_signer(sub)
        reward, fee = 10 * 10**18, 2 * 10**18
        p.token.approve(p.market.address, reward + fee + p.market.jackpot_tax(reward, fee))
        job_id, _ = p.market.post_job(cid_to_digest(LocalStore(workdir / "spec-store").put(job.spec_path.read_bytes())), reward, fee, 600)
        proto.with_signer(sol).market.claim(job_id)
        served, hidden = LocalStore(workdir / "solver"), LocalStore(workdir / "withheld")
        cids = [hidden.put(c) for c in checkpoints]
        hashes = [state_hash(c) for c in checkpoints]
        doc = {
            "version": 2,
            "spec_cid": cids[0],
            "spec_hash": spec.spec_hash(),
            "steps": SEGMENTS * spec.checkpoint_interval,
            "checkpoint_interval": spec.checkpoint_interval,
            "root": hex32(TraceTree(hashes).root),
            "checkpoints": [{"index": i, "cid": c, "state_hash": hex32(h)} for i, (c, h) in enumerate(zip(cids, hashes))],
            "update_norms": [1.0] * SEGMENTS,
            "losses": [1.0] * SEGMENTS,
        }
        manifest = json.dumps(doc).encode()
        parse_manifest(manifest)
        manifest_cid = served.put(manifest)
        proto.with_signer(sol).market.commit(job_id, TraceTree(hashes).root, len(hashes), cid_to_digest(cids[-1]), cid_to_digest(manifest_cid))
        net.chain.mine(2)
        proto.with_signer(sub).market.assign_verifier(job_id)
        for m in members:  # staked after the verifier's draw, so that the drawn verifier is `ver`
            q = proto.with_signer(m)
            q.token.approve(q.stakes.address, q.stakes.min_stake(Role.VERIFIER))
            q.stakes.stake(Role.VERIFIER, q.stakes.min_stake(Role.VERIFIER))
        gateway = stack.enter_context(GatewayServer(served))
        verifier = proto.with_signer(ver)
        wanted = [Wanted(i, cids[i], Limits.CHECKPOINT_BYTES, f"checkpoint {i}", hashes[i]) for i in range(1, SEGMENTS + 1)]
        availability = Availability(verifier, FetchingStore(LocalStore(workdir / "verifier"), [gateway.url]))
        while True:  # the verifier waits AVAILABILITY_WAIT_S for content on its way, then challenges
            try:
                availability.gather(job_id, wanted, proto.market.get_job(job_id).deadline)
            except ContentPending:
                time.sleep(1)
                continue
            except ContentUnavailable as lacking:
                challenge(verifier, ver.address, lacking)
            break
        duties = [
            CourtDuty(
                proto.with_signer(m).court,
                proto.book.deploy_block,
                FetchingStore(LocalStore(workdir / f"member-{i}"), [gateway.url]),
                m.address,
                _secret(),
                MarketWatcher(proto.market, proto.book.deploy_block),
            )
            for i, m in enumerate(members)
        ]
        params = proto.court.params()
        for _ in range(12):
            net.chain.mine(2)
            for duty in duties:
                for move in court_moves(net.client.timestamp(), net.client.block_number(), duty.me, CourtWatcher(proto, duty.me).live(), params, 0):
                    duty.perform(move)
            if not CourtWatcher(proto, ver.address).live():
                break
        case_id = proto.court.case_count()
        case = proto.court.get_case(case_id)
        gas: dict[str, int] = {}
        for name in ("CaseOpened", "CommitteeDrawn", "VoteCommitted", "VoteRevealed", "CaseSettled"):
            for e in proto.court.events(name, proto.book.deploy_block, caseId=case_id):
                gas[name] = max(gas.get(name, 0), _gas(net.client, e.tx_hash))
        members_bytes = sum(_disk(workdir / f"member-{i}") for i in range(len(members)))
        return {
            "outcome": case.status.name,
            "job_state": proto.market.get_job(job_id).state.name,
            "solver_slashed": proto.stakes.stake_of(sol.address, Role.SOLVER).staked < proto.stakes.min_stake(Role.SOLVER),
            "checkpoint_bytes": len(first),
            "gas_max_per_call": gas,
            "committee_bytes_fetched": members_bytes,
            "wall_s": round(time.monotonic() - started, 1),
            "ok": case.status is CaseStatus.WITHHELD and proto.market.get_job(job_id).state is JobState.OPEN,
        }


def _secret() -> Any:
    secret = os.urandom(32)
    return lambda: secret


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--job", default="gpt2-small", help="a gpt demo job: gpt2-small (124M), or gpt-tiny for a short run")

    parser.add_argument("--steps", type=int, help="training steps, a multiple of the job's checkpoint interval (default: the job's)")
    parser.add_argument("--part", choices=("honest", "withheld", "both"), default="both")
    parser.add_argument("--timeout", type=float, default=6 * 3600, help="seconds the honest job may take to finalize")
    parser.add_argument("--keep", type=Path, help="keep the work directory here (default: a temporary one, removed)")
    args = parser.parse_args()
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="gpt2-small-"))
    out: dict[str, Any] = {"job": args.job, "steps": args.steps}
    try:
        if args.part in ("honest", "both"):
            out["honest"] = honest(workdir, args.job, args.steps, args.timeout)
        if args.part in ("withheld", "both"):
            out["withheld"] = withheld(workdir, args.job, args.steps)
    finally:
        if args.keep is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
