"""Multi-party training, DiLoCo-style (issue 28): the deterministic engine of a verified outer step.

A multi-party job trains one model with ``M`` parties over ``R`` rounds. Each round every party
starts from the round's committed global model, runs ``H`` inner steps (an ordinary trace of the
inner spec, :func:`inner_spec`) on its own shard (:func:`shard_of`, :func:`party_dataset`), and
commits its compressed pseudo-gradient (:func:`compress`, :func:`encode_contribution`) by CID.
A drawn aggregator computes the next global model (:func:`aggregate`) and commits its state hash;
anyone recomputes it from the committed inputs (:func:`check_aggregate`). docs/multiparty.md is
the design; what follows pins each function's arithmetic.

Every value here is float32 and every operation a separate elementwise IEEE operation (numpy
ufuncs, one rounding each, never fused), in a fixed order, so two machines get the same bits
under any SIMD dispatch (tests/proofs/test_diloco.py runs it with numpy's dispatch cut down).

* **Shards.** The ``N`` training examples are permuted once by ``torch.randperm`` seeded with
  ``derive_seed(seed, "diloco-shard")``; shard ``s`` of ``M`` is slice ``[s*N//M, (s+1)*N//M)``
  of that permutation, in ascending example order. Party ``p`` trains shard ``(p + r) mod M``
  in round ``r``: shards rotate, so a party that drops out leaves no example unseen for good.
  A token dataset is cut into ``M`` contiguous ranges of window starts instead (a window is
  ``block_size + 1`` consecutive tokens, :class:`proofs.data.BatchOrder`).
* **Pseudo-gradient** of a parameter: ``global - party`` (the party's parameters after ``H`` steps).
* **int8 with per-block scales.** A tensor's values (flattened, row-major) are cut into blocks of
  ``block_size``; a block's ``scale = float32(max|x|) / 127`` (one rounding), each value's
  ``q = rint(x / scale)`` (round half to even) clipped to ``[-127, 127]``, and ``q = 0`` for the
  whole block when ``scale`` is 0 (a zero block, or one whose largest value is so small that
  ``max/127`` underflows). Decompression is ``float32(q) * scale`` (exact: one rounding). The
  error of a value is at most ``scale / 2`` plus one rounding of the product.
* **Top-k with error feedback** (optional, ``keep`` in ``(0, 1]``): per tensor ``v = delta +
  residual``; the ``k = max(1, ceil(keep * n))`` entries of largest ``|v|`` are kept (ties to the
  lower index), in ascending index order, and quantized as above; the residual carried to the
  next round is ``v - decompressed`` (``v`` itself where nothing was sent). Without ``keep`` a
  residual, if given, is fed back the same way (dense).
* **Aggregate.** Over the included parties in ascending index order: ``acc = 0; acc = acc + d_p``,
  ``mean = acc / float32(n)``; then the outer Nesterov step (PyTorch's SGD formulas with
  ``dampening = 0``, the buffer starting at zero): ``buf = mu * buf + mean``;
  ``update = mean + mu * buf``; ``param = param - lr * update``, each product and sum rounded.
* **State.** The global model after round ``r`` is a checkpoint at step ``r`` (``param.<name>``
  and ``optim.<name>.outer_momentum``) in :mod:`proofs.checkpoint`'s canonical bytes, stamped
  with the job's spec hash; its state hash is what the aggregator commits.

A contribution's bytes (:func:`encode_contribution`, never pickle)::

    magic  b"VTDLC01\\0"
    u32    block_size
    u32    tensor count
    per tensor, names strictly ascending:
      u16 name length, name (ASCII 0x21..0x7e)
      u8  ndim, ndim x u32 dims
      u8  kind (0 dense, 1 top-k)
      top-k: u32 k, k x u32 indices (strictly ascending, each < numel)
      ceil(count / block_size) x f32 scales (finite, >= 0)
      count x i8 values (in [-127, 127]; all 0 in a block whose scale is 0)

little-endian, ``count`` = numel (dense) or ``k``, nothing after the last tensor. Its hash is
keccak256 of the bytes (:func:`contribution_hash`); its CID is the store's.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import torch
from safetensors.numpy import save as save_safetensors

from core.bounded import InputRejected, load_json
from core.probe import Bytes32
from core.storage.unixfs import file_cid
from proofs.checkpoint import Checkpoint, decode_checkpoint, encode_checkpoint, hash_state
from proofs.data import Dataset, load_dataset
from proofs.errors import ProofError
from proofs.keccak import keccak
from proofs.merkle import hex32
from proofs.seeds import derive_seed
from proofs.spec import JobSpec, Limits, canonical_json, load_spec

__all__ = [
    "MAGIC",
    "MAX_CONTRIBUTION_BYTES",
    "ContributionError",
    "MultipartyConfig",
    "CompressedTensor",
    "Contribution",
    "OuterState",
    "shard_of",
    "shard_indices",
    "party_dataset",
    "inner_spec",
    "PartyJob",
    "pack_shard",
    "pack_weights",
    "party_job",
    "train_party",
    "pseudo_gradient",
    "compress",
    "decompress",
    "encode_contribution",
    "decode_contribution",
    "contribution_hash",
    "contribution_of",
    "check_contribution",
    "admissible",
    "aggregate",
    "check_aggregate",
    "DOCUMENT_FORMAT",
    "encode_document",
    "decode_document",
    "PartyRound",
    "RoundVerdict",
    "judge_round",
    "check_round",
]

MAGIC = b"VTDLC01\x00"
#: The largest block a contribution may name (a scale per block of at most this many values).
MAX_BLOCK = 1 << 16
#: Values, indices and scales of a model at the parameter limit, with room for names.
MAX_CONTRIBUTION_BYTES = 9 * Limits.PARAMS + (1 << 20)
_MAX_TENSORS = 4096
_MAX_NDIM = 8
_MOMENTUM = "outer_momentum"

_F = np.float32


class ContributionError(ProofError):
    """Contribution bytes that do not decode, or that do not fit the job's model."""


