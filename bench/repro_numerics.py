"""Training speed of the reproducible numerics (repro-v1, repro-v2) against plain torch, side by side in one run.

    .venv/bin/python -m bench.repro_numerics [--steps 3] [--only NAME ...] [--clock cpu] [--profile] [--gemm-only]

repro-v2 is repro-v1 with each term of a matmul's or a convolution's sum one fused multiply-add
(one rounding, :data:`proofs.repro_kernels.FUSED`) where repro-v1 rounds a multiply, then an add;
the rest of its kernels are repro-v1's.

For each model (character transformers of about 100k, 1M and 10M parameters, a GPT of about
10M, an MLP and a CNN of about 1M, a ResNet of about 0.3M) it times training steps (``Trainer.run``: forward, backward, optimizer
update, Adam) under ``numerics: torch``, ``numerics: repro-v1`` and ``numerics: repro-v2`` at 1 and
2 threads, interleaved step by step, and prints the median seconds per step and the ratios:

* repro-v1 / torch and repro-v2 / torch at equal threads (the goal is 1.5x or less);
* repro-v1 and repro-v2 with every core against today's exact mode (torch, one thread): above 1
  means a solver trains faster than today;
* in a second table, each numerics' own speed-up from one thread to two (torch's, repro-v1's,
  repro-v2's) and repro's less torch's: issue 27's goal is 1.7x, and torch's own speed-up on the
  same step is what two threads give a step of that size here (docs/numerics.md, "A linear's bias
  on the threads, and two threads on the small models").

The first step of each configuration is a warm-up (numba loads or compiles its kernels,
torch sizes its allocator) and is not timed; each timed step starts after ``SETTLE_S`` idle
seconds, so that no thread pool still spinning from the step before is counted in it, and one
untimed step of its own, so that a core the idle let sleep is awake again.

Before the models, the matmul alone (``--gemm-only`` stops there): GFLOP/s of the repro-v1
``bmm`` and of repro-v2's fused one (``FUSED.bmm``) on the models' matmul shapes at one thread
against the best BLAS torch carries here, MKL (``torch.mm``, ATen's default) and oneDNN
(``torch._C._nn.mkldnn_linear`` on mkldnn tensors, the same ``x W^T``), and each repro's
two-thread speed-up (wall clock); and, on a line before the table, all three with their operands in
L1 (the register tile's ceiling on this core), and each one's speed-up from one thread to two there (what
the machine's two cores give compute itself). A line first says which CPU features each side used:
the CPU's flags, ATen's capability, oneDNN's ISA (its verbose log, read in a child process), and
numba's target CPU with repro's tile family.

``--clock cpu`` times the process's CPU seconds instead of wall seconds: on a machine shared
with other work, a one-thread cell then counts only its own work (not the time it waited for
a core); two-thread cells count both threads, and torch's OpenMP pool spins while it waits,
so read the 2T columns from the wall clock. ``--profile`` adds, per model and repro numerics, the
seconds per step of each kernel (1 and 2 threads; repro-v2's fused ones named ``fused ...``) and of
the rest (Python, autograd, torch's copies), and what two threads would gain were the rest serial
and the kernels split evenly (Amdahl's bound) beside what they gained and what the rest gained.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numba
import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from proofs import repro_kernels as K
from proofs.data import load_dataset
from proofs.datasets import shapes, spirals, text_tokens
from proofs.spec import TOKEN_MODELS, load_spec
from proofs.train import Runtime, Trainer

_LM = {"kind": "char-transformer", "vocab_size": 128, "block_size": 64}
#: name -> (model config, dataset builder, batch size)
MODELS: dict[str, tuple[dict[str, Any], Any, int]] = {
    "transformer-100k": ({**_LM, "n_layer": 2, "n_head": 4, "n_embd": 64}, text_tokens, 16),
    "transformer-1M": ({**_LM, "n_layer": 5, "n_head": 4, "n_embd": 128}, text_tokens, 16),
    "transformer-10M": ({**_LM, "n_layer": 12, "n_head": 8, "n_embd": 256}, text_tokens, 16),
    "gpt-10M": ({**_LM, "kind": "gpt", "n_layer": 12, "n_head": 8, "n_embd": 256}, text_tokens, 16),
    "mlp-1M": ({"kind": "mlp", "input_dim": 2, "hidden": [1000, 1000], "num_classes": 3}, lambda: spirals(1, per_class=512), 256),
    "cnn-1M": (
        {"kind": "cnn", "in_channels": 1, "height": 16, "width": 16, "channels": [32, 64], "hidden": 1000, "num_classes": 4},
        lambda: shapes(1, count=512),
        64,
    ),
    "resnet-0.3M": (
        {"kind": "resnet", "in_channels": 1, "height": 16, "width": 16, "channels": [16, 32, 64], "blocks": 3, "num_classes": 4},
        lambda: shapes(1, count=512),
        64,
    ),
}
THREADS = (1, 2)
NUMERICS = ("torch", "repro-v1", "repro-v2")
#: The reproducible ones, compared with torch.
REPRO = ("repro-v1", "repro-v2")


def _spec(model: dict[str, Any], data: bytes, batch: int, steps: int, numerics: str) -> Any:
    return load_spec(
        {
            "model": model,
            "dataset": {"cid": "QmBench", "format": "safetensors", "size_bytes": len(data), "targets": None if model["kind"] in TOKEN_MODELS else "y"},
            "optimizer": {"kind": "adam", "lr": 0.001},
            "batch_size": batch,
            "steps": steps,
            "seed": 1,
            "checkpoint_interval": steps,
            "numerics": numerics,
        }
    )


CLOCKS: dict[str, Callable[[], float]] = {"wall": time.perf_counter, "cpu": time.process_time}


def _trainers(model: dict[str, Any], data: bytes, batch: int, steps: int) -> dict[tuple[str, int], Trainer]:
    """One warmed-up trainer per (numerics, threads)."""
    trainers = {}
    for n in NUMERICS:
        spec = _spec(model, data, batch, steps + 1, n)
        dataset = load_dataset(spec, data)
        for t in THREADS:
            trainers[(n, t)] = Trainer(spec, dataset, Runtime(threads=t))
            trainers[(n, t)].run(1)  # warm-up
    return trainers


#: Idle seconds before each timed step: torch's OpenMP pool keeps spinning after its two-thread
#: step, and without this wait that spinning was counted in the next cell (repro 1T: measured
#: 0.0205 instead of 0.0138 CPU seconds per step on the CNN; with OMP_WAIT_POLICY=PASSIVE, 0.0131).
SETTLE_S = 0.3


def _seconds_per_step(trainers: dict[tuple[str, int], Trainer], steps: int, clock: Callable[[], float]) -> dict[tuple[str, int], float]:
    """Median seconds per step of each (numerics, threads), timed one step each in turn so
    that load from other processes falls on every cell alike. Each timed step follows the idle
    and an untimed step: on a VM the idle let the second vCPU sleep, and a two-thread step just
    after it took 13 or 45 to 50 ms at random (mlp-1M; 9 to 11 ms back to back, as training runs)."""
    times: dict[tuple[str, int], list[float]] = {key: [] for key in trainers}
    for _ in range(steps):
        for key, trainer in trainers.items():
            time.sleep(SETTLE_S)
            trainer.run(1)
            start = clock()
            trainer.run(1)
            times[key].append(clock() - start)
    return {key: statistics.median(v) for key, v in times.items()}


@contextmanager
def _kernel_clock(clock: Callable[[], float], spent: dict[str, float]) -> Iterator[None]:
    """Time every call of every kernel in :mod:`proofs.repro_kernels` into ``spent`` (name -> seconds),
    repro-v2's fused ones (``K.FUSED``) as ``fused <name>``."""
    saved = {name: getattr(K, name) for name in K.__all__ if name not in ("exp64", "log64", "tanh64", "FUSED")}
    saved_fused = dict(vars(K.FUSED))

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            start = clock()
            try:
                return fn(*args)
            finally:
                spent[name] += clock() - start

        return call

    for name, fn in saved.items():
        setattr(K, name, timed(name, fn))
    for name, fn in saved_fused.items():
        setattr(K.FUSED, name, timed(f"fused {name}", fn))
    try:
        yield
    finally:
        for name, fn in saved.items():
            setattr(K, name, fn)
        for name, fn in saved_fused.items():
            setattr(K.FUSED, name, fn)


