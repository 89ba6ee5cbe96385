"""Bounded readers for bytes that come from outside: JSON, files, safetensors headers.

Standard library only (no eth, no web3, no numpy), so that the proofs engine and every
role use the same code. Each reader checks size and nesting depth BEFORE a parser sees
the bytes: web3's import raises Python's recursion limit to 100,000, and the C JSON
parser then overflows the C stack (SIGSEGV, not an exception) on a few ten thousand
nested ``[``. Every refusal is a :class:`InputRejected`, a ``ValueError`` with a one-line
message; callers turn it into their own error (a spec error, a malformed report...).
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
import struct
from itertools import accumulate
from pathlib import Path
from typing import Any

__all__ = [
    "MAX_DEPTH",
    "InputRejected",
    "json_depth",
    "load_json",
    "read_regular_file",
    "safetensors_header",
]

#: Nesting depth of JSON arrays and objects accepted anywhere (the deepest honest document,
#: a safetensors header or an IPFS reply, nests 3 levels).
MAX_DEPTH = 32

_STRINGS = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+"?', re.DOTALL)  # an unterminated string runs to the end
_BRACKETS_ONLY = bytes(range(256)).translate(None, b"[]{}")  # every byte but brackets: deleted
_STEP = tuple(1 if b in b"[{" else -1 if b in b"]}" else 0 for b in range(256))


class InputRejected(ValueError):
    """Input refused before (or while) parsing: too large, too deep, not the expected shape."""


def json_depth(data: bytes) -> int:
    """How deep arrays and objects nest in ``data`` (brackets inside strings do not count).

    Linear time, no recursion: strings are cut out (between alternate quotes when nothing is
    escaped, else by one regular expression), then the running sum of +1/-1 per bracket is
    taken in C (``accumulate``).
    """
    outside = b"".join(data.split(b'"')[0::2]) if b"\\" not in data else _STRINGS.sub(b"", data)
    brackets = outside.translate(None, _BRACKETS_ONLY)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise InputRejected(f"number {text[:20]}... does not fit a float")
    return value


def _no_constant(name: str) -> Any:
    raise InputRejected(f"{name} is not JSON")


def load_json(data: bytes | str, *, max_bytes: int, what: str, max_depth: int = MAX_DEPTH) -> Any:
    """Parse JSON of at most ``max_bytes`` bytes and ``max_depth`` levels of nesting.

    NaN, Infinity and numbers that overflow a float are refused; integers of more than
    4300 digits are refused by Python itself. Raises :class:`InputRejected` with ``what``
    in its one-line message.
    """
    raw = data.encode() if isinstance(data, str) else bytes(data)
    if len(raw) > max_bytes:
        raise InputRejected(f"{what} is {len(raw):,} bytes, over the limit of {max_bytes:,}")
    depth = json_depth(raw)
    if depth > max_depth:
        raise InputRejected(f"{what} nests {depth} levels deep, over the limit of {max_depth}")
    try:
        return json.loads(raw, parse_constant=_no_constant, parse_float=_finite)
    except InputRejected as exc:
        raise InputRejected(f"{what} is not acceptable JSON: {exc}") from None
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise InputRejected(f"{what} is not valid JSON: {_first_line(exc)}") from None


def read_regular_file(path: Path, *, max_bytes: int, what: str) -> bytes:
    """The bytes of the regular file at ``path``, at most ``max_bytes``.

    Opened non-blocking and checked with ``fstat`` on the open descriptor, so a FIFO, a
    device or a directory is refused at once instead of blocking or reading forever; a
    file that grows past the limit while being read is refused too.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputRejected(f"{what} {path} does not exist") from None
    except OSError as exc:
        raise InputRejected(f"{what} {path} cannot be opened: {exc.strerror or type(exc).__name__}") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):  # before fdopen, which raises its own IsADirectoryError on a directory
        os.close(fd)
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else "not a regular file"
        raise InputRejected(f"{what} {path} is {kind}")
    with os.fdopen(fd, "rb") as fh:
        if info.st_size > max_bytes:
            raise InputRejected(f"{what} {path} is {info.st_size:,} bytes, over the limit of {max_bytes:,}")
        data = fh.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InputRejected(f"{what} {path} grew past the limit of {max_bytes:,} bytes while read")
    return data


def safetensors_header(data: bytes | bytearray | memoryview, *, max_header: int, what: str) -> dict[str, Any]:
    """The JSON header of safetensors bytes, bounded, checked for shape before any tensor is read.

    Every entry but ``__metadata__`` must name a dtype, a shape of non-negative ints and
    ``data_offsets`` inside the data that follows the header.
    """
    if len(data) < 8:
        raise InputRejected(f"{what} is truncated: {len(data)} bytes, not even a header length")
    (head_len,) = struct.unpack("<Q", data[:8])
    if head_len > max_header or 8 + head_len > len(data):
        raise InputRejected(f"{what} has a header of {head_len:,} bytes in {len(data):,} bytes (at most {max_header:,})")
    header = load_json(bytes(data[8 : 8 + head_len]), max_bytes=max_header, what=f"{what} header")
    if not isinstance(header, dict):
        raise InputRejected(f"{what} header is not a JSON object")
    body = len(data) - 8 - head_len
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        ok = (
            isinstance(entry, dict)
            and isinstance(entry.get("dtype"), str)
            and isinstance(entry.get("shape"), list)
            and all(type(d) is int and d >= 0 for d in entry["shape"])
            and isinstance(entry.get("data_offsets"), list)
            and len(entry["data_offsets"]) == 2
            and all(type(o) is int for o in entry["data_offsets"])
            and 0 <= entry["data_offsets"][0] <= entry["data_offsets"][1] <= body
        )
        if not ok:
            raise InputRejected(f"{what}: tensor {str(name)[:64]!r} has a malformed header entry")
    return header


def _first_line(exc: BaseException) -> str:
    text = str(exc)
    return (text.splitlines()[0] if text else type(exc).__name__)[:200]
