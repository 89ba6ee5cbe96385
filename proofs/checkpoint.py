"""Checkpoints: the full training state in one canonical safetensors byte form.

A checkpoint holds every parameter (``param.<name>``) and every optimizer slot
(``optim.<name>.<slot>``: SGD's ``momentum``, Adam's ``exp_avg`` and
``exp_avg_sq``) as float32, and in its safetensors metadata the format tag,
the global step and the spec hash. The bytes are canonical, so equal states
have equal bytes and equal state hashes:

* header: the safetensors JSON with sorted keys and no whitespace, padded with
  spaces to a multiple of 8 bytes;
* data: the tensors in sorted-name order, contiguous, little-endian.

``state_hash = keccak256(bytes)`` is the Merkle leaf value. Decoding goes
through the safetensors library (never pickle) and then re-encodes: bytes that
are not exactly canonical are refused, so one state has one hash.
"""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_safetensors

from core.bounded import safetensors_header
from core.probe import Bytes32
from proofs.errors import CheckpointError, HashMismatch, LimitExceeded
from proofs.keccak import keccak
from proofs.spec import Limits

__all__ = [
    "FORMAT",
    "MAX_CHECKPOINT_BYTES",
    "Checkpoint",
    "encode_checkpoint",
    "decode_checkpoint",
    "state_hash",
    "update_norm",
]

FORMAT = "veritrain-checkpoint/1"
#: Parameters plus at most two optimizer slots per parameter, float32, plus a header.
MAX_CHECKPOINT_BYTES = 3 * 4 * Limits.PARAMS + (1 << 20)
_MAX_HEADER = 1 << 20


@dataclass(frozen=True)
class Checkpoint:
    """A decoded checkpoint: global step, the spec hash it was made for, float32 CPU tensors."""

    step: int
    spec_hash: str
    tensors: Mapping[str, torch.Tensor]

    def params(self) -> dict[str, torch.Tensor]:
        """The model parameters by module name (``param.`` prefix removed)."""
        return {k[6:]: v for k, v in self.tensors.items() if k.startswith("param.")}

    def optimizer_state(self) -> dict[str, torch.Tensor]:
        return {k: v for k, v in self.tensors.items() if k.startswith("optim.")}

    def to_bytes(self) -> bytes:
        return encode_checkpoint(self.step, self.tensors, self.spec_hash)


def state_hash(data: bytes) -> Bytes32:
    """keccak256 of checkpoint bytes: the value a trace commits to."""
    return Bytes32(keccak(data))


def encode_checkpoint(step: int, tensors: Mapping[str, torch.Tensor], spec_hash: str) -> bytes:
    """Canonical safetensors bytes of a training state (tensors are written as float32)."""
    names = sorted(tensors)
    header: dict[str, object] = {"__metadata__": {"format": FORMAT, "spec": spec_hash, "step": str(step)}}
    blobs = []
    offset = 0
    for name in names:
        t = tensors[name].detach()
        if t.dtype != torch.float32:
            raise CheckpointError(f"tensor {name!r} is {t.dtype}; checkpoints hold float32 only")
        blob = t.cpu().contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(blob)]}
        offset += len(blob)
        blobs.append(blob)
    head = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    return struct.pack("<Q", len(head)) + head + b"".join(blobs)


def decode_checkpoint(data: bytes, *, expect_hash: Bytes32 | None = None, expect_spec: str | None = None) -> Checkpoint:
    """Parse canonical checkpoint bytes; check them against a committed hash and spec hash if given.

    Raises :class:`LimitExceeded` (oversize), :class:`HashMismatch` (bytes are not what
    was committed) or :class:`CheckpointError` (truncated, not safetensors, not canonical,
    not float32, wrong format tag or spec).
    """
    if len(data) > MAX_CHECKPOINT_BYTES:
        raise LimitExceeded("checkpoint size in bytes", len(data), MAX_CHECKPOINT_BYTES)
    if expect_hash is not None:
        actual = state_hash(data)
        if actual != expect_hash:
            raise HashMismatch("checkpoint bytes", expect_hash, actual)
    if len(data) < 8:
        raise CheckpointError(f"checkpoint is truncated: {len(data)} bytes, not even a header length")
    (head_len,) = struct.unpack("<Q", data[:8])
    if head_len > _MAX_HEADER or 8 + head_len > len(data):
        raise CheckpointError(f"checkpoint is truncated or corrupt: header of {head_len} bytes in {len(data)} bytes of data")
    try:
        meta = safetensors_header(data, max_header=_MAX_HEADER, what="checkpoint").get("__metadata__") or {}
        tensors = load_safetensors(data)
    except (SafetensorError, ValueError, AttributeError) as exc:  # InputRejected is a ValueError
        raise CheckpointError(f"checkpoint is not valid safetensors (truncated or corrupt?): {exc}") from exc
    if meta.get("format") != FORMAT:
        raise CheckpointError(f"checkpoint format is {meta.get('format')!r}, expected {FORMAT!r}")
    step_text = meta.get("step", "")
    if not (isinstance(step_text, str) and step_text.isdigit() and len(step_text) <= 12):
        raise CheckpointError(f"checkpoint step {step_text!r} is not a non-negative integer")
    spec = meta.get("spec")
    if not isinstance(spec, str):
        raise CheckpointError("checkpoint metadata has no spec hash")
    if expect_spec is not None and spec != expect_spec:
        raise CheckpointError(f"checkpoint was made for spec {spec}, not {expect_spec}")
    for name, t in tensors.items():
        if t.dtype != torch.float32:
            raise CheckpointError(f"tensor {name!r} is {t.dtype}; checkpoints hold float32 only")
    ckpt = Checkpoint(step=int(step_text), spec_hash=spec, tensors=tensors)
    if encode_checkpoint(ckpt.step, tensors, spec) != data:
        raise CheckpointError("checkpoint bytes are not in canonical form (key order, padding or extra metadata)")
    return ckpt


def update_norm(before: Mapping[str, torch.Tensor], after: Mapping[str, torch.Tensor]) -> float:
    """L2 norm of the parameter update ``after - before``, in float64.

    Computed with numpy's pairwise sums over sorted names and ``math.fsum``, so the
    same inputs give the same float on any machine and thread count: a verifier
    recomputes the solver's claimed norms exactly.
    """
    if sorted(before) != sorted(after):
        raise CheckpointError("cannot compare states with different tensors")
    parts = []
    for name in sorted(before):
        d = after[name].detach().cpu().numpy().astype(np.float64) - before[name].detach().cpu().numpy().astype(np.float64)
        parts.append(float(np.sum(d * d)))
    return math.sqrt(math.fsum(parts))
