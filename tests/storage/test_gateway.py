"""The trustless gateway a daemon serves (core.storage.gateway) and the store that fetches from peers
(core.storage.peers), over real HTTP on loopback: one-block and multi-level files, pinned content
only, every block verified (a lying gateway is refused), limits, and the one-line errors."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

from core.cid import InvalidCid
from core.storage import CidMismatch, ContentNotFound, ContentTooLarge, LocalStore, StoreUnavailable, file_cid
from core.storage.gateway import RAW_BLOCK, GatewayServer
from core.storage.peers import FetchingStore, GatewayFetcher
from core.storage.unixfs import CHUNK_SIZE, MAX_LINKS, leaf_block, read_block


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[LocalStore, GatewayServer]]:
    store = LocalStore(tmp_path / "served")
    with GatewayServer(store) as server:
        yield store, server


def test_a_block_request_answers_the_raw_block_and_nothing_else(served: tuple[LocalStore, GatewayServer]) -> None:
    store, server = served
    cid = store.put(b"hello\n")
    reply = requests.get(f"{server.url}/ipfs/{cid}", params={"format": "raw"}, timeout=10)
    assert reply.status_code == 200 and reply.headers["Content-Type"] == RAW_BLOCK
    assert reply.content == leaf_block(b"hello\n")
    by_accept = requests.get(f"{server.url}/ipfs/{cid}", headers={"Accept": RAW_BLOCK}, timeout=10)
    assert by_accept.content == reply.content
    assert requests.get(f"{server.url}/ipfs/{cid}", timeout=10).status_code == 406  # no whole files, no HTML
    assert requests.get(f"{server.url}/ipfs/not-a-cid?format=raw", timeout=10).status_code == 400
    assert requests.post(f"{server.url}/ipfs/{cid}?format=raw", timeout=10).status_code == 405  # read-only
    assert requests.get(f"{server.url}/ipfs/{file_cid(b'absent')}?format=raw", timeout=10).status_code == 404
    assert store.take_wanted() == [file_cid(b"absent")] and store.take_wanted() == [], "asked for and not held: remembered once"


def test_a_multi_level_file_crosses_verified_and_is_kept(served: tuple[LocalStore, GatewayServer], tmp_path: Path) -> None:
    store, server = served
    data = os.urandom(CHUNK_SIZE * (MAX_LINKS + 2) + 123)  # two levels of parents: 176 leaves
    cid = store.put(data)
    mine = LocalStore(tmp_path / "mine")
    fetching = FetchingStore(mine, [server.url])
    assert not fetching.has(cid)
    assert fetching.get(cid, len(data)) == data
    assert mine.stat(cid).pinned  # kept, so this party serves it on
    assert fetching.get(cid, len(data)) == data  # now from its own store
    with pytest.raises(ContentTooLarge, match=f"{cid} is {len(data)} bytes"):
        FetchingStore(LocalStore(tmp_path / "other"), [server.url]).get(cid, len(data) - 1)


def test_only_pinned_content_is_served(served: tuple[LocalStore, GatewayServer], tmp_path: Path) -> None:
    store, server = served
    cid = store.put(os.urandom(CHUNK_SIZE + 1))
    root = read_block(requests.get(f"{server.url}/ipfs/{cid}?format=raw", timeout=10).content)
    store.unpin(cid)  # the party let it go: its blocks are no longer served, root or leaf
    leaf = GatewayFetcher(server.url)
    with pytest.raises(ContentNotFound, match=f"not found in gateway {server.url}"):
        leaf.block(root.children[0])
    with pytest.raises(ContentNotFound, match=f"{cid} not found in LocalStore"):
        FetchingStore(LocalStore(tmp_path / "mine"), [server.url]).get(cid, 1 << 20)
    store.pin(cid)  # kept again: served again
    assert FetchingStore(LocalStore(tmp_path / "again"), [server.url]).get(cid, 1 << 20) == store.get(cid, 1 << 20)


class _Liar(BaseHTTPRequestHandler):
    """Answers every block request with the block of other bytes."""

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        body = leaf_block(b"forged")
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_a_lying_gateway_is_refused_and_the_next_peer_asked(served: tuple[LocalStore, GatewayServer], tmp_path: Path) -> None:
    store, server = served
    cid = store.put(b"the real bytes")
    liar = ThreadingHTTPServer(("127.0.0.1", 0), _Liar)
    threading.Thread(target=liar.serve_forever, daemon=True).start()
    liar_url = f"http://127.0.0.1:{liar.server_address[1]}"
    try:
        with pytest.raises(CidMismatch, match=f"content for {cid} hashes to"):
            GatewayFetcher(liar_url).fetch(cid, 100)
        mine = LocalStore(tmp_path / "mine")
        assert FetchingStore(mine, [liar_url, server.url]).get(cid, 100) == b"the real bytes"
        assert mine.has(cid)
    finally:
        liar.shutdown()


def test_an_unreachable_peer_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(StoreUnavailable, match=r"content store http://127.0.0.1:9 unavailable: block Qm\w+: ConnectionError"):
        GatewayFetcher("http://127.0.0.1:9", timeout=2).fetch(file_cid(b"x"), 10)
    with pytest.raises(ContentNotFound, match="or gateway http://127.0.0.1:9"):
        FetchingStore(LocalStore(tmp_path / "mine"), ["http://127.0.0.1:9"], timeout=2).get(file_cid(b"x"), 10)
    with pytest.raises(StoreUnavailable, match="a peer gateway is http"):
        GatewayFetcher("ftp://example.org/x")
    with pytest.raises(InvalidCid):
        GatewayFetcher("http://127.0.0.1:9").fetch("not-a-cid", 10)


def test_daemon_options_open_a_fetching_store_and_serve_it(tmp_path: Path) -> None:
    from core.errors import ConfigError
    from rolebase.cli import open_store, serve_store

    plain = open_store(store_dir=tmp_path / "a", ipfs_api=None, data_dir=tmp_path)
    assert isinstance(plain, LocalStore)  # the one-machine default: no peers, nothing served
    cid = plain.put(b"from host a")
    gateway = serve_store(plain, "127.0.0.1:0")
    try:
        other = open_store(store_dir=None, ipfs_api=None, data_dir=tmp_path / "b", peers=[gateway.url])
        assert isinstance(other, FetchingStore)
        assert other.get(cid, 100) == b"from host a"
        with pytest.raises(ConfigError, match="cannot listen there"):
            serve_store(other, f"127.0.0.1:{gateway.port}")  # taken
    finally:
        gateway.stop()
    with pytest.raises(ConfigError, match="--serve takes HOST:PORT"):
        serve_store(plain, "8080")
