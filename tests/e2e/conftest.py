"""End-to-end fixtures: a devnet with the demo's short windows, a shared store, real daemon processes.

Each test module gets its own chain (the lifecycle moves real time forward: blocks are
mined once a second, as the demo does), and every daemon a test starts is stopped when
the test ends, passed or failed.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest

from core.anvil import dev_private_key
from core.chain import Signer
from core.contracts import Protocol
from core.storage import LocalStore
from deploy.build import build
from deploy.devnet import Devnet, start_devnet
from veritrain.demo import RoleProcess, daemon_argv, demo_params

T = TypeVar("T")
KEYSTORE_PASSWORD = "e2e-keystore-password"


@dataclass
class Market:
    """A devnet plus the store and the bookkeeping to start role daemons on it."""

    net: Devnet
    root: Path
    store_dir: Path
    book_dir: Path
    processes: list[RoleProcess] = field(default_factory=list)

    @property
    def store(self) -> LocalStore:
        return LocalStore(self.store_dir)

    def protocol(self, signer: Signer | None = None) -> Protocol:
        return self.net.protocol(signer)

    def account(self, i: int) -> Signer:
        """Funded dev account ``i`` (0-based over the funded ones; anvil index i + 1)."""
        return self.net.accounts[i]

    def daemon(self, role: str, account: int, name: str, *extra: str, run: int = 1, keystore: bool = False) -> RoleProcess:
        """Start a ``role`` daemon for funded account ``account``; its state lives in ``root/name``.

        ``run`` numbers restarts of the same daemon (same state, a log file of its own).
        The key travels in an environment variable, or with ``keystore`` in an encrypted
        keystore file whose password is in ``VERITRAIN_KEYSTORE_PASSWORD``.
        """
        key_env = f"VT_E2E_{name.upper()}_KEY"
        argv = daemon_argv(
            role,
            rpc_url=self.net.rpc_url,
            book_dir=self.book_dir,
            data_dir=self.root / name,
            store_dir=self.store_dir,
            key_env=key_env,
            extra=("--poll", "0.3", *extra),
        )
        env = {key_env: dev_private_key(account + 1)}
        if keystore:
            path = self.root / f"{name}.keystore.json"
            path.write_text(json.dumps(self.account(account).encrypt(KEYSTORE_PASSWORD)))
            at = argv.index("--key-env")
            argv[at : at + 2] = ["--keystore", str(path)]
            env = {"VERITRAIN_KEYSTORE_PASSWORD": KEYSTORE_PASSWORD}
        process = RoleProcess(
            f"{name}#{run}",
            argv,
            env,
            self.root / "logs" / f"{name}-{run}.log",
        )
        self.processes.append(process)
        return process.start()

    def stop_all(self) -> None:
        for process in self.processes:
            process.stop(timeout=10)
        self.processes.clear()


def wait_for(what: str, probe: Callable[[], T | None], timeout: float, market: Market | None = None) -> T:
    """Poll ``probe`` until it returns something truthy; fail with the daemons' log tails otherwise."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        if market is not None:
            dead = [p for p in market.processes if p.process is not None and p.process.poll() is not None and p.process.returncode not in (0, -9)]
            if dead:
                pytest.fail(f"{dead[0].name} exited {dead[0].process.returncode} while waiting for {what}:\n{_tail(dead[0])}")  # type: ignore[union-attr]
        time.sleep(0.3)
    tails = "\n".join(f"--- {p.name}\n{_tail(p)}" for p in (market.processes if market else []))
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}\n{tails}")


def _tail(process: RoleProcess, lines: int = 25) -> str:
    if not process.log_path.exists():
        return "(no log)"
    return "\n".join(process.log_path.read_text(errors="replace").splitlines()[-lines:])


@pytest.fixture(scope="module")
def devnet_e2e(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Devnet, Path]]:
    """One chain per test module; a module sets ``E2E_ACCOUNTS`` for more funded accounts than 6, and
    ``E2E_MARKET`` (a dict of JobMarket params by their Solidity names) to override the demo's market."""
    build()
    root = tmp_path_factory.mktemp("e2e")
    accounts = getattr(request.module, "E2E_ACCOUNTS", 6)
    params = demo_params(getattr(request.module, "E2E_MARKET", None))
    with start_devnet(book_dir=root / "deployments", accounts=accounts, params=params) as net:
        net.client.rpc("evm_setIntervalMining", [1])
        yield net, root


@pytest.fixture
def market(devnet_e2e: tuple[Devnet, Path], tmp_path: Path) -> Iterator[Market]:
    net, root = devnet_e2e
    m = Market(net, tmp_path, root / "store", root / "deployments")
    try:
        yield m
    finally:
        m.stop_all()
