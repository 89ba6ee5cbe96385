"""LocalStore: the embedded default, a directory of files named by their CID.

Layout under ``root``::

    blobs/<CIDv0>   the file's bytes (one file per piece of content)
    pins/<CIDv0>    empty marker: keep this blob through gc()
    tmp/            writes in progress (renamed into blobs/ when complete)

The CID is computed with the same UnixFS DAG code as ``ipfs add``
(:mod:`core.storage.unixfs`), so a CID from this store names the same bytes
on any IPFS node. Nothing here trusts the disk: :meth:`LocalStore.get`
recomputes the DAG root of every byte it returns. File names come only from
validated CIDv0 strings (base58 characters, fixed length), and blobs are
opened with ``O_NOFOLLOW``, so no CID can reach outside ``root``.
"""

from __future__ import annotations

import errno
import logging
import os
import stat as stat_mod
import tempfile
import threading
import time
from pathlib import Path

from core.cid import Cid, InvalidCid, to_v0
from core.storage.base import ContentStat, check_max_size
from core.storage.errors import CidMismatch, ContentNotFound, ContentTooLarge, StoreUnavailable
from core.storage.unixfs import DagBuilder

__all__ = ["LocalStore"]

log = logging.getLogger(__name__)

_STALE_TMP_S = 3600.0  # a write still in tmp/ after an hour was abandoned by a dead process
#: CIDs asked of this store's gateway and not held here, remembered until taken (the oldest forgotten first).
MAX_WANTED = 256


