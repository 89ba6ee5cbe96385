"""Every party on its own host (issue 13): chain, submitter, solver, verifier and whistleblower each in a
network namespace of its own (its own address, ports and loopback), with its own state and store
directories; nothing is shared but the network. Content crosses hosts only through the parties'
gateways (``--serve``, ``submit serve``), announced on chain and found there (no ``--peer``), every
byte verified by CID.

Needs root and iproute2 (deploy/netns.py); skips with the reason elsewhere. Run with ``-s`` to see the
figures it measures (commit to the verifier holding the checkpoints it sampled).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

from core.cid import digest_to_cid
from core.contracts import GameId, GameStatus, JobId, JobState, Role
from core.storage import LocalStore
from core.storage.peers import FETCHED_FROM_PEER, GatewayFetcher
from deploy.anvil import dev_private_key
from deploy.build import build
from deploy.devnet import Devnet, start_devnet
from deploy.netns import Host, Hosts, why_not
from submitter.demo_job import build_demo_job
from tests.e2e.conftest import wait_for
from tests.e2e.disputes import settled
from veritrain.localnet import RoleProcess, local_params

REASON = why_not()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"separate hosts cannot be made here: {REASON}")

PORT = 8080
#: Each host's funded dev account; the referees are verifiers, drawn to a dispute's committee.
ACCOUNTS = {"submitter": 0, "solver": 1, "verifier": 2, "whistleblower": 3, "referee4": 4, "referee5": 5, "referee6": 6}
REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T")


@dataclass
class Party:
    """One host: its namespace, its own directories, the processes started on it."""

    host: Host
    home: Path
    account: int
    processes: list[RoleProcess]

    @property
    def url(self) -> str:
        return f"http://{self.host.ip}:{PORT}"

    @property
    def store(self) -> LocalStore:
        return LocalStore(self.home / "store")

    @property
    def key_var(self) -> str:
        return f"VERITRAIN_{self.host.name.upper()}_KEY"

    def args(self, rpc_url: str) -> list[str]:
        """Its chain and its own directories: no ``--peer``, the gateways it fetches from are those announced on chain."""
        return [
            "--rpc",
            rpc_url,
            "--address-book-dir",
            str(self.home / "deployments"),
            "--data-dir",
            str(self.home / "data"),
            "--store-dir",
            str(self.home / "store"),
        ]

    def start(self, name: str, argv: list[str]) -> RoleProcess:
        process = RoleProcess(
            name,
            name,
            None,
            [*self.host.launcher, sys.executable, "-m", "veritrain", *argv],
            {self.key_var: dev_private_key(self.account + 1)},
            self.home,
            self.home / f"{name}.log",
        )
        self.processes.append(process.start())
        return process

    def run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, self.key_var: dev_private_key(self.account + 1)}
        return subprocess.run([*self.host.launcher, sys.executable, "-m", "veritrain", *argv], env=env, cwd=REPO, capture_output=True, text=True, timeout=300)

    def fetched(self, peer: Party) -> dict[str, float]:
        """CID -> log time of each item this party fetched from ``peer``'s gateway."""
        return {r["cid"]: r["ts"] for p in self.processes for r in p.log_records() if r.get("msg") == FETCHED_FROM_PEER and r.get("peer") == peer.url}


@pytest.fixture(scope="module")
def hosts() -> Iterator[Hosts]:
    with Hosts(["chain", *ACCOUNTS]) as made:
        yield made


@pytest.fixture
def chain(hosts: Hosts, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Devnet, Path]]:
    """A fresh chain on its own host for each test (no daemon of an earlier test left staked on it)."""
    build()
    root = tmp_path_factory.mktemp("hosts")
    net = start_devnet(
        book_dir=root / "deployments", port=8545, accounts=len(ACCOUNTS), params=local_params(), host=hosts["chain"].ip, launcher=hosts["chain"].launcher
    )
    try:
        net.client.rpc("evm_setIntervalMining", [1])
        yield net, root
    finally:
        net.stop()


@pytest.fixture
def parties(hosts: Hosts, chain: tuple[Devnet, Path], tmp_path: Path) -> Iterator[dict[str, Party]]:
    net, root = chain
    made = {}
    for name, account in ACCOUNTS.items():
        home = tmp_path / name
        shutil.copytree(root / "deployments", home / "deployments")  # each host its own copy of the address book
        made[name] = Party(hosts[name], home, account, [])
    try:
        yield made
    finally:
        for party in made.values():
            for process in party.processes:
                process.terminate()
        for party in made.values():
            for process in party.processes:
                process.stop(10)


