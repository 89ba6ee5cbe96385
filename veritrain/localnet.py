"""A local network: a devnet, a shared embedded store and role daemons as real processes.

One module starts "role daemons on a devnet" for everything that needs them: ``veritrain up``,
``veritrain demo``, the end-to-end tests (``tests/e2e/conftest.py``) and the daemon-capacity
benchmark::

    with start_local_net(workdir, accounts=3) as local:     # anvil, deployed with LOCAL_MARKET/LOCAL_GAME windows
        solver = local.daemon("solver", 1, "solver")         # `python -m veritrain solver run`, dev account 1's key
        local.daemon("verifier", 2, "verifier", "--duty-grace", "5")
        local.wait_staked(120)
        ...                                                  # post jobs with local.protocol(local.account(0))
    # every daemon stopped (SIGTERM, then SIGKILL), then anvil

Layout under the daemons' root: ``<root>/<name>/`` is a daemon's state directory, ``<root>/logs/<name>.log``
its JSON log lines (``<name>-<run>.log`` for a restart); the store is ``<root>/store`` and the address
books ``<root>/deployments`` (a :class:`LocalNet` built over a shared devnet may put them elsewhere).
A daemon's key travels in an environment variable (or an encrypted keystore file), never on its command
line. Each daemon gets ``PR_SET_PDEATHSIG``: it gets SIGTERM when the process that started it dies,
however it dies; :func:`interrupts_as_keyboard` makes SIGTERM end a run like Ctrl-C does, through the
same cleanup.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from core.chain import Address, Signer
from core.contracts import Protocol, Role
from core.errors import ChainError, VeritrainError
from core.storage import LocalStore
from deploy.anvil import dev_private_key, die_with_parent
from deploy.deployer import DeployParams
from deploy.devnet import Devnet, start_devnet

__all__ = [
    "LOCAL_MARKET",
    "LOCAL_GAME",
    "ROLES",
    "DaemonKey",
    "LocalNet",
    "RoleProcess",
    "interrupts_as_keyboard",
    "local_params",
    "start_local_net",
]

#: Windows short enough for a job to finish in minutes; everything else as on the devnet.
LOCAL_MARKET = {
    "openWindow": 900,
    "maxCommitWindow": 900,
    "reportWindow": 180,
    "challengeWindow": 8,
    "disputeWindow": 300,  # > the game's openWindow + maxGameDuration (docs/dispute.md)
}

#: The dispute game's windows, roomier than the devnet's so that ten daemons on two cores keep
#: their clocks: openWindow + maxGameDuration = 30 + (2 * 60 + 20 + 30 + 30) = 230 s < disputeWindow.
LOCAL_GAME = {
    "clockTime": 60,
    "openWindow": 30,
    "drawWindow": 20,
    "commitWindow": 30,
    "revealWindow": 30,
}

#: The daemons' command names and the stake role each holds.
ROLES = {"solver": Role.SOLVER, "verifier": Role.VERIFIER, "whistleblower": Role.WHISTLEBLOWER}

KEYSTORE_PASSWORD_ENV = "VERITRAIN_KEYSTORE_PASSWORD"


def local_params(market: Mapping[str, int] | None = None) -> DeployParams:
    """The devnet's parameters with the local windows; ``market`` overrides JobMarket fields on top
    (by their Solidity names: the e2e tests set e.g. ``forcedErrorRateBps``)."""
    base = DeployParams.devnet()
    merged = {**base.market, **LOCAL_MARKET, **(market or {})}
    return base.model_copy(update={"market": merged, "game": {**base.game, **LOCAL_GAME}, "unbonding_delay": 60})


@contextmanager
def interrupts_as_keyboard() -> Iterator[None]:
    """SIGINT (Ctrl-C) and SIGTERM raise KeyboardInterrupt, so that both go through the same cleanup; SIGINT
    too even where it was ignored (a job a shell started in the background starts with SIGINT ignored)."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


