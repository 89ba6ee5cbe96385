"""The trace manifest: what a solver publishes (by CID) next to its on-chain commitment.

Canonical JSON (sorted keys, compact) listing, for checkpoint ``i = 0..n``, its
CID and state hash, the per-segment update norms (L2 of the parameter change
over segment ``i``, the top-Q sampling key), the per-segment mean training losses
(``proofs.train.segment_loss``: float32 values, written as the shortest decimal that
reads back as the same number, so they round-trip bit-exactly), the spec's CID and
hash, the Merkle root and, for a spec that holds out an evaluation split (``spec.eval``), the
final model's held-out loss (``proofs.train.held_out_loss``, a float32; left out otherwise, so a
manifest without it keeps its bytes). Parsing is bounded and checks that the manifest is
internally consistent: indices in order, ``n + 1`` checkpoints for ``n`` norms and
``n`` losses, every loss a float32, and a root that is the
:class:`~proofs.merkle.TraceTree` root of the listed hashes.

Version 2 added the losses; a version 1 manifest (no losses) is refused like any other
malformed manifest (docs/formats.md, "Manifest").
"""

from __future__ import annotations

import json
import math
import re
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from core.bounded import MAX_DEPTH, json_depth
from core.probe import Bytes32
from proofs.errors import LimitExceeded, ManifestError
from proofs.merkle import TraceTree, hex32
from proofs.spec import JobSpec, Limits, canonical_json

__all__ = ["MANIFEST_VERSION", "MAX_MANIFEST_BYTES", "CheckpointEntry", "Manifest", "parse_manifest", "is_float32"]

MANIFEST_VERSION: Literal[2] = 2
MAX_MANIFEST_BYTES = 256 * (Limits.SEGMENTS + 1) + 4096

_HEX32 = r"^0x[0-9a-f]{64}$"
_Hex32 = Annotated[str, Field(pattern=_HEX32)]


def _hash_from_json(value: object) -> object:
    """A hash field's JSON text to bytes (the pattern and messages of a ``_Hex32`` field); bytes,
    from code, pass on to the length check."""
    if isinstance(value, bytes):
        return value
    if not isinstance(value, str):
        raise PydanticCustomError("string_type", "Input should be a valid string")
    if not re.fullmatch(_HEX32, value):
        raise PydanticCustomError("string_pattern_mismatch", "String should match pattern '{pattern}'", {"pattern": _HEX32})
    return bytes.fromhex(value[2:])


#: A hash as code sees it (``Bytes32``); ``0x`` + 64 lowercase hex digits in the JSON.
_Hash = Annotated[Bytes32, BeforeValidator(_hash_from_json), Field(min_length=32, max_length=32), PlainSerializer(hex32)]
_Cid = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9]+$")]


def is_float32(value: float) -> bool:
    """Whether ``value`` is exactly a finite float32 (what a committed loss must be)."""
    with np.errstate(over="ignore"):
        return math.isfinite(value) and float(np.float32(value)) == value


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class CheckpointEntry(_Frozen):
    index: Annotated[int, Field(ge=0, le=Limits.SEGMENTS)]
    cid: _Cid
    state_hash: _Hash


