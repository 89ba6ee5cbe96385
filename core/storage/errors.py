"""Storage errors, under :class:`core.errors.VeritrainError`.

Each one names the CID (and the limit, sizes or URL) it is about, so a
one-line CLI error is enough to act on. :class:`core.cid.InvalidCid` (a
malformed CID) is raised by both backends too.
"""

from __future__ import annotations

from core.errors import VeritrainError

__all__ = [
    "StorageError",
    "ContentNotFound",
    "ContentTooLarge",
    "CidMismatch",
    "StoreUnavailable",
]


class StorageError(VeritrainError):
    """A content store could not do what was asked."""

    exit_code = 6


class ContentNotFound(StorageError):
    """No content with this CID in the store (or on the IPFS node, within its lookup timeout)."""

    def __init__(self, cid: str, where: str) -> None:
        super().__init__(f"content {cid} not found in {where}")
        self.cid = cid
        self.where = where


class ContentTooLarge(StorageError):
    """The content is larger than the caller's limit. ``size`` is None when only "more than limit" is known."""

    def __init__(self, cid: str, size: int | None, limit: int) -> None:
        shown = f"{size} bytes" if size is not None else "more bytes"
        super().__init__(f"content {cid} is {shown}, over the limit of {limit} bytes")
        self.cid = cid
        self.size = size
        self.limit = limit


class CidMismatch(StorageError):
    """Bytes did not hash to the CID they were stored or served under (corruption or a lying peer)."""

    def __init__(self, expected: str, got: str) -> None:
        super().__init__(f"content for {expected} hashes to {got}: corrupted or forged, rejected")
        self.expected = expected
        self.got = got


class StoreUnavailable(StorageError):
    """The store could not be reached or answered out of protocol (IPFS API down, bad reply, disk error)."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f"content store {url} unavailable: {reason}")
        self.url = url
        self.reason = reason
