"""A read-only IPFS trustless gateway over a :class:`LocalStore`: the blocks of what a party keeps.

Every daemon started with ``--serve HOST:PORT`` runs one (docs/storage.md, "Across hosts"), so that
parties on other hosts can fetch what it must keep available (a solver's manifest, checkpoints and
model, a verifier's report, a submitter's spec and data) and check every byte against its CID
(:mod:`core.storage.peers`); over HTTPS when given a certificate (:mod:`core.storage.tls`), and then
only HTTPS: a plain request to its port gets no block. The protocol is the IPFS trustless gateway's block request::

    GET /ipfs/{cid}?format=raw          (or Accept: application/vnd.ipld.raw)
    200 application/vnd.ipld.raw        the dag-pb block whose sha2-256 the CID names
    404                                 not a block of pinned content here (remembered: LocalStore.take_wanted)
    400 / 406                           not a CID / another format than raw blocks

Only **pinned** content is served (what the store keeps; an unpinned blob is on its way out). A file's
blocks are found by indexing it when its root is first asked for (the fetcher always starts at the
root): its parent blocks are kept in memory, its leaves as offsets into the blob, each leaf rebuilt
from the blob and checked against its digest before it is sent, since nothing trusts the disk.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import socket
import ssl
import threading
from dataclasses import dataclass

from aiohttp import web

from core.cid import Cid, InvalidCid, cid_to_digest, digest_to_cid
from core.storage.errors import StorageError
from core.storage.local import LocalStore
from core.storage.unixfs import CHUNK_SIZE, DagBuilder, leaf_block, read_block

__all__ = ["BlockIndex", "GatewayServer", "RAW_BLOCK", "MAX_INDEXED_FILE"]

log = logging.getLogger(__name__)

RAW_BLOCK = "application/vnd.ipld.raw"
#: The largest file indexed (read whole once, to find its blocks): above any content limit of the protocol.
MAX_INDEXED_FILE = 4 << 30


@dataclass(frozen=True)
class _Leaf:
    root: Cid
    offset: int
    length: int


class BlockIndex:
    """Finds the block a digest names among the pinned files of ``store``; thread-safe."""

    def __init__(self, store: LocalStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._parents: dict[bytes, tuple[Cid, bytes]] = {}
        self._leaves: dict[bytes, _Leaf] = {}
        self._indexed: set[Cid] = set()

    def block(self, cid: Cid) -> bytes | None:
        """The block ``cid`` names if it belongs to a pinned file here, else None."""
        digest = cid_to_digest(cid)
        with self._lock:
            if cid not in self._indexed and self._pinned(cid):
                self._index(cid)
            parent, leaf = self._parents.get(digest), self._leaves.get(digest)
        root = parent[0] if parent is not None else leaf.root if leaf is not None else None
        if root is None:
            self.store.want(cid)  # the party may make it (a solver regenerates a dropped checkpoint)
            return None
        if not self._pinned(root):
            self._forget(root)  # let go of: indexed again if pinned again
            return None
        if parent is not None or leaf is None:
            return parent[1] if parent is not None else None
        block = leaf_block(self.store.read_range(leaf.root, leaf.offset, leaf.length))
        if hashlib.sha256(block).digest() != digest:
            log.error("blob changed under the gateway", extra={"cid": leaf.root, "block": cid})
            return None
        return block

    def _forget(self, root: Cid) -> None:
        with self._lock:
            self._indexed.discard(root)
            for table in (self._parents, self._leaves):
                for digest in [d for d, v in table.items() if (v[0] if isinstance(v, tuple) else v.root) == root]:
                    del table[digest]

    def _pinned(self, cid: Cid) -> bool:
        try:
            return self.store.stat(cid).pinned
        except StorageError:
            return False

    def _index(self, root: Cid) -> None:
        """Rebuild ``root``'s DAG from its (verified) bytes and remember where each block comes from."""
        try:
            data = self.store.get(root, MAX_INDEXED_FILE)
        except StorageError as exc:
            log.warning("cannot index", extra={"cid": root, "error": str(exc)})
            return
        offset = 0

        def record(digest: bytes, block: bytes) -> None:
            nonlocal offset
            node = read_block(block)
            if node.children:
                self._parents[digest] = (root, block)
            else:
                self._leaves[digest] = _Leaf(root, offset, len(node.data))
                offset += len(node.data)

        builder = DagBuilder(record, chunk_size=CHUNK_SIZE)
        builder.write(data)
        builder.finish()
        self._indexed.add(root)


def _wants_raw(request: web.Request) -> bool:
    return request.query.get("format") == "raw" or RAW_BLOCK in request.headers.get("Accept", "")


def make_app(index: BlockIndex) -> web.Application:
    """The gateway's routes: ``GET``/``HEAD /ipfs/{cid}`` for raw blocks, nothing else."""

    async def block(request: web.Request) -> web.Response:
        if not _wants_raw(request):
            return web.Response(status=406, text="this trustless gateway serves raw blocks only: ?format=raw\n")
        try:
            cid = digest_to_cid(cid_to_digest(request.match_info["cid"]))
        except InvalidCid as exc:
            return web.Response(status=400, text=f"{exc}\n")
        found = await asyncio.get_running_loop().run_in_executor(None, index.block, cid)
        if found is None:
            return web.Response(status=404, text=f"block {cid} is not served here\n")
        headers = {"X-Content-Type-Options": "nosniff", "Cache-Control": "public, max-age=29030400, immutable", "X-Ipfs-Roots": cid}
        return web.Response(body=found, content_type=RAW_BLOCK, headers=headers)

    app = web.Application(client_max_size=1024)  # requests carry no body
    app.router.add_get("/ipfs/{cid}", block)
    return app


class GatewayServer:
    """The gateway on ``host:port`` (port 0: any free one), in a thread of its own; ``stop()`` ends it.
    With ``tls`` (:func:`core.storage.tls.server_context`) it speaks HTTPS only."""

    def __init__(self, store: LocalStore, host: str = "127.0.0.1", port: int = 0, tls: ssl.SSLContext | None = None) -> None:
        self.index = BlockIndex(store)
        self.host = host
        self.port = port
        self.tls = tls
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name="gateway", daemon=True)

    @property
    def url(self) -> str:
        return f"{'https' if self.tls is not None else 'http'}://{self.address}"

    @property
    def address(self) -> str:
        """``HOST:PORT`` it listens on (an IPv6 host in brackets), the port chosen for port 0 once started."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def start(self) -> GatewayServer:
        """Listen (OSError if the address cannot be bound), then serve in the background."""
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=30)
        except BaseException:
            self.stop()
            raise
        log.info("gateway serving the store", extra={"url": self.url, "store": str(self.index.store.root)})
        return self

    async def _start(self) -> None:
        sock = socket.create_server((self.host, self.port))
        self.port = int(sock.getsockname()[1])  # the one chosen for port 0
        self._runner = web.AppRunner(make_app(self.index), access_log=None)
        await self._runner.setup()
        await web.SockSite(self._runner, sock, ssl_context=self.tls).start()

    def stop(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(timeout=30)
            self._runner = None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)

    def __enter__(self) -> GatewayServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
