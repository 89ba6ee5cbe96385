"""keccak256 and the 32-byte ABI words the contracts hash, without the chain libraries.

Every value the engine hashes as the contracts do is a static ABI type (``uint256``, ``bytes32``,
``address``), whose ``abi.encode`` is the concatenation of one 32-byte word per value, so the words
are built here; tests/proofs/test_keccak.py checks them against eth_abi. keccak256 is pycryptodome's
(the backend eth-hash uses).
"""

from __future__ import annotations

from Crypto.Hash import keccak as _keccak

from proofs.errors import ProofError

#: Incremental keccak256: ``h = keccak_hasher(); h.update(piece); ...; h.digest()`` (pieces of any
#: bytes-like type, read in place; pycryptodome hashes them without the GIL).
Keccak256 = _keccak.Keccak_Hash


def keccak_hasher() -> Keccak256:
    """A fresh incremental keccak256."""
    return _keccak.new(digest_bits=256)


def keccak(data: bytes | bytearray | memoryview) -> bytes:
    """keccak256 (Ethereum's, not NIST SHA3-256) of ``data`` (read in place, not copied)."""
    return _keccak.new(digest_bits=256, data=data).digest()


def uint256(value: int) -> bytes:
    """``abi.encode(uint256 value)``."""
    if not 0 <= value < 2**256:
        raise ProofError(f"{value} does not fit a uint256")
    return int(value).to_bytes(32, "big")


def address_word(address: str) -> bytes:
    """``abi.encode(address)`` of a 0x-prefixed 20-byte hex address (any letter case)."""
    text = address[2:] if address.startswith(("0x", "0X")) else ""
    try:
        raw = bytes.fromhex(text)
    except ValueError:
        raw = b""
    if len(raw) != 20:
        raise ProofError(f"{address!r} is not a 20-byte hex address")
    return bytes(12) + raw
