"""The UnixFS file DAG that ``ipfs add`` builds, computed here byte for byte.

Kubo's defaults for ``ipfs add`` (and what :class:`core.storage.IpfsStore`
asks any daemon for explicitly): CIDv0, sha2-256, fixed-size chunks of
262144 bytes, no raw leaves, balanced layout with at most 174 links per node,
no file metadata. The resulting blocks:

* a **leaf** per chunk: a dag-pb node whose Data is UnixFS
  ``{Type: File, Data: chunk, filesize: len(chunk)}`` and which has no links;
* an **empty file**: the same with no Data field, ``filesize: 0``;
* a **parent** over up to 174 children: a dag-pb node with one link per child
  (``Hash`` = child multihash, ``Name`` = "", ``Tsize`` = the child's block
  plus everything under it) and Data = UnixFS
  ``{Type: File, filesize: total, blocksizes: [file bytes under each child]}``.

A file of one chunk is its own root. Otherwise leaves are grouped in runs of
174 under parents, those parents in runs of 174, and so on until one node is
left: every leaf sits at the same depth. This bottom-up grouping produces the
same tree as Kubo's top-down ``balanced.Layout`` (each subtree it fills is
complete except the last) and as js-ipfs's importer.

Protobuf is written by hand (fields in the canonical dag-pb order: Links
before Data; inside a link Hash, Name, Tsize; UnixFS fields by number,
``blocksizes`` unpacked, as proto2 writes them).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from core.cid import Cid, digest_to_cid

__all__ = [
    "CHUNK_SIZE",
    "MAX_LINKS",
    "Link",
    "DagBuilder",
    "file_cid",
    "leaf_block",
    "parent_block",
    "MAX_BLOCK",
    "FileNode",
    "read_block",
    "dag_height",
    "canonical_children",
]

CHUNK_SIZE = 262_144  # Kubo's default chunker: size-262144
MAX_LINKS = 174  # Kubo's helpers.DefaultLinksPerBlock

_UNIXFS_FILE = 2
_MULTIHASH_SHA256 = b"\x12\x20"


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _key(field: int, wire_type: int) -> bytes:
    return _varint(field << 3 | wire_type)


def _bytes_field(field: int, value: bytes) -> bytes:
    return _key(field, 2) + _varint(len(value)) + value


def _uint_field(field: int, value: int) -> bytes:
    return _key(field, 0) + _varint(value)


@dataclass(frozen=True)
class Link:
    """A child as its parent sees it: block digest, cumulative block size, file bytes under it."""

    digest: bytes
    tsize: int
    file_size: int

    @property
    def cid(self) -> Cid:
        return digest_to_cid(self.digest)


def _leaf_frame(size: int) -> tuple[bytes, bytes]:
    """The bytes before and after a chunk of ``size`` bytes in its leaf block (none between: the empty file)."""
    unixfs_head = _uint_field(1, _UNIXFS_FILE) + (_key(2, 2) + _varint(size) if size else b"")
    unixfs_tail = _uint_field(3, size)
    return _key(1, 2) + _varint(len(unixfs_head) + size + len(unixfs_tail)) + unixfs_head, unixfs_tail


def leaf_block(chunk: bytes | memoryview) -> bytes:
    """The dag-pb block of one file chunk (or of the empty file when ``chunk`` is empty)."""
    head, tail = _leaf_frame(len(chunk))
    return head + bytes(chunk) + tail


def parent_block(children: list[Link]) -> bytes:
    """The dag-pb block of an internal node over ``children`` (1..MAX_LINKS of them)."""
    if not 0 < len(children) <= MAX_LINKS:
        raise ValueError(f"a parent node has 1..{MAX_LINKS} children, got {len(children)}")
    links = b"".join(_bytes_field(2, _bytes_field(1, _MULTIHASH_SHA256 + c.digest) + _bytes_field(2, b"") + _uint_field(3, c.tsize)) for c in children)
    unixfs = _uint_field(1, _UNIXFS_FILE) + _uint_field(3, sum(c.file_size for c in children))
    unixfs += b"".join(_uint_field(4, c.file_size) for c in children)
    return links + _bytes_field(1, unixfs)


BlockSink = Callable[[bytes, bytes], None]
"""Receives each block as it is built: ``sink(digest, block)``; leaves first, the root last."""


class DagBuilder:
    """Streams a file in, yields its blocks and root CID; memory is one chunk plus one Link per chunk.

    >>> b = DagBuilder()
    >>> b.write(b"hello\\n")
    >>> b.finish()
    'QmZULkCELmmk5XNfCgTnCyFgAVxBRBXyDHGGMVoLFLiXEN'
    """

    def __init__(self, sink: BlockSink | None = None, *, chunk_size: int = CHUNK_SIZE) -> None:
        if chunk_size <= 0:
            raise ValueError("chunk_size must be positive")
        self._sink = sink
        self._chunk_size = chunk_size
        self._pending = bytearray()
        self._leaves: list[Link] = []
        self._size = 0
        self._root: Cid | None = None

    @property
    def size(self) -> int:
        """File bytes written so far."""
        return self._size

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._root is not None:
            raise ValueError("DagBuilder already finished")
        self._size += len(data)
        view = memoryview(data)
        if self._pending:
            need = self._chunk_size - len(self._pending)
            self._pending += view[:need]
            view = view[need:]
            if len(self._pending) < self._chunk_size:
                return
            self._add_leaf(bytes(self._pending))
            self._pending.clear()
        while len(view) >= self._chunk_size:
            self._add_leaf(view[: self._chunk_size])
            view = view[self._chunk_size :]
        self._pending += view

    def finish(self) -> Cid:
        """Flush the last chunk, build the parents, and return the root CID (idempotent)."""
        if self._root is not None:
            return self._root
        if self._pending or not self._leaves:
            self._add_leaf(bytes(self._pending))  # the last partial chunk, or the empty file
            self._pending.clear()
        level = self._leaves
        while len(level) > 1:
            level = [self._emit_parent(level[i : i + MAX_LINKS]) for i in range(0, len(level), MAX_LINKS)]
        self._root = level[0].cid
        return self._root

    def _emit(self, block: bytes) -> bytes:
        digest = hashlib.sha256(block).digest()
        if self._sink is not None:
            self._sink(digest, block)
        return digest

    def _add_leaf(self, chunk: bytes | memoryview) -> None:
        head, tail = _leaf_frame(len(chunk))
        if self._sink is not None:
            digest = self._emit(head + bytes(chunk) + tail)
        else:  # only the digest is wanted: hash the chunk in place
            hasher = hashlib.sha256(head)
            hasher.update(chunk)
            hasher.update(tail)
            digest = hasher.digest()
        self._leaves.append(Link(digest, len(head) + len(chunk) + len(tail), len(chunk)))

    def _emit_parent(self, children: list[Link]) -> Link:
        block = parent_block(children)
        tsize = len(block) + sum(c.tsize for c in children)
        return Link(self._emit(block), tsize, sum(c.file_size for c in children))


def file_cid(data: bytes | Iterable[bytes], *, chunk_size: int = CHUNK_SIZE) -> Cid:
    """The CID ``ipfs add`` gives ``data`` (bytes, or an iterable of byte pieces of any size)."""
    builder = DagBuilder(chunk_size=chunk_size)
    if isinstance(data, (bytes, bytearray, memoryview)):
        builder.write(data)
    else:
        for piece in data:
            builder.write(piece)
    return builder.finish()


#: The largest block :func:`read_block` parses: a full leaf (262144 bytes of data and 14 bytes of
#: framing) or a parent (174 links of 42 bytes and its sizes), with room to spare.
MAX_BLOCK = 1 << 20


@dataclass(frozen=True)
class FileNode:
    """A parsed UnixFS file block: its links (each child's digest, the block bytes under it and the
    file bytes under it, as this block declares them; none for a leaf) and, for a leaf, its bytes."""

    links: tuple[Link, ...]
    data: bytes
    file_size: int

    @property
    def children(self) -> tuple[bytes, ...]:
        return tuple(link.digest for link in self.links)


def dag_height(file_size: int, chunk_size: int = CHUNK_SIZE) -> int:
    """The levels of parents above the leaves in the DAG :class:`DagBuilder` builds for a file of
    ``file_size`` bytes (0: the file is one leaf)."""
    leaves, height = max(1, -(-file_size // chunk_size)), 0
    while leaves > 1:
        leaves, height = -(-leaves // MAX_LINKS), height + 1
    return height


def canonical_children(file_size: int, height: int, chunk_size: int = CHUNK_SIZE) -> list[int]:
    """The file bytes under each child of a node at ``height`` (1 or more) over ``file_size`` bytes,
    in the DAG :class:`DagBuilder` builds: full subtrees of ``chunk_size * MAX_LINKS ** (height - 1)``
    bytes and the rest in the last. What a fetcher holds a gateway's parent block to (its links and
    sizes must be exactly these), so that a DAG can drive no more requests or bytes than the size its
    verified root declares."""
    if height < 1 or file_size < 1:
        raise ValueError(f"a parent has height >= 1 and file bytes under it, got height {height}, {file_size} bytes")
    full = chunk_size * MAX_LINKS ** (height - 1)
    if file_size > full * MAX_LINKS:
        raise ValueError(f"{file_size} bytes do not fit under a node of height {height}")
    return [min(full, file_size - start) for start in range(0, file_size, full)]


def _fields(buf: bytes, what: str) -> Iterable[tuple[int, int, int | bytes]]:
    """The (field, wire type, value) of a protobuf message: varints and length-delimited fields only."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _read_uvarint(buf, pos, what)
        field, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_uvarint(buf, pos, what)
            yield field, wire, value
        elif wire == 2:
            length, pos = _read_uvarint(buf, pos, what)
            if pos + length > end:
                raise ValueError(f"{what}: field {field} runs past the end")
            yield field, wire, buf[pos : pos + length]
            pos += length
        else:
            raise ValueError(f"{what}: wire type {wire} (field {field}) is not dag-pb/UnixFS")


