"""Content from other hosts: a store that fetches what it lacks from peers' trustless gateways.

:class:`FetchingStore` answers from its own store first; on a miss it asks each peer gateway (the
``--peer`` URLs, then those the parties announced on chain: other parties' ``--serve`` addresses, or
any IPFS trustless gateway) for the content
by raw blocks (:class:`GatewayFetcher`): the root, then its children, each block checked against the
digest its parent names before it is parsed, so every byte is verified against the CID asked for
before it is used or stored. What it fetches it keeps (pinned) in its own store, so this party serves
it on in turn. A peer that is down, slow or lying is logged and skipped; content that no peer has is
:class:`ContentNotFound`, naming every place looked in.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit

import requests

from core.cid import Cid, block_cid, cid_to_digest, digest_to_cid, to_v0
from core.config import redact_url
from core.storage.base import ContentStat, ContentStore, check_max_size
from core.storage.errors import CidMismatch, ContentNotFound, ContentTooLarge, StorageError, StoreUnavailable
from core.storage.unixfs import MAX_BLOCK, FileNode, read_block

__all__ = ["GatewayFetcher", "FetchingStore", "MAX_PEERS", "FETCHED_FROM_PEER", "parse_peer"]

#: Logged for each item fetched from a peer gateway (``cid``, ``peer``, ``bytes``).
FETCHED_FROM_PEER = "fetched from a peer"

log = logging.getLogger(__name__)

MAX_PEERS = 32
_MAX_DEPTH = 8  # 174^7 leaves of 256 KiB: beyond any file
_PARALLEL = 8  # blocks in flight per fetch


def parse_peer(url: str) -> str:
    """A gateway base URL (``http(s)://host[:port]``, no path), or StoreUnavailable saying why not."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/") or parts.query:
        raise StoreUnavailable(redact_url(url), "a peer gateway is http(s)://host:port")
    return url.rstrip("/")


class GatewayFetcher:
    """Fetches a file by CID from one trustless gateway, block by block, every block verified."""

    def __init__(self, url: str, *, timeout: float = 30.0) -> None:
        self.url = parse_peer(url)
        self.shown = redact_url(self.url)
        self.timeout = timeout
        self._local = threading.local()

    def __repr__(self) -> str:
        return f"GatewayFetcher({self.shown!r})"

    def _session(self) -> requests.Session:
        session: requests.Session | None = getattr(self._local, "session", None)
        if session is None:
            session = self._local.session = requests.Session()
        return session

    def block(self, digest: bytes) -> bytes:
        """The block whose sha2-256 is ``digest``: ContentNotFound, StoreUnavailable or CidMismatch otherwise."""
        cid = digest_to_cid(digest)
        try:
            with self._session().get(
                f"{self.url}/ipfs/{cid}", params={"format": "raw"}, headers={"Accept": "application/vnd.ipld.raw"}, stream=True, timeout=(5.0, self.timeout)
            ) as resp:
                if resp.status_code == 404:
                    raise ContentNotFound(cid, f"gateway {self.shown}")
                if resp.status_code != 200:
                    raise StoreUnavailable(self.shown, f"block {cid}: HTTP {resp.status_code}")
                body = bytearray()
                for piece in resp.iter_content(1 << 16):
                    body += piece
                    if len(body) > MAX_BLOCK:
                        raise StoreUnavailable(self.shown, f"block {cid}: longer than {MAX_BLOCK} bytes")
        except requests.RequestException as e:
            raise StoreUnavailable(self.shown, f"block {cid}: {type(e).__name__}") from e
        if hashlib.sha256(body).digest() != digest:
            raise CidMismatch(cid, block_cid(bytes(body)))
        return bytes(body)

    def _node(self, digest: bytes) -> FileNode:
        block = self.block(digest)
        try:
            return read_block(block)
        except ValueError as e:
            raise StoreUnavailable(self.shown, f"block {digest_to_cid(digest)} is not a UnixFS file block: {e}") from None

    def fetch(self, cid: str, max_size: int) -> bytes:
        """The file ``cid`` names, at most ``max_size`` bytes (ContentTooLarge, from its verified root, if more)."""
        check_max_size(max_size)
        v0 = to_v0(cid)
        root = self._node(cid_to_digest(v0))
        if root.file_size > max_size:
            raise ContentTooLarge(v0, root.file_size, max_size)
        out = bytearray()
        with ThreadPoolExecutor(_PARALLEL) as pool:
            self._walk(root, 0, out, pool, v0, max_size)
        if len(out) != root.file_size:
            raise StoreUnavailable(self.shown, f"{v0}: its blocks hold {len(out)} bytes, its root says {root.file_size}")
        return bytes(out)

    def _walk(self, node: FileNode, depth: int, out: bytearray, pool: ThreadPoolExecutor, cid: Cid, max_size: int) -> None:
        if not node.children:
            out += node.data
            if len(out) > max_size:
                raise ContentTooLarge(cid, None, max_size)
            return
        if depth >= _MAX_DEPTH:
            raise StoreUnavailable(self.shown, f"{cid}: DAG deeper than {_MAX_DEPTH} levels")
        for child in pool.map(self._node, node.children):  # in order, _PARALLEL in flight
            self._walk(child, depth + 1, out, pool, cid, max_size)


class FetchingStore:
    """A :class:`ContentStore`: ``own`` first; what it lacks, fetched from ``peers`` and then from the
    gateways ``discover()`` names now (those announced on chain: :mod:`rolebase.gateways`), and kept in ``own``."""

    def __init__(self, own: ContentStore, peers: Sequence[str], *, discover: Callable[[], Sequence[str]] | None = None, timeout: float = 30.0) -> None:
        if len(peers) > MAX_PEERS:
            raise StoreUnavailable(f"{len(peers)} peers", f"at most {MAX_PEERS} peer gateways")
        self.own = own
        self.peers = [GatewayFetcher(url, timeout=timeout) for url in peers]
        self._discover = discover
        self._timeout = timeout
        self._found: dict[str, GatewayFetcher] = {}

    def __repr__(self) -> str:
        return f"FetchingStore({self.own!r}, {[p.shown for p in self.peers]})"

    def _gateways(self) -> list[GatewayFetcher]:
        """The ``--peer`` gateways, then the discovered ones (at most MAX_PEERS of them)."""
        gateways = list(self.peers)
        known = {p.url for p in gateways}
        for url in list(self._discover())[:MAX_PEERS] if self._discover is not None else []:
            fetcher = self._found.get(url) or self._found.setdefault(url, GatewayFetcher(url, timeout=self._timeout))
            if fetcher.url not in known:
                known.add(fetcher.url)
                gateways.append(fetcher)
        return gateways

    def get(self, cid: str, max_size: int) -> bytes:
        try:
            return self.own.get(cid, max_size)
        except ContentNotFound:
            pass
        v0 = to_v0(cid)
        gateways = self._gateways()
        for peer in gateways:
            try:
                data = peer.fetch(v0, max_size)
            except ContentTooLarge:
                raise  # the size its verified root block says
            except ContentNotFound:
                continue
            except StorageError as exc:  # down, slow, or serving bytes that are not the CID's
                log.warning("peer gateway failed", extra={"cid": v0, "peer": peer.shown, "error": str(exc)})
                continue
            self.own.put(data)  # verified already; kept so that this party serves it on
            log.info(FETCHED_FROM_PEER, extra={"cid": v0, "peer": peer.shown, "bytes": len(data)})
            return data
        raise ContentNotFound(v0, " or ".join([repr(self.own), *(f"gateway {p.shown}" for p in gateways)]))

    def put(self, data: bytes) -> Cid:
        return self.own.put(data)

    def has(self, cid: str) -> bool:
        return self.own.has(cid)

    def stat(self, cid: str) -> ContentStat:
        return self.own.stat(cid)

    def pin(self, cid: str) -> None:
        self.own.pin(cid)

    def unpin(self, cid: str) -> None:
        self.own.unpin(cid)