@dataclass(frozen=True)
class MultipartyConfig:
    """A multi-party job's parameters besides its spec: ``parties`` M, ``rounds`` R, ``inner_steps``
    H, the outer Nesterov step's ``outer_lr`` and ``outer_momentum``, the compression's
    ``block_size`` and ``keep`` (top-k fraction; None: dense int8), and ``quorum`` Mmin (the fewest
    included contributions a round needs; fewer: the round is void, docs/multiparty.md)."""

    parties: int
    rounds: int
    inner_steps: int
    outer_lr: float = 0.7
    outer_momentum: float = 0.9
    block_size: int = 256
    keep: float | None = None
    quorum: int = 1

    def __post_init__(self) -> None:
        if self.parties < 1 or self.rounds < 1 or self.inner_steps < 1:
            raise ProofError("a multi-party job has at least one party, round and inner step")
        if not 1 <= self.block_size <= MAX_BLOCK:
            raise ProofError(f"block_size {self.block_size} is outside [1, {MAX_BLOCK}]")
        if self.keep is not None and not 0.0 < self.keep <= 1.0:
            raise ProofError(f"keep {self.keep} is outside (0, 1]")
        if not 1 <= self.quorum <= self.parties:
            raise ProofError(f"quorum {self.quorum} is outside [1, {self.parties}]")
        if not (math.isfinite(self.outer_lr) and self.outer_lr > 0 and 0 <= self.outer_momentum < 1):
            raise ProofError("outer_lr must be positive and outer_momentum in [0, 1)")


#: The job document's format tag (``DilocoJobs`` names the document by CID as the job's ``specCid``).
DOCUMENT_FORMAT = "veritrain-diloco/1"
MAX_DOCUMENT_BYTES = 4096
_DOCUMENT_FIELDS = ("format", "spec", "parties", "rounds", "inner_steps", "outer_lr", "outer_momentum", "block_size", "keep", "quorum")


def encode_document(spec_cid: str, cfg: MultipartyConfig) -> bytes:
    """A multi-party job's document: the base spec by CID and the settings (``keep`` null for dense
    int8), canonical JSON (sorted keys, no spaces), so one job has one document CID."""
    fields = {"format": DOCUMENT_FORMAT, "spec": spec_cid, **{n: getattr(cfg, n) for n in _DOCUMENT_FIELDS[2:]}}
    return canonical_json(fields)


def decode_document(data: bytes) -> tuple[str, MultipartyConfig]:
    """The base spec's CID and the settings of a job document (bounded; exactly the fields of
    :func:`encode_document`, which re-encodes to the same bytes). :class:`ProofError` otherwise."""
    try:
        raw = load_json(data, max_bytes=MAX_DOCUMENT_BYTES, what="multi-party job document", max_depth=2)
    except InputRejected as exc:
        raise ProofError(str(exc)) from None
    if not isinstance(raw, dict) or sorted(raw) != sorted(_DOCUMENT_FIELDS) or raw["format"] != DOCUMENT_FORMAT:
        raise ProofError(f"not a {DOCUMENT_FORMAT} document: its fields must be exactly {', '.join(_DOCUMENT_FIELDS)}")
    ints, floats = ("parties", "rounds", "inner_steps", "block_size", "quorum"), ("outer_lr", "outer_momentum")
    if (
        not isinstance(raw["spec"], str)
        or any(type(raw[n]) is not int for n in ints)
        or any(type(raw[n]) not in (int, float) for n in floats)
        or type(raw["keep"]) not in (type(None), int, float)
    ):
        raise ProofError("a multi-party job document's spec is a CID string, its counts integers, its rates numbers and its keep a number or null")
    cfg = MultipartyConfig(**{n: raw[n] for n in _DOCUMENT_FIELDS[2:]})
    if encode_document(raw["spec"], cfg) != bytes(data):
        raise ProofError("a multi-party job document is not in its canonical form")
    return raw["spec"], cfg


