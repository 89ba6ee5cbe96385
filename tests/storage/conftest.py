"""Storage fixtures: a real js-ipfs daemon (offline, loopback, random ports) and a lying RPC server.

* ``ipfs_node`` (session): ``jsipfs daemon --offline`` on a fresh repo, API on
  127.0.0.1 port 0, killed at the end of the session (deploy.jsipfs).
* ``ipfs_store``: an IpfsStore on that node with a 1 s lookup timeout.
* ``ipfs_add``: the node's own ``/api/v0/add`` with any chunker, to compare CIDs.
* ``liar``: a tiny HTTP server in a thread that speaks just enough of the RPC
  API to lie; each test sets its routes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests

from core.storage import IpfsStore, LocalStore
from core.storage.ipfs import ADD_PARAMS
from deploy.jsipfs import JsIpfsNode


@pytest.fixture(scope="session")
def ipfs_node() -> Iterator[JsIpfsNode]:
    with JsIpfsNode() as node:
        yield node


@pytest.fixture
def ipfs_store(ipfs_node: JsIpfsNode) -> IpfsStore:
    return IpfsStore(ipfs_node.api_url, lookup_timeout=1.0, local_timeout=0.5)


@pytest.fixture
def local_store(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "store")


@pytest.fixture
def ipfs_add(ipfs_node: JsIpfsNode) -> Callable[..., str]:
    """CID the daemon gives ``data`` with ``chunk_size`` (Kubo defaults otherwise); not pinned."""

    def add(data: bytes, chunk_size: int = 262_144) -> str:
        params = {**ADD_PARAMS, "chunker": f"size-{chunk_size}", "pin": "false"}
        reply = requests.post(
            f"{ipfs_node.api_url}/api/v0/add",
            params=params,
            files={"file": ("blob", data, "application/octet-stream")},
            timeout=120,
        )
        reply.raise_for_status()
        return str(reply.json()["Hash"])

    return add


Route = Callable[[BaseHTTPRequestHandler], None]


class Liar:
    """An HTTP server on 127.0.0.1 answering POST /api/v0/<command> with the test's routes."""

    def __init__(self) -> None:
        self.routes: dict[str, Route] = {}
        liar = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                command = urlsplit(self.path).path.removeprefix("/api/v0/")
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                route = liar.routes.get(command)
                if route is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                try:
                    route(self)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client stopped reading, as a bounded reader should

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    @staticmethod
    def reply(status: int, body: bytes, content_type: str = "application/json") -> Route:
        """A route answering ``status`` with ``body``."""

        def route(handler: BaseHTTPRequestHandler) -> None:
            handler.send_response(status)
            handler.send_header("Content-Type", content_type)
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)

        return route

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def liar() -> Iterator[Liar]:
    server = Liar()
    try:
        yield server
    finally:
        server.close()
