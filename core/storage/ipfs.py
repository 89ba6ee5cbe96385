"""IpfsStore: a real IPFS node through the Kubo RPC HTTP API (``/api/v0/...``).

Works with Kubo and with js-ipfs (which serves the same API). The node is not
trusted:

* ``put`` asks for Kubo's ``ipfs add`` defaults explicitly (``cid-version=0``,
  ``raw-leaves=false``, ``chunker=size-262144``, ``hash=sha2-256``, balanced
  layout) whatever the node's own defaults are, computes the CID locally with
  the same DAG code as :class:`core.storage.LocalStore`, and rejects a node
  that answers another CID (:class:`CidMismatch`);
* ``get`` streams ``/api/v0/cat`` and stops after ``max_size + 1`` bytes,
  then recomputes the CID of what it received and returns it only if it
  matches;
* every RPC reply is size-bounded and every call has a timeout. A content
  lookup that the node cannot finish within ``lookup_timeout`` is reported as
  :class:`ContentNotFound` (the node's own ``timeout`` argument, so it stops
  searching too).
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

import requests

from core.bounded import load_json
from core.cid import Cid, to_v0
from core.config import redact_url
from core.storage.base import ContentStat, check_max_size
from core.storage.errors import CidMismatch, ContentNotFound, ContentTooLarge, StorageError, StoreUnavailable
from core.storage.unixfs import CHUNK_SIZE, DagBuilder, file_cid

__all__ = ["IpfsStore", "ADD_PARAMS"]

log = logging.getLogger(__name__)

ADD_PARAMS: dict[str, str] = {
    "cid-version": "0",
    "raw-leaves": "false",
    "chunker": f"size-{CHUNK_SIZE}",
    "hash": "sha2-256",
    "trickle": "false",
    "wrap-with-directory": "false",
    "pin": "true",
    "progress": "false",
}
"""Query parameters of every ``/api/v0/add``: Kubo's ``ipfs add`` defaults, spelled out."""

_MAX_REPLY = 1 << 20  # JSON replies (add, stat, pin) are a few hundred bytes
_READ_PIECE = 1 << 20
# Phrases Kubo and js-ipfs use when a block is absent or its lookup ran out of time.
_NOT_FOUND = ("not found", "timed out", "deadline exceeded", "could not find", "no link named")


class _RpcError(Exception):
    """A non-200 reply from the node: its error message (internal; mapped to storage errors)."""


