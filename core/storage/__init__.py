"""Storage by content id: one interface, two backends, the same CIDs as ``ipfs add``.

* :class:`ContentStore`: ``put(bytes) -> Cid``, ``get(cid, max_size) -> bytes``
  (verified), ``has``, ``stat``, ``pin``, ``unpin``.
* :class:`LocalStore`: the embedded default, a directory of blobs named by CID.
* :class:`IpfsStore`: a real IPFS node (Kubo RPC HTTP API, e.g. ``--ipfs-api URL``).
* :mod:`core.storage.unixfs`: the UnixFS DAG both compute CIDs with.

The engine (``proofs``) needs only content ids and the storage errors, so :class:`IpfsStore` (and with it
``requests``) loads on first use, not with the package.

See docs/storage.md.
"""

from typing import TYPE_CHECKING, Any

from core.storage.base import ContentStat, ContentStore, check_max_size
from core.storage.errors import CidMismatch, ContentNotFound, ContentTooLarge, StorageError, StoreUnavailable
from core.storage.local import LocalStore
from core.storage.unixfs import file_cid

if TYPE_CHECKING:
    from core.storage.ipfs import IpfsStore

__all__ = [
    "ContentStore",
    "ContentStat",
    "LocalStore",
    "IpfsStore",
    "file_cid",
    "check_max_size",
    "StorageError",
    "ContentNotFound",
    "ContentTooLarge",
    "CidMismatch",
    "StoreUnavailable",
]


def __getattr__(name: str) -> Any:
    if name == "IpfsStore":
        from core.storage.ipfs import IpfsStore

        return IpfsStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
