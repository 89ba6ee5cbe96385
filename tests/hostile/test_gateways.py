"""Hostile trustless gateways against the fetcher (core.storage.peers), each a local HTTP server on
127.0.0.1: redirects off the origin, DAGs whose links fan out or repeat, blocks larger than their
parent declares, a gateway that drips one byte at a time or never answers. The fetcher must not be
led, must send no more requests than the canonical DAG of the declared size needs, and must give up
in time or take the content from an honest gateway asked at the same time."""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from core.cid import cid_to_digest, digest_to_cid
from core.storage import ContentNotFound, ContentTooLarge, LocalStore, StoreUnavailable
from core.storage.gateway import GatewayServer
from core.storage.peers import FetchingStore, GatewayFetcher
from core.storage.unixfs import CHUNK_SIZE, MAX_LINKS, DagBuilder, Link, leaf_block, parent_block

#: ``behave(handler, cid)``: answers one request (the handler's ``send_*``/``wfile``).
Behaviour = Callable[[BaseHTTPRequestHandler, str], None]


class Hostile:
    """A gateway on 127.0.0.1 that serves ``blocks`` (digest -> block) as an honest one would, unless
    ``behave`` answers a request its own way; it counts the requests it gets."""

    def __init__(self, blocks: dict[bytes, bytes], behave: Behaviour | None = None) -> None:
        self.blocks = blocks
        self.requests = 0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                outer.requests += 1
                cid = self.path.split("/ipfs/", 1)[-1].split("?", 1)[0]
                if behave is not None:
                    behave(self, cid)
                    return
                block = outer.blocks.get(cid_to_digest(cid))
                if block is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                send(self, block)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def send(handler: BaseHTTPRequestHandler, body: bytes) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/vnd.ipld.raw")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


@pytest.fixture
def hostile() -> Iterator[Callable[..., Hostile]]:
    made: list[Hostile] = []

    def make(blocks: dict[bytes, bytes], behave: Behaviour | None = None) -> Hostile:
        made.append(Hostile(blocks, behave))
        return made[-1]

    yield make
    for server in made:
        server.close()


def dag(data: bytes) -> tuple[str, dict[bytes, bytes]]:
    blocks: dict[bytes, bytes] = {}
    builder = DagBuilder(lambda digest, block: blocks.__setitem__(digest, block))
    builder.write(data)
    return builder.finish(), blocks


def digest(block: bytes) -> bytes:
    return hashlib.sha256(block).digest()


def test_a_redirect_off_the_origin_is_refused_and_one_on_it_followed(hostile: Callable[..., Hostile], tmp_path: Path) -> None:
    cid, blocks = dag(b"content the fetcher must not be led to")
    elsewhere = hostile(blocks)  # another origin (port), holding the real content: an internal service, say

    def off(handler: BaseHTTPRequestHandler, asked: str) -> None:
        handler.send_response(302)
        handler.send_header("Location", f"{elsewhere.url}/ipfs/{asked}?format=raw")
        handler.end_headers()

    leading = hostile({}, off)
    with pytest.raises(StoreUnavailable, match="another origin: refused"):
        GatewayFetcher(leading.url, timeout=5).fetch(cid, 1 << 20)
    assert elsewhere.requests == 0, "the redirect was not followed"
    with pytest.raises(ContentNotFound, match="another origin: refused"):
        FetchingStore(LocalStore(tmp_path / "a"), [leading.url], timeout=5).get(cid, 1 << 20)
    assert elsewhere.requests == 0

    def same(handler: BaseHTTPRequestHandler, asked: str) -> None:
        if handler.path.startswith("/moved/"):
            send(handler, blocks[cid_to_digest(asked)])
            return
        handler.send_response(307)
        handler.send_header("Location", f"/moved/ipfs/{asked}?format=raw")
        handler.end_headers()

    moving = hostile({}, same)
    assert GatewayFetcher(moving.url, timeout=5).fetch(cid, 1 << 20) == b"content the fetcher must not be led to"


