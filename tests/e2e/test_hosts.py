"""Every party on its own host (issue 13): chain, submitter, solver, verifier and whistleblower each in a
network namespace of its own (its own address, ports and loopback), with its own state and store
directories; nothing is shared but the network. Content crosses hosts only through the parties'
gateways (``--serve``, ``submit serve``), announced on chain and found there (no ``--peer``), every
byte verified by CID.

The hosts and their daemons are tests/e2e/hosts.py's. Needs root and iproute2 (deploy/netns.py); skips
with the reason elsewhere. Run with ``-s`` to see the figures it measures (commit to the verifier
holding the checkpoints it sampled).
"""

from __future__ import annotations

import json
from pathlib import Path

from core.cid import digest_to_cid
from core.contracts import GameId, GameStatus, JobId, JobState, Role
from core.storage.peers import GatewayFetcher
from deploy.devnet import Devnet
from submitter.demo_job import build_demo_job
from tests.e2e.disputes import settled
from tests.e2e.hosts import NEEDS_HOSTS, Party, assert_no_traceback, daemon, host_fixtures, serve_submitter, until, wait_staked

pytestmark = NEEDS_HOSTS

#: Each host's funded dev account; the referees are verifiers, drawn to a dispute's committee.
ACCOUNTS = {"submitter": 0, "solver": 1, "verifier": 2, "whistleblower": 3, "referee4": 4, "referee5": 5, "referee6": 6}
hosts, chain, parties = host_fixtures(ACCOUNTS)


def _post(net: Devnet, sub: Party, folder: Path) -> dict[str, str]:
    job = build_demo_job("tiny", folder)
    posted = sub.run(
        ["submit", "post", str(job.spec_path), "--data", str(job.data_path), "--reward", "10", "--fee", "2", "--commit-window", str(job.commit_window),
         *sub.args(net.rpc_url), "--key-env", sub.key_var, "--json"]
    )  # fmt: skip
    assert posted.returncode == 0, posted.stderr
    return dict(json.loads(posted.stdout.splitlines()[-1]))


def test_an_honest_job_crosses_hosts_by_gateways_only(chain: tuple[Devnet, Path], parties: dict[str, Party], tmp_path: Path) -> None:
    net, _ = chain
    sub, solver, verifier = parties["submitter"], parties["solver"], parties["verifier"]
    serve_submitter(net, parties)
    for role in ("solver", "verifier", "whistleblower"):
        daemon(net, parties, role, role, *(["--duty-grace", "5"] if role == "verifier" else []))
    wait_staked(net, parties, {r: Role[r.upper()] for r in ("solver", "verifier", "whistleblower")})
    posted = _post(net, sub, tmp_path / "job")
    job_id = JobId(int(posted["job_id"]))
    protocol = net.protocol()
    until(f"job {job_id} finalized", lambda: protocol.market.get_job(job_id).state is JobState.FINALIZED, parties, 420)

    # the solver got the spec and the dataset from the submitter's host, and nothing else did
    assert set(solver.fetched(sub)) == {posted["spec_cid"], posted["dataset_cid"]}
    # the verifier got the manifest and the checkpoints it sampled from the solver's host, verified and kept
    start = protocol.book.deploy_block
    committed = protocol.market.events("TraceCommitted", start, jobId=job_id)[0]
    manifest = digest_to_cid(bytes(committed.args["manifestCid"]))
    from_solver = verifier.fetched(solver)
    sampled = set(from_solver) - {manifest, posted["spec_cid"], posted["dataset_cid"]}  # the checkpoints it replayed
    assert manifest in from_solver and sampled, from_solver
    assert all(verifier.store.stat(cid).pinned for cid in from_solver)
    report = protocol.market.events("ReportSubmitted", start, jobId=job_id)[0]
    assert report.args["passed"] is True
    # the verifier's report crosses to any host from its gateway
    report_cid = digest_to_cid(bytes(report.args["reportCid"]))
    assert GatewayFetcher(verifier.url).fetch(report_cid, 1 << 20) == verifier.store.get(report_cid, 1 << 20)
    # and the submitter takes its model from the solver's host
    model = tmp_path / "model.safetensors"
    fetched = sub.run(["submit", "fetch", str(job_id), "--out", str(model), *sub.args(net.rpc_url)])
    assert fetched.returncode == 0, fetched.stderr
    assert model.stat().st_size > 0 and sub.store.has(digest_to_cid(bytes(committed.args["finalModelCid"])))
    assert_no_traceback(parties)

    commit_at = protocol.client.timestamp(committed.block_number)
    held_at = max(from_solver[cid] for cid in sampled)
    print(f"\nseparate hosts: commit (block time {commit_at}) to the verifier holding its sampled checkpoints: {held_at - commit_at:.1f} s")


def test_a_cheating_solver_is_caught_across_hosts(chain: tuple[Devnet, Path], parties: dict[str, Party], tmp_path: Path) -> None:
    """The trace game of tests/e2e/test_false_loss.py, every party on its own host: the solver commits a
    prettier curve (``--cheat false-loss``), the verifier replays from the solver's gateway and opens the
    game, the referees (each on its own host) replay the disputed segment from checkpoints fetched from
    the gateways and rule against the solver, who loses its bond."""
    net, _ = chain
    protocol = net.protocol()
    serve_submitter(net, parties)
    daemon(net, parties, "verifier", "verifier", "--stake", "200", "--duty-grace", "5")
    wait_staked(net, parties, {"verifier": Role.VERIFIER})
    daemon(net, parties, "solver", "solver", "--cheat", "false-loss")
    posted = _post(net, parties["submitter"], tmp_path / "job")
    job_id = JobId(int(posted["job_id"]))
    verifier = net.accounts[parties["verifier"].account].address
    until("the verifier drawn", lambda: protocol.market.get_job(job_id).verifier == verifier, parties, 300)
    referees = ("referee4", "referee5", "referee6")
    for name in referees:
        daemon(net, parties, name, "verifier", "--stake", "200", "--duty-grace", "5")
    event = until("the game settled", lambda: settled(protocol, job_id), parties, 420)

    game = protocol.game.get_game(GameId(int(event.args["gameId"])))
    assert (game.status, game.by_verifier, game.challenger) == (GameStatus.CHALLENGER_WON, True, verifier)
    assert protocol.market.get_job(job_id).state is JobState.OPEN, "reopened with its escrow for another solver"
    solver = parties["solver"]
    assert parties["verifier"].fetched(solver), "the verifier replayed from the solver's gateway"
    assert any(parties[name].fetched(solver) or parties[name].fetched(parties["verifier"]) for name in referees), "a referee fetched from a gateway"
    assert_no_traceback(parties)
