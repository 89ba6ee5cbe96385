"""A local anvil node for tests and the devnet, plus time-travel helpers.

:class:`Anvil` starts ``node_modules/.bin/anvil`` on 127.0.0.1 on a free
port (or on a given host, through a launcher such as ``ip netns exec NS``
for the separate-hosts test), waits until it answers, and stops it on exit, on Ctrl-C, and (through
``PR_SET_PDEATHSIG`` on Linux) when the process that started it dies.

:class:`DevChain` wraps the node's test RPCs (``evm_increaseTime``,
``anvil_mine``, ``evm_snapshot``...) and works on any anvil endpoint.
"""

from __future__ import annotations

import ctypes
import logging
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import requests
from eth_account import Account

from core.chain import DEVNET_CHAIN_ID, Address, ChainClient, Signer, Wei
from core.errors import ChainError, ConfigError

__all__ = ["Anvil", "DevChain", "DEV_MNEMONIC", "dev_signers", "dev_private_key", "die_with_parent", "free_port", "port_free"]

log = logging.getLogger(__name__)

ANVIL_BIN = Path(__file__).resolve().parent.parent / "node_modules" / ".bin" / "anvil"
# anvil's (and hardhat's) public test mnemonic: its keys are known to everyone, use them only on devnets.
DEV_MNEMONIC = "test test test test test test test test test test test junk"
_MAX_DEV_ACCOUNTS = 100


