"""Content from other hosts: a store that fetches what it lacks from peers' trustless gateways.

:class:`FetchingStore` answers from its own store first; on a miss it asks the peer gateways (the
``--peer`` URLs, then those the parties announced on chain: other parties' ``--serve`` addresses, or
any IPFS trustless gateway) for the content by raw blocks: the root from **every** gateway at once
(the first verified answer wins), then its children, each block from the gateway that answered first
and, should it fail, from the others in turn. Every block is checked against the digest its parent
names before it is parsed, and against what its parent declares: the DAG must be the one ``ipfs add``
builds for the size its verified root declares (:func:`core.storage.unixfs.canonical_children`), so a
gateway cannot make a fetch ask for more blocks or hold more bytes than that size, whatever its links
repeat or fan out. No redirect is followed off the gateway's origin. An https gateway is verified
against the system's trust store, plus the ``tls`` context's CAs if given (``--peer-ca``:
:func:`core.storage.tls.client_context`); one whose certificate does not verify is a failing source
like any other (logged once per store), never asked again over plain HTTP. Every fetch has an overall
deadline (``timeout`` plus the declared size at ``min_rate``) and each block one of ``timeout``: a
gateway that stalls or drips is abandoned in time to use another source, or to challenge. What it
fetches it keeps (pinned) in its own store, so this party serves it on in turn. Content that no
gateway gave is :class:`ContentNotFound`, naming every place looked in and why.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import ssl
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import urljoin, urlsplit

import aiohttp

from core.cid import Cid, block_cid, cid_to_digest, digest_to_cid, to_v0
from core.config import redact_url
from core.storage.base import ContentStat, ContentStore, check_max_size
from core.storage.errors import CidMismatch, ContentNotFound, ContentTooLarge, StorageError, StoreUnavailable
from core.storage.gateway import RAW_BLOCK
from core.storage.unixfs import MAX_BLOCK, FileNode, canonical_children, dag_height, read_block

__all__ = ["GatewayFetcher", "FetchingStore", "MAX_PEERS", "FETCHED_FROM_PEER", "UNVERIFIED_GATEWAY", "MIN_RATE", "parse_peer"]

#: Logged for each item fetched from a peer gateway (``cid``, ``peer``, ``bytes``).
FETCHED_FROM_PEER = "fetched from a peer"
#: Logged once per store for each https gateway whose certificate does not verify (``peer``, ``error``).
UNVERIFIED_GATEWAY = "gateway certificate not verified: not fetched from it"

log = logging.getLogger(__name__)

MAX_PEERS = 32
#: The slowest average a fetch may take, in bytes a second: its deadline is ``timeout`` plus its
#: declared size at this rate (a 1.5 GB checkpoint: 30 s + 150 s).
MIN_RATE = 10_000_000
_PARALLEL = 8  # blocks in flight per fetch
_MAX_REDIRECTS = 2  # to the same origin only
_PIECE = 1 << 16
T = TypeVar("T")


def parse_peer(url: str) -> str:
    """A gateway base URL (``http(s)://host[:port]``, no path), or StoreUnavailable saying why not."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/") or parts.query:
        raise StoreUnavailable(redact_url(url), "a peer gateway is http(s)://host:port")
    return url.rstrip("/")


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme, (parts.hostname or "").lower(), parts.port or {"http": 80, "https": 443}.get(parts.scheme)


class _Gave(Exception):
    """One gateway did not give one block: why, as an error a caller may raise."""

    def __init__(self, error: StorageError) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass
class _Source:
    """One gateway as a fetch sees it."""

    url: str
    shown: str


class _Fetch:
    """One file fetched from ``sources`` over ``session``: the engine of :class:`GatewayFetcher` and
    :class:`FetchingStore` (async, in a loop of the calling thread's own)."""

    def __init__(self, session: aiohttp.ClientSession, sources: list[_Source], timeout: float, min_rate: float) -> None:
        self.session = session
        self.sources = sources
        self.timeout = timeout
        self.min_rate = min_rate
        self.failures: dict[str, str] = {}  # gateway shown -> why it was dropped
        self.unverified: dict[str, str] = {}  # gateway shown -> why its certificate did not verify
        self.requests = 0

    async def block(self, source: _Source, digest: bytes, limit: int) -> bytes:
        """The block ``digest`` from ``source``, at most ``limit`` bytes, within ``timeout``; _Gave otherwise."""
        cid = digest_to_cid(digest)
        url = f"{source.url}/ipfs/{cid}?format=raw"
        try:
            async with asyncio.timeout(self.timeout):
                for _ in range(_MAX_REDIRECTS + 1):
                    self.requests += 1
                    async with self.session.get(url, headers={"Accept": RAW_BLOCK}, allow_redirects=False) as resp:
                        if resp.status in (301, 302, 303, 307, 308):
                            target = urljoin(url, resp.headers.get("Location", ""))
                            if _origin(target) != _origin(source.url):
                                raise _Gave(StoreUnavailable(source.shown, f"block {cid}: redirected to {redact_url(target)}, another origin: refused"))
                            url = target
                            continue
                        if resp.status == 404:
                            raise _Gave(ContentNotFound(cid, f"gateway {source.shown}"))
                        if resp.status != 200:
                            raise _Gave(StoreUnavailable(source.shown, f"block {cid}: HTTP {resp.status}"))
                        if resp.content_length is not None and resp.content_length > limit:
                            raise _Gave(StoreUnavailable(source.shown, f"block {cid}: {resp.content_length} bytes, over the {limit} its parent allows"))
                        body = bytearray()
                        async for piece in resp.content.iter_chunked(_PIECE):
                            body += piece
                            if len(body) > limit:
                                raise _Gave(StoreUnavailable(source.shown, f"block {cid}: longer than the {limit} bytes its parent allows"))
                        break
                else:
                    raise _Gave(StoreUnavailable(source.shown, f"block {cid}: more than {_MAX_REDIRECTS} redirects"))
        except TimeoutError:
            raise _Gave(StoreUnavailable(source.shown, f"block {cid}: not received within {self.timeout:g} s")) from None
        except aiohttp.ClientConnectorCertificateError as e:
            cert = e.certificate_error
            why = cert.verify_message if isinstance(cert, ssl.SSLCertVerificationError) and cert.verify_message else type(cert).__name__
            self.unverified[source.shown] = why
            raise _Gave(StoreUnavailable(source.shown, f"block {cid}: TLS certificate not verified ({why})")) from None
        except aiohttp.ClientError as e:
            kind = "ConnectionError" if isinstance(e, aiohttp.ClientConnectionError) else type(e).__name__
            raise _Gave(StoreUnavailable(source.shown, f"block {cid}: {kind}")) from None
        if hashlib.sha256(body).digest() != digest:
            raise _Gave(CidMismatch(cid, block_cid(bytes(body))))
        return bytes(body)

    async def node(self, source: _Source, digest: bytes, limit: int, size: int | None, height: int | None) -> FileNode:
        """The block ``digest`` from ``source``, parsed and held to what its parent declared: ``size``
        file bytes at ``height`` in the canonical DAG (None for the root: anything up to the caller)."""
        block = await self.block(source, digest, limit)
        cid = digest_to_cid(digest)
        try:
            node = read_block(block)
        except ValueError as e:
            raise _Gave(StoreUnavailable(source.shown, f"block {cid} is not a UnixFS file block: {e}")) from None
        if size is not None and node.file_size != size:
            raise _Gave(StoreUnavailable(source.shown, f"block {cid} holds {node.file_size} file bytes, its parent declares {size}"))
        height = dag_height(node.file_size) if height is None else height
        expected = canonical_children(node.file_size, height) if height else []
        if [link.file_size for link in node.links] != expected:
            raise _Gave(
                StoreUnavailable(
                    source.shown,
                    f"block {cid} is not the DAG `ipfs add` builds for {node.file_size} bytes (children of {[link.file_size for link in node.links][:4]}... bytes)",
                )
            )
        return node

    async def first(self, digest: bytes, limit: int, size: int | None, height: int | None, sources: list[_Source]) -> tuple[_Source, FileNode]:
        """The node ``digest`` from the first of ``sources`` to give it verified; a source that
        fails is dropped from this fetch (``failures``). _Gave with the last reason if none does."""
        last: StorageError = ContentNotFound(digest_to_cid(digest), "no gateway")
        for source in sources:
            if source.shown in self.failures:
                continue
            try:
                return source, await self.node(source, digest, limit, size, height)
            except _Gave as gave:
                last = gave.error
                if not isinstance(gave.error, ContentNotFound):
                    self.failures[source.shown] = str(gave.error)
        raise _Gave(last)

    async def race(self, digest: bytes) -> tuple[_Source, FileNode]:
        """The root block from every source at once: the first verified answer wins, the rest are cancelled."""

        async def ask(source: _Source) -> tuple[_Source, FileNode]:
            try:
                return source, await self.node(source, digest, MAX_BLOCK, None, None)
            except _Gave as gave:
                if not isinstance(gave.error, ContentNotFound):
                    self.failures[source.shown] = str(gave.error)
                raise

        tasks = [asyncio.ensure_future(ask(s)) for s in self.sources]
        try:
            last: StorageError = ContentNotFound(digest_to_cid(digest), "no gateway")
            for done in asyncio.as_completed(tasks):
                try:
                    return await done
                except _Gave as gave:
                    last = gave.error
            raise _Gave(last)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def file(self, v0: Cid, max_size: int) -> tuple[bytes, _Source]:
        """The file ``v0`` names, verified block by block, within its deadline; and who gave its root."""
        started = time.monotonic()
        winner, root = await self.race(cid_to_digest(v0))
        if root.file_size > max_size:
            raise ContentTooLarge(v0, root.file_size, max_size)
        budget = self.timeout + root.file_size / self.min_rate
        try:
            async with asyncio.timeout(budget - (time.monotonic() - started)):
                return await self._below(root, winner), winner
        except TimeoutError:
            raise _Gave(StoreUnavailable(winner.shown, f"{v0}: not fetched within its deadline of {budget:.0f} s ({root.file_size} bytes)")) from None

    async def _below(self, root: FileNode, winner: _Source) -> bytes:
        """The file bytes under ``root``, fetching each distinct block once, ``_PARALLEL`` at a time."""
        if not root.links:
            return root.data
        out = bytearray(root.file_size)  # the declared size, at most the caller's limit
        order = [winner] + [s for s in self.sources if s is not winner]
        gate = asyncio.Semaphore(_PARALLEL)
        level: list[tuple[int, FileNode]] = [(0, root)]  # (file offset, node)
        height = dag_height(root.file_size)
        while level:
            height -= 1
            wanted: dict[bytes, tuple[int, int]] = {}  # distinct digest -> (block limit, file bytes)
            placed: list[tuple[int, bytes]] = []
            for offset, node in level:
                for link in node.links:
                    wanted.setdefault(link.digest, (min(MAX_BLOCK, link.tsize), link.file_size))
                    placed.append((offset, link.digest))
                    offset += link.file_size

            async def one(digest: bytes, limit: int, size: int, at: int) -> tuple[bytes, FileNode]:
                async with gate:
                    return digest, (await self.first(digest, limit, size, at, order))[1]

            got = dict(await asyncio.gather(*(one(d, lim, size, height) for d, (lim, size) in wanted.items())))
            if height == 0:
                for offset, digest in placed:
                    data = got[digest].data
                    out[offset : offset + len(data)] = data
                level = []
            else:
                level = [(offset, got[digest]) for offset, digest in placed]
        return bytes(out)


def _run(sources: list[_Source], timeout: float, min_rate: float, tls: ssl.SSLContext | None, work: Callable[[_Fetch], Awaitable[T]]) -> T:
    """Run ``work`` (a coroutine function of a :class:`_Fetch`) in a loop of this thread's own; https
    verified with ``tls``, else aiohttp's default (the system's trust store)."""

    async def main() -> T:
        connector = aiohttp.TCPConnector(limit=_PARALLEL * 2, force_close=False, ssl=tls if tls is not None else True)
        conn_timeout = aiohttp.ClientTimeout(total=None, sock_connect=min(5.0, timeout))
        async with aiohttp.ClientSession(connector=connector, timeout=conn_timeout, auto_decompress=False) as session:
            return await work(_Fetch(session, sources, timeout, min_rate))

    # A loop of our own, not asyncio.run: in the main thread that installs a SIGINT handler whose check
    # formats the main task, result included (a whole file: seconds of repr for a large one).
    loop = asyncio.new_event_loop()
    try:
        return loop.run_until_complete(main())
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


class GatewayFetcher:
    """Fetches a file by CID from one trustless gateway, block by block, every block verified; an https
    one verified with ``tls`` (:func:`core.storage.tls.client_context`; None: the system's trust store)."""

    def __init__(self, url: str, *, timeout: float = 30.0, min_rate: float = MIN_RATE, tls: ssl.SSLContext | None = None) -> None:
        self.url = parse_peer(url)
        self.shown = redact_url(self.url)
        self.timeout = timeout
        self.min_rate = min_rate
        self.tls = tls

    def __repr__(self) -> str:
        return f"GatewayFetcher({self.shown!r})"

    def block(self, digest: bytes) -> bytes:
        """The block whose sha2-256 is ``digest``: ContentNotFound, StoreUnavailable or CidMismatch otherwise."""

        async def work(fetch: _Fetch) -> bytes:
            return await fetch.block(fetch.sources[0], digest, MAX_BLOCK)

        try:
            return _run([_Source(self.url, self.shown)], self.timeout, self.min_rate, self.tls, work)
        except _Gave as gave:
            raise gave.error from None

    def fetch(self, cid: str, max_size: int) -> bytes:
        """The file ``cid`` names, at most ``max_size`` bytes (ContentTooLarge, from its verified root, if more)."""
        check_max_size(max_size)
        v0 = to_v0(cid)

        async def work(fetch: _Fetch) -> bytes:
            return (await fetch.file(v0, max_size))[0]

        try:
            return _run([_Source(self.url, self.shown)], self.timeout, self.min_rate, self.tls, work)
        except _Gave as gave:
            raise gave.error from None


class FetchingStore:
    """A :class:`ContentStore`: ``own`` first; what it lacks, fetched from ``peers`` and the gateways
    ``discover()`` names now (those announced on chain, ranked: :mod:`rolebase.gateways`), all asked at
    once, and kept in ``own``. ``timeout``: seconds for any one block (and the root); ``min_rate``: the
    slowest average, in bytes a second, a whole fetch may take (its deadline: ``timeout`` plus its
    declared size at that rate); ``tls``: what https gateways are verified with (None: the system's
    trust store)."""

    def __init__(
        self,
        own: ContentStore,
        peers: Sequence[str],
        *,
        discover: Callable[[], Sequence[str]] | None = None,
        timeout: float = 30.0,
        min_rate: float = MIN_RATE,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        if len(peers) > MAX_PEERS:
            raise StoreUnavailable(f"{len(peers)} peers", f"at most {MAX_PEERS} peer gateways")
        if timeout <= 0 or min_rate <= 0:
            raise ValueError(f"timeout and min_rate must be positive, got {timeout!r} and {min_rate!r}")
        self.own = own
        self.peers = [GatewayFetcher(url, timeout=timeout, min_rate=min_rate, tls=tls) for url in peers]
        self._discover = discover
        self._timeout = timeout
        self._min_rate = min_rate
        self._tls = tls
        self._unverified: set[str] = set()  # gateways whose certificate failure was logged (by any thread)
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"FetchingStore({self.own!r}, {[p.shown for p in self.peers]})"

    def _gateways(self) -> list[_Source]:
        """The ``--peer`` gateways, then the discovered ones, at most MAX_PEERS in all."""
        sources = [_Source(p.url, p.shown) for p in self.peers]
        known = {s.url for s in sources}
        for url in list(self._discover()) if self._discover is not None else []:
            if len(sources) >= MAX_PEERS:
                break
            try:
                url = parse_peer(url)
            except StoreUnavailable:
                continue
            if url not in known:
                known.add(url)
                sources.append(_Source(url, redact_url(url)))
        return sources

    def get(self, cid: str, max_size: int) -> bytes:
        try:
            return self.own.get(cid, max_size)
        except ContentNotFound:
            pass
        check_max_size(max_size)
        v0 = to_v0(cid)
        sources = self._gateways()
        places = [repr(self.own), *(f"gateway {s.shown}" for s in sources)]
        if not sources:
            raise ContentNotFound(v0, " or ".join(places))

        failures: dict[str, str] = {}
        unverified: dict[str, str] = {}

        async def work(fetch: _Fetch) -> tuple[bytes, _Source]:
            fetch.failures, fetch.unverified = failures, unverified  # read below, whatever happens
            return await fetch.file(v0, max_size)

        try:
            data, source = _run(sources, self._timeout, self._min_rate, self._tls, work)
        except _Gave as gave:
            failures.setdefault("", str(gave.error))
            why = "; ".join(sorted(set(failures.values())))[:500]
            log.warning("no peer gateway gave the content", extra={"cid": v0, "error": why})
            raise ContentNotFound(v0, " or ".join(places) + (f" ({why})" if not isinstance(gave.error, ContentNotFound) or len(failures) > 1 else "")) from None
        finally:
            with self._lock:
                first = {shown: reason for shown, reason in unverified.items() if shown not in self._unverified}
                self._unverified.update(first)
            for shown, reason in first.items():
                log.warning(UNVERIFIED_GATEWAY, extra={"peer": shown, "error": reason})
        self.own.put(data)  # verified already; kept so that this party serves it on
        log.info(FETCHED_FROM_PEER, extra={"cid": v0, "peer": source.shown, "bytes": len(data)})
        return data

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