@dataclass
class RoleProcess:
    """One daemon process: started with its key in its environment, logs to a file, stopped for sure."""

    name: str
    role: str
    address: Address | None  # None: a process that holds no key (the dashboard)
    argv: list[str]
    env: dict[str, str]
    data_dir: Path
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    _log: IO[bytes] | None = field(default=None, repr=False)

    def start(self) -> RoleProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            self.argv,
            env={**os.environ, **self.env},
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            preexec_fn=die_with_parent,
        )
        return self

    @property
    def pid(self) -> int:
        if self.process is None:
            raise VeritrainError(f"the {self.name} daemon was never started")
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL, as a crash would: no cleanup runs in the daemon."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def terminate(self) -> None:
        """SIGTERM: the daemon finishes its unit of work and exits; does not wait."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM (graceful), then SIGKILL after ``timeout``; returns the exit code. Idempotent."""
        process = self.process
        if process is not None:
            if process.poll() is None:
                self.terminate()
                try:
                    process.wait(timeout)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
        return None if process is None else process.returncode

    def log_records(self) -> list[dict[str, Any]]:
        """The daemon's JSON log lines (other lines, e.g. a traceback, are skipped)."""
        records = []
        if self.log_path.exists():
            for line in self.log_path.read_text(errors="replace").splitlines():
                if line.startswith("{"):
                    try:
                        records.append(json.loads(line))
                    except json.JSONDecodeError:
                        continue
        return records

    def log_tail(self, lines: int = 25) -> str:
        """The last ``lines`` of its log, for a failure message."""
        if not self.log_path.exists():
            return "(no log)"
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


@dataclass(frozen=True)
class DaemonKey:
    """How a daemon gets its key: its command-line flags and the environment they read (never the key itself on the command line)."""

    args: tuple[str, ...]
    env: Mapping[str, str]
    address: Address

    @staticmethod
    def from_env(var: str, signer: Signer, private_key: str) -> DaemonKey:
        return DaemonKey(("--key-env", var), {var: private_key}, signer.address)

    @staticmethod
    def keystore(path: Path, signer: Signer, password: str) -> DaemonKey:
        """``signer``'s key encrypted into ``path``; the password in the daemon's environment."""
        path.write_text(json.dumps(signer.encrypt(password)))
        return DaemonKey(("--keystore", str(path)), {KEYSTORE_PASSWORD_ENV: password}, signer.address)


