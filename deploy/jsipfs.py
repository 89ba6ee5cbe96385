"""A throwaway js-ipfs node on loopback, for tests, benchmarks and local runs.

:class:`JsIpfsNode` runs ``node_modules/.bin/jsipfs`` (npm ``ipfs`` 0.66.1,
js-ipfs core 0.18.1) with a fresh repository in a temporary directory:
``jsipfs init --empty-repo``, then its config rewritten so that the API,
gateway and gRPC endpoints listen on 127.0.0.1 port 0 (the OS picks free
ports), no swarm listeners, no bootstrap peers, no delegates, no MDNS or
WebRTC discovery; then ``jsipfs daemon --offline --enable-preload=false``.
The API address is read from the ``api`` file the daemon writes, and the node
counts as up once ``/api/v0/id`` answers. Stopping sends SIGTERM to the
daemon's process group (SIGKILL after a grace period) and deletes the repo.

Kubo cannot be installed here; js-ipfs serves the same RPC API.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType
from typing import IO

import requests

from core.errors import ConfigError
from core.storage.errors import StoreUnavailable

__all__ = ["JsIpfsNode", "JSIPFS_BIN"]

log = logging.getLogger(__name__)

JSIPFS_BIN = Path(__file__).resolve().parents[1] / "node_modules" / ".bin" / "jsipfs"
_LOOPBACK_ANY_PORT = "/ip4/127.0.0.1/tcp/0"


class JsIpfsNode:
    """An offline js-ipfs daemon on 127.0.0.1. Use as a context manager; ``api_url`` once started.

    ``startup_timeout`` bounds ``jsipfs init`` and the wait for the API: a liveness bound (a few
    seconds idle), not a speed target; ``init`` once took more than 60 s on a loaded 2-core machine."""

    def __init__(self, *, binary: Path = JSIPFS_BIN, startup_timeout: float = 300.0) -> None:
        self.binary = binary
        self.startup_timeout = startup_timeout
        self.api_url = ""
        self.process: subprocess.Popen[bytes] | None = None
        self._repo_dir: Path | None = None
        self._log: IO[bytes] | None = None

    @property
    def repo(self) -> Path:
        if self._repo_dir is None:
            raise StoreUnavailable("jsipfs", "node not started")
        return self._repo_dir / "repo"

    def _env(self) -> dict[str, str]:
        return {**os.environ, "IPFS_PATH": str(self.repo), "IPFS_MONITORING": "0"}

    def _init_repo(self) -> None:
        done = subprocess.run(
            [str(self.binary), "init", "--empty-repo"],
            env=self._env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=self.startup_timeout,
        )
        if done.returncode != 0:
            raise StoreUnavailable("jsipfs", f"init failed: {done.stderr.decode(errors='replace')[-500:]}")
        config_path = self.repo / "config"
        config = json.loads(config_path.read_text())
        addresses = config["Addresses"]
        addresses.update(API=_LOOPBACK_ANY_PORT, Gateway=_LOOPBACK_ANY_PORT, RPC=_LOOPBACK_ANY_PORT, Swarm=[], Delegates=[])
        config["Bootstrap"] = []
        config["Discovery"] = {"MDNS": {"Enabled": False}, "webRTCStar": {"Enabled": False}}
        config_path.write_text(json.dumps(config, indent=2))

    def start(self) -> JsIpfsNode:
        if self.process is not None:
            raise StoreUnavailable(self.api_url or "jsipfs", "node already started")
        if not self.binary.exists():
            raise ConfigError(f"jsipfs not found at {self.binary}: run `make setup`")
        self._repo_dir = Path(tempfile.mkdtemp(prefix="veritrain-jsipfs-"))
        try:
            self._init_repo()
            self._log = tempfile.TemporaryFile(prefix="jsipfs-")
            self.process = subprocess.Popen(
                [str(self.binary), "daemon", "--offline", "--enable-preload=false"],
                env=self._env(),
                stdin=subprocess.DEVNULL,
                stdout=self._log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group: stop() reaches node and any child
            )
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        log.info("js-ipfs node started", extra={"url": self.api_url, "pid": self.process.pid})
        return self

    def _wait_ready(self) -> None:
        assert self.process is not None
        deadline = time.monotonic() + self.startup_timeout
        api_file = self.repo / "api"
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise StoreUnavailable("jsipfs", f"daemon exited: {self._output()[-500:]}")
            if not self.api_url and api_file.exists():
                # "/ip4/127.0.0.1/tcp/PORT/http" -> "http://127.0.0.1:PORT"
                parts = api_file.read_text().strip().split("/")
                if len(parts) >= 5 and parts[1] == "ip4" and parts[3] == "tcp":
                    self.api_url = f"http://{parts[2]}:{parts[4]}"
            if self.api_url:
                try:
                    if requests.post(f"{self.api_url}/api/v0/id", timeout=2.0).ok:
                        return
                except requests.RequestException:
                    pass
            time.sleep(0.1)
        raise StoreUnavailable(self.api_url or "jsipfs", f"daemon not ready in {self.startup_timeout:g}s: {self._output()[-500:]}")

    def _output(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read(64 * 1024).decode(errors="replace")

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the daemon (SIGTERM to its group, then SIGKILL), reap it and delete the repo. Idempotent."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            except ProcessLookupError:  # exited between poll() and killpg()
                process.wait()
        if process is not None:
            log.info("js-ipfs node stopped", extra={"pid": process.pid})
        if self._log is not None:
            self._log.close()
            self._log = None
        if self._repo_dir is not None:
            shutil.rmtree(self._repo_dir, ignore_errors=True)
            self._repo_dir = None
        self.api_url = ""

    def __enter__(self) -> JsIpfsNode:
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()
