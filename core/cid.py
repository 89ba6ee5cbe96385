"""Content ids: CIDv0 strings, the bytes32 digests the contracts store, CIDv1 parsing.

A CIDv0 is base58btc(0x12 0x20 || sha2-256 digest) and always reads "Qm..."
(46 characters). It names a dag-pb block: for a file, the root of the UnixFS
DAG that ``ipfs add`` builds (see :mod:`core.storage.unixfs`). The contracts
store only the 32-byte digest; :func:`digest_to_cid` and :func:`cid_to_digest`
convert both ways without loss.

CIDv1 strings ("bafy..." in base32, or "z..." in base58btc) are parsed too;
a CIDv1 of a dag-pb block with a sha2-256 multihash names the same block as a
CIDv0 and converts to it (:func:`to_v0`). Other codecs (raw leaves) and hashes
do not: they raise :class:`InvalidCid`, since the chain has no room for them.

Everything here is pure and bounded: inputs longer than :data:`MAX_CID_TEXT`
characters are rejected before any decoding work.

>>> cid = digest_to_cid(bytes(32))
>>> cid
'QmNLei78zWmzUdbeRB3CiUfAizWUrbeeZh5K1rhAQKCh51'
>>> cid_to_digest(cid) == bytes(32)
True
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import NewType

from core.errors import VeritrainError

__all__ = [
    "Cid",
    "InvalidCid",
    "ParsedCid",
    "DAG_PB",
    "RAW",
    "SHA2_256",
    "MAX_CID_TEXT",
    "b58encode",
    "b58decode",
    "digest_to_cid",
    "cid_to_digest",
    "parse_cid",
    "to_v0",
    "validate_cid",
    "block_cid",
]

Cid = NewType("Cid", str)
"""A validated CIDv0 string ("Qm" + 44 base58btc characters)."""

DAG_PB = 0x70
RAW = 0x55
SHA2_256 = 0x12
_DIGEST_LEN = 32
_V0_PREFIX = bytes((SHA2_256, _DIGEST_LEN))
_V0_TEXT_LEN = 46
MAX_CID_TEXT = 128  # well above any sha2-256 CID in base32 (59) or base58btc (46..50 chars)

_B58_ALPHABET = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_B58_INDEX = {c: i for i, c in enumerate(_B58_ALPHABET)}


class InvalidCid(VeritrainError, ValueError):
    """A string or digest is not a content id veritrain accepts; the message says why."""

    exit_code = 2

    def __init__(self, value: object, reason: str) -> None:
        shown = repr(value) if not isinstance(value, str) else repr(value[:MAX_CID_TEXT])
        super().__init__(f"invalid CID {shown}: {reason}")
        self.value = value
        self.reason = reason


@dataclass(frozen=True)
class ParsedCid:
    """The parts of a CID: version (0 or 1), content codec, multihash code, digest."""

    version: int
    codec: int
    hash_code: int
    digest: bytes


def b58encode(data: bytes) -> str:
    """base58btc (Bitcoin alphabet), leading zero bytes as '1'."""
    zeros = len(data) - len(data.lstrip(b"\0"))
    n = int.from_bytes(data, "big")
    out = []
    while n:
        n, rem = divmod(n, 58)
        out.append(_B58_ALPHABET[rem])
    return "1" * zeros + "".join(reversed(out))


def b58decode(text: str) -> bytes:
    """Inverse of :func:`b58encode`; raises ValueError on a character outside the alphabet."""
    n = 0
    for ch in text:
        digit = _B58_INDEX.get(ch)
        if digit is None:
            raise ValueError(f"character {ch!r} is not base58btc")
        n = n * 58 + digit
    zeros = len(text) - len(text.lstrip("1"))
    body = n.to_bytes((n.bit_length() + 7) // 8, "big") if n else b""
    return b"\0" * zeros + body


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    """Unsigned LEB128 varint at ``pos`` (at most 9 bytes, as multiformats allows)."""
    value = 0
    for i in range(9):
        if pos + i >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos + i]
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            if byte == 0 and i > 0:
                raise ValueError("varint is not minimally encoded")
            return value, pos + i + 1
    raise ValueError("varint longer than 9 bytes")


def _multihash(data: bytes, pos: int, whole: object) -> tuple[int, bytes]:
    try:
        code, pos = _read_varint(data, pos)
        length, pos = _read_varint(data, pos)
    except ValueError as e:
        raise InvalidCid(whole, f"bad multihash ({e})") from None
    digest = data[pos:]
    if len(digest) != length:
        raise InvalidCid(whole, f"multihash says {length} digest bytes, found {len(digest)}")
    return code, digest


def parse_cid(text: str) -> ParsedCid:
    """Parse a CIDv0 ("Qm...") or a CIDv1 in base32 ("b...") or base58btc ("z...").

    Raises :class:`InvalidCid` naming the problem. Accepts any codec and hash
    for CIDv1 (use :func:`to_v0` to require what the chain can hold).
    """
    if not isinstance(text, str):
        raise InvalidCid(text, f"expected a string, got {type(text).__name__}")
    if not text:
        raise InvalidCid(text, "empty string")
    if len(text) > MAX_CID_TEXT:
        raise InvalidCid(text, f"longer than {MAX_CID_TEXT} characters")
    if text.startswith("Qm"):
        if len(text) != _V0_TEXT_LEN:
            raise InvalidCid(text, f"a CIDv0 has {_V0_TEXT_LEN} characters, this has {len(text)}")
        try:
            raw = b58decode(text)
        except ValueError as e:
            raise InvalidCid(text, str(e)) from None
        if len(raw) != 2 + _DIGEST_LEN or not raw.startswith(_V0_PREFIX):
            raise InvalidCid(text, "a CIDv0 must decode to 0x12 0x20 followed by a 32-byte sha2-256 digest")
        return ParsedCid(0, DAG_PB, SHA2_256, raw[2:])
    prefix, body = text[0], text[1:]
    try:
        if prefix == "b":
            if body != body.lower():
                raise ValueError("base32 CIDs are lower case")
            raw = base64.b32decode(body.upper() + "=" * (-len(body) % 8))
        elif prefix == "z":
            raw = b58decode(body)
        else:
            raise InvalidCid(text, f"unsupported multibase prefix {prefix!r} (expected 'Qm', 'b' or 'z')")
    except ValueError as e:  # binascii.Error is a ValueError
        raise InvalidCid(text, f"bad multibase encoding ({e})") from None
    try:
        version, pos = _read_varint(raw, 0)
        if version != 1:
            raise InvalidCid(text, f"unsupported CID version {version}")
        codec, pos = _read_varint(raw, pos)
    except ValueError as e:
        raise InvalidCid(text, f"bad CIDv1 header ({e})") from None
    hash_code, digest = _multihash(raw, pos, text)
    return ParsedCid(1, codec, hash_code, digest)


def to_v0(text: str) -> Cid:
    """The CIDv0 naming the same dag-pb/sha2-256 block as ``text`` (a CIDv0 or CIDv1)."""
    parsed = parse_cid(text)
    if parsed.version == 0:
        return Cid(text)
    if parsed.codec != DAG_PB:
        raise InvalidCid(text, f"codec 0x{parsed.codec:x} is not dag-pb (0x70); only dag-pb CIDs have a CIDv0 form")
    if parsed.hash_code != SHA2_256 or len(parsed.digest) != _DIGEST_LEN:
        raise InvalidCid(text, f"multihash 0x{parsed.hash_code:x} is not a 32-byte sha2-256")
    return digest_to_cid(parsed.digest)


def validate_cid(text: str) -> Cid:
    """``text`` as a :data:`Cid` if it is a well-formed CIDv0, else :class:`InvalidCid`.

    Strict: CIDv1 is refused here (convert it with :func:`to_v0` first), so a
    validated CID is also safe as a file name (base58 characters only).
    """
    parsed = parse_cid(text)
    if parsed.version != 0:
        raise InvalidCid(text, "expected a CIDv0 ('Qm...'); convert CIDv1 with core.cid.to_v0")
    return Cid(text)


def digest_to_cid(digest: bytes) -> Cid:
    """The CIDv0 of a sha2-256 digest (a bytes32 read from a contract)."""
    if not isinstance(digest, (bytes, bytearray)):
        raise InvalidCid(digest, f"expected 32 bytes, got {type(digest).__name__}")
    if len(digest) != _DIGEST_LEN:
        raise InvalidCid(digest, f"expected a 32-byte digest, got {len(digest)} bytes")
    return Cid(b58encode(_V0_PREFIX + bytes(digest)))


def cid_to_digest(text: str) -> bytes:
    """The 32-byte sha2-256 digest to store on chain for a CIDv0 (or an equivalent CIDv1)."""
    return parse_cid(to_v0(text)).digest


def block_cid(block: bytes) -> Cid:
    """The CIDv0 of one serialized dag-pb block: base58btc(0x12 0x20 || sha256(block))."""
    return digest_to_cid(hashlib.sha256(block).digest())
