"""Checkpoints: the full training state in one canonical safetensors byte form.

A checkpoint holds every parameter (``param.<name>``) and every optimizer slot
(``optim.<name>.<slot>``: SGD's ``momentum``, Adam's ``exp_avg`` and
``exp_avg_sq``) as float32, and in its safetensors metadata the format tag,
the global step and the spec hash. The bytes are canonical, so equal states
have equal bytes and equal state hashes:

* header: the safetensors JSON with sorted keys and no whitespace, padded with
  spaces to a multiple of 8 bytes;
* data: the tensors in sorted-name order, contiguous, little-endian.

``state_hash = keccak256(bytes)`` is the Merkle leaf value. Decoding never
unpickles and never copies tensor data: the header is parsed bounded
(``core.bounded.safetensors_header``) and must be byte for byte the canonical
header of the tensors it names, and the data exactly as long as they are, so
bytes that are not exactly canonical are refused and one state has one hash.
The decoded tensors are read-only views of the bytes. :class:`StateBuffer`
writes the canonical bytes of a state into one reused buffer (the solver's
checkpoint path: :class:`proofs.train.Committer`).

A sealed job's checkpoint (``spec.dataset.sealed``) is those bytes sealed under the job's data
key in their one canonical sealing (:func:`seal_state`, ``core.sealing.seal_canonical``): its
state hash, CID and every copy stored or published are the sealed bytes', which anyone can check
against a leaf without the key, while only its holders read the state (``decode_checkpoint``
with ``data_key``). docs/sealing.md has why.
"""

from __future__ import annotations

import json
import math
import struct
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch
from numba import njit

from core.bounded import safetensors_header
from core.errors import SealingError
from core.probe import Bytes32
from core.sealing import MAGIC, open_canonical, seal_canonical
from proofs.errors import CheckpointError, HashMismatch, LimitExceeded
from proofs.keccak import keccak, keccak_hasher
from proofs.spec import Limits

__all__ = [
    "FORMAT",
    "Checkpoint",
    "StateBuffer",
    "encode_checkpoint",
    "decode_checkpoint",
    "seal_state",
    "state_hash",
    "hash_state",
    "update_norm",
]

FORMAT = "veritrain-checkpoint/1"
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


def state_hash(data: bytes | bytearray | memoryview) -> Bytes32:
    """keccak256 of checkpoint bytes: the value a trace commits to."""
    return Bytes32(keccak(data))


