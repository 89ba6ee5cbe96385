"""Small jobs for the proofs tests: a few hundred steps in total, real torch on the CPU."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from proofs.data import Dataset, load_dataset
from proofs.datasets import shapes, spirals, text_tokens
from proofs.merkle import hex32, to_bytes32
from proofs.replay import SegmentVerdict, replay_segment
from proofs.spec import TOKEN_MODELS, JobSpec, load_spec
from proofs.train import Trace, train_trace


def make_spec(kind: str, data: bytes, **overrides: Any) -> JobSpec:
    """A tiny job of ``kind`` over ``data`` (``overrides`` replace top-level fields)."""
    models = {
        "mlp": {"kind": "mlp", "input_dim": 2, "hidden": [16], "num_classes": 3},
        "cnn": {"kind": "cnn", "in_channels": 1, "height": 16, "width": 16, "channels": [4], "hidden": 16, "num_classes": 4},
        "char-transformer": {"kind": "char-transformer", "vocab_size": 128, "block_size": 8, "n_layer": 1, "n_head": 2, "n_embd": 16},
        "gpt": {"kind": "gpt", "vocab_size": 128, "block_size": 8, "n_layer": 2, "n_head": 2, "n_embd": 16, "bias": False},
        "resnet": {"kind": "resnet", "in_channels": 1, "height": 16, "width": 16, "channels": [4, 8], "blocks": 1, "num_classes": 4},
    }
    raw: dict[str, Any] = {
        "model": models[kind],
        "dataset": {"cid": "QmTestDataset", "format": "safetensors", "size_bytes": len(data), "targets": None if kind in TOKEN_MODELS else "y"},
        "optimizer": {"kind": "sgd", "lr": 0.05, "momentum": 0.9} if kind == "mlp" else {"kind": "adam", "lr": 0.01},
        "batch_size": 16,
        "steps": 24,
        "seed": 5,
        "checkpoint_interval": 4,
    }
    raw.update(overrides)
    return load_spec(raw)


def fma32(a: Any, b: Any, c: Any) -> Any:
    """float32 ``a * b + c`` rounded once (a fused multiply-add), elementwise over numpy arrays or
    scalars, without the machine's FMA: the float64 product of two float32 is exact, its sum with
    ``c`` is made round-to-odd (TwoSum's error moves an even result one step towards the exact
    sum), and a float64 rounded to odd rounds to the float32 nearest the exact value (53 >= 24 + 2
    bits). The reference for repro-v2's kernels."""
    p = np.asarray(a, np.float32).astype(np.float64) * np.asarray(b, np.float32).astype(np.float64)
    c64 = np.asarray(c, np.float32).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        s = p + c64
        v = s - p
        err = (p - (s - v)) + (c64 - v)
        even = (np.asarray(s).view(np.int64) & 1) == 0
        nudge = np.isfinite(s) & (err != 0) & even
        s = np.where(nudge, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s.astype(np.float32)


def replay_committed(spec: JobSpec, dataset: Dataset, trace: Trace, seg: int) -> SegmentVerdict:
    """:func:`replay_segment` of ``seg`` of ``trace`` against everything it commits: both leaves, the update norm and the loss."""
    return replay_segment(
        spec,
        dataset,
        seg,
        trace.checkpoints[seg],
        trace.checkpoints[seg + 1],
        start_hash=trace.state_hashes[seg],
        end_hash=trace.state_hashes[seg + 1],
        claimed_norm=trace.update_norms[seg],
        claimed_loss=trace.losses[seg],
    )


ROOT = Path(__file__).resolve().parents[2]
#: How long a proofs test waits for a child process that replays or recompiles kernels before it
#: calls the child hung: a liveness bound, not a timing target. On a fresh clone a child compiles
#: numba's kernels for its own CPU setting (``NUMBA_CPU_NAME``), about two minutes of a core, beside
#: the daemons' tests at a lower priority; CI once took more than 600 s for one pair of children.
CHILD_LIVENESS_S = 3_600
OZ_TREE = Path(__file__).with_name("oz_tree.js")

OpenZeppelin = Callable[[Sequence[str], Sequence[Sequence[Sequence[Any]]]], list[dict[str, Any]]]


@pytest.fixture(scope="session")
def openzeppelin() -> OpenZeppelin:
    """``openzeppelin(types, sets)``: root and proofs of ``StandardMerkleTree.of(values, types)``
    for each leaf set, from the npm package itself. The npm package speaks hex: integers are sent as
    decimal strings, bytes as ``0x`` hex, and the root and proofs it returns come back as bytes."""
    if shutil.which("node") is None or not (ROOT / "node_modules/@openzeppelin/merkle-tree").is_dir():
        pytest.skip("node and node_modules/@openzeppelin/merkle-tree are needed for the cross-check")

    def run(types: Sequence[str], sets: Sequence[Sequence[Sequence[Any]]]) -> list[dict[str, Any]]:
        values = [[[str(v) if isinstance(v, int) else hex32(v) for v in value] for value in values] for values in sets]
        payload = json.dumps({"types": list(types), "sets": values})
        done = subprocess.run(["node", str(OZ_TREE)], input=payload, capture_output=True, text=True, cwd=ROOT, check=True, timeout=60)
        trees = json.loads(done.stdout)
        return [{"root": to_bytes32(t["root"]), "proofs": [[to_bytes32(h) for h in proof] for proof in t["proofs"]]} for t in trees]

    return run


@pytest.fixture(scope="session", name="make_spec")
def make_spec_fixture() -> Any:
    """:func:`make_spec`, for tests that build their own small specs."""
    return make_spec


@pytest.fixture(scope="session")
def training_features() -> dict[str, Any]:
    """Spec fields that turn on every training option of issue 12 item 2 at once (AdamW, warmup
    then cosine decay, clipping by global norm, micro-batches, a held-out split evaluated at steps
    0 and 8): overrides for :func:`make_spec`."""
    return {
        "optimizer": {"kind": "adamw", "lr": 0.01, "weight_decay": 0.1},
        "schedule": {"kind": "warmup-cosine", "warmup_steps": 3, "min_lr": 0.001},
        "grad_clip": 0.5,
        "micro_batches": 4,
        "eval": {"fraction": 0.2, "every": 8},
        "steps": 12,
    }


@dataclass(frozen=True)
class Job:
    spec: JobSpec
    data: bytes
    dataset: Dataset


def small_datasets() -> dict[str, bytes]:
    """The small jobs' data by model kind (:func:`make_spec`'s models): the ``datasets`` fixture's,
    and a child process's."""
    return {
        "mlp": spirals(1, per_class=64),
        "cnn": shapes(1, count=128),
        "char-transformer": text_tokens(),
        "gpt": text_tokens(),
        "resnet": shapes(1, count=128),
    }


@pytest.fixture(scope="session")
def datasets() -> dict[str, bytes]:
    return small_datasets()


@pytest.fixture(scope="session")
def jobs(datasets: dict[str, bytes]) -> dict[str, Job]:
    out = {}
    for kind, data in datasets.items():
        spec = make_spec(kind, data)
        out[kind] = Job(spec, data, load_dataset(spec, data))
    return out


@pytest.fixture(scope="session")
def mlp(jobs: dict[str, Job]) -> Job:
    return jobs["mlp"]


@pytest.fixture(scope="session")
def traces(jobs: dict[str, Job]) -> dict[str, Trace]:
    return {kind: train_trace(job.spec, job.dataset) for kind, job in jobs.items()}