def _profile(name: str, numerics: str, trainers: dict[tuple[str, int], Trainer], steps: int, clock: Callable[[], float]) -> Table:
    """Seconds per step in each kernel of ``numerics`` (a repro one), and in the rest, at 1 and 2 threads."""
    spent: dict[int, defaultdict[str, float]] = {t: defaultdict(float) for t in THREADS}
    total = {}
    for t in THREADS:
        with _kernel_clock(clock, spent[t]):
            time.sleep(SETTLE_S)
            start = clock()
            trainers[(numerics, t)].run(steps)
            total[t] = clock() - start
    table = Table(title=f"{name}: {numerics} seconds per step by kernel")
    for col in ("kernel", *(f"{t}T" for t in THREADS)):
        table.add_column(col, justify="right")
    for kernel in sorted(spent[1], key=lambda k: -spent[1][k]):
        table.add_row(kernel, *(f"{spent[t][kernel] / steps:.4f}" for t in THREADS))
    rest = {t: total[t] - sum(spent[t].values()) for t in THREADS}
    table.add_row("rest (Python, autograd, torch)", *(f"{rest[t] / steps:.4f}" for t in THREADS))
    table.add_row("step", *(f"{total[t] / steps:.4f}" for t in THREADS))
    # Amdahl's bound on the two-thread speed-up, were the rest serial and the kernels split evenly
    share = rest[1] / total[1]
    table.caption = (
        f"the rest: {share:.0%} of the one-thread step; were it serial, two threads would gain {1 / (share + (1 - share) / 2):.2f}x "
        f"(measured: {total[1] / total[2]:.2f}x, the rest itself {rest[1] / rest[2]:.2f}x)"
    )
    return table


