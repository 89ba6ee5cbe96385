"""Peak training memory against its estimate from the spec (``proofs.spec.training_memory_bytes``).

    .venv/bin/python -m bench.training_memory [--only NAME ...]

Each job runs in its own child process (so its peak is its own): it loads a random dataset for
the spec, takes two AdamW steps and encodes a checkpoint, and reports its peak resident memory
(``VmHWM``, this process's own: ``ru_maxrss`` would carry the parent's peak across ``execve``)
above what the process held after its imports. The table puts that beside the
estimate less its fixed allowance for the process (``PROCESS_BYTES``): the estimate must never be
below what training took.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table
from safetensors.numpy import save

from bench.procstatus import memory_mb
from proofs.data import load_dataset
from proofs.spec import PROCESS_BYTES, TOKEN_MODELS, JobSpec, load_spec, training_memory_bytes
from proofs.train import Trainer

#: name -> (model config, batch size, micro-batches)
JOBS: dict[str, tuple[dict[str, Any], int, int]] = {
    "gpt-10M": ({"kind": "gpt", "vocab_size": 8192, "block_size": 256, "n_layer": 4, "n_head": 6, "n_embd": 384}, 8, 1),
    "gpt-15M-micro": ({"kind": "gpt", "vocab_size": 50257, "block_size": 256, "n_layer": 2, "n_head": 4, "n_embd": 256}, 8, 2),
    "gpt-54M": ({"kind": "gpt", "vocab_size": 50257, "block_size": 1024, "n_layer": 2, "n_head": 12, "n_embd": 768}, 2, 1),
    "resnet-20": ({"kind": "resnet", "in_channels": 3, "height": 32, "width": 32, "channels": [16, 32, 64], "blocks": 3, "num_classes": 10}, 64, 1),
    "resnet-64px": ({"kind": "resnet", "in_channels": 3, "height": 64, "width": 64, "channels": [32, 64], "blocks": 2, "num_classes": 10}, 32, 1),
}


def _spec(model: dict[str, Any], batch: int, micro: int) -> tuple[JobSpec, bytes]:
    rng = np.random.default_rng(0)
    if model["kind"] in TOKEN_MODELS:
        data, targets = save({"x": rng.integers(0, model["vocab_size"], 200_000).astype(np.uint16)}), None
    else:
        images = rng.standard_normal((512, model["in_channels"], model["height"], model["width"])).astype(np.float32)
        data, targets = save({"x": images, "y": rng.integers(0, model["num_classes"], 512)}), "y"
    raw = {
        "model": model,
        "dataset": {"cid": "QmBench", "format": "safetensors", "size_bytes": len(data), "targets": targets},
        "optimizer": {"kind": "adamw", "lr": 1e-3},
        "batch_size": batch,
        "micro_batches": micro,
        "steps": 4,
        "seed": 1,
        "checkpoint_interval": 2,
    }
    return load_spec(raw), data


def _child(name: str) -> None:
    """Train job ``name`` briefly; print its peak memory above the imports and its estimate, as JSON."""
    spec, data = _spec(*JOBS[name])
    base = memory_mb()["VmHWM"]
    trainer = Trainer(spec, load_dataset(spec, data))
    trainer.run(2)
    trainer.to_bytes()
    peak = memory_mb()["VmHWM"]
    print(
        json.dumps(
            {
                "params": spec.param_count(),
                "rows": spec.batch_size // spec.micro_batches,
                "used": int((peak - base) * 2**20),
                "estimate": training_memory_bytes(spec),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", action="append", choices=sorted(JOBS), help="measure only this job (repeatable)")
    parser.add_argument("--child", choices=sorted(JOBS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child)
        return
    table = Table(title="peak training memory (two AdamW steps and a checkpoint) against the spec's estimate")
    for col in ("job", "params", "rows per backward", "used MiB", "estimate less process MiB", "estimate / used"):
        table.add_column(col, justify="right")
    for name in args.only or JOBS:
        proc = subprocess.run([sys.executable, "-m", "bench.training_memory", "--child", name], capture_output=True, text=True, timeout=1800, check=True)
        got = json.loads(proc.stdout.strip().splitlines()[-1])
        budget = got["estimate"] - PROCESS_BYTES
        table.add_row(name, f"{got['params']:,}", str(got["rows"]), f"{got['used'] >> 20:,}", f"{budget >> 20:,}", f"{budget / got['used']:.2f}x")
    Console(width=160).print(table)


if __name__ == "__main__":
    main()
