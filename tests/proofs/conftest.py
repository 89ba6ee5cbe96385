"""Small jobs for the proofs tests: a few hundred steps in total, real torch on the CPU."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from proofs import Dataset, JobSpec, Trace, load_dataset, load_spec, train_trace
from proofs.datasets import shapes, spirals, text_tokens


def make_spec(kind: str, data: bytes, **overrides: Any) -> JobSpec:
    """A tiny job of ``kind`` over ``data`` (``overrides`` replace top-level fields)."""
    models = {
        "mlp": {"kind": "mlp", "input_dim": 2, "hidden": [16], "num_classes": 3},
        "cnn": {"kind": "cnn", "in_channels": 1, "height": 16, "width": 16, "channels": [4], "hidden": 16,
                "num_classes": 4},
        "char-transformer": {"kind": "char-transformer", "vocab_size": 128, "block_size": 8, "n_layer": 1,
                             "n_head": 2, "n_embd": 16},
    }
    raw: dict[str, Any] = {
        "model": models[kind],
        "dataset": {"cid": "QmTestDataset", "format": "safetensors", "size_bytes": len(data),
                    "targets": None if kind == "char-transformer" else "y"},
        "optimizer": {"kind": "sgd", "lr": 0.05, "momentum": 0.9} if kind == "mlp" else {"kind": "adam", "lr": 0.01},
        "batch_size": 16,
        "steps": 24,
        "seed": 5,
        "checkpoint_interval": 4,
    }
    raw.update(overrides)
    return load_spec(raw)


@pytest.fixture(scope="session", name="make_spec")
def make_spec_fixture() -> Any:
    """:func:`make_spec`, for tests that build their own small specs."""
    return make_spec


@dataclass(frozen=True)
class Job:
    spec: JobSpec
    data: bytes
    dataset: Dataset


@pytest.fixture(scope="session")
def datasets() -> dict[str, bytes]:
    return {"mlp": spirals(1, per_class=64), "cnn": shapes(1, count=128), "char-transformer": text_tokens()}


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