#: (M, K, N) of the models' matmuls: the transformers' projections and MLP at 1M and 10M
#: (1024 tokens a batch), the MLP's hidden layer, the CNN head's first layer
GEMM_SHAPES = [(1024, 128, 384), (1024, 128, 512), (1024, 512, 128), (1024, 256, 1024), (1024, 1024, 256), (256, 1000, 1000), (64, 4096, 1000)]
_CPU_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_bf16", "amx_tile")


def _onednn_isa() -> str:
    """The ISA oneDNN dispatches to, from its verbose log in a child process (it prints there)."""
    code = "import torch; x = torch.ones(8, 8).to_mkldnn(); torch._C._nn.mkldnn_linear(x, x)"
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "ONEDNN_VERBOSE": "1"}, capture_output=True, text=True, check=False)
    for line in done.stdout.splitlines():
        if "cpu,isa:" in line or ",isa:" in line:
            return line.split("isa:", 1)[1].strip()
    return "unknown"


def cpu_features() -> str:
    """One line: what the CPU offers and what each side compiled for or dispatched to."""
    try:
        with open("/proc/cpuinfo") as fh:
            flags = next((line.split(":", 1)[1].split() for line in fh if line.startswith("flags")), [])
    except OSError:
        flags = []
    cpu = numba.config.CPU_NAME or numba.core.codegen.ll.get_host_cpu_name()
    return (
        f"CPU flags: {' '.join(f for f in _CPU_FLAGS if f in flags) or 'unknown'}; "
        f"ATen (MKL GEMM, vectorized ops): {torch.backends.cpu.get_cpu_capability()}; "
        f"oneDNN: {_onednn_isa()}; "
        f"repro-v1 and repro-v2 (numba {numba.__version__}): target CPU {cpu}, {f'wide {K._ROWS} x {4 * K._W}' if K.WIDE_TILES else f'narrow {K._NROWS} x {2 * K._NW}'} register tiles"
    )


Cell = tuple[Callable[[], float], Callable[[], object]]


def _gflops(cells: dict[str, Cell], repeats: int, flops: float) -> dict[str, float]:
    """GFLOP/s of each cell (its clock, its call): one warm-up call each (numba compiles or loads
    its kernels), then ``repeats`` rounds interleaved, the best of each."""
    times: dict[str, list[float]] = {name: [] for name in cells}
    for _, fn in cells.values():
        fn()
    for _ in range(repeats):
        for name, (clock, fn) in cells.items():
            start = clock()
            fn()
            times[name].append(clock() - start)
    return {name: flops / min(v) / 1e9 for name, v in times.items()}