@dataclass
class LocalNet:
    """A devnet plus the store and the bookkeeping to start role daemons on it, and stop them.

    ``root`` holds the daemons' state directories and logs; ``poll`` is every daemon's ``--poll``
    (a daemon's own flags come after it and win); ``ipfs_api`` puts the daemons on an IPFS node
    instead of the embedded store."""

    net: Devnet
    root: Path
    store_dir: Path
    book_dir: Path
    poll: float = 0.5
    ipfs_api: str | None = None
    processes: list[RoleProcess] = field(default_factory=list)

    @property
    def rpc_url(self) -> str:
        return self.net.rpc_url

    @property
    def store(self) -> LocalStore:
        return LocalStore(self.store_dir)

    def protocol(self, signer: Signer | None = None) -> Protocol:
        return self.net.protocol(signer)

    def account(self, i: int) -> Signer:
        """Funded dev account ``i`` (0-based over the funded ones; anvil index i + 1)."""
        return self.net.accounts[i]

    def daemon(self, role: str, account: int | DaemonKey, name: str, *extra: str, run: int = 1, keystore: bool = False) -> RoleProcess:
        """Start a ``role`` daemon (``solver``, ``verifier``, ``whistleblower``) logging JSON lines; its state
        lives in ``root/name``, its log in ``root/logs/name.log`` (``name-run.log`` for a restart: ``run``
        numbers restarts of the same daemon, same state).

        ``account``: a funded dev account, whose key travels in an environment variable, or with
        ``keystore`` in an encrypted keystore file (its password in the environment); or a
        :class:`DaemonKey` for any other key."""
        if role not in ROLES:
            raise VeritrainError(f"no daemon role {role!r}; choose one of {', '.join(ROLES)}")
        if isinstance(account, int):
            signer, private_key = self.account(account), dev_private_key(account + 1)  # dev account i+1 is net.accounts[i]
            if keystore:
                key = DaemonKey.keystore(self.root / f"{name}.keystore.json", signer, f"{name}-local-keystore-password")
            else:
                key = DaemonKey.from_env(f"VERITRAIN_{name.upper()}_KEY", signer, private_key)
        else:
            key = account
        store = ("--ipfs-api", self.ipfs_api) if self.ipfs_api else ("--store-dir", str(self.store_dir))
        data_dir = self.root / name
        argv = [
            sys.executable, "-m", "veritrain", role, "run",
            "--rpc", self.net.rpc_url,
            "--address-book-dir", str(self.book_dir),
            "--data-dir", str(data_dir),
            *store,
            *key.args,
            "--log-json",
            "--poll", str(self.poll),
            *extra,
        ]  # fmt: skip
        self.root.mkdir(parents=True, exist_ok=True)
        process = RoleProcess(
            name if run == 1 else f"{name}#{run}",
            role,
            key.address,
            argv,
            dict(key.env),
            data_dir,
            self.root / "logs" / (f"{name}.log" if run == 1 else f"{name}-{run}.log"),
        )
        self.processes.append(process)
        return process.start()

    def dashboard(self, port: int) -> RoleProcess:
        """Start ``veritrain dashboard`` on this chain and store, on 127.0.0.1:``port`` (a read-only
        process: no key, no address); its log is ``root/logs/dashboard.log``."""
        store = ("--ipfs-api", self.ipfs_api) if self.ipfs_api else ("--store-dir", str(self.store_dir))
        argv = [
            sys.executable, "-m", "veritrain", "dashboard",
            "--rpc-url", self.net.rpc_url,
            "--address-book-dir", str(self.book_dir),
            *store,
            "--port", str(port),
            "--poll", str(self.poll),
        ]  # fmt: skip
        process = RoleProcess("dashboard", "dashboard", None, argv, {}, self.root / "dashboard", self.root / "logs" / "dashboard.log")
        self.processes.append(process)
        return process.start()

    def check_running(self) -> None:
        """Raise if anvil or a daemon started here has exited (naming its log)."""
        if not self.net.anvil.running:
            raise ChainError("anvil exited")
        for process in self.processes:
            if not process.running:
                code = process.process.returncode if process.process is not None else "?"
                raise VeritrainError(f"the {process.name} daemon exited ({code}): see {process.log_path}")

    def wait_staked(self, timeout_s: float, at_least: Mapping[str, int] | None = None) -> float:
        """Seconds until every daemon holds stake in its role: ``at_least[name]`` base units, else the
        chain's minimum (the daemons stake on start: imports, approve, stake)."""
        start = time.monotonic()
        protocol = self.protocol()
        minimum = {role: int(protocol.stakes.min_stake(r)) for role, r in ROLES.items()}
        staking = [(p.address, p) for p in self.processes if p.address is not None]  # the dashboard holds no stake
        wanted = [((at_least or {}).get(p.name, minimum[p.role]), address, p.role) for address, p in staking]
        while time.monotonic() - start < timeout_s:
            self.check_running()
            if all(protocol.stakes.stake_of(address, ROLES[role]).staked >= amount for amount, address, role in wanted):
                return time.monotonic() - start
            time.sleep(0.25)
        raise VeritrainError(f"daemons not staked after {timeout_s:.0f}s; logs in {self.root / 'logs'}")

    def stop_daemons(self, timeout: float = 15.0) -> None:
        """Stop every daemon started here (SIGTERM to all at once, then SIGKILL to any still running
        ``timeout`` seconds later). Idempotent."""
        for process in self.processes:
            process.terminate()  # side by side: a daemon takes seconds to stop on busy cores
        for process in self.processes:
            process.stop(timeout)
        self.processes.clear()

    def stop(self) -> None:
        """The daemons, then anvil."""
        try:
            self.stop_daemons()
        finally:
            self.net.stop()

    def __enter__(self) -> LocalNet:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


def start_local_net(
    root: Path, *, accounts: int, params: DeployParams | None = None, block_time: int = 1, poll: float = 0.5, gas_limit: int | None = None
) -> LocalNet:
    """Anvil deployed with ``params`` (:func:`local_params` by default) and ``accounts`` funded dev accounts,
    mining a block every ``block_time`` seconds as a real chain would, blocks of ``gas_limit`` gas (anvil's
    30M when None); the store and address books under ``root``."""
    net = start_devnet(book_dir=root / "deployments", accounts=accounts, params=params or local_params(), gas_limit=gas_limit)
    try:
        net.client.rpc("evm_setIntervalMining", [block_time])  # deployed at a block per transaction (fast), then blocks keep time
    except BaseException:
        net.stop()
        raise
    return LocalNet(net, root, root / "store", root / "deployments", poll=poll)