def port_free(port: int, host: str = "127.0.0.1") -> bool:
    """Whether nothing listens on ``host:port`` now (a bind succeeds; a closed socket's TIME_WAIT does not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def dev_signers(count: int, mnemonic: str = DEV_MNEMONIC) -> list[Signer]:
    """The first ``count`` accounts of ``mnemonic`` (m/44'/60'/0'/0/i), as anvil derives them."""
    if not 0 < count <= _MAX_DEV_ACCOUNTS:
        raise ConfigError(f"dev account count must be in 1..{_MAX_DEV_ACCOUNTS}")
    Account.enable_unaudited_hdwallet_features()
    return [Signer(Account.from_mnemonic(mnemonic, account_path=f"m/44'/60'/0'/0/{i}")) for i in range(count)]


def dev_private_key(index: int, mnemonic: str = DEV_MNEMONIC) -> str:
    """The private key of dev account ``index``: for printing anvil's PUBLIC test keys on a devnet only."""
    Account.enable_unaudited_hdwallet_features()
    return "0x" + bytes(Account.from_mnemonic(mnemonic, account_path=f"m/44'/60'/0'/0/{index}").key).hex()


def die_with_parent() -> None:
    """In a child before exec (``preexec_fn``): SIGTERM when its parent dies, however it dies (Linux only)."""
    if sys.platform.startswith("linux"):
        PR_SET_PDEATHSIG = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class Anvil:
    """An anvil process on loopback. Use as a context manager, or call start()/stop()."""

    def __init__(
        self,
        *,
        port: int = 0,
        chain_id: int = DEVNET_CHAIN_ID,
        accounts: int = 10,
        balance_eth: int = 10_000,
        mnemonic: str = DEV_MNEMONIC,
        block_time: float | None = None,
        binary: Path = ANVIL_BIN,
        startup_timeout: float = 30.0,
        host: str = "127.0.0.1",
        launcher: tuple[str, ...] = (),
        gas_limit: int | None = None,
    ) -> None:
        """``gas_limit``: the block gas limit (anvil's default, 30M, when None); a larger one also lifts
        anvil's 2 MB limit on a request's size, so that a block's worth of calldata can be sent."""
        if not 0 < accounts <= _MAX_DEV_ACCOUNTS:
            raise ConfigError(f"anvil accounts must be in 1..{_MAX_DEV_ACCOUNTS}")
        self.host = host
        self.launcher = launcher  # argv prefix, e.g. ("ip", "netns", "exec", NS): anvil in a network namespace
        self.requested_port = port
        self.port = 0
        self.chain_id = chain_id
        self.accounts = accounts
        self.balance_eth = balance_eth
        self.mnemonic = mnemonic
        self.block_time = block_time
        self.binary = binary
        self.startup_timeout = startup_timeout
        self.gas_limit = gas_limit
        self.process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._cache: Path | None = None  # where anvil persists old states; removed at stop

    @property
    def rpc_url(self) -> str:
        if not self.port:
            raise ChainError("anvil is not running")
        return f"http://{self.host}:{self.port}"

    def _command(self, port: int) -> list[str]:
        cmd = [
            *self.launcher,
            str(self.binary),
            "--host",
            self.host,
            "--port",
            str(port),
            "--chain-id",
            str(self.chain_id),
            "--accounts",
            str(self.accounts),
            "--balance",
            str(self.balance_eth),
            "--mnemonic",
            self.mnemonic,
        ]
        if self._cache is not None:
            cmd += ["--cache-path", str(self._cache)]  # not ~/.foundry/anvil/tmp, which nothing cleans
        if self.block_time is not None:
            cmd += ["--block-time", str(self.block_time)]
        if self.gas_limit is not None:
            cmd += ["--gas-limit", str(self.gas_limit), "--no-request-size-limit"]
        return cmd

    def start(self) -> Anvil:
        if self.process is not None:
            raise ChainError("anvil already started")
        if not self.binary.exists():
            raise ConfigError(f"anvil not found at {self.binary}: run `make setup`")
        attempts = 1 if self.requested_port else 3  # a picked free port can be taken before anvil binds it
        for attempt in range(attempts):
            port = self.requested_port or free_port(self.host)
            self._log = tempfile.TemporaryFile(prefix="anvil-")
            self._cache = Path(tempfile.mkdtemp(prefix="veritrain-anvil-"))
            self.process = subprocess.Popen(
                self._command(port),
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent,
                start_new_session=True,  # a terminal's Ctrl-C reaches us, and we stop anvil in order
            )
            self.port = port
            if self._wait_ready():
                log.info("anvil started", extra={"url": self.rpc_url, "pid": self.process.pid})
                return self
            output = self._output()
            self.stop()
            if attempt == attempts - 1 or "in use" not in output.lower():
                raise ChainError(f"anvil did not start on port {port}: {output.strip()[-500:] or 'no output'}")
        raise AssertionError("unreachable")

    def _wait_ready(self) -> bool:
        assert self.process is not None
        deadline = time.monotonic() + self.startup_timeout
        url = f"http://{self.host}:{self.port}"
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                if requests.post(url, json=body, timeout=1.0).ok:
                    return True
            except requests.RequestException:
                pass
            time.sleep(0.05)
        return False

    def _output(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read(64 * 1024).decode(errors="replace")

    def stop(self, timeout: float = 5.0) -> None:
        """Terminate anvil (SIGTERM, then SIGKILL) and reap it. Idempotent."""
        process, self.process = self.process, None
        if process is not None:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
            log.info("anvil stopped", extra={"pid": process.pid})
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._cache is not None:
            shutil.rmtree(self._cache, ignore_errors=True)
            self._cache = None
        self.port = 0

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def restart_from(self, state: str) -> None:
        """Stop, start again on the same port and load ``state`` (an ``anvil_dumpState`` result): the
        chain restarted from an older dump, every block after it gone, as a client of that URL sees it."""
        port, requested = self.port, self.requested_port
        self.stop()
        self.requested_port = port
        try:
            self.start()
        finally:
            self.requested_port = requested
        client = ChainClient(self.rpc_url)
        client.rpc("anvil_loadState", [state])
        client.reset_nonces()  # this process's cached nonces are ahead of the older chain

    def __enter__(self) -> Anvil:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


class DevChain:
    """Test-node controls for an anvil endpoint: time travel, mining, snapshots."""

    def __init__(self, client: ChainClient) -> None:
        self.client = client

    def mine(self, blocks: int = 1) -> None:
        if not 0 < blocks <= 1_000_000:
            raise ValueError("blocks must be in 1..1000000")
        self.client.rpc("anvil_mine", [hex(blocks)])

    def increase_time(self, seconds: int) -> int:
        """Move the clock forward and mine a block at the new time; returns that block's timestamp."""
        if seconds < 0:
            raise ValueError("time only moves forward")
        self.client.rpc("evm_increaseTime", [seconds])
        self.client.rpc("evm_mine", [])
        return self.client.timestamp()

    def travel_to(self, timestamp: int) -> None:
        """Mine the next block at exactly ``timestamp`` (must be after the latest block's)."""
        self.client.rpc("evm_setNextBlockTimestamp", [timestamp])
        self.client.rpc("evm_mine", [])

    def snapshot(self) -> str:
        return str(self.client.rpc("evm_snapshot", []))

    def revert(self, snapshot_id: str) -> None:
        """Revert to a snapshot (which is consumed) and drop cached nonces."""
        if self.client.rpc("evm_revert", [snapshot_id]) is not True:
            raise ChainError(f"evm_revert to unknown snapshot {snapshot_id}")
        self.client.reset_nonces()

    def set_balance(self, address: Address, wei: Wei) -> None:
        self.client.rpc("anvil_setBalance", [address, hex(wei)])