def _serve_submitter(net: Devnet, parties: dict[str, Party]) -> None:
    """``veritrain submit serve`` on the submitter's host, announcing its gateway on chain."""
    sub = parties["submitter"]
    sub.start("submitter", ["submit", "serve", f"{sub.host.ip}:{PORT}", *sub.args(net.rpc_url), "--key-env", sub.key_var])
    wait_for("the submitter's gateway announced", lambda: net.protocol().stakes.gateway_of(net.accounts[sub.account].address) == sub.url, 120)


def _daemon(net: Devnet, parties: dict[str, Party], name: str, role: str, *extra: str) -> RoleProcess:
    """``veritrain ROLE run`` on host ``name``: its own directories, serving its store (announced on chain)."""
    party = parties[name]
    serve = ["--serve", f"{party.host.ip}:{PORT}", "--key-env", party.key_var, "--log-json", "--poll", "0.5"]
    return party.start(role, [role, "run", *party.args(net.rpc_url), *serve, *extra])


def _wait_staked(net: Devnet, parties: dict[str, Party], staking: dict[str, Role], timeout: float = 240) -> None:
    protocol = net.protocol()
    wanted = [(net.accounts[parties[name].account].address, role) for name, role in staking.items()]
    minimum = {role: protocol.stakes.min_stake(role) for _, role in wanted}
    processes = [p for party in parties.values() for p in party.processes]

    def staked() -> bool:
        for p in processes:
            if not p.running:
                pytest.fail(f"{p.name} exited:\n{p.log_tail()}")
        return all(protocol.stakes.stake_of(a, r).staked >= minimum[r] for a, r in wanted)

    wait_for("the daemons staked", staked, timeout)


def _until(what: str, probe: Callable[[], T | None], parties: dict[str, Party], timeout: float) -> T:
    """``wait_for`` that fails at once when a daemon exits, and shows every log tail when it times out."""
    every = [p for party in parties.values() for p in party.processes]

    def alive_probe() -> T | None:
        for p in every:
            if not p.running:
                pytest.fail(f"{p.name} exited:\n{p.log_tail()}")
        return probe()

    try:
        return wait_for(what, alive_probe, timeout)
    except BaseException:
        for p in every:
            print(f"--- {p.name}\n{p.log_tail(40)}")
        raise


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
    _serve_submitter(net, parties)
    for role in ("solver", "verifier", "whistleblower"):
        _daemon(net, parties, role, role, *(["--duty-grace", "5"] if role == "verifier" else []))
    _wait_staked(net, parties, {r: Role[r.upper()] for r in ("solver", "verifier", "whistleblower")})
    posted = _post(net, sub, tmp_path / "job")
    job_id = JobId(int(posted["job_id"]))
    protocol = net.protocol()
    _until(f"job {job_id} finalized", lambda: protocol.market.get_job(job_id).state is JobState.FINALIZED, parties, 420)

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
    for p in (p for party in parties.values() for p in party.processes):
        assert "Traceback" not in p.log_path.read_text(), p.log_tail()

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
    _serve_submitter(net, parties)
    _daemon(net, parties, "verifier", "verifier", "--stake", "200", "--duty-grace", "5")
    _wait_staked(net, parties, {"verifier": Role.VERIFIER})
    _daemon(net, parties, "solver", "solver", "--cheat", "false-loss")
    posted = _post(net, parties["submitter"], tmp_path / "job")
    job_id = JobId(int(posted["job_id"]))
    verifier = net.accounts[parties["verifier"].account].address
    _until("the verifier drawn", lambda: protocol.market.get_job(job_id).verifier == verifier, parties, 300)
    referees = ("referee4", "referee5", "referee6")
    for name in referees:
        _daemon(net, parties, name, "verifier", "--stake", "200", "--duty-grace", "5")
    event = _until("the game settled", lambda: settled(protocol, job_id), parties, 420)

    game = protocol.game.get_game(GameId(int(event.args["gameId"])))
    assert (game.status, game.by_verifier, game.challenger) == (GameStatus.CHALLENGER_WON, True, verifier)
    assert protocol.market.get_job(job_id).state is JobState.OPEN, "reopened with its escrow for another solver"
    solver = parties["solver"]
    assert parties["verifier"].fetched(solver), "the verifier replayed from the solver's gateway"
    assert any(parties[name].fetched(solver) or parties[name].fetched(parties["verifier"]) for name in referees), "a referee fetched from a gateway"
    for p in (p for party in parties.values() for p in party.processes):
        assert "Traceback" not in p.log_path.read_text(), p.log_tail()
