"""IpfsStore against a real js-ipfs daemon, and against a server that lies."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler

import pytest

from core.cid import InvalidCid
from core.storage import (
    CidMismatch,
    ContentNotFound,
    ContentStore,
    ContentTooLarge,
    IpfsStore,
    LocalStore,
    StoreUnavailable,
    file_cid,
)
from deploy.anvil import free_port

from .conftest import Liar

ABSENT = "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"


def test_ipfs_store_is_a_content_store(ipfs_store: IpfsStore) -> None:
    assert isinstance(ipfs_store, ContentStore)


def test_round_trip_and_stat(ipfs_store: IpfsStore) -> None:
    data = os.urandom(700_000)
    cid = ipfs_store.put(data)
    assert cid == file_cid(data)
    assert ipfs_store.get(cid, max_size=len(data)) == data
    assert ipfs_store.has(cid)
    stat = ipfs_store.stat(cid)
    assert (stat.cid, stat.size, stat.pinned) == (cid, len(data), True)


def test_content_moves_between_backends(ipfs_store: IpfsStore, local_store: LocalStore) -> None:
    data = os.urandom(1_000_000)
    cid = local_store.put(data)
    assert ipfs_store.put(local_store.get(cid, 1 << 20)) == cid
    back = LocalStore(local_store.root.parent / "other")
    assert back.put(ipfs_store.get(cid, 1 << 20)) == cid


def test_oversize_is_rejected_with_the_limit(ipfs_store: IpfsStore) -> None:
    cid = ipfs_store.put(b"y" * 5000)
    with pytest.raises(ContentTooLarge, match="over the limit of 4999 bytes") as info:
        ipfs_store.get(cid, max_size=4999)
    assert (info.value.size, info.value.limit) == (5000, 4999)


def test_missing_content_error_names_the_cid(ipfs_store: IpfsStore) -> None:
    with pytest.raises(ContentNotFound, match=ABSENT) as info:
        ipfs_store.get(ABSENT, 100)
    assert info.value.cid == ABSENT
    with pytest.raises(ContentNotFound, match=ABSENT):
        ipfs_store.pin(ABSENT)
    assert not ipfs_store.has(ABSENT)


def test_pin_unpin(ipfs_store: IpfsStore) -> None:
    cid = ipfs_store.put(b"pin me " + os.urandom(8))
    ipfs_store.unpin(cid)
    ipfs_store.unpin(cid)  # unpinning twice is a no-op
    assert not ipfs_store.stat(cid).pinned
    ipfs_store.pin(cid)
    assert ipfs_store.stat(cid).pinned


def test_cidv1_argument_and_malformed_cids(ipfs_store: IpfsStore) -> None:
    ipfs_store.put(b"hello\n")
    assert ipfs_store.get("bafybeiffndsajwhk3lwjewwdxqntmjm4b5wxaaanokonsggenkbw6slwk4", 10) == b"hello\n"
    with pytest.raises(InvalidCid):
        ipfs_store.get("../../api/v0/shutdown", 10)


def test_closed_port_is_unavailable() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    store = IpfsStore(url, timeout=2.0)
    with pytest.raises(StoreUnavailable, match=url):
        store.put(b"x")
    with pytest.raises(StoreUnavailable, match=url):
        store.get(ABSENT, 10)


def test_non_http_url_is_refused() -> None:
    with pytest.raises(StoreUnavailable, match="http"):
        IpfsStore("file:///etc/passwd")


# -- a node that lies ------------------------------------------------------------------------------
def _stat(size: int) -> bytes:
    return json.dumps({"Type": "file", "Size": size}).encode()


def _serve_as_node(liar: Liar, cid: str, body: bytes, claimed_size: int | None = None) -> None:
    liar.routes["files/stat"] = Liar.reply(200, _stat(len(body) if claimed_size is None else claimed_size))
    liar.routes["pin/ls"] = Liar.reply(200, json.dumps({"Keys": {cid: {"Type": "recursive"}}}).encode())
    liar.routes["cat"] = Liar.reply(200, body, "application/octet-stream")


def test_bytes_of_another_cid_are_rejected(liar: Liar) -> None:
    asked, served = b"the real model", b"a poisoned model"
    cid = file_cid(asked)
    _serve_as_node(liar, cid, served)
    with pytest.raises(CidMismatch) as info:
        IpfsStore(liar.url).get(cid, 1000)
    assert (info.value.expected, info.value.got) == (cid, file_cid(served))


def test_truncated_stream_is_rejected(liar: Liar) -> None:
    data = os.urandom(600_000)
    cid = file_cid(data)
    _serve_as_node(liar, cid, data[:-1], claimed_size=len(data))
    with pytest.raises(CidMismatch, match=cid):
        IpfsStore(liar.url).get(cid, 1 << 20)


def test_endless_stream_under_a_small_stat_is_cut_at_the_limit(liar: Liar) -> None:
    cid = file_cid(b"small")
    sent = {"bytes": 0}

    def endless(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/octet-stream")
        handler.end_headers()  # no length: a stream that never ends
        piece = b"\xff" * 65536
        while sent["bytes"] < 1 << 30:
            handler.wfile.write(piece)
            sent["bytes"] += len(piece)

    _serve_as_node(liar, cid, b"")
    liar.routes["files/stat"] = Liar.reply(200, _stat(5))
    liar.routes["cat"] = endless
    with pytest.raises(ContentTooLarge, match="over the limit of 100000 bytes") as info:
        IpfsStore(liar.url).get(cid, 100_000)
    assert info.value.size is None
    assert sent["bytes"] < 1 << 30  # the client hung up long before the server ran dry


def test_node_returning_another_cid_on_add_is_rejected(liar: Liar) -> None:
    liar.routes["add"] = Liar.reply(200, json.dumps({"Name": "blob", "Hash": ABSENT, "Size": "14"}).encode())
    with pytest.raises(CidMismatch) as info:
        IpfsStore(liar.url).put(b"hello\n")
    assert (info.value.expected, info.value.got) == (file_cid(b"hello\n"), ABSENT)


@pytest.mark.parametrize(
    ("status", "body"),
    [
        pytest.param(502, b"<html>bad gateway</html>", id="html-error"),
        pytest.param(200, b"not json", id="garbage"),
        pytest.param(200, b"[1, 2]", id="not-an-object"),
        pytest.param(200, b'{"Size": "' + b"9" * (2 << 20) + b'"}', id="reply-over-1MiB"),
        pytest.param(200, b'{"Size": -5}', id="negative-size"),
    ],
)
def test_out_of_protocol_replies_make_the_store_unavailable(liar: Liar, status: int, body: bytes) -> None:
    liar.routes["files/stat"] = Liar.reply(status, body)
    with pytest.raises(StoreUnavailable, match=liar.url):
        IpfsStore(liar.url).stat(file_cid(b"x"))


@pytest.fixture
def silent_node() -> Iterator[str]:
    """A socket that accepts connections and never answers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"


def test_silent_node_times_out_as_unavailable(silent_node: str) -> None:
    store = IpfsStore(silent_node, timeout=0.5, lookup_timeout=0.5)
    with pytest.raises(StoreUnavailable, match="Timeout"):
        store.get(ABSENT, 10)
