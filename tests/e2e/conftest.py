"""End-to-end fixtures: a devnet with the local network's short windows, a shared store, real daemon
processes (``veritrain.localnet``, what ``veritrain demo`` and ``veritrain up`` run).

Each test module gets its own chain (the lifecycle moves real time forward: blocks are
mined once a second, as the demo does), and every daemon a test starts is stopped when
the test ends, passed or failed.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TypeVar

import pytest

from deploy.build import build
from deploy.devnet import Devnet
from veritrain.localnet import LocalNet as Market  # the tests' name: a devnet with a store, daemons started on it
from veritrain.localnet import local_params, start_local_net

__all__ = ["LONG_JOB_WINDOW", "DripGateway", "Market", "wait_for", "gone"]

T = TypeVar("T")

#: The commit window of a test's long job (and the market's ``maxCommitWindow`` where it is posted): a
#: day. A solver refuses a job whose window its training estimate passes, and on a loaded machine it
#: estimated 200,000 tiny steps (under 10 minutes idle) at 7,612 s, past the 7,200 s used before.
LONG_JOB_WINDOW = 86_400


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
                pytest.fail(f"{dead[0].name} exited {dead[0].process.returncode} while waiting for {what}:\n{dead[0].log_tail()}")  # type: ignore[union-attr]
        time.sleep(0.3)
    tails = "\n".join(f"--- {p.name}\n{p.log_tail()}" for p in (market.processes if market else []))
    pytest.fail(f"timed out after {timeout:.0f}s waiting for {what}\n{tails}")


def gone(pid: int) -> bool:
    """No process ``pid`` any more (a zombie counts as gone: it runs nothing)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    status = Path(f"/proc/{pid}/status")
    return not status.exists() or "zombie" in status.read_text()


@pytest.fixture(scope="module")
def devnet_e2e(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Devnet, Path]]:
    """One chain per test module; a module sets ``E2E_ACCOUNTS`` for more funded accounts than 6, and
    ``E2E_MARKET`` (a dict of JobMarket params by their Solidity names) to override the local network's market (``veritrain.localnet.LOCAL_MARKET``)."""
    build()
    root = tmp_path_factory.mktemp("e2e")
    accounts = getattr(request.module, "E2E_ACCOUNTS", 6)
    params = local_params(getattr(request.module, "E2E_MARKET", None))
    with start_local_net(root, accounts=accounts, params=params) as local:
        yield local.net, root


@pytest.fixture
def market(devnet_e2e: tuple[Devnet, Path], tmp_path: Path) -> Iterator[Market]:
    net, root = devnet_e2e
    m = Market(net, tmp_path, root / "store", root / "deployments", poll=0.3)
    try:
        yield m
    finally:
        m.stop_daemons(timeout=10)


class DripGateway:
    """A test adversary: a "gateway" that answers 200 to every request and then sends one byte every
    ``every_s`` seconds, forever (a fetch with only a per-read timeout never ends)."""

    def __init__(self, every_s: float = 3.0) -> None:
        self.requests = 0
        stop = self.stop = threading.Event()
        gateway = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server name
                gateway.requests += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/vnd.ipld.raw")
                self.send_header("Content-Length", str(1 << 20))
                self.end_headers()
                while not stop.wait(every_s):
                    try:
                        self.wfile.write(b"\0")
                        self.wfile.flush()
                    except OSError:
                        return

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.stop.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def drip() -> Iterator[DripGateway]:
    gateway = DripGateway()
    try:
        yield gateway
    finally:
        gateway.close()