# ----------------------------------------------------------------------------- shards and inner work


def shard_of(round_: int, party: int, parties: int) -> int:
    """The shard party ``party`` trains in round ``round_``: ``(party + round) mod parties``."""
    if not (0 <= party < parties and round_ >= 0):
        raise ProofError(f"no party {party} of {parties} in round {round_}")
    return (party + round_) % parties


def shard_indices(seed: int, examples: int, parties: int, shard: int) -> torch.Tensor:
    """Example indices of ``shard`` of ``parties`` (ascending): a slice of one seeded permutation."""
    if not 0 <= shard < parties or examples < parties:
        raise ProofError(f"cannot cut {examples} examples into {parties} shards (shard {shard})")
    perm = torch.randperm(examples, generator=torch.Generator().manual_seed(derive_seed(seed, "diloco-shard")))
    return perm[shard * examples // parties : (shard + 1) * examples // parties].sort().values


def party_dataset(spec: JobSpec, dataset: Dataset, round_: int, party: int, parties: int) -> Dataset:
    """The training data of ``party`` in ``round_``: its shard of ``dataset`` (held-out split dropped).

    Examples: :func:`shard_indices`. Tokens: the window starts ``[s*W//M, (s+1)*W//M)`` of the
    ``W = T - block_size`` windows, i.e. the token range ``[s*W//M, (s+1)*W//M + block_size)``."""
    shard = shard_of(round_, party, parties)
    if dataset.targets is None:
        block = spec.model.block_size  # type: ignore[union-attr]
        windows = dataset.inputs.shape[0] - block
        lo, hi = shard * windows // parties, (shard + 1) * windows // parties
        if hi - lo < spec.batch_size:
            raise ProofError(f"shard {shard} holds {hi - lo} windows, fewer than one batch of {spec.batch_size}")
        return Dataset(inputs=dataset.inputs[lo : hi + block], targets=None)
    idx = shard_indices(spec.seed, dataset.inputs.shape[0], parties, shard)
    if idx.shape[0] < spec.batch_size:
        raise ProofError(f"shard {shard} holds {idx.shape[0]} examples, fewer than one batch of {spec.batch_size}")
    return Dataset(inputs=dataset.inputs[idx], targets=dataset.targets[idx])


def inner_spec(spec: JobSpec, cfg: MultipartyConfig, round_: int, party: int) -> JobSpec:
    """The ordinary spec a party's inner trace of ``round_`` follows: ``spec`` with ``steps = H``,
    ``seed = derive_seed(seed, "diloco-inner", round * M + party)`` (its data order within the
    shard), one checkpoint interval that divides ``H`` (the spec's, else ``H``) and no held-out
    evaluation. Its optimizer starts from zero slots, its schedule runs over the ``H`` steps.
    Its ``dataset`` and ``init`` are still the job's: :func:`party_job` names the shard's and the
    global model's files instead."""
    raw = spec.to_json_dict()
    k = spec.checkpoint_interval if cfg.inner_steps % spec.checkpoint_interval == 0 else cfg.inner_steps
    raw.update(steps=cfg.inner_steps, seed=derive_seed(spec.seed, "diloco-inner", round_ * cfg.parties + party), checkpoint_interval=k)
    raw.pop("eval", None)
    return load_spec(raw)


def pack_shard(spec: JobSpec, shard: Dataset) -> bytes:
    """A shard (:func:`party_dataset`) as a dataset file that :func:`proofs.data.load_dataset` reads
    back to the same tensors: safetensors (``safetensors.numpy.save``, pinned, so the same shard
    gives the same bytes and CID on every machine) of ``x``: the tokens as uint16 (int32 past a
    vocabulary of 65,536), or the features as uint8 when every value is exactly ``k / 255`` (images:
    what they were loaded from) and float32 otherwise; and ``y``: the labels, int64."""
    if shard.targets is None:
        vocab = spec.model.vocab_size  # type: ignore[union-attr]
        return save_safetensors({"x": shard.inputs.numpy().astype(np.uint16 if vocab <= 1 << 16 else np.int32)})
    x = shard.inputs.numpy()
    pixels = np.rint(x * _F(255))
    if np.all((pixels >= 0) & (pixels <= 255)) and np.array_equal(pixels.astype(np.uint8).astype(_F) / _F(255), x):
        x = pixels.astype(np.uint8)
    return save_safetensors({"x": np.ascontiguousarray(x), "y": shard.targets.numpy().astype(np.int64)})


def pack_weights(params: Mapping[str, torch.Tensor]) -> bytes:
    """Model parameters by module name as the pretrained-weights file a spec's ``init`` names
    (safetensors, float32: what ``veritrain model export`` writes as ``weights.safetensors``)."""
    return save_safetensors({name: np.ascontiguousarray(_np(t)) for name, t in params.items()})


@dataclass(frozen=True)
class PartyJob:
    """Party ``party``'s inner work of a round as an ordinary job: ``spec`` (:func:`inner_spec`, its
    ``dataset`` the ``shard`` file and its ``init`` the global model's parameters, ``init``, each by
    CID), so its trace is committed, replayed, probed and disputed as any job's."""

    spec: JobSpec
    shard: bytes
    init: bytes

    def dataset(self) -> Dataset:
        """The job's training inputs, loaded as every role loads a job's (:func:`proofs.data.load_dataset`)."""
        return load_dataset(self.spec, self.shard, self.init)


def party_job(spec: JobSpec, dataset: Dataset, cfg: MultipartyConfig, state: OuterState, party: int) -> PartyJob:
    """The job ``party`` trains in round ``state.round``, from the global model ``state``: every party,
    verifier and referee derives the same spec and files (hence CIDs) from the job's spec and dataset."""
    if spec.dataset.sealed:
        raise ProofError("a multi-party job over a sealed dataset is not built (docs/multiparty.md)")
    shard = pack_shard(spec, party_dataset(spec, dataset, state.round, party, cfg.parties))
    init = pack_weights(state.params)
    raw = inner_spec(spec, cfg, state.round, party).to_json_dict()
    raw["dataset"] = {
        "cid": file_cid(shard),
        "format": "safetensors",
        "size_bytes": len(shard),
        "inputs": "x",
        "targets": None if dataset.targets is None else "y",
    }
    raw["init"] = {"cid": file_cid(init), "size_bytes": len(init)}
    return PartyJob(load_spec(raw), shard, init)


def train_party(
    spec: JobSpec, dataset: Dataset, cfg: MultipartyConfig, state: OuterState, party: int, rt: object | None = None
) -> tuple[dict[str, torch.Tensor], list[float]]:
    """Run party ``party``'s ``H`` inner steps of round ``state.round`` from the global model (its
    :func:`party_job`): its parameters after them (copies) and its step losses. ``rt``: a
    :class:`proofs.train.Runtime`."""
    from proofs.train import Runtime, Trainer  # the training stack, only where training happens

    job = party_job(spec, dataset, cfg, state, party)
    trainer = Trainer(job.spec, job.dataset(), rt if isinstance(rt, Runtime) else Runtime())
    losses = trainer.run(cfg.inner_steps)
    return {n: p.detach().clone() for n, p in trainer.params.items()}, losses


# ----------------------------------------------------------------------------- pseudo-gradients


def _np(t: torch.Tensor | np.ndarray) -> np.ndarray:
    """A float32, C-contiguous numpy array of ``t`` (a view where it already is one)."""
    arr = t.detach().cpu().numpy() if isinstance(t, torch.Tensor) else t
    if arr.dtype != np.float32:
        raise ProofError(f"float32 values expected, got {arr.dtype}")
    return np.ascontiguousarray(arr)


def pseudo_gradient(global_params: Mapping[str, torch.Tensor], party_params: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``global - party`` per parameter tensor (float32, one rounding each)."""
    if sorted(global_params) != sorted(party_params):
        raise ProofError("the party's parameters are not the global model's")
    out = {}
    for name in sorted(global_params):
        g, p = _np(global_params[name]), _np(party_params[name])
        if g.shape != p.shape:
            raise ProofError(f"{name}: {p.shape} against the global {g.shape}")
        out[name] = torch.from_numpy(np.subtract(g, p))
    return out


@dataclass(frozen=True)
class CompressedTensor:
    """One tensor of a contribution: its shape, the kept flat ``indices`` (uint32, ascending; None:
    dense), one float32 ``scale`` per block of ``values`` (int8)."""

    shape: tuple[int, ...]
    indices: np.ndarray | None
    scales: np.ndarray
    values: np.ndarray

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


@dataclass(frozen=True)
class Contribution:
    """A party's compressed pseudo-gradient: tensors by parameter name."""

    block_size: int
    tensors: Mapping[str, CompressedTensor] = field(default_factory=dict)

    def to_bytes(self) -> bytes:
        return encode_contribution(self)


def _quantize(x: np.ndarray, block: int) -> tuple[np.ndarray, np.ndarray]:
    """int8 values and float32 per-block scales of the flat float32 ``x`` (module docstring)."""
    n = x.shape[0]
    blocks = -(-n // block)
    padded = np.zeros(blocks * block, dtype=_F)
    padded[:n] = x
    rows = padded.reshape(blocks, block)
    scales = np.divide(np.max(np.abs(rows), axis=1), _F(127)) if blocks else np.zeros(0, dtype=_F)
    safe = np.where(scales == 0, _F(1), scales).astype(_F)
    q = np.rint(np.divide(rows, safe[:, None]))
    q = np.clip(q, -127, 127)
    q[scales == 0] = 0
    return q.reshape(-1)[:n].astype(np.int8), scales.astype(_F)


def _dequantize(values: np.ndarray, scales: np.ndarray, block: int) -> np.ndarray:
    """``float32(q) * scale`` per value (its block's scale)."""
    n = values.shape[0]
    per_value = np.repeat(scales, block)[:n]
    return np.multiply(values.astype(_F), per_value)


def compress(
    delta: Mapping[str, torch.Tensor], block_size: int = 256, *, keep: float | None = None, residual: Mapping[str, torch.Tensor] | None = None
) -> tuple[Contribution, dict[str, torch.Tensor] | None]:
    """The int8 contribution of a pseudo-gradient and, when ``keep`` or ``residual`` is given, the
    residual to carry to the next round (``v - decompressed``, ``v = delta + residual``)."""
    if not 1 <= block_size <= MAX_BLOCK:
        raise ProofError(f"block_size {block_size} is outside [1, {MAX_BLOCK}]")
    feedback = keep is not None or residual is not None
    tensors: dict[str, CompressedTensor] = {}
    carried: dict[str, torch.Tensor] = {}
    for name in sorted(delta):
        d = _np(delta[name])
        v = d.reshape(-1)
        if residual is not None:
            v = np.add(v, _np(residual[name]).reshape(-1))
        if not np.isfinite(v).all():
            raise ProofError(f"{name}: the pseudo-gradient holds NaN or infinite values")
        if keep is None:
            values, scales = _quantize(v, block_size)
            tensors[name] = CompressedTensor(tuple(d.shape), None, scales, values)
            sent = _dequantize(values, scales, block_size)
        else:
            k = max(1, math.ceil(keep * v.shape[0])) if v.shape[0] else 0
            order = np.lexsort((np.arange(v.shape[0]), np.negative(np.abs(v))))  # |v| descending, then index
            idx = np.sort(order[:k]).astype(np.uint32)
            values, scales = _quantize(v[idx], block_size)
            tensors[name] = CompressedTensor(tuple(d.shape), idx, scales, values)
            sent = np.zeros_like(v)
            sent[idx] = _dequantize(values, scales, block_size)
        if feedback:
            carried[name] = torch.from_numpy(np.subtract(v, sent).reshape(d.shape))
    return Contribution(block_size, tensors), (carried if feedback else None)


def decompress(contribution: Contribution) -> dict[str, torch.Tensor]:
    """The dense float32 pseudo-gradient a contribution stands for (zeros where top-k sent nothing)."""
    out = {}
    for name, t in contribution.tensors.items():
        sent = _dequantize(t.values, t.scales, contribution.block_size)
        if t.indices is None:
            dense = sent
        else:
            dense = np.zeros(t.numel, dtype=_F)
            dense[t.indices.astype(np.int64)] = sent
        out[name] = torch.from_numpy(dense.reshape(t.shape))
    return out


# ----------------------------------------------------------------------------- bytes


def encode_contribution(c: Contribution) -> bytes:
    """The canonical bytes of a contribution (layout in the module docstring)."""
    parts = [MAGIC, struct.pack("<II", c.block_size, len(c.tensors))]
    for name in sorted(c.tensors):
        t = c.tensors[name]
        raw = name.encode("ascii")
        parts.append(struct.pack("<H", len(raw)) + raw + struct.pack("<B", len(t.shape)) + struct.pack(f"<{len(t.shape)}I", *t.shape))
        if t.indices is None:
            parts.append(b"\x00")
        else:
            parts.append(b"\x01" + struct.pack("<I", t.indices.shape[0]) + t.indices.astype("<u4").tobytes())
        parts.append(t.scales.astype("<f4").tobytes())
        parts.append(t.values.astype(np.int8).tobytes())
    return b"".join(parts)


class _Reader:
    def __init__(self, data: bytes | bytearray | memoryview) -> None:
        self.data = memoryview(data).cast("B")
        self.at = 0

    def take(self, size: int, what: str) -> memoryview:
        if size < 0 or self.at + size > len(self.data):
            raise ContributionError(f"contribution is truncated: {what} needs {size} bytes at offset {self.at} of {len(self.data)}")
        out = self.data[self.at : self.at + size]
        self.at += size
        return out

    def unpack(self, fmt: str, what: str) -> tuple[int, ...]:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt), what))