def ceiling(repeats: int) -> str:
    """One line: the matmul's speed with its operands in L1 (64 matmuls of 64 x 128 x 64 on one
    broadcast a and b), repro-v1 and repro-v2 against MKL, at one thread: the register tile's
    ceiling on this core, where repro-v1's separate multiply and add per k take two vector
    instructions to a BLAS's (and repro-v2's) one fused multiply-add. Then each one's speed-up
    from one thread to two (wall clock): with nothing to wait on in memory and 64 equal tasks,
    what two cores of this machine give compute itself, the ceiling of any step's speed-up."""
    rng = np.random.default_rng(0)
    nb, m, k, n = 64, 64, 128, 64
    a = np.broadcast_to(rng.standard_normal((1, m, k)).astype(np.float32), (nb, m, k))
    b = np.broadcast_to(rng.standard_normal((1, k, n)).astype(np.float32), (nb, k, n))
    out = np.empty((nb, m, n), np.float32)
    ta, tb = torch.from_numpy(a[:1].copy()).expand(nb, m, k), torch.from_numpy(b[:1].copy()).expand(nb, k, n)
    saved = torch.get_num_threads(), numba.get_num_threads()
    torch.set_num_threads(1)
    numba.set_num_threads(1)
    cells: dict[str, Cell] = {
        "repro": (time.thread_time, lambda: K.bmm(a, b, out)),
        "fused": (time.thread_time, lambda: K.FUSED.bmm(a, b, out)),
        "mkl": (time.thread_time, lambda: torch.bmm(ta, tb)),
    }
    best = _gflops(cells, repeats, 2 * nb * m * k * n)
    wall = {}
    for threads in (1, 2):
        torch.set_num_threads(threads)
        numba.set_num_threads(threads)
        wall[threads] = _gflops({name: (time.perf_counter, fn) for name, (_, fn) in cells.items()}, repeats, 2 * nb * m * k * n)
    torch.set_num_threads(saved[0])
    numba.set_num_threads(saved[1])
    two = {name: wall[2][name] / wall[1][name] for name in cells}
    return (
        f"operands in L1 ({nb} x {m} x {k} x {n}, one broadcast a and b), GFLOP/s at one thread: "
        f"repro-v1 {best['repro']:.1f}, repro-v2 {best['fused']:.1f}, MKL {best['mkl']:.1f} "
        f"(repro-v1 / MKL {best['repro'] / best['mkl']:.2f}: a multiply and an add per k; "
        f"repro-v2 / MKL {best['fused'] / best['mkl']:.2f}: one fused multiply-add per k, as a BLAS); "
        f"two threads against one (wall): repro-v1 {two['repro']:.2f}x, repro-v2 {two['fused']:.2f}x, MKL {two['mkl']:.2f}x "
        f"(this machine's own ceiling for two threads)"
    )