class Manifest(_Frozen):
    version: Literal[2] = MANIFEST_VERSION
    spec_cid: _Cid
    spec_hash: _Hex32
    steps: Annotated[int, Field(ge=1, le=Limits.STEPS)]
    checkpoint_interval: Annotated[int, Field(ge=1, le=Limits.STEPS)]
    root: _Hash
    checkpoints: tuple[CheckpointEntry, ...] = Field(min_length=2, max_length=Limits.SEGMENTS + 1)
    update_norms: tuple[Annotated[float, Field(ge=0.0, allow_inf_nan=False)], ...]
    losses: tuple[Annotated[float, Field(allow_inf_nan=False)], ...]
    held_out_loss: Annotated[float, Field(allow_inf_nan=False)] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Manifest:
        n = self.segments
        if self.steps != n * self.checkpoint_interval:
            raise ValueError(f"{n + 1} checkpoints every {self.checkpoint_interval} steps cannot cover {self.steps} steps")
        if [c.index for c in self.checkpoints] != list(range(n + 1)):
            raise ValueError("checkpoint indices must be 0, 1, ..., n in order")
        if len(self.update_norms) != n:
            raise ValueError(f"{len(self.update_norms)} update norms for {n} segments")
        if len(self.losses) != n:
            raise ValueError(f"{len(self.losses)} losses for {n} segments")
        if (bad := next((i for i, x in enumerate(self.losses) if not is_float32(x)), None)) is not None:
            raise ValueError(f"loss of segment {bad} ({self.losses[bad]!r}) is not a float32")
        if self.held_out_loss is not None and not is_float32(self.held_out_loss):
            raise ValueError(f"held-out loss {self.held_out_loss!r} is not a float32")
        computed = TraceTree(self.state_hashes).root
        if computed != self.root:
            raise ValueError(f"root {hex32(self.root)} is not the Merkle root of the listed state hashes ({hex32(computed)})")
        return self

    @property
    def segments(self) -> int:
        return len(self.checkpoints) - 1

    @property
    def state_hashes(self) -> tuple[Bytes32, ...]:
        return tuple(c.state_hash for c in self.checkpoints)

    @property
    def checkpoint_cids(self) -> tuple[str, ...]:
        return tuple(c.cid for c in self.checkpoints)

    @property
    def final_cid(self) -> str:
        """CID of the last checkpoint: the trained model the submitter receives."""
        return self.checkpoints[-1].cid

    def tree(self) -> TraceTree:
        return TraceTree(self.state_hashes)

    def check_spec(self, spec: JobSpec) -> None:
        """Raise :class:`ManifestError` unless the manifest describes a trace of ``spec``."""
        if self.spec_hash != spec.spec_hash():
            raise ManifestError(f"manifest is for spec {self.spec_hash}, not {spec.spec_hash()}")
        if (self.steps, self.checkpoint_interval) != (spec.steps, spec.checkpoint_interval):
            raise ManifestError(
                f"manifest covers {self.steps} steps every {self.checkpoint_interval}; the spec says {spec.steps} every {spec.checkpoint_interval}"
            )
        if (self.held_out_loss is None) != (spec.eval is None):
            held = "holds out an evaluation split" if spec.eval is not None else "holds out nothing"
            raise ManifestError(f"the spec {held}; the manifest {'lacks' if self.held_out_loss is None else 'claims'} a held-out loss")

    def canonical_bytes(self) -> bytes:
        return canonical_json(self.model_dump(mode="json", exclude={"held_out_loss"} if self.held_out_loss is None else None))


_CIDV0_SHAPE = "Qm" + "z" * 44


def largest_manifest_bytes(steps: int, checkpoint_interval: int) -> int:
    """The size of the largest canonical manifest of a job of ``steps`` steps checkpointed every
    ``checkpoint_interval``, with CIDv0 content ids (46 characters, what our stores return) and the
    longest norms and losses, without building its tree: what a solver compares with what it could publish on
    chain if its manifest's availability is challenged."""
    n = steps // checkpoint_interval
    longest = Manifest.model_construct(
        version=MANIFEST_VERSION,
        spec_cid=_CIDV0_SHAPE,
        spec_hash="0x" + "f" * 64,
        steps=steps,
        checkpoint_interval=checkpoint_interval,
        root=Bytes32(b"\xff" * 32),
        checkpoints=tuple(CheckpointEntry.model_construct(index=i, cid=_CIDV0_SHAPE, state_hash=Bytes32(b"\xff" * 32)) for i in range(n + 1)),
        update_norms=(1.2345678901234567e-300,) * n,
        losses=(-1.2345678901234567e-38,) * n,
        held_out_loss=-1.2345678901234567e-38,
    )
    return len(longest.canonical_bytes())


def parse_manifest(data: bytes, spec: JobSpec | None = None) -> Manifest:
    """Parse canonical manifest bytes (bounded), validate them, and match them to ``spec`` if given."""
    if len(data) > MAX_MANIFEST_BYTES:
        raise LimitExceeded("manifest size in bytes", len(data), MAX_MANIFEST_BYTES)
    depth = json_depth(data)  # a manifest nests 3 levels; bounded before any parser sees it
    if depth > MAX_DEPTH:
        raise ManifestError(f"manifest nests {depth} levels deep, over the limit of {MAX_DEPTH}")
    try:
        manifest = Manifest.model_validate_json(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(manifest)'}: {e['msg']}" for e in exc.errors(include_url=False)[:5])
        raise ManifestError(f"invalid manifest: {problems}") from exc
    except json.JSONDecodeError as exc:  # pragma: no cover - pydantic wraps JSON errors
        raise ManifestError(f"manifest is not JSON: {exc}") from exc
    if spec is not None:
        manifest.check_spec(spec)
    return manifest