class IpfsStore:
    """A :class:`core.storage.ContentStore` over an IPFS node's RPC API, e.g. ``http://127.0.0.1:5001``."""

    def __init__(
        self,
        api_url: str,
        *,
        timeout: float = 60.0,
        lookup_timeout: float = 30.0,
        local_timeout: float = 1.0,
        session: requests.Session | None = None,
    ) -> None:
        parts = urlsplit(api_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise StoreUnavailable(redact_url(api_url), "the IPFS API URL must be http(s)://host:port")
        if min(timeout, lookup_timeout, local_timeout) <= 0:
            raise ValueError("timeouts must be positive")
        self._base = api_url.rstrip("/")  # may hold a credential: requests sends it, messages show ``api_url``
        self.api_url = redact_url(self._base)
        self.timeout = timeout
        self.lookup_timeout = lookup_timeout
        self.local_timeout = local_timeout
        self._session = session or requests.Session()

    def __repr__(self) -> str:
        return f"IpfsStore({self.api_url!r})"

    # -- transport ------------------------------------------------------------------------------
    def _post(self, command: str, params: dict[str, Any], *, files: Any = None, read_timeout: float | None = None) -> requests.Response:
        """POST /api/v0/<command> with a streamed reply; _RpcError on a non-200 reply."""
        url = f"{self._base}/api/v0/{command}"
        try:
            resp = self._session.post(url, params=params, files=files, stream=True, timeout=(min(self.timeout, 10.0), read_timeout or self.timeout))
        except requests.RequestException as e:
            raise StoreUnavailable(self.api_url, f"{command}: {type(e).__name__}: {e}") from e
        if resp.status_code != 200:
            with resp:
                body = self._read_bounded(resp, _MAX_REPLY, command)
            try:
                message = str(load_json(body, max_bytes=_MAX_REPLY, what="error reply").get("Message", ""))
            except (ValueError, AttributeError):  # InputRejected is a ValueError
                message = body[:200].decode(errors="replace")
            # the node's words end up in one-line errors and logs: printable characters only, bounded
            raise _RpcError("".join(c if c.isprintable() else "?" for c in message[:200]) or f"HTTP {resp.status_code}")
        return resp

    def _read_bounded(self, resp: requests.Response, limit: int, command: str) -> bytes:
        data = bytearray()
        try:
            for piece in resp.iter_content(_READ_PIECE):
                data += piece
                if len(data) > limit:
                    raise StoreUnavailable(self.api_url, f"{command}: reply longer than {limit} bytes")
        except requests.RequestException as e:
            raise StoreUnavailable(self.api_url, f"{command}: {type(e).__name__}: {e}") from e
        return bytes(data)

    def _json(self, command: str, params: dict[str, Any], *, files: Any = None, read_timeout: float | None = None) -> dict[str, Any]:
        """The last JSON object of a (possibly newline-delimited) reply."""
        with self._post(command, params, files=files, read_timeout=read_timeout) as resp:
            body = self._read_bounded(resp, _MAX_REPLY, command)
        try:
            reply = load_json(body.strip().splitlines()[-1], max_bytes=_MAX_REPLY, what="reply")
        except (ValueError, IndexError):  # InputRejected is a ValueError
            raise StoreUnavailable(self.api_url, f"{command}: reply is not JSON: {body[:200]!r}") from None
        if not isinstance(reply, dict):
            raise StoreUnavailable(self.api_url, f"{command}: unexpected reply {reply!r:.200}")
        return reply

    def _lookup_error(self, cid: Cid, command: str, error: _RpcError) -> StorageError:
        if any(phrase in str(error).lower() for phrase in _NOT_FOUND):
            return ContentNotFound(cid, f"IPFS node {self.api_url} (within {self.lookup_timeout:g}s)")
        return StoreUnavailable(self.api_url, f"{command} {cid}: {error}")

    def _lookup_params(self, arg: str, **extra: Any) -> dict[str, Any]:
        """The parameters of a lookup of ``arg`` (a CID or an ``/ipfs/`` path), bounded by the lookup timeout."""
        return {"arg": arg, "timeout": f"{int(self.lookup_timeout * 1000)}ms", **extra}

    # -- ContentStore ---------------------------------------------------------------------------
    def put(self, data: bytes) -> Cid:
        expected = file_cid(data)
        try:
            reply = self._json("add", ADD_PARAMS, files={"file": ("blob", data, "application/octet-stream")})
        except _RpcError as e:
            raise StoreUnavailable(self.api_url, f"add: {e}") from None
        got = reply.get("Hash")
        if got != expected:
            raise CidMismatch(expected, str(got))
        log.debug("stored", extra={"cid": expected, "bytes": len(data), "node": self.api_url})
        return expected

    def get(self, cid: str, max_size: int) -> bytes:
        check_max_size(max_size)
        v0 = to_v0(cid)
        size = self._size(v0)  # an early, exact error; the bounded read below is what enforces the limit
        if size > max_size:
            raise ContentTooLarge(v0, size, max_size)
        builder = DagBuilder()
        data = bytearray()
        try:
            resp = self._post("cat", self._lookup_params(v0, length=max_size + 1), read_timeout=self.timeout + self.lookup_timeout)
        except _RpcError as e:
            raise self._lookup_error(v0, "cat", e) from None
        with resp:
            try:
                for piece in resp.iter_content(_READ_PIECE):
                    if len(data) + len(piece) > max_size:
                        raise ContentTooLarge(v0, None, max_size)
                    data += piece
                    builder.write(piece)
            except requests.RequestException as e:
                raise StoreUnavailable(self.api_url, f"cat {v0}: {type(e).__name__}: {e}") from e
        got = builder.finish()
        if got != v0:
            log.error("IPFS node served wrong bytes", extra={"cid": v0, "hashes_to": got, "node": self.api_url})
            raise CidMismatch(v0, got)
        return bytes(data)

    def has(self, cid: str) -> bool:
        v0 = to_v0(cid)
        params = {"arg": v0, "offline": "true", "timeout": f"{int(self.local_timeout * 1000)}ms"}
        try:
            self._json("block/stat", params, read_timeout=self.local_timeout + self.timeout)
        except _RpcError as e:
            if isinstance(self._lookup_error(v0, "block/stat", e), ContentNotFound):
                return False
            raise StoreUnavailable(self.api_url, f"block/stat {v0}: {e}") from None
        return True

    def stat(self, cid: str) -> ContentStat:
        v0 = to_v0(cid)
        return ContentStat(v0, self._size(v0), self._pinned(v0))

    def _size(self, v0: Cid) -> int:
        try:
            reply = self._json("files/stat", self._lookup_params(f"/ipfs/{v0}"), read_timeout=self.timeout + self.lookup_timeout)
        except _RpcError as e:
            raise self._lookup_error(v0, "files/stat", e) from None
        size = reply.get("Size")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise StoreUnavailable(self.api_url, f"files/stat {v0}: bad Size {size!r}")
        return size

    def _pinned(self, cid: Cid) -> bool:
        try:
            reply = self._json("pin/ls", {"arg": cid, "type": "recursive"})
        except _RpcError as e:
            if "not pinned" in str(e).lower():
                return False
            raise StoreUnavailable(self.api_url, f"pin/ls {cid}: {e}") from None
        keys = reply.get("Keys")
        return isinstance(keys, dict) and cid in keys

    def pin(self, cid: str) -> None:
        v0 = to_v0(cid)
        try:
            self._json("pin/add", self._lookup_params(v0, recursive="true"), read_timeout=self.timeout + self.lookup_timeout)
        except _RpcError as e:
            raise self._lookup_error(v0, "pin/add", e) from None

    def unpin(self, cid: str) -> None:
        v0 = to_v0(cid)
        try:
            self._json("pin/rm", {"arg": v0, "recursive": "true"})
        except _RpcError as e:
            if "not pinned" not in str(e).lower():
                raise StoreUnavailable(self.api_url, f"pin/rm {v0}: {e}") from None
