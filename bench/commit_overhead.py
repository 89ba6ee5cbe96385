"""What committing to a trace costs a solver, and the memory of the solver and the verifier, at 1M, 10M and 100M parameters.

    .venv/bin/python -m bench.commit_overhead [--quick] [--sizes 1M 10M 100M] [--numerics repro-v1 torch]
        [--models transformer gpt mlp cnn resnet]

Every model of the registry (``proofs.models.REGISTRY``), each at about 1M, 10M and 100M
parameters (:data:`MODELS`), trained with Adam:

* ``transformer``: a character transformer, vocabulary 128, 64-token blocks, batch 16;
  (n_layer, n_head, n_embd) = (5, 4, 128), (12, 8, 256), (12, 8, 832).
* ``gpt``: the GPT (head tied to the token embedding) on the same tokens and batch; at 1M and 10M
  the transformer's sizes, at 100M GPT-2 small's width (768, 12 heads of 64) with 14 layers
  instead of 12, which lands at 99.4M with a vocabulary of 128.
* ``mlp``: on the spirals, batch 256; hidden layers 2 x 1000, 3 x 2236, 3 x 7071: at 100M nearly
  every parameter sits in two 7071 x 7071 weights (a layer is at most 8192 wide), the layout whose
  float64 update norm cost seconds.
* ``cnn``: on the shapes drawn at 32 x 32, batch 64; convolutions of c and 2c channels, then the
  hidden layer: (c, hidden) = (32, 256), (64, 1216), (96, 8192). At 100M nearly every parameter
  is the hidden layer's one 8192 x 12288 weight, as in VGG-style nets: a CNN's convolutions hold
  few parameters per unit of work, and the flattened map must be 12,288 wide (192 channels of
  8 x 8) for a hidden layer of at most 8192 to reach 100M.
* ``resnet``: on the shapes at 16 x 16, batch 16; stages of c, 2c, 8c, 8c, 8c channels (the
  last three at 4 x 4, 2 x 2 and 1 x 1 pixels after the pools), 7 blocks each, c = 6, 20, 64.
  At 100M that is 41 convolutions of 512 x 512 x 3 x 3 (2.4M parameters each) among 148
  tensors; widening the late, small stages rather than the 16 x 16 one gets there at about
  0.9 GMAC an image, so a step stays affordable (seconds) on a 2-core CPU.

Everything runs side by side in one run:

1. Per checkpoint, in this process (median of a few): the commit work as the solver did it before
   (``encode_checkpoint``, keccak256, the CID, the update norm through float64 copies against a
   clone of the parameters, the next clone: all on the training thread) and as it does now through
   ``proofs.train.Committer``: on the training thread, the update norm against the previous state
   in the reused buffer and the copy into it; on the worker thread, keccak256 and the CID in one
   pass and the file write with fsync; and the worker's time for the same state as a sealed job's,
   sealed canonically first (docs/sealing.md). The update norm alone is timed both ways, through float64
   copies of every tensor (as until issue 27) and as ``update_norm`` computes it now (the same
   bits, checked). Each against one k-step segment of training (the step time
   from the plain runs below), so the ratio at k = 50 follows even where the runs use a smaller k.
2. End to end, each run a child process, plain and solver runs interleaved, medians: ``plain`` is
   ``Trainer.run`` for the job's steps; ``solver`` is ``JobTrainer._build_trace`` (checkpoint 0,
   every segment, the Committer, SQLite records) and then ``JobTrainer.upload`` (every checkpoint
   stored and checked against its CID, the manifest). The overhead is their wall-time difference
   against plain; training uses one thread, the Committer's worker may use another core.
3. Peak RSS (``VmHWM``) of each child: plain training, the solver (training and upload) and a
   verifier replaying the last segment through ``proofs.TraceReplay`` from the solver's store
   (checkpoints fetched and checked against their CIDs, hash, norm and loss checked). The
   footprint of the model alone is params + grads + two Adam slots (16 bytes per parameter) plus
   the activations of a step: measured as plain training's peak RSS less the RSS of the same
   process before the model was built (interpreter, torch, the dataset).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

from bench.procstatus import memory_mb
from core.agent import StopFlag
from core.contracts import JobId
from core.sealing import new_data_key, sealed_size
from core.storage import LocalStore, file_cid
from proofs.checkpoint import state_hash, update_norm
from proofs.data import load_dataset
from proofs.datasets import shapes, spirals, text_tokens
from proofs.manifest import parse_manifest
from proofs.replay import TraceReplay
from proofs.spec import TOKEN_MODELS, JobSpec, Limits, load_spec
from proofs.train import Committer, Trainer
from solver.state import SolverDb
from solver.work import JobTrainer

console = Console(width=160)

SIZES = ("1M", "10M", "100M")


@dataclass(frozen=True)
class Model:
    """A model of the benchmark: its dataset, its batch size and its config at each of :data:`SIZES`."""

    data: Callable[[], bytes]
    batch: int
    configs: dict[str, dict[str, Any]]


def _decoder(kind: str, n_layer: int, n_head: int, n_embd: int) -> dict[str, Any]:
    return {"kind": kind, "vocab_size": 128, "block_size": 64, "n_layer": n_layer, "n_head": n_head, "n_embd": n_embd}


def _mlp(width: int, layers: int) -> dict[str, Any]:
    return {"kind": "mlp", "input_dim": 2, "hidden": [width] * layers, "num_classes": 3}


def _cnn(c: int, hidden: int) -> dict[str, Any]:
    return {"kind": "cnn", "in_channels": 1, "height": 32, "width": 32, "channels": [c, 2 * c], "hidden": hidden, "num_classes": 4}


def _resnet(c: int) -> dict[str, Any]:
    return {"kind": "resnet", "in_channels": 1, "height": 16, "width": 16, "channels": [c, 2 * c, 8 * c, 8 * c, 8 * c], "blocks": 7, "num_classes": 4}


MODELS: dict[str, Model] = {
    "transformer": Model(
        text_tokens,
        16,
        {"1M": _decoder("char-transformer", 5, 4, 128), "10M": _decoder("char-transformer", 12, 8, 256), "100M": _decoder("char-transformer", 12, 8, 832)},
    ),
    "gpt": Model(text_tokens, 16, {"1M": _decoder("gpt", 5, 4, 128), "10M": _decoder("gpt", 12, 8, 256), "100M": _decoder("gpt", 14, 12, 768)}),
    "mlp": Model(lambda: spirals(1, per_class=512), 256, {"1M": _mlp(1000, 2), "10M": _mlp(2236, 3), "100M": _mlp(7071, 3)}),
    "cnn": Model(lambda: shapes(1, count=512, size=32), 64, {"1M": _cnn(32, 256), "10M": _cnn(64, 1216), "100M": _cnn(96, 8192)}),
    "resnet": Model(lambda: shapes(1, count=512), 16, {"1M": _resnet(6), "10M": _resnet(20), "100M": _resnet(64)}),
}
#: name -> (k, segments, repeats) of the end-to-end runs; 100M trains at several seconds a step
RUNS = {"1M": (50, 4, 3), "10M": (50, 2, 2), "100M": (2, 2, 1)}
JOB = JobId(1)


def _spec(model: str, size: str, numerics: str, k: int, segments: int, data: bytes) -> JobSpec:
    config = MODELS[model].configs[size]
    return load_spec(
        {
            "model": config,
            "dataset": {"cid": file_cid(data), "format": "safetensors", "size_bytes": len(data), "targets": None if config["kind"] in TOKEN_MODELS else "y"},
            "optimizer": {"kind": "adam", "lr": 0.001},
            "batch_size": MODELS[model].batch,
            "steps": k * segments,
            "seed": 1,
            "checkpoint_interval": k,
            "numerics": numerics,
        }
    )


# -- children: one role each, printing one JSON line ------------------------------------------


def _child(role: str, model: str, size: str, numerics: str, k: int, segments: int, workdir: Path) -> dict[str, Any]:
    data = MODELS[model].data()
    spec = _spec(model, size, numerics, k, segments, data)
    dataset = load_dataset(spec, data)
    base = memory_mb()["VmRSS"]
    store = LocalStore(workdir / "store")
    started = time.perf_counter()
    cpu = time.process_time()
    out: dict[str, Any] = {}
    if role == "plain":
        trainer = Trainer(spec, dataset)
        trainer.run(spec.steps)
    elif role == "solver":
        store.put(data)
        spec_cid = store.put(spec.canonical_bytes())
        db = SolverDb(workdir / "state.sqlite")
        db.start_job(JOB, spec_cid)
        never = SimpleNamespace(client=SimpleNamespace(timestamp=lambda: 0))  # the commit deadline is never near
        workshop = JobTrainer(never, store, db, never, workdir / "jobs", StopFlag())  # type: ignore[arg-type]
        workshop.train(JOB, 2**32 - 1)
        trained = time.perf_counter()
        workshop.upload(JOB)
        record = db.job(JOB)
        assert record is not None and record.manifest_cid is not None
        out = {"train_s": trained - started, "upload_s": time.perf_counter() - trained, "manifest": record.manifest_cid}
        db.close()
    else:  # verifier
        manifest = parse_manifest(store.get((workdir / "manifest").read_text(), 1 << 20), spec)
        replay = TraceReplay(spec, dataset, manifest, lambda i: store.get(manifest.checkpoint_cids[i], Limits.CHECKPOINT_BYTES))
        verdict = replay.segment(spec.segments - 1)
        assert verdict.passed, verdict.detail
    return {
        **out,
        "wall_s": time.perf_counter() - started,
        "cpu_s": time.process_time() - cpu,
        "base_mb": base,
        "peak_mb": memory_mb()["VmHWM"],
    }


def _run_child(role: str, model: str, size: str, numerics: str, k: int, segments: int, workdir: Path) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "bench.commit_overhead", "--child", role, model, size, numerics, str(k), str(segments), str(workdir)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{role} child failed: {done.stderr[-2000:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


# -- 1. per checkpoint, in process ---------------------------------------------------------------


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def _norm_float64_copies(before: dict[str, Any], after: dict[str, Any]) -> float:
    """The update norm as computed before (whole float64 copies of each tensor and of the
    difference, then numpy's sum): the same bits as ``update_norm``, for its time beside it."""
    parts = []
    for name in sorted(before):
        d = after[name].detach().numpy().astype(np.float64) - before[name].detach().numpy().astype(np.float64)
        parts.append(float(np.sum(d * d)))
    return math.sqrt(math.fsum(parts))


def per_checkpoint(model: str, size: str, numerics: str, repeat: int, workdir: Path) -> dict[str, float]:
    data = MODELS[model].data()
    spec = _spec(model, size, numerics, 1, 2, data)
    trainer = Trainer(spec, load_dataset(spec, data))
    trainer.run(1)  # Adam's slots hold values, kernels are compiled
    before = {n: p.detach().clone() for n, p in trainer.params.items()}

    path = workdir / "checkpoint.bin"

    def write(_index: int, data: bytes | memoryview) -> None:
        with open(path, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())

    def old() -> None:  # what the solver did on the training thread at each checkpoint (upload redid most of it)
        encoded = trainer.to_bytes()
        state_hash(encoded)
        write(0, encoded)
        file_cid(encoded)
        _norm_float64_copies(before, trainer.params)
        {n: p.detach().clone() for n, p in trainer.params.items()}

    def commits(of: Trainer) -> tuple[list[float], list[float]]:
        """Seconds of each of ``repeat`` commits of ``of``'s state on the training thread and on the worker."""
        on_thread, off_thread = [], []
        committer = Committer(write, lambda _done: None)
        committer.hold(of)
        for _ in range(repeat):
            started = time.perf_counter()
            committer.commit(1, of, 0.0)
            handed = time.perf_counter()
            committer.close()  # waits for the worker: what it does while training goes on
            on_thread.append(handed - started)
            off_thread.append(time.perf_counter() - handed)
            committer = Committer(write, lambda _done: None)
            committer.hold(of)
        committer.close()
        return on_thread, off_thread

    on_thread, off_thread = commits(trainer)
    # the same state as a sealed job's (docs/sealing.md): the worker seals it before it hashes and writes
    sealed_spec = spec.model_copy(update={"dataset": spec.dataset.model_copy(update={"sealed": True, "size_bytes": sealed_size(len(data))})})
    sealed = Trainer(sealed_spec, load_dataset(sealed_spec, data, data_key=new_data_key()))
    sealed.load(trainer.checkpoint())
    sealed_off = commits(sealed)[1]
    del sealed
    step = statistics.median(_timed(lambda: trainer.run(1)) for _ in range(2 if size == "100M" else 5))
    params = dict(trainer.params)
    if update_norm(before, params) != _norm_float64_copies(before, params):
        raise AssertionError("update_norm's bits differ from the float64-copy norm's")
    return {
        "norm_copies_s": statistics.median(_timed(lambda: _norm_float64_copies(before, params)) for _ in range(repeat)),
        "norm_s": statistics.median(_timed(lambda: update_norm(before, params)) for _ in range(repeat)),
        "old_s": statistics.median(_timed(old) for _ in range(repeat)),
        "on_thread_s": statistics.median(on_thread),
        "off_thread_s": statistics.median(off_thread),
        "sealed_off_thread_s": statistics.median(sealed_off),
        "step_s": step,
        "bytes": len(trainer.to_bytes()),
        "params": spec.param_count(),
    }


# -- the tables ----------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1M only, k = 10, one run of each (a smoke run)")
    parser.add_argument("--sizes", nargs="+", choices=SIZES, default=list(SIZES))
    parser.add_argument("--numerics", nargs="+", choices=["repro-v1", "repro-v2", "torch"], default=["repro-v1", "torch"])
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--child", nargs=7, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        role, model, size, numerics, k, segments, workdir = args.child
        print(json.dumps(_child(role, model, size, numerics, int(k), int(segments), Path(workdir))))
        return
    sizes = ["1M"] if args.quick else args.sizes
    first = Table(title="1. Commit work per checkpoint against one k = 50 segment of training (median; one training thread)")
    for col in (
        "model",
        "numerics",
        "params",
        "checkpoint MB",
        "step s",
        "before: on the training thread s",
        "norm, float64 copies s",
        "norm now s",
        "now: training thread s",
        "now: worker s",
        "sealed job: worker s",
        "before / segment",
        "with the float64-copy norm / segment",
        "now / segment",
    ):
        first.add_column(col, justify="right")
    second = Table(title="2. End to end: plain training against the solver (training, Committer, records, upload), wall time, median of interleaved child runs")
    for col in (
        "model",
        "numerics",
        "k x segments",
        "plain wall s",
        "solver wall s (train + upload)",
        "wall overhead",
        "plain CPU s",
        "solver CPU s",
        "CPU overhead (all threads)",
    ):
        second.add_column(col, justify="right")
    third = Table(title="3. Peak RSS (MB) of each child; footprint = plain training's peak less its RSS before the model was built")
    for col in (
        "model",
        "numerics",
        "16 B/param",
        "runtime before model",
        "plain peak",
        "footprint",
        "solver peak",
        "verifier peak",
        "solver / footprint",
        "verifier / footprint",
    ):
        third.add_column(col, justify="right")
    for model, size in ((m, s) for s in sizes for m in args.models):
        for numerics in args.numerics:
            if size == "100M" and numerics == "torch" and len(args.numerics) > 1:
                continue  # minutes more for the same bytes: the repro-v1 row is the slower, so the kinder, ratio
            k, segments, repeat = (10, 2, 1) if args.quick else RUNS[size]
            with tempfile.TemporaryDirectory(prefix="commit-bench-") as tmp:
                per = per_checkpoint(model, size, numerics, 1 if size == "100M" else 3, Path(tmp))
            segment = 50 * per["step_s"]
            first.add_row(
                f"{model} {size}",
                numerics,
                f"{per['params']:,}",
                f"{per['bytes'] / 1e6:.1f}",
                f"{per['step_s']:.3f}",
                f"{per['old_s']:.3f}",
                f"{per['norm_copies_s']:.3f}",
                f"{per['norm_s']:.3f}",
                f"{per['on_thread_s']:.3f}",
                f"{per['off_thread_s']:.3f}",
                f"{per['sealed_off_thread_s']:.3f}",
                f"{per['old_s'] / segment:.2%}",
                f"{(per['on_thread_s'] - per['norm_s'] + per['norm_copies_s']) / segment:.2%}",
                f"{per['on_thread_s'] / segment:.2%}",
            )
            runs: dict[str, list[dict[str, Any]]] = {"plain": [], "solver": []}
            verifier: dict[str, Any] = {}
            for r in range(repeat):
                for role in ("plain", "solver") if r % 2 == 0 else ("solver", "plain"):
                    with tempfile.TemporaryDirectory(prefix="commit-bench-") as tmp:
                        result = _run_child(role, model, size, numerics, k, segments, Path(tmp))
                        runs[role].append(result)
                        if role == "solver" and not verifier:
                            (Path(tmp) / "manifest").write_text(result["manifest"])
                            verifier = _run_child("verifier", model, size, numerics, k, segments, Path(tmp))

            def med(role: str, key: str) -> float:
                return statistics.median(x[key] for x in runs[role])

            plain, solver, plain_cpu, solver_cpu = med("plain", "wall_s"), med("solver", "wall_s"), med("plain", "cpu_s"), med("solver", "cpu_s")
            second.add_row(
                f"{model} {size}",
                numerics,
                f"{k} x {segments}",
                f"{plain:.2f}",
                f"{solver:.2f} ({med('solver', 'train_s'):.2f} + {med('solver', 'upload_s'):.2f})",
                f"{(solver - plain) / plain:+.2%}",
                f"{plain_cpu:.2f}",
                f"{solver_cpu:.2f}",
                f"{(solver_cpu - plain_cpu) / plain_cpu:+.2%}",
            )
            plain_peak = max(x["peak_mb"] for x in runs["plain"])
            base = statistics.median(x["base_mb"] for x in runs["plain"])
            footprint = plain_peak - base
            solver_peak = max(x["peak_mb"] for x in runs["solver"])
            third.add_row(
                f"{model} {size}",
                numerics,
                f"{16 * per['params'] / 2**20:,.0f}",
                f"{base:,.0f}",
                f"{plain_peak:,.0f}",
                f"{footprint:,.0f}",
                f"{solver_peak:,.0f}",
                f"{verifier['peak_mb']:,.0f}",
                f"{(solver_peak - base) / footprint:.2f}x",
                f"{(verifier['peak_mb'] - base) / footprint:.2f}x",
            )
            console.print(f"   {model} {size} {numerics} done", style="dim")
    console.print(first, second, third)


if __name__ == "__main__":
    main()