def gemm_table(repeats: int) -> Table:
    """GFLOP/s at one thread (the calling thread's CPU clock, best of ``repeats`` interleaved), and repro's speed-up at 2 threads (wall)."""
    rng = np.random.default_rng(0)
    table = Table(
        title=f"matmul alone: GFLOP/s at one thread (CPU seconds, best of {repeats}, interleaved), repro-v1 bmm and repro-v2 fused bmm against torch's BLAS"
    )
    for col in (
        "M x K x N",
        "repro-v1 1T",
        "repro-v2 1T",
        "MKL 1T",
        "oneDNN 1T",
        "repro-v1 / best",
        "repro-v2 / best",
        "repro-v1 2T / 1T (wall)",
        "repro-v2 2T / 1T (wall)",
    ):
        table.add_column(col, justify="right")
    saved = torch.get_num_threads(), numba.get_num_threads()
    for m, k, n in GEMM_SHAPES:
        a = rng.standard_normal((1, m, k)).astype(np.float32)
        b = rng.standard_normal((1, k, n)).astype(np.float32)
        out = np.empty((1, m, n), np.float32)
        ta, tb = torch.from_numpy(a[0]), torch.from_numpy(b[0])
        xm, wm = ta.to_mkldnn(), tb.t().contiguous().to_mkldnn()

        def multiply(kern: Any, threads: int) -> None:
            numba.set_num_threads(threads)
            kern.bmm(a, b, out)

        # one-thread cells run on this thread: its CPU seconds, not the process's (numba's
        # OpenMP threads spin a while after each two-thread call, and would be counted)
        cpu, wall = time.thread_time, time.perf_counter
        repros = {"repro": K, "fused": K.FUSED}  # repro-v1's bmm, repro-v2's
        cells: dict[str, Cell] = {label: (cpu, functools.partial(multiply, kern, 1)) for label, kern in repros.items()}
        cells["mkl"] = (cpu, lambda: torch.mm(ta, tb))
        cells["onednn"] = (cpu, lambda: torch._C._nn.mkldnn_linear(xm, wm, None))
        cells |= {f"{label} {t}T wall": (wall, functools.partial(multiply, kern, t)) for label, kern in repros.items() for t in (1, 2)}
        torch.set_num_threads(1)
        best = _gflops(cells, repeats, 2 * m * k * n)
        blas = max(best["mkl"], best["onednn"])
        table.add_row(
            f"{m} x {k} x {n}",
            f"{best['repro']:.1f}",
            f"{best['fused']:.1f}",
            f"{best['mkl']:.1f}",
            f"{best['onednn']:.1f}",
            f"{best['repro'] / blas:.2f}",
            f"{best['fused'] / blas:.2f}",
            f"{best['repro 2T wall'] / best['repro 1T wall']:.2f}x",
            f"{best['fused 2T wall'] / best['fused 1T wall']:.2f}x",
        )
    torch.set_num_threads(saved[0])
    numba.set_num_threads(saved[1])
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=3, help="timed steps per cell (median), default 3")
    parser.add_argument("--only", action="append", choices=sorted(MODELS), help="only this model (repeatable)")
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall", help="wall seconds (default) or the process's CPU seconds")
    parser.add_argument("--profile", action="store_true", help="also print each model's seconds per step by kernel, under repro-v1 and repro-v2")
    parser.add_argument("--gemm-repeats", type=int, default=5, help="interleaved repeats of each matmul cell (best taken), default 5")
    parser.add_argument("--gemm-only", action="store_true", help="the CPU features line and the matmul table only")
    args = parser.parse_args()
    clock = CLOCKS[args.clock]
    console = Console(width=200)
    console.print(cpu_features())
    console.print(ceiling(args.gemm_repeats))
    console.print(gemm_table(args.gemm_repeats))
    if args.gemm_only:
        return
    table = Table(
        title=f"repro-v1 (v1) and repro-v2 (v2) vs plain torch: {args.clock} seconds per training step (Adam, median of {args.steps}), {os.cpu_count()} CPUs",
        caption=f"speed-up: repro at {THREADS[-1]} threads against torch at one (today's exact mode); above 1, a solver trains faster than today",
    )
    profiles = []
    short = {n: n.removeprefix("repro-") for n in REPRO}
    table.add_column("model", justify="right", no_wrap=True)
    table.add_column("params", justify="right", no_wrap=True)
    table.add_column("batch", justify="right")
    for t in THREADS:
        table.add_column(f"torch {t}T", justify="right")
        for n in REPRO:
            table.add_column(f"{short[n]} {t}T", justify="right")
            table.add_column(f"{short[n]}/torch {t}T", justify="right")
    for n in REPRO:
        table.add_column(f"speed-up {short[n]} {THREADS[-1]}T vs torch 1T", justify="right")
    own = Table(
        title=f"{THREADS[-1]} threads against 1, each numerics against itself ({args.clock} clock)",
        caption="issue 27's goal 1.7x; torch's own speed-up on the same step is what this machine gives a step of that size (docs/numerics.md)",
    )
    for col in ("model", *NUMERICS, *(f"{short[n]} - torch" for n in REPRO)):
        own.add_column(col, justify="right")
    for name, (model, build, batch) in MODELS.items():
        if args.only and name not in args.only:
            continue
        data = build()
        params = _spec(model, data, batch, 1, "torch").param_count()
        trainers = _trainers(model, data, batch, args.steps * (3 if args.profile else 2))
        cell = _seconds_per_step(trainers, args.steps, clock)
        if args.profile:
            profiles += [_profile(name, n, trainers, args.steps, clock) for n in REPRO]
        row = [name, f"{params:,}", str(batch)]
        for t in THREADS:
            plain = cell[("torch", t)]
            row.append(f"{plain:.4f}")
            for n in REPRO:
                row += [f"{cell[(n, t)]:.4f}", f"{cell[(n, t)] / plain:.2f}x"]
        row += [f"{cell[('torch', 1)] / cell[(n, THREADS[-1])]:.2f}x" for n in REPRO]
        table.add_row(*row)
        gain = {n: cell[(n, 1)] / cell[(n, THREADS[-1])] for n in NUMERICS}
        own.add_row(name, *(f"{gain[n]:.2f}x" for n in NUMERICS), *(f"{gain[n] - gain['torch']:+.2f}" for n in REPRO))
    console.print(table)
    console.print(own)
    for profile in profiles:
        console.print(profile)


if __name__ == "__main__":
    main()
