"""Training data: load dataset bytes safely, check them against the spec, and derive batches.

The data order is not the solver's choice: the batch of step ``s`` is a pure
function of ``(spec, dataset, s)``. Each epoch is a permutation of the examples
drawn by ``torch.randperm`` from a generator seeded with
``derive_seed(spec.seed, "data", epoch)``; step ``s`` takes slice
``s % steps_per_epoch`` of epoch ``s // steps_per_epoch`` (the last partial
batch of an epoch is dropped). For a token model (char-transformer, gpt) an example is a
window of ``block_size + 1`` consecutive tokens starting at any position.

Datasets are read into numpy arrays by :mod:`proofs.arrays` (npz, safetensors, or
in place as little-endian uint16 tokens: ``u16``, nanoGPT's flat token files), never
unpickled; sizes, dtypes, shapes and value ranges are checked before training
starts. uint8 features (images) become float32 as ``x / 255``, one correctly
rounded float32 division each.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import torch
from safetensors import SafetensorError
from safetensors.torch import load as load_torch_safetensors

from core.bounded import safetensors_header
from proofs.arrays import first_line, read_npz, read_safetensors, read_u16
from proofs.errors import DatasetError, LimitExceeded
from proofs.seeds import derive_seed
from proofs.spec import CNNConfig, JobSpec, Limits, MLPConfig, ResNetConfig

__all__ = ["Dataset", "load_dataset", "BatchOrder"]

_FLOATS = (np.float16, np.float32, np.float64)
_INTS = (np.uint8, np.int8, np.int16, np.int32, np.int64, np.uint16)
#: A pretrained model's header names every parameter (a few hundred tensors at most).
_MAX_WEIGHTS_HEADER = 1 << 20


@dataclass(frozen=True)
class Dataset:
    """Validated training tensors on the CPU.

    ``inputs`` is float32 features ``(N, ...)`` (uint8 images scaled by 1/255) with int64 ``targets`` ``(N,)`` for
    classifiers, or int64 tokens ``(T,)`` with ``targets=None`` for the transformer.
    ``init`` holds the pretrained parameters by module name when the spec fine-tunes
    (``spec.init``): with the data, what a trainer needs besides the spec. ``held_out`` is
    the evaluation split (``spec.eval``), left out of ``inputs`` and ``targets``. ``data_key`` is
    a sealed job's data key (``spec.dataset.sealed``), which also seals its checkpoints
    (:func:`proofs.checkpoint.seal_state`); None for any other job.
    """

    inputs: torch.Tensor
    targets: torch.Tensor | None
    init: Mapping[str, torch.Tensor] | None = None
    held_out: Dataset | None = None
    data_key: bytes | None = field(default=None, repr=False)

    @property
    def is_tokens(self) -> bool:
        return self.targets is None


def load_dataset(spec: JobSpec, data: bytes, init: bytes | None = None, data_key: bytes | None = None) -> Dataset:
    """Parse dataset bytes as the spec says and check them against the spec's model; ``init``
    is the pretrained model's bytes when the spec names one (``spec.init``), else None. A sealed
    job's dataset (opened already) comes with its ``data_key``, kept on the :class:`Dataset` for
    its checkpoints; any other job's key is not kept.

    Raises :class:`LimitExceeded` for oversize input and :class:`DatasetError` for
    anything that does not fit (wrong length, missing tensor, dtype, shape, label range).
    """
    weights = _pretrained(spec, init)
    ds = spec.dataset
    key = data_key if ds.sealed else None
    if len(data) > Limits.DATASET_BYTES:
        raise LimitExceeded("dataset size in bytes", len(data), Limits.DATASET_BYTES)
    # a sealed file's size_bytes is its sealed bytes' (checked where they were fetched): the opened
    # plaintext, given here, is shorter by the sealing's overhead (docs/sealing.md)
    if len(data) > ds.size_bytes or (not ds.sealed and len(data) != ds.size_bytes):
        raise DatasetError(f"dataset {ds.cid} is {len(data)} bytes; the spec says {ds.size_bytes}")
    if ds.format == "u16":
        return _hold_out(spec, Dataset(inputs=_tokens(spec, read_u16(data)), targets=None, init=weights, data_key=key))
    names = [ds.inputs] + ([ds.targets] if ds.targets is not None else [])
    arrays = read_npz(data, names) if ds.format == "npz" else read_safetensors(data, names)
    if ds.targets is None:
        tokens = _tokens(spec, arrays[ds.inputs])
        return _hold_out(spec, Dataset(inputs=tokens, targets=None, init=weights, data_key=key))
    inputs = _features(spec, arrays[ds.inputs])
    targets = _labels(spec, arrays[ds.targets], inputs.shape[0])
    return _hold_out(spec, Dataset(inputs=inputs, targets=targets, init=weights, data_key=key))


def _hold_out(spec: JobSpec, full: Dataset) -> Dataset:
    """Split off ``spec.eval``'s held-out set: for tokens the last ``n`` tokens of the stream (so
    no training window reaches into it); for examples the first ``n`` of ``torch.randperm(N)``
    seeded with ``derive_seed(seed, "eval")``, both sides kept in dataset order. ``n`` is
    ``count``, or ``floor(fraction * N)`` in float64."""
    if spec.eval is None:
        return full
    total = full.inputs.shape[0]
    n = spec.eval.count if spec.eval.count is not None else math.floor(spec.eval.fraction * total)  # type: ignore[operator]
    if full.targets is None:
        block = spec.model.block_size  # type: ignore[union-attr]
        if n < block + 1 or total - n - block < spec.batch_size:
            raise DatasetError(
                f"holding out {n} of {total} tokens leaves no window of {block + 1} on one side or no batch of {spec.batch_size} windows on the other"
            )
        held = Dataset(inputs=full.inputs[total - n :], targets=None)
        return Dataset(inputs=full.inputs[: total - n], targets=None, init=full.init, held_out=held, data_key=full.data_key)
    if n < 1 or total - n < spec.batch_size:
        raise DatasetError(f"holding out {n} of {total} examples leaves no held-out example or fewer than one batch of {spec.batch_size}")
    perm = torch.randperm(total, generator=torch.Generator().manual_seed(derive_seed(spec.seed, "eval")))
    held_idx, train_idx = perm[:n].sort().values, perm[n:].sort().values
    assert full.targets is not None
    held = Dataset(inputs=full.inputs[held_idx], targets=full.targets[held_idx])
    return Dataset(inputs=full.inputs[train_idx], targets=full.targets[train_idx], init=full.init, held_out=held, data_key=full.data_key)


def _pretrained(spec: JobSpec, data: bytes | None) -> dict[str, torch.Tensor] | None:
    """The pretrained parameters ``spec.init`` names, read from safetensors (header bounded first,
    never unpickled); that they are exactly the model's parameters is checked by the trainer."""
    ref = spec.init
    if ref is None:
        if data is not None:
            raise DatasetError("pretrained weights were given, but the spec names no init model")
        return None
    if data is None:
        raise DatasetError(f"the spec fine-tunes from {ref.cid}: its weights are needed")
    if len(data) != ref.size_bytes:
        raise DatasetError(f"pretrained model {ref.cid} is {len(data)} bytes; the spec says {ref.size_bytes}")
    try:
        safetensors_header(data, max_header=_MAX_WEIGHTS_HEADER, what="pretrained model")
        tensors = load_torch_safetensors(data)
    except (SafetensorError, ValueError) as exc:  # InputRejected is a ValueError
        raise DatasetError(f"pretrained model {ref.cid} is not valid safetensors: {first_line(exc)}") from exc
    for name, t in tensors.items():
        if t.dtype != torch.float32:
            raise DatasetError(f"pretrained tensor {name!r} is {t.dtype}; float32 weights are needed")
    return tensors


