"""Small real datasets shipped with the engine, and the reference jobs built on them.

* ``spirals``: interleaved 2-D spirals, ``classes`` arms, Gaussian jitter (for the MLP);
* ``shapes``: 1x16x16 images of four noisy shapes at random places (for the CNN and the ResNet);
* ``text``: the short public-domain tale in ``text.txt``, as ASCII byte tokens
  (for the character transformer and the GPT);
* ``shakespeare``: the public-domain corpus in ``shakespeare.txt`` (1.16 MB), as a ``u16`` token
  file of the shipped tokenizer's tokens (``veritrain data pack text``; the gpt-mini demo's).

Builders are pure functions of their seed and return canonical safetensors bytes
(no timestamps, unlike npz), so the same call gives the same CID everywhere.
:func:`reference_job` pairs a dataset with a spec whose ``dataset.cid`` the caller
fills in once it has stored the bytes.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from typing import TYPE_CHECKING

import numpy as np
from safetensors.numpy import save as save_safetensors

from proofs.pack import pack_text
from proofs.spec import JobSpec, load_spec

if TYPE_CHECKING:
    from proofs.data import Dataset

__all__ = ["spirals", "shapes", "text_tokens", "shakespeare_tokens", "ReferenceJob", "reference_job", "REFERENCE_JOBS"]


def spirals(seed: int, per_class: int = 512, classes: int = 3, noise: float = 0.15) -> bytes:
    """``x`` float32 (N, 2), ``y`` int64 (N,): ``classes`` spiral arms."""
    rng = np.random.Generator(np.random.PCG64(seed))
    xs, ys = [], []
    for c in range(classes):
        r = np.linspace(0.05, 1.0, per_class)
        theta = np.linspace(0.0, 3.5, per_class) + 2 * np.pi * c / classes + rng.normal(0.0, noise, per_class)
        xs.append(np.stack([r * np.sin(theta), r * np.cos(theta)], axis=1))
        ys.append(np.full(per_class, c))
    x = np.concatenate(xs).astype(np.float32)
    y = np.concatenate(ys).astype(np.int64)
    order = rng.permutation(len(y))
    return save_safetensors({"x": np.ascontiguousarray(x[order]), "y": np.ascontiguousarray(y[order])})


def blobs(seed: int, per_class: int = 64, classes: int = 3, spread: float = 0.1) -> bytes:
    """``x`` float32 (N, 2), ``y`` int64 (N,): ``classes`` well-separated Gaussian blobs on the unit
    circle, data a small MLP classifies without error (what ``tiny-gradient`` needs)."""
    rng = np.random.Generator(np.random.PCG64(seed))
    angles = 2 * np.pi * np.arange(classes) / classes
    centres = np.stack([np.cos(angles), np.sin(angles)], axis=1)
    y = np.repeat(np.arange(classes), per_class)
    x = (centres[y] + rng.normal(0.0, spread, (len(y), 2))).astype(np.float32)
    order = rng.permutation(len(y))
    return save_safetensors({"x": np.ascontiguousarray(x[order]), "y": np.ascontiguousarray(y[order].astype(np.int64))})


def shapes(seed: int, count: int = 2048, size: int = 16, noise: float = 0.3) -> bytes:
    """``x`` float32 (N, 1, size, size), ``y`` int64: 0 horizontal bar, 1 vertical bar, 2 box, 3 cross."""
    rng = np.random.Generator(np.random.PCG64(seed))
    x = rng.normal(0.0, noise, (count, 1, size, size)).astype(np.float32)
    y = rng.integers(0, 4, count).astype(np.int64)
    for i in range(count):
        r, c = rng.integers(2, size - 6, 2)
        img = x[i, 0]
        if y[i] == 0:
            img[r + 2, c : c + 6] += 1.0
        elif y[i] == 1:
            img[r : r + 6, c + 2] += 1.0
        elif y[i] == 2:
            img[r, c : c + 5] += 1.0
            img[r + 4, c : c + 5] += 1.0
            img[r : r + 5, c] += 1.0
            img[r : r + 5, c + 4] += 1.0
        else:
            img[r + 2, c : c + 5] += 1.0
            img[r : r + 5, c + 2] += 1.0
    return save_safetensors({"x": x, "y": y})


def text_tokens(split: str = "train") -> bytes:
    """``x`` int64 tokens (ASCII codes) of the shipped tale: first 90% for ``train``, the rest for ``test``."""
    data = resources.files(__name__).joinpath("text.txt").read_bytes()
    tokens = np.frombuffer(data, dtype=np.uint8).astype(np.int64)
    cut = int(len(tokens) * 0.9)
    part = tokens[:cut] if split == "train" else tokens[cut:]
    return save_safetensors({"x": np.ascontiguousarray(part)})


def shakespeare_tokens(split: str = "train") -> bytes:
    """The shipped tokenizer's tokens of ``shakespeare.txt`` as a ``u16`` file: the lines of its first
    90% for ``train``, the rest for ``test``."""
    data = resources.files(__name__).joinpath("shakespeare.txt").read_bytes()
    cut = data.rindex(b"\n", 0, len(data) * 9 // 10) + 1
    return pack_text(data[:cut] if split == "train" else data[cut:])


@dataclass(frozen=True)
class ReferenceJob:
    """A shipped dataset (train and held-out test bytes) and the spec that trains on it."""

    name: str
    dataset: bytes
    test_dataset: bytes
    template: dict

    def spec(self, dataset_cid: str) -> JobSpec:
        """The job spec with ``dataset.cid`` set to where the caller stored :attr:`dataset`."""
        raw = dict(self.template)
        raw["dataset"] = {**raw["dataset"], "cid": dataset_cid, "size_bytes": len(self.dataset)}
        return load_spec(raw)

    def test_set(self, spec: JobSpec) -> Dataset:
        """The held-out :attr:`test_dataset`, loaded for ``spec`` (for :func:`proofs.evaluate`)."""
        from proofs.data import load_dataset  # here, not above: the datasets are built without torch (`veritrain spec new`)

        sized = spec.model_copy(update={"dataset": spec.dataset.model_copy(update={"size_bytes": len(self.test_dataset)})})
        return load_dataset(sized, self.test_dataset)


def _template(model: dict, optimizer: dict, batch_size: int, seed: int, steps: int, k: int) -> dict:
    """A reference job's spec fields; classifiers read ``x`` and ``y``, token models ``x`` alone."""
    tokens = model["kind"] in ("char-transformer", "gpt")
    return {
        "model": model,
        "dataset": {"format": "safetensors", "inputs": "x", "targets": None if tokens else "y"},
        "optimizer": optimizer,
        "batch_size": batch_size,
        "steps": steps,
        "seed": seed,
        "checkpoint_interval": k,
    }