def _read_uvarint(buf: bytes, pos: int, what: str) -> tuple[int, int]:
    value = 0
    for i in range(10):
        if pos + i >= len(buf):
            raise ValueError(f"{what}: truncated varint")
        byte = buf[pos + i]
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            return value, pos + i + 1
    raise ValueError(f"{what}: varint longer than 10 bytes")


def read_block(block: bytes) -> FileNode:
    """Parse one dag-pb block of a UnixFS file (what :func:`leaf_block` and :func:`parent_block` write,
    or any equivalent encoding); ValueError naming the problem for anything else. Bounded: at most
    :data:`MAX_BLOCK` bytes, at most :data:`MAX_LINKS` links, each to a sha2-256 CIDv0 block with its
    Tsize, a leaf's size equal to its data, a parent's size the sum of its children's (``blocksizes``,
    one per link)."""
    if len(block) > MAX_BLOCK:
        raise ValueError(f"block of {len(block)} bytes, over {MAX_BLOCK}")
    children: list[tuple[bytes, int]] = []
    unixfs: bytes | None = None
    for field, wire, value in _fields(block, "dag-pb node"):
        if field == 2 and isinstance(value, bytes):
            link = list(_fields(value, "dag-pb link"))
            hashes = [v for f, _, v in link if f == 1 and isinstance(v, bytes)]
            if len(hashes) != 1 or len(hashes[0]) != 34 or not hashes[0].startswith(_MULTIHASH_SHA256):
                raise ValueError("a dag-pb link does not name a sha2-256 CIDv0 block")
            tsizes = [v for f, _, v in link if f == 3 and isinstance(v, int)]
            if len(tsizes) != 1:
                raise ValueError("a dag-pb link does not declare the size of its block (Tsize)")
            children.append((hashes[0][2:], tsizes[0]))
            if len(children) > MAX_LINKS:
                raise ValueError(f"a UnixFS parent block links to more than {MAX_LINKS} children")
        elif field == 1 and isinstance(value, bytes) and unixfs is None:
            unixfs = value
        else:
            raise ValueError(f"dag-pb node: unexpected field {field} (wire type {wire})")
    if unixfs is None:
        raise ValueError("dag-pb node has no UnixFS data")
    kind, data, size, blocksizes = None, b"", None, []
    for field, _, value in _fields(unixfs, "UnixFS data"):
        if field == 1 and isinstance(value, int):
            kind = value
        elif field == 2 and isinstance(value, bytes):
            data = value
        elif field == 3 and isinstance(value, int):
            size = value
        elif field == 4 and isinstance(value, int):  # blocksizes: file bytes under each child
            blocksizes.append(value)
        else:
            raise ValueError(f"UnixFS data: unexpected field {field}")
    if kind != _UNIXFS_FILE or size is None:
        raise ValueError(f"not a UnixFS file block (type {kind}, filesize {size})")
    if children and data:
        raise ValueError("a UnixFS parent block carries data of its own")
    if not children and size != len(data):
        raise ValueError(f"a UnixFS leaf says {size} bytes and holds {len(data)}")
    if len(blocksizes) != len(children) or (children and sum(blocksizes) != size):
        raise ValueError(f"a UnixFS block declares {len(blocksizes)} child sizes summing to {sum(blocksizes)} for {len(children)} links and {size} bytes")
    return FileNode(tuple(Link(digest, tsize, under) for (digest, tsize), under in zip(children, blocksizes, strict=True)), data, size)