def decode_contribution(data: bytes | bytearray | memoryview, *, max_bytes: int = MAX_CONTRIBUTION_BYTES) -> Contribution:
    """Parse canonical contribution bytes, bounded: refuses oversize input, a wrong magic, bad names
    or order, shapes or counts the bytes cannot hold, indices out of order or range, NaN, infinite
    or negative scales, values of -128, a non-zero value in a zero-scale block and trailing bytes
    (:class:`ContributionError`). Nothing is allocated before its size is checked against the bytes."""
    if len(data) > max_bytes:
        raise ContributionError(f"contribution is {len(data):,} bytes; at most {max_bytes:,} are accepted")
    r = _Reader(data)
    if bytes(r.take(len(MAGIC), "magic")) != MAGIC:
        raise ContributionError("not a contribution (wrong magic)")
    block, count = r.unpack("<II", "header")
    if not 1 <= block <= MAX_BLOCK:
        raise ContributionError(f"block size {block} is outside [1, {MAX_BLOCK}]")
    if count > _MAX_TENSORS:
        raise ContributionError(f"{count} tensors; at most {_MAX_TENSORS}")
    tensors: dict[str, CompressedTensor] = {}
    last = ""
    for _ in range(count):
        (name_len,) = r.unpack("<H", "name length")
        raw = bytes(r.take(name_len, "name"))
        if not raw or any(b < 0x21 or b > 0x7E for b in raw):
            raise ContributionError(f"tensor name {raw[:40]!r} is empty or not printable ASCII")
        name = raw.decode("ascii")
        if tensors and name <= last:
            raise ContributionError(f"tensor names are not strictly ascending ({last!r} then {name!r})")
        last = name
        (ndim,) = r.unpack("<B", "ndim")
        if ndim > _MAX_NDIM:
            raise ContributionError(f"{name}: {ndim} dimensions; at most {_MAX_NDIM}")
        shape = r.unpack(f"<{ndim}I", "shape")
        numel = 1
        for dim in shape:
            numel *= dim
            if numel > Limits.PARAMS:
                raise ContributionError(f"{name}: shape {shape} holds more than {Limits.PARAMS:,} values")
        (kind,) = r.unpack("<B", "kind")
        indices = None
        if kind == 0:
            n = numel
        elif kind == 1:
            (n,) = r.unpack("<I", "k")
            if n > numel:
                raise ContributionError(f"{name}: keeps {n} of {numel} values")
            indices = np.frombuffer(r.take(4 * n, "indices"), dtype="<u4").astype(np.uint32)
            if n and (int(indices[-1]) >= numel or (n > 1 and not bool(np.all(indices[1:] > indices[:-1])))):
                raise ContributionError(f"{name}: indices are not strictly ascending below {numel}")
        else:
            raise ContributionError(f"{name}: unknown kind {kind}")
        blocks = -(-n // block)
        scales = np.frombuffer(r.take(4 * blocks, "scales"), dtype="<f4").astype(_F)
        if not bool(np.all(np.isfinite(scales))) or bool(np.any(scales < 0)):
            raise ContributionError(f"{name}: a scale is NaN, infinite or negative")
        values = np.frombuffer(r.take(n, "values"), dtype=np.int8).copy()
        if n and bool(np.any(values == -128)):
            raise ContributionError(f"{name}: a value is -128 (values lie in [-127, 127])")
        zero = np.repeat(scales == 0, block)[:n]
        if bool(np.any(values[zero] != 0)):
            raise ContributionError(f"{name}: a block whose scale is 0 holds a non-zero value")
        tensors[name] = CompressedTensor(tuple(shape), indices, scales, values)
    if r.at != len(r.data):
        raise ContributionError(f"contribution has {len(r.data) - r.at} trailing bytes")
    return Contribution(block, tensors)


def contribution_hash(data: bytes | bytearray | memoryview) -> Bytes32:
    """keccak256 of a contribution's bytes."""
    return Bytes32(keccak(data))


def contribution_of(
    state: OuterState, final: bytes, cfg: MultipartyConfig, residual: Mapping[str, torch.Tensor] | None = None
) -> tuple[bytes, dict[str, torch.Tensor] | None]:
    """The contribution a party's committed trace gives, and the residual it carries on: the
    pseudo-gradient from ``state``'s parameters to the trace's final checkpoint ``final`` (its bytes,
    checked against the trace's last leaf by the caller), compressed as ``cfg`` says, with the party's
    previous ``residual`` (top-k with error feedback). A function of committed things alone, so a
    verifier recomputes it without training (docs/multiparty.md, "Contribution")."""
    params = decode_checkpoint(final).params()
    c, carried = compress(pseudo_gradient(state.params, params), cfg.block_size, keep=cfg.keep, residual=residual)
    return encode_contribution(c), carried


def residual_after(state: OuterState, final: bytes, cfg: MultipartyConfig, residual: Mapping[str, torch.Tensor] | None) -> dict[str, torch.Tensor] | None:
    """The residual a party whose contribution was included in round ``state.round`` carries into the
    next (top-k with error feedback; None for dense int8): what :func:`contribution_of` carries on. A
    party not included carries nothing: its feedback restarts after a round that did not count (cut
    out, void, not verified in time). A function of committed things alone (the round's global state,
    the trace's final checkpoint, the residual it came in with), so every judge derives the same one."""
    if cfg.keep is None:
        return None
    return contribution_of(state, final, cfg, residual)[1]


def check_contribution(
    state: OuterState, final: bytes, contribution: bytes, cfg: MultipartyConfig, residual: Mapping[str, torch.Tensor] | None = None
) -> str | None:
    """What is wrong with a party's committed ``contribution`` against its trace's final checkpoint
    (:func:`contribution_of`): None when it is exactly those bytes. Another party's contribution,
    a changed value or scale, or one from a final state that does not fit the global model fails."""
    try:
        expected, _ = contribution_of(state, final, cfg, residual)
    except ProofError as exc:
        return f"no contribution follows from the trace's final checkpoint: {exc}"
    if contribution_hash(contribution) != contribution_hash(expected):
        return f"the contribution hashes to {hex32(contribution_hash(contribution))}; the trace's final checkpoint gives {hex32(contribution_hash(expected))}"
    return None


# ----------------------------------------------------------------------------- the outer step


@dataclass(frozen=True)
class OuterState:
    """The global model after ``round`` rounds and the outer momentum buffer (float32 tensors)."""

    round: int
    params: Mapping[str, torch.Tensor]
    momentum: Mapping[str, torch.Tensor]

    @classmethod
    def start(cls, params: Mapping[str, torch.Tensor]) -> OuterState:
        """Round 0: the job's initial parameters (copied) and a zero buffer."""
        own = {n: _np(p).copy() for n, p in sorted(params.items())}
        return cls(0, {n: torch.from_numpy(a) for n, a in own.items()}, {n: torch.zeros(a.shape) for n, a in own.items()})

    def tensors(self) -> dict[str, torch.Tensor]:
        """Keyed as in a checkpoint: ``param.<name>`` and ``optim.<name>.outer_momentum``."""
        out = {f"param.{n}": p for n, p in self.params.items()}
        out.update({f"optim.{n}.{_MOMENTUM}": m for n, m in self.momentum.items()})
        return out

    def state_hash(self, stamp: str) -> Bytes32:
        """The state hash of :meth:`to_bytes` (what the aggregator commits), without the bytes."""
        return hash_state(self.round, self.tensors(), stamp)

    def to_bytes(self, stamp: str) -> bytes:
        """Canonical checkpoint bytes at step ``round``, stamped with the job's spec hash."""
        return encode_checkpoint(self.round, self.tensors(), stamp)

    @classmethod
    def from_checkpoint(cls, ckpt: Checkpoint) -> OuterState:
        params = ckpt.params()
        suffix = f".{_MOMENTUM}"
        momentum = {k[6:].removesuffix(suffix): v for k, v in ckpt.tensors.items() if k.startswith("optim.") and k.endswith(suffix)}
        if sorted(momentum) != sorted(params) or len(ckpt.tensors) != 2 * len(params):
            raise ProofError("the checkpoint is not an outer state (one parameter and one outer momentum per tensor)")
        return cls(ckpt.step, params, momentum)


def _fits(state: OuterState, c: Contribution) -> str | None:
    """Why ``c`` does not fit the model of ``state`` (None: it fits)."""
    if sorted(c.tensors) != sorted(state.params):
        return "its tensors are not the model's"
    for name, t in c.tensors.items():
        if t.shape != tuple(state.params[name].shape):
            return f"{name} is {t.shape}, the model's {tuple(state.params[name].shape)}"
    return None


def admissible(state: OuterState, contributions: Mapping[int, bytes | Contribution]) -> dict[int, Contribution]:
    """The committed contributions that count, by party: those that decode and fit the model. One
    that does not counts as not committed (a deterministic rule anyone applies to the same bytes)."""
    out = {}
    for party in sorted(contributions):
        c = contributions[party]
        try:
            decoded = c if isinstance(c, Contribution) else decode_contribution(c)
        except ContributionError:
            continue
        if _fits(state, decoded) is None:
            out[party] = decoded
    return out


def aggregate(
    state: OuterState, contributions: Mapping[int, bytes | Contribution], cfg: MultipartyConfig, *, exclude: Iterable[int] = ()
) -> tuple[OuterState, tuple[int, ...]]:
    """The next global state from round ``state.round``'s committed contributions (by party index;
    the order they arrive in does not matter) and the parties included. ``exclude``: parties cut
    out (a lost dispute): the mean is recomputed over the rest. Fewer included than the quorum:
    :class:`ProofError` (the round is void)."""
    out_of = set(exclude)
    chosen = {p: c for p, c in admissible(state, contributions).items() if p not in out_of and 0 <= p < cfg.parties}
    if len(chosen) < cfg.quorum:
        raise ProofError(f"round {state.round}: {len(chosen)} contributions count, fewer than the quorum {cfg.quorum}")
    included = tuple(sorted(chosen))
    dense = {p: decompress(chosen[p]) for p in included}
    count = _F(len(included))
    mu, lr = _F(cfg.outer_momentum), _F(cfg.outer_lr)
    params, momentum = {}, {}
    for name in sorted(state.params):
        acc = np.zeros(tuple(state.params[name].shape), dtype=_F)
        for p in included:
            np.add(acc, dense[p][name].numpy(), out=acc)
        mean = np.divide(acc, count)
        buf = np.add(np.multiply(_np(state.momentum[name]), mu), mean)
        update = np.add(mean, np.multiply(buf, mu))
        params[name] = torch.from_numpy(np.subtract(_np(state.params[name]), np.multiply(update, lr)))
        momentum[name] = torch.from_numpy(buf)
    return OuterState(state.round + 1, params, momentum), included


def check_aggregate(
    state: OuterState,
    contributions: Mapping[int, bytes | Contribution],
    cfg: MultipartyConfig,
    stamp: str,
    claimed_hash: Bytes32,
    *,
    exclude: Iterable[int] = (),
) -> bool:
    """Whether ``claimed_hash`` is the state hash of the next global model: recomputed from the
    committed inputs alone (the round's state, the contributions' bytes, the excluded parties)."""
    try:
        nxt, _ = aggregate(state, contributions, cfg, exclude=exclude)
    except ProofError:
        return False
    return nxt.state_hash(stamp) == claimed_hash


# ----------------------------------------------------------------------------- a round on chain


@dataclass(frozen=True)
class PartyRound:
    """One party's round as the chain and the store hold it, read alike by the aggregator, a
    challenger and every referee: its committed ``contribution`` bytes (checked against their CID
    by the caller), its inner trace's ``final`` checkpoint (checked against the trace's last leaf;
    None: not served), whether its inner job names the spec :func:`party_job` derives
    (``spec_ok``), whether that job was Finalized with the party paid (``verified``: the only
    contributions the chain lets an aggregate include) and, for top-k, the ``residual`` it came into
    the round with (:func:`residual_after` of its previous round; None: zero)."""

    contribution: bytes
    final: bytes | None
    spec_ok: bool
    verified: bool
    residual: Mapping[str, torch.Tensor] | None = None


@dataclass(frozen=True)
class RoundVerdict:
    """What a round's aggregate must say (``DilocoJobs.commitAggregate``): the next global ``state``
    (None: the round is void, fewer than the quorum right), the ``included`` parties and the
    ``wrong`` ones (a committed contribution that is not what its trace gives, or whose inner job
    names another spec)."""

    state: OuterState | None
    included: tuple[int, ...]
    wrong: tuple[int, ...]

    def masks(self) -> tuple[int, int]:
        """``(included, wrong)`` as the contract's bit masks (bit p: party p)."""
        return sum(1 << p for p in self.included), sum(1 << p for p in self.wrong)

    def state_hash(self, stamp: str) -> Bytes32:
        """The hash the aggregate commits: the next state's, or zero for a void round."""
        return Bytes32(bytes(32)) if self.state is None else self.state.state_hash(stamp)


def judge_round(state: OuterState, rounds: Mapping[int, PartyRound], cfg: MultipartyConfig) -> RoundVerdict:
    """The aggregate of round ``state.round`` from every committed contribution (by party). A party
    is wrong when its inner job names another spec (whatever it serves) or its contribution is not
    exactly what its trace's final checkpoint gives (:func:`check_contribution`); included when it is
    right, served and verified. Otherwise an unserved final checkpoint is neither (the inner job's
    availability game decides it). Top-k: each contribution is checked with the residual its party came in with."""
    wrong, right = [], []
    for party in sorted(rounds):
        if not 0 <= party < cfg.parties:
            raise ProofError(f"no party {party} of {cfg.parties}")
        r = rounds[party]
        if not r.spec_ok:  # its inner job names another spec (on chain): wrong whatever it serves
            wrong.append(party)
            continue
        if r.final is None:
            continue
        if check_contribution(state, r.final, r.contribution, cfg, r.residual) is not None:
            wrong.append(party)
        elif r.verified:
            right.append(party)
    if len(right) < cfg.quorum:
        return RoundVerdict(None, tuple(right), tuple(wrong))
    nxt, included = aggregate(state, {p: rounds[p].contribution for p in right}, cfg)
    return RoundVerdict(nxt, included, tuple(wrong))


def check_round(
    state: OuterState, rounds: Mapping[int, PartyRound], cfg: MultipartyConfig, stamp: str, claimed_hash: Bytes32, included: int, wrong: int
) -> str | None:
    """What is wrong with a committed aggregate (its state hash and masks) against :func:`judge_round`
    of the same inputs: None when it is exactly that. What a challenger and a referee run."""
    verdict = judge_round(state, rounds, cfg)
    want_included, want_wrong = verdict.masks()
    if (included, wrong) != (want_included, want_wrong):
        return f"the aggregate includes {included:#x} and calls {wrong:#x} wrong; the round's inputs give {want_included:#x} and {want_wrong:#x}"
    want = verdict.state_hash(stamp)
    if bytes(claimed_hash) != bytes(want):
        return f"the aggregate's state hash is {hex32(claimed_hash)}; the round's inputs give {hex32(want)}"
    return None