_MLP = {"kind": "mlp", "input_dim": 2, "hidden": [64, 64], "num_classes": 3}
_CNN = {"kind": "cnn", "in_channels": 1, "height": 16, "width": 16, "channels": [8, 16], "hidden": 64, "num_classes": 4}
_CHAR = {"kind": "char-transformer", "vocab_size": 128, "block_size": 32, "n_layer": 2, "n_head": 2, "n_embd": 32}
_GPT = {"kind": "gpt", "vocab_size": 128, "block_size": 32, "n_layer": 2, "n_head": 2, "n_embd": 32, "bias": True}
_RESNET = {"kind": "resnet", "in_channels": 1, "height": 16, "width": 16, "channels": [8, 16], "blocks": 1, "num_classes": 4}
_ADAM = {"kind": "adam", "lr": 0.003}


REFERENCE_JOBS = ("mlp-spirals", "cnn-shapes", "char-text", "gpt-text", "resnet-shapes")


def reference_job(name: str, *, steps: int = 400, checkpoint_interval: int = 50) -> ReferenceJob:
    """One of :data:`REFERENCE_JOBS`, with its step count and ``k`` (``steps`` must be a multiple of ``k``)."""
    if name == "mlp-spirals":
        return ReferenceJob(
            name, spirals(1), spirals(2, per_class=200), _template(_MLP, {"kind": "sgd", "lr": 0.1, "momentum": 0.9}, 64, 7, steps, checkpoint_interval)
        )
    if name == "cnn-shapes":
        return ReferenceJob(name, shapes(1), shapes(2, count=512), _template(_CNN, _ADAM, 32, 11, steps, checkpoint_interval))
    if name == "char-text":
        return ReferenceJob(name, text_tokens("train"), text_tokens("test"), _template(_CHAR, _ADAM, 16, 3, steps, checkpoint_interval))
    if name == "gpt-text":
        return ReferenceJob(
            name,
            text_tokens("train"),
            text_tokens("test"),
            _template(_GPT, {"kind": "adamw", "lr": 0.003, "weight_decay": 0.1}, 16, 13, steps, checkpoint_interval),
        )
    if name == "resnet-shapes":
        return ReferenceJob(name, shapes(1), shapes(2, count=512), _template(_RESNET, _ADAM, 32, 17, steps, checkpoint_interval))
    raise KeyError(f"no reference job {name!r}; choose one of {', '.join(REFERENCE_JOBS)}")