def _features(spec: JobSpec, arr: np.ndarray) -> torch.Tensor:
    model = spec.model
    if arr.dtype.type not in _FLOATS and arr.dtype != np.uint8:
        raise DatasetError(f"inputs must be float16/32/64 (features) or uint8 (images), got {arr.dtype}")
    if arr.ndim < 2 or arr.shape[0] == 0:
        raise DatasetError(f"inputs must be (examples, features...), got shape {arr.shape}")
    if isinstance(model, MLPConfig):
        features = int(np.prod(arr.shape[1:]))
        if features != model.input_dim:
            raise DatasetError(f"inputs have {features} features per example; the mlp takes {model.input_dim}")
    elif isinstance(model, (CNNConfig, ResNetConfig)):
        want = (model.in_channels, model.height, model.width)
        if tuple(arr.shape[1:]) != want:
            raise DatasetError(f"inputs are {tuple(arr.shape[1:])} per example; the {model.kind} takes {want} (C, H, W)")
    if arr.shape[0] < spec.batch_size:
        raise DatasetError(f"{arr.shape[0]} examples is fewer than one batch of {spec.batch_size}")
    floats = arr.astype(np.float32) / np.float32(255) if arr.dtype == np.uint8 else np.ascontiguousarray(arr, dtype=np.float32)
    tensor = torch.from_numpy(floats)
    if not torch.isfinite(tensor).all():
        raise DatasetError("inputs hold NaN or infinite values")
    return tensor


