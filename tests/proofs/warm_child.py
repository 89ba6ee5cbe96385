"""Child process of tests/proofs/test_warm.py: warm the kernels (:func:`proofs.warm.warm`) in a fresh
process, then train the suite's small jobs and run the ops at sizes past the reference jobs', and print
the kernel builds those compiled that the warm-up had not (``missed``: empty is the pass) and how many
builds the warm-up held (``warmed``).

    python -m tests.proofs.warm_child      (from the repository's root)
"""

from __future__ import annotations

import json
import math

import torch

from proofs import repro
from proofs import repro_kernels as K
from proofs.data import load_dataset
from proofs.train import Runtime, train_trace
from proofs.warm import kernels, warm
from tests.proofs.conftest import make_spec, small_datasets

OPTIMIZERS = [
    {"kind": "sgd", "lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.001},
    {"kind": "adam", "lr": 0.01, "weight_decay": 0.001},
    {"kind": "adamw", "lr": 0.01, "weight_decay": 0.1},
]
FEATURES = {
    "schedule": {"kind": "warmup-cosine", "warmup_steps": 1, "min_lr": 0.001},
    "grad_clip": 0.5,
    "micro_batches": 4,
    "eval": {"fraction": 0.2, "every": 2},
}


def builds() -> dict[str, set[str]]:
    return {name: {str(sig) for sig in d.signatures} for name, d in kernels().items()}


def larger_ops(fused: bool) -> None:
    """A linear of 300 to 600 features and attention over 256 positions (their gradients copy a
    far-strided transposed operand), a wider convolution than the reference jobs'."""
    gen = torch.Generator().manual_seed(0)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen).requires_grad_()

    outs = [
        repro.linear(randn(64, 300), randn(600, 300), randn(600), fused=fused),
        repro.conv2d(randn(2, 16, 12, 12), randn(32, 16, 3, 3), randn(32), 1, fused=fused),
        repro.causal_attention(randn(2, 4, 64, 16), randn(2, 4, 64, 16), randn(2, 4, 64, 16), fused=fused),
        repro.causal_attention(randn(1, 2, 256, 32), randn(1, 2, 256, 32), randn(1, 2, 256, 32), fused=fused),
    ]
    torch.stack([o.sum() for o in outs]).sum().backward()


def main() -> None:
    warm()
    warmed = builds()
    datasets = small_datasets()
    for numerics in ("repro-v1", "repro-v2"):
        for limit in (math.inf, 0.0):
            K.PARALLEL_MIN = limit
            for kind, data in datasets.items():
                for optimizer in OPTIMIZERS:
                    spec = make_spec(kind, data, optimizer=optimizer, steps=4, checkpoint_interval=2, numerics=numerics, **FEATURES)
                    train_trace(spec, load_dataset(spec, data), Runtime(threads=2))
            larger_ops(numerics == "repro-v2")
    missed = {name: sorted(sigs - warmed.get(name, set())) for name, sigs in builds().items()}
    print(json.dumps({"warmed": sum(map(len, warmed.values())), "missed": {name: sigs for name, sigs in missed.items() if sigs}}))


if __name__ == "__main__":
    main()
