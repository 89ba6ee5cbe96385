"""The one interface every content store implements: :class:`ContentStore`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from core.cid import Cid

__all__ = ["ContentStore", "ContentStat", "check_max_size"]


@dataclass(frozen=True)
class ContentStat:
    """What a store knows about one piece of content: its file size in bytes and whether it is pinned."""

    cid: Cid
    size: int
    pinned: bool


def check_max_size(max_size: int) -> None:
    """ValueError unless ``max_size`` (a ``get`` limit in bytes) is a non-negative int."""
    if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 0:
        raise ValueError(f"max_size must be a non-negative int, got {max_size!r}")


@runtime_checkable
class ContentStore(Protocol):
    """Content addressed by the CID ``ipfs add`` gives it (CIDv0, see :mod:`core.storage.unixfs`).

    Every method takes a CIDv0 or an equivalent CIDv1 string and raises
    :class:`core.cid.InvalidCid` for anything else. :meth:`get` returns only
    bytes that hash to the CID asked for, and never reads more than
    ``max_size + 1`` bytes.
    """

    def put(self, data: bytes) -> Cid:
        """Store ``data`` (pinned) and return its CID."""
        ...

    def get(self, cid: str, max_size: int) -> bytes:
        """The content of ``cid``, verified; ContentNotFound / ContentTooLarge / CidMismatch otherwise."""
        ...

    def has(self, cid: str) -> bool:
        """Whether the store holds ``cid`` now, without fetching it from anywhere."""
        ...

    def stat(self, cid: str) -> ContentStat:
        """Size and pin state of ``cid``; ContentNotFound if absent."""
        ...

    def pin(self, cid: str) -> None:
        """Keep ``cid`` through garbage collection; ContentNotFound if absent."""
        ...

    def unpin(self, cid: str) -> None:
        """Let garbage collection remove ``cid``; a no-op when it is not pinned."""
        ...