def _labels(spec: JobSpec, arr: np.ndarray, count: int) -> torch.Tensor:
    classes = spec.model.num_classes  # type: ignore[union-attr]
    if arr.dtype.type not in _INTS:
        raise DatasetError(f"targets must be integers, got {arr.dtype}")
    if arr.shape != (count,):
        raise DatasetError(f"targets must have shape ({count},) like the inputs, got {arr.shape}")
    labels = torch.from_numpy(arr.astype(np.int64))
    if labels.min() < 0 or labels.max() >= classes:
        raise DatasetError(f"labels must lie in [0, {classes}), got [{int(labels.min())}, {int(labels.max())}]")
    return labels


def _tokens(spec: JobSpec, arr: np.ndarray) -> torch.Tensor:
    model = spec.model
    if arr.dtype.type not in _INTS:
        raise DatasetError(f"tokens must be integers, got {arr.dtype}")
    if arr.ndim != 1:
        raise DatasetError(f"tokens must be one 1-D tensor, got shape {arr.shape}")
    windows = arr.shape[0] - model.block_size  # type: ignore[union-attr]
    if windows < spec.batch_size:
        raise DatasetError(f"{arr.shape[0]} tokens give {max(windows, 0)} windows of block_size+1; one batch needs {spec.batch_size}")
    vocab = model.vocab_size  # type: ignore[union-attr]
    low, high = int(arr.min()), int(arr.max())
    if low < 0 or high >= vocab:
        first = int(np.argmax((arr < 0) | (arr >= vocab)))
        raise DatasetError(f"tokens must lie in [0, {vocab}), got [{low}, {high}] (the first outside at position {first:,})")
    return torch.from_numpy(arr.astype(np.int64))


class BatchOrder:
    """The batch of any step, derived from the seed (the solver cannot choose it)."""

    def __init__(self, spec: JobSpec, dataset: Dataset, *, seed: int | None = None) -> None:
        """``seed`` overrides the spec's seed for the data order (only the adversary library uses it)."""
        self.spec = spec
        self.dataset = dataset
        self.seed = spec.seed if seed is None else seed
        self.block = spec.model.block_size if dataset.is_tokens else 0  # type: ignore[union-attr]
        self.examples = dataset.inputs.shape[0] - self.block
        self.steps_per_epoch = self.examples // spec.batch_size
        self._epoch = -1
        self._perm = torch.empty(0, dtype=torch.int64)

    def permutation(self, epoch: int) -> torch.Tensor:
        if epoch != self._epoch:
            gen = torch.Generator().manual_seed(derive_seed(self.seed, "data", epoch))
            self._perm = torch.randperm(self.examples, generator=gen)
            self._epoch = epoch
        return self._perm

    def indices(self, step: int) -> torch.Tensor:
        """Example indices of step ``step`` (0-based: the batch that turns state ``step`` into ``step+1``)."""
        epoch, pos = divmod(step, self.steps_per_epoch)
        b = self.spec.batch_size
        return self.permutation(epoch)[pos * b : (pos + 1) * b]

    def batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(inputs, targets)`` of step ``step``, on the CPU."""
        idx = self.indices(step)
        if not self.dataset.is_tokens:
            assert self.dataset.targets is not None
            return self.dataset.inputs[idx], self.dataset.targets[idx]
        offsets = torch.arange(self.block + 1)
        windows = self.dataset.inputs[idx.unsqueeze(1) + offsets]
        return windows[:, :-1], windows[:, 1:]
