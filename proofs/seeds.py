"""Named sub-seeds derived from a job's seed, so init and data order never share a stream."""

from __future__ import annotations

from proofs.keccak import keccak

__all__ = ["derive_seed"]


def derive_seed(seed: int, purpose: str, index: int = 0) -> int:
    """A 63-bit seed: keccak256(seed as uint64 || purpose || index as uint64), first 8 bytes."""
    digest = keccak(seed.to_bytes(8, "big") + purpose.encode() + index.to_bytes(8, "big"))
    return int.from_bytes(digest[:8], "big") >> 1