class LocalStore:
    """A :class:`core.storage.ContentStore` in a local directory (created if missing)."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = Path(root).resolve()
        self._blobs = self.root / "blobs"
        self._pins = self.root / "pins"
        self._tmp = self.root / "tmp"
        try:
            for d in (self._blobs, self._pins, self._tmp):
                d.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StoreUnavailable(str(self.root), f"cannot create store directories: {e}") from e
        self._wanted: dict[Cid, None] = {}  # ordered: the oldest first
        self._wanted_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LocalStore({str(self.root)!r})"

    # -- paths: only ever built from a validated CIDv0 --------------------------------------------
    def _names(self, cid: str) -> tuple[Cid, Path, Path]:
        v0 = to_v0(cid)  # InvalidCid for anything but a well-formed CIDv0/CIDv1 of a dag-pb block
        blob, pin = self._blobs / v0, self._pins / v0
        # INVARIANT: a CID maps to a direct child of blobs/ and pins/ (base58 has no '/', '.', '\0').
        if blob.parent != self._blobs or pin.parent != self._pins:
            raise AssertionError(f"CID {v0!r} escaped the store directory")
        return v0, blob, pin

    # -- ContentStore -------------------------------------------------------------------------
    def put(self, data: bytes) -> Cid:
        builder = DagBuilder()
        builder.write(data)
        cid = builder.finish()
        _, blob, pin = self._names(cid)
        try:
            pin.touch()  # pin first: a concurrent gc() never sees this blob unpinned
            fd, tmp_name = tempfile.mkstemp(dir=self._tmp, prefix=f"{cid}.")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(data)
                    f.flush()
                    os.fsync(f.fileno())
                os.replace(tmp_name, blob)  # atomic: readers see the old complete file or the new one
            except BaseException:
                Path(tmp_name).unlink(missing_ok=True)
                raise
            self._fsync_dir(self._blobs)
        except OSError as e:
            raise StoreUnavailable(str(self.root), f"cannot write {cid}: {e}") from e
        log.debug("stored", extra={"cid": cid, "bytes": len(data)})
        return cid

    def get(self, cid: str, max_size: int) -> bytes:
        check_max_size(max_size)
        v0, blob, _ = self._names(cid)
        try:
            fd = os.open(blob, os.O_RDONLY | os.O_NOFOLLOW)
        except FileNotFoundError:
            raise ContentNotFound(v0, f"local store {self.root}") from None
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise ContentNotFound(v0, f"local store {self.root} (blob is a symlink, refused)") from None
            raise StoreUnavailable(str(self.root), f"cannot open {v0}: {e}") from e
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if not stat_mod.S_ISREG(info.st_mode):
                raise ContentNotFound(v0, f"local store {self.root} (blob is not a regular file)")
            if info.st_size > max_size:
                raise ContentTooLarge(v0, info.st_size, max_size)
            data = f.read(info.st_size + 1)  # allocates at most the file size (<= max_size) + 1
        if len(data) > max_size:  # the file grew since fstat
            raise ContentTooLarge(v0, None, max_size)
        builder = DagBuilder()
        builder.write(data)
        got = builder.finish()
        if got != v0:
            log.error("corrupted blob", extra={"cid": v0, "hashes_to": got, "path": str(blob)})
            raise CidMismatch(v0, got)
        return data

    def read_range(self, cid: str, offset: int, length: int) -> bytes:
        """``length`` bytes of ``cid``'s blob from ``offset`` (fewer at its end), unverified: for a
        caller that checks them against a block digest (:mod:`core.storage.gateway`); ContentNotFound if absent."""
        v0, blob, _ = self._names(cid)
        try:
            fd = os.open(blob, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError as e:
            raise ContentNotFound(v0, f"local store {self.root} ({e.strerror})") from None
        with os.fdopen(fd, "rb") as f:
            f.seek(offset)
            return f.read(length)

    def has(self, cid: str) -> bool:
        _, blob, _ = self._names(cid)
        try:
            return stat_mod.S_ISREG(blob.lstat().st_mode)
        except FileNotFoundError:
            return False

    def stat(self, cid: str) -> ContentStat:
        v0, blob, pin = self._names(cid)
        try:
            info = blob.lstat()
        except FileNotFoundError:
            raise ContentNotFound(v0, f"local store {self.root}") from None
        if not stat_mod.S_ISREG(info.st_mode):
            raise ContentNotFound(v0, f"local store {self.root} (blob is not a regular file)")
        return ContentStat(v0, info.st_size, pin.exists())

    def pin(self, cid: str) -> None:
        v0, _, pin = self._names(cid)
        if not self.has(v0):
            raise ContentNotFound(v0, f"local store {self.root}")
        pin.touch()

    def unpin(self, cid: str) -> None:
        _, _, pin = self._names(cid)
        pin.unlink(missing_ok=True)

    # -- what others asked for ----------------------------------------------------------------
    def want(self, cid: Cid) -> None:
        """Remember that a peer asked this store's gateway for ``cid``, which it does not hold (a
        solver regenerates a dropped checkpoint that is asked for: solver.retention)."""
        with self._wanted_lock:
            self._wanted.pop(cid, None)
            self._wanted[cid] = None
            while len(self._wanted) > MAX_WANTED:
                del self._wanted[next(iter(self._wanted))]

    def take_wanted(self) -> list[Cid]:
        """The CIDs asked for and not held since the last call, oldest first; forgotten here."""
        with self._wanted_lock:
            wanted, self._wanted = list(self._wanted), {}
        return wanted

    # -- maintenance ----------------------------------------------------------------------------
    def gc(self) -> list[Cid]:
        """Delete unpinned blobs and abandoned writes; return the CIDs removed."""
        removed: list[Cid] = []
        for blob in self._blobs.iterdir():
            try:
                v0, _, pin = self._names(blob.name)
            except InvalidCid:
                log.warning("gc skipped a foreign file", extra={"path": str(blob)})
                continue
            if not pin.exists():
                blob.unlink(missing_ok=True)
                removed.append(v0)
        cutoff = time.time() - _STALE_TMP_S
        for tmp in self._tmp.iterdir():
            if tmp.lstat().st_mtime < cutoff:
                tmp.unlink(missing_ok=True)
        if removed:
            log.info("gc removed unpinned content", extra={"count": len(removed)})
        return removed

    @staticmethod
    def _fsync_dir(path: Path) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