def test_links_that_fan_out_or_repeat_drive_no_more_requests_than_the_declared_size(hostile: Callable[..., Hostile], tmp_path: Path) -> None:
    # the attack of issue 26: a root linking 1,000 times to one child that links 1,000 times to a leaf
    leaf = leaf_block(b"x")
    child = parent_block([Link(digest(leaf), len(leaf), 1)] * MAX_LINKS)
    fanned = bytearray()
    for _ in range(1000):  # written by hand: parent_block refuses more than MAX_LINKS links
        fanned += b"\x12" + bytes([42]) + b"\x0a\x22\x12\x20" + digest(child) + b"\x12\x00\x18" + bytes([0x80, 0x80, 0x01])
    fanned += b"\x0a\x04\x08\x02\x18\x00"
    root = bytes(fanned)
    server = hostile({digest(b): b for b in (leaf, child, root)})
    with pytest.raises(StoreUnavailable, match="not a UnixFS file block: a UnixFS parent block links to more than 174"):
        GatewayFetcher(server.url, timeout=5).fetch(digest_to_cid(digest(root)), 1 << 40)
    assert server.requests == 1

    # within the link limit but not the DAG of its size: 174 one-byte leaves declared under a parent
    server.requests = 0
    with pytest.raises(StoreUnavailable, match="not the DAG `ipfs add` builds for 174 bytes"):
        GatewayFetcher(server.url, timeout=5).fetch(digest_to_cid(digest(child)), 1 << 40)
    assert server.requests == 1

    # the canonical DAG of 174 equal chunks repeats one leaf 174 times: fetched once, all bytes right
    chunk = bytes(range(256)) * (CHUNK_SIZE // 256)
    cid, blocks = dag(chunk * MAX_LINKS)
    assert len(blocks) == 2  # the root and one distinct leaf
    server = hostile(blocks)
    mine = LocalStore(tmp_path / "mine")
    assert FetchingStore(mine, [server.url], timeout=10).get(cid, len(chunk) * MAX_LINKS) == chunk * MAX_LINKS
    assert server.requests == 2
    # a declared size over the caller's limit is refused from the root, before any child is asked for
    server.requests = 0
    with pytest.raises(ContentTooLarge):
        GatewayFetcher(server.url, timeout=5).fetch(cid, CHUNK_SIZE)
    assert server.requests == 1


def test_a_block_larger_than_its_parent_declares_is_cut_off(hostile: Callable[..., Hostile]) -> None:
    data = b"a" * (CHUNK_SIZE + 10)
    cid, blocks = dag(data)
    root = blocks[cid_to_digest(cid)]
    padded = {d: b + b"\0" * 100_000 if b != root else b for d, b in blocks.items()}  # leaves grown (hashes no longer match)

    def grown(handler: BaseHTTPRequestHandler, asked: str) -> None:
        send(handler, padded[cid_to_digest(asked)])

    server = hostile({}, grown)
    with pytest.raises(StoreUnavailable, match="over the 262158 its parent allows|its parent allows"):
        GatewayFetcher(server.url, timeout=5).fetch(cid, 1 << 20)


def test_a_dripping_gateway_is_abandoned_and_an_honest_one_asked_at_once_wins(hostile: Callable[..., Hostile], tmp_path: Path) -> None:
    data = bytes(range(256)) * 3000  # three leaves
    cid, blocks = dag(data)

    def drip(handler: BaseHTTPRequestHandler, asked: str) -> None:
        body = blocks[cid_to_digest(asked)]
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        try:
            for byte in body:  # 200, then one byte at a time, never done in time
                handler.wfile.write(bytes([byte]))
                handler.wfile.flush()
                time.sleep(0.5)
        except OSError:
            pass

    dripping = hostile({}, drip)
    started = time.monotonic()
    with pytest.raises(StoreUnavailable, match="not received within 2 s"):
        GatewayFetcher(dripping.url, timeout=2).fetch(cid, 1 << 20)
    assert time.monotonic() - started < 30, "abandoned at its deadline, not when the drip ends (hours)"

    honest = LocalStore(tmp_path / "honest")
    honest.put(data)
    with GatewayServer(honest) as server:
        mine = LocalStore(tmp_path / "mine")
        fetching = FetchingStore(mine, [dripping.url, server.url], timeout=60)
        started = time.monotonic()
        assert fetching.get(cid, 1 << 20) == data
        assert time.monotonic() - started < 30, "the honest answer won; the drip (60 s a block) was not waited for"


def test_a_silent_gateway_makes_the_fetch_fail_by_its_deadline_with_a_clear_error(hostile: Callable[..., Hostile], tmp_path: Path) -> None:
    def silent(handler: BaseHTTPRequestHandler, asked: str) -> None:
        time.sleep(20)

    server = hostile({}, silent)
    started = time.monotonic()
    with pytest.raises(ContentNotFound, match=r"not found in .* or gateway http://127.0.0.1:\d+ \(.*not received within 1 s\)"):
        FetchingStore(LocalStore(tmp_path / "mine"), [server.url], timeout=1).get(dag(b"x")[0], 100)
    assert time.monotonic() - started < 15


def test_a_whole_fetch_has_a_deadline_from_its_declared_size(hostile: Callable[..., Hostile]) -> None:
    """Every block arrives within its own timeout, but the file as a whole too slowly: abandoned."""
    data = bytes(i % 251 for i in range(4 * CHUNK_SIZE))  # four different leaves
    cid, blocks = dag(data)
    root = cid_to_digest(cid)
    one_at_a_time = threading.Lock()

    def slow(handler: BaseHTTPRequestHandler, asked: str) -> None:
        with one_at_a_time:
            if cid_to_digest(asked) != root:
                time.sleep(0.8)
            send(handler, blocks[cid_to_digest(asked)])

    server = hostile({}, slow)
    with pytest.raises(StoreUnavailable, match=r"not fetched within its deadline of 1 s \(1048576 bytes\)"):
        GatewayFetcher(server.url, timeout=1, min_rate=1 << 40).fetch(cid, 1 << 21)
