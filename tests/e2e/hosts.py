"""Every party on its own host, for the separate-hosts tests (tests/e2e/test_hosts.py,
tests/e2e/test_multiparty_hosts.py): the chain and each party in a network namespace of its own (its own
address, ports and loopback), with its own state and store directories; nothing is shared but the
network. Content crosses hosts only through the parties' gateways (``--serve``, ``submit serve``),
announced on chain and found there (no ``--peer``), every byte verified by CID.

A test module binds the fixtures to its own host set, one funded dev account a host::

    hosts, chain, parties = host_fixtures({"submitter": 0, "solver": 1, "verifier": 2})

Needs root and iproute2 (deploy/netns.py): a module marks itself ``pytestmark = NEEDS_HOSTS``, which
skips with the reason elsewhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from core.contracts import Role
from core.storage import LocalStore
from core.storage.peers import FETCHED_FROM_PEER
from deploy.anvil import dev_private_key
from deploy.build import build
from deploy.devnet import Devnet, start_devnet
from deploy.netns import Host, Hosts, why_not
from tests.e2e.conftest import wait_for
from veritrain.localnet import RoleProcess, local_params

__all__ = ["NEEDS_HOSTS", "Party", "host_fixtures", "serve_submitter", "daemon", "wait_staked", "until", "assert_no_traceback"]

_REASON = why_not()
NEEDS_HOSTS = pytest.mark.skipif(_REASON is not None, reason=f"separate hosts cannot be made here: {_REASON}")

PORT = 8080
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


def host_fixtures(accounts: Mapping[str, int]) -> tuple[Any, Any, Any]:
    """The fixtures ``hosts``, ``chain`` and ``parties`` for the hosts ``accounts`` names (each with that
    funded dev account) and one for the chain: the namespaces are made once per module; each test gets
    a fresh chain (the local network's windows, :func:`veritrain.localnet.local_params`) on its own
    host, so that no daemon of an earlier test is left staked on it, and a :class:`Party` a host, whose
    processes are stopped when the test ends."""

    @pytest.fixture(scope="module")
    def hosts() -> Iterator[Hosts]:
        with Hosts(["chain", *accounts]) as made:
            yield made

    @pytest.fixture
    def chain(hosts: Hosts, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Devnet, Path]]:
        build()
        root = tmp_path_factory.mktemp("hosts")
        net = start_devnet(
            book_dir=root / "deployments",
            port=8545,
            accounts=1 + max(accounts.values()),
            params=local_params(),
            host=hosts["chain"].ip,
            launcher=hosts["chain"].launcher,
        )
        try:
            net.client.rpc("evm_setIntervalMining", [1])
            yield net, root
        finally:
            net.stop()

    @pytest.fixture
    def parties(hosts: Hosts, chain: tuple[Devnet, Path], tmp_path: Path) -> Iterator[dict[str, Party]]:
        _, root = chain
        made = {}
        for name, account in accounts.items():
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

    return hosts, chain, parties


def serve_submitter(net: Devnet, parties: dict[str, Party]) -> None:
    """``veritrain submit serve`` on the submitter's host, announcing its gateway on chain."""
    sub = parties["submitter"]
    sub.start("submitter", ["submit", "serve", f"{sub.host.ip}:{PORT}", *sub.args(net.rpc_url), "--key-env", sub.key_var])
    wait_for("the submitter's gateway announced", lambda: net.protocol().stakes.gateway_of(net.accounts[sub.account].address) == sub.url, 120)


def daemon(net: Devnet, parties: dict[str, Party], name: str, role: str, *extra: str) -> RoleProcess:
    """``veritrain ROLE run`` on host ``name``: its own directories, serving its store (announced on chain)."""
    party = parties[name]
    serve = ["--serve", f"{party.host.ip}:{PORT}", "--key-env", party.key_var, "--log-json", "--poll", "0.5"]
    return party.start(role, [role, "run", *party.args(net.rpc_url), *serve, *extra])


def wait_staked(net: Devnet, parties: dict[str, Party], staking: dict[str, Role], timeout: float = 240) -> None:
    """Until host ``name``'s account holds the chain's minimum stake in ``staking[name]``, for each; fails at once when a process exits."""
    protocol = net.protocol()
    wanted = [(net.accounts[parties[name].account].address, role) for name, role in staking.items()]
    minimum = {role: protocol.stakes.min_stake(role) for _, role in wanted}
    until("the daemons staked", lambda: all(protocol.stakes.stake_of(a, r).staked >= minimum[r] for a, r in wanted), parties, timeout)


def until(what: str, probe: Callable[[], T | None], parties: dict[str, Party], timeout: float) -> T:
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


def assert_no_traceback(parties: dict[str, Party]) -> None:
    """No process on any host logged a traceback."""
    for p in (p for party in parties.values() for p in party.processes):
        assert "Traceback" not in p.log_path.read_text(), p.log_tail()
