"""Errors the proof-of-learning engine raises, under one root: :class:`ProofError`.

Each names what was wrong with the input (a spec, a dataset, a checkpoint, a
manifest) so a CLI can print it as one line. The root sits under
``core.errors.VeritrainError`` (exit code 7 at the CLI).

A *failing replay* is not an error: :func:`proofs.replay.replay_segment`
returns a verdict that says which segment failed and why. Errors are for input
that cannot be judged at all (malformed, oversize, inconsistent with the spec)
or for a caller that asks for something impossible (a segment out of range).
"""

from __future__ import annotations

from core.errors import VeritrainError

__all__ = [
    "ProofError",
    "SpecError",
    "LimitExceeded",
    "DatasetError",
    "CheckpointError",
    "HashMismatch",
    "ManifestError",
    "MerkleError",
    "SegmentOutOfRange",
]


class ProofError(VeritrainError):
    """Root of every error the proofs engine raises on purpose."""

    exit_code = 7


class SpecError(ProofError):
    """A job spec is malformed: bad JSON, unknown fields, values out of bounds."""


class LimitExceeded(ProofError):
    """An input is larger than the engine accepts (spec, dataset, checkpoint, manifest)."""

    def __init__(self, what: str, size: int, limit: int) -> None:
        super().__init__(f"{what} is {size:,} but at most {limit:,} is accepted")
        self.what = what
        self.size = size
        self.limit = limit


class DatasetError(ProofError):
    """Dataset bytes do not hold the tensors the spec names, with the shapes and dtypes it needs."""


class CheckpointError(ProofError):
    """Checkpoint bytes are truncated, not canonical, or do not fit the spec's model and optimizer."""


class HashMismatch(ProofError):
    """Bytes do not hash to the state hash they were committed under."""

    def __init__(self, what: str, expected: bytes, actual: bytes) -> None:
        super().__init__(f"{what}: keccak256 is 0x{actual.hex()}, committed 0x{expected.hex()}")
        self.what = what
        self.expected = expected
        self.actual = actual


class ManifestError(ProofError):
    """A trace manifest is malformed or inconsistent with its spec or its Merkle root."""


class MerkleError(ProofError):
    """A Merkle tree request cannot be answered (no leaves, unknown index, bad hash)."""


class SegmentOutOfRange(ProofError):
    """A segment or step index outside the trace was asked for."""

    def __init__(self, what: str, index: int, count: int) -> None:
        super().__init__(f"{what} {index} is out of range (0..{count - 1})")
        self.index = index
        self.count = count