def _header(step: int, spec_hash: str, shapes: Sequence[tuple[str, Sequence[int]]]) -> bytes:
    """The canonical header (length word included) of float32 tensors ``(name, shape)`` in sorted-name order."""
    header: dict[str, object] = {"__metadata__": {"format": FORMAT, "spec": spec_hash, "step": str(step)}}
    offset = 0
    for name, shape in shapes:
        size = 4 * math.prod(shape)
        header[name] = {"dtype": "F32", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size
    head = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    return struct.pack("<Q", len(head)) + head


def _layout(step: int, tensors: Mapping[str, torch.Tensor], spec_hash: str) -> tuple[bytes, list[memoryview]]:
    """The canonical header and each tensor's bytes (views, no copy where the tensor is a contiguous CPU one)."""
    names = sorted(tensors)
    blobs = []
    for name in names:
        t = tensors[name].detach()
        if t.dtype != torch.float32:
            raise CheckpointError(f"tensor {name!r} is {t.dtype}; checkpoints hold float32 only")
        blobs.append(t.cpu().contiguous().reshape(-1).numpy().view(np.uint8).data)
    return _header(step, spec_hash, [(name, tuple(tensors[name].shape)) for name in names]), blobs


def hash_state(step: int, tensors: Mapping[str, torch.Tensor], spec_hash: str) -> Bytes32:
    """``state_hash(encode_checkpoint(...))`` without the bytes: the tensors are hashed in place."""
    head, blobs = _layout(step, tensors, spec_hash)
    hasher = keccak_hasher()
    hasher.update(head)
    for blob in blobs:
        hasher.update(blob)
    return Bytes32(hasher.digest())


def encode_checkpoint(step: int, tensors: Mapping[str, torch.Tensor], spec_hash: str) -> bytes:
    """Canonical safetensors bytes of a training state (tensors are written as float32)."""
    head, blobs = _layout(step, tensors, spec_hash)
    return b"".join([head, *blobs])


class StateBuffer:
    """One buffer, reused, that holds the canonical bytes of the last state written into it: a
    checkpoint costs one copy of the state and no fresh memory (a fresh allocation of a large
    checkpoint costs more in page faults than the copy itself)."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._size = 0

    def write(self, step: int, tensors: Mapping[str, torch.Tensor], spec_hash: str) -> memoryview:
        """Write the canonical bytes of a state; a view of them (valid until the next write)."""
        head, blobs = _layout(step, tensors, spec_hash)
        size = len(head) + sum(len(b) for b in blobs)
        if size > len(self._buf):
            self._buf = bytearray(size + 64)  # a later checkpoint's step may take a few more header bytes
        view = memoryview(self._buf)
        view[: len(head)] = head
        at = len(head)
        for blob in blobs:
            view[at : at + len(blob)] = blob
            at += len(blob)
        self._size = size
        return view[:size]

    def view(self) -> memoryview:
        """The bytes of the last state written."""
        return memoryview(self._buf)[: self._size]


def seal_state(data: bytes | memoryview, data_key: bytes | None) -> bytes | memoryview:
    """A state's committed bytes: its canonical bytes ``data``, sealed canonically under a sealed
    job's ``data_key`` (unchanged when None)."""
    return data if data_key is None else seal_canonical(data_key, data)


def decode_checkpoint(
    data: bytes | bytearray | memoryview, *, expect_hash: Bytes32 | None = None, expect_spec: str | None = None, data_key: bytes | None = None
) -> Checkpoint:
    """Parse canonical checkpoint bytes; check them against a committed hash and spec hash if given.
    A sealed job's checkpoint is opened with its ``data_key`` first (after the hash check, which is
    of the sealed bytes). The tensors are views of the (opened) bytes (read-only: clone one to
    change it).

    Raises :class:`LimitExceeded` (oversize), :class:`HashMismatch` (bytes are not what
    was committed) or :class:`CheckpointError` (truncated, not safetensors, not canonical,
    not float32, wrong format tag or spec; sealed content that does not open to its canonical
    sealing under ``data_key``).
    """
    if len(data) > Limits.CHECKPOINT_BYTES:
        raise LimitExceeded("checkpoint size in bytes", len(data), Limits.CHECKPOINT_BYTES)
    if expect_hash is not None:
        actual = state_hash(data)
        if actual != expect_hash:
            raise HashMismatch("checkpoint bytes", expect_hash, actual)
    if data_key is not None:
        try:
            data = open_canonical(data_key, data)
        except SealingError as exc:
            raise CheckpointError(f"sealed checkpoint does not open: {exc}") from exc
    elif bytes(data[: len(MAGIC)]) == MAGIC:
        raise CheckpointError("checkpoint is sealed: its job's data key is needed to read it")
    if len(data) < 8:
        raise CheckpointError(f"checkpoint is truncated: {len(data)} bytes, not even a header length")
    (head_len,) = struct.unpack("<Q", data[:8])
    if head_len > _MAX_HEADER or 8 + head_len > len(data):
        raise CheckpointError(f"checkpoint is truncated or corrupt: header of {head_len} bytes in {len(data)} bytes of data")
    try:
        header = safetensors_header(data, max_header=_MAX_HEADER, what="checkpoint")
    except ValueError as exc:  # InputRejected is a ValueError
        raise CheckpointError(f"checkpoint is not valid safetensors (truncated or corrupt?): {exc}") from exc
    meta = header.pop("__metadata__", None) or {}
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(f"checkpoint format is {meta.get('format') if isinstance(meta, dict) else meta!r}, expected {FORMAT!r}")
    step_text = meta.get("step", "")
    if not (isinstance(step_text, str) and step_text.isdigit() and len(step_text) <= 12):
        raise CheckpointError(f"checkpoint step {step_text!r} is not a non-negative integer")
    spec = meta.get("spec")
    if not isinstance(spec, str):
        raise CheckpointError("checkpoint metadata has no spec hash")
    if expect_spec is not None and spec != expect_spec:
        raise CheckpointError(f"checkpoint was made for spec {spec}, not {expect_spec}")
    for name, entry in header.items():
        if entry["dtype"] != "F32":
            raise CheckpointError(f"tensor {name!r} is {entry['dtype']}; checkpoints hold float32 only")
    shapes = [(name, tuple(header[name]["shape"])) for name in sorted(header)]
    room = len(data) // 4  # no tensor holds more values than the bytes do (a hostile shape's product is never computed whole)
    if any(_numel(shape, room) > room for _, shape in shapes):
        raise CheckpointError("checkpoint is truncated or corrupt: a tensor's shape holds more values than the bytes")
    head = _header(int(step_text), spec, shapes)
    if data[: len(head)] != head or len(data) != len(head) + sum(4 * math.prod(shape) for _, shape in shapes):
        raise CheckpointError("checkpoint bytes are not in canonical form (key order, padding or extra metadata)")
    tensors = {}
    at = len(head)
    with warnings.catch_warnings():  # views of immutable bytes: read-only by contract (see above)
        warnings.filterwarnings("ignore", message="The given buffer is not writable")
        for name, shape in shapes:
            count = math.prod(shape)
            flat = torch.frombuffer(data, dtype=torch.float32, count=count, offset=at) if count else torch.zeros(0)
            tensors[name] = flat.view(shape)
            at += 4 * count
    return Checkpoint(step=int(step_text), spec_hash=spec, tensors=tensors)


def _numel(shape: Sequence[int], limit: int) -> int:
    """The number of values of ``shape``, or ``limit + 1`` as soon as it is known to exceed ``limit``."""
    if 0 in shape:
        return 0
    count = 1
    for dim in shape:
        count *= dim
        if count > limit:
            return limit + 1
    return count


def update_norm(before: Mapping[str, torch.Tensor], after: Mapping[str, torch.Tensor]) -> float:
    """L2 norm of the parameter update ``after - before``, in float64.

    Per tensor (sorted names), the sum of ``(float64(after) - float64(before))**2`` in numpy's
    pairwise order (:func:`_pairwise_sq_diff`), then ``math.fsum`` of those sums: the same
    inputs give the same float on any machine and thread count, so a verifier recomputes the
    solver's claimed norms exactly. No float64 copy of a tensor is made (the earlier
    ``np.sum(d * d)`` over float64 copies, which these bits still equal, took 3.3 s for a
    10000 x 10000 weight; this 0.2 s).
    """
    if sorted(before) != sorted(after):
        raise CheckpointError("cannot compare states with different tensors")
    parts = []
    for name in sorted(before):
        a = after[name].detach().cpu().numpy().reshape(-1)
        b = before[name].detach().cpu().numpy().reshape(-1)
        if a.shape != b.shape:
            raise CheckpointError(f"cannot compare {name}: {after[name].shape} against {before[name].shape}")
        parts.append(0.0 + float(_pairwise_sq_diff(a, b, 0, a.shape[0])))  # numpy's sum adds to its identity 0
    return math.sqrt(math.fsum(parts))


@njit(cache=True, nogil=True, inline="always")
def _sq_diff(a: np.ndarray, b: np.ndarray, i: int) -> float:
    d = np.float64(a[i]) - np.float64(b[i])
    return d * d


@njit(cache=True, nogil=True)
def _pairwise_sq_diff(a: np.ndarray, b: np.ndarray, lo: int, n: int) -> float:
    """``np.sum(d * d)`` for ``d = float64(a[lo:lo+n]) - float64(b[lo:lo+n])``, without ``d``:
    numpy's pairwise summation (``pairwise_sum`` in numpy's ``loops_utils.h``) step for step:
    under 8 terms in order; up to 128 in eight running sums, combined as
    ``((r0+r1)+(r2+r3))+((r4+r5)+(r6+r7))``, then the rest in order; above 128, the two halves
    (the first a multiple of 8 long) summed apart and added. ``tests/proofs/test_checkpoint.py``
    pins it against numpy on every length to 300 and on large odd ones."""
    if n < 8:
        res = 0.0
        for i in range(lo, lo + n):
            res += _sq_diff(a, b, i)
        return res
    if n <= 128:
        r0, r1, r2, r3 = _sq_diff(a, b, lo), _sq_diff(a, b, lo + 1), _sq_diff(a, b, lo + 2), _sq_diff(a, b, lo + 3)
        r4, r5, r6, r7 = _sq_diff(a, b, lo + 4), _sq_diff(a, b, lo + 5), _sq_diff(a, b, lo + 6), _sq_diff(a, b, lo + 7)
        end = lo + n - n % 8
        for i in range(lo + 8, end, 8):
            r0, r1, r2, r3 = r0 + _sq_diff(a, b, i), r1 + _sq_diff(a, b, i + 1), r2 + _sq_diff(a, b, i + 2), r3 + _sq_diff(a, b, i + 3)
            r4, r5, r6, r7 = r4 + _sq_diff(a, b, i + 4), r5 + _sq_diff(a, b, i + 5), r6 + _sq_diff(a, b, i + 6), r7 + _sq_diff(a, b, i + 7)
        res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        for i in range(end, lo + n):
            res += _sq_diff(a, b, i)
        return res
    n2 = n // 2
    n2 -= n2 % 8
    return _pairwise_sq_diff(a, b, lo, n2) + _pairwise_sq_diff(a, b, lo + n2, n - n2)
