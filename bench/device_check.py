"""repro-v1 and repro-v2 on an NVIDIA GPU, in one command: the same bits as the CPU, and the speed against cuBLAS.

    python3 -m bench.device_check --out device-check          # about 4-6 minutes on an H100
    python3 -m bench.device_check --out device-check --quick  # 2 replay steps, gpt-10M speed only

Both reproducible numerics are checked: repro-v1 (each term of a matmul's or a convolution's sum a
rounded multiply, then a rounded add) and repro-v2 (the same kernels, each such term one fused
multiply-add: one rounding). In every section the repro-v2 cells come after the repro-v1 ones, so
that a short ``--budget-s`` still runs every repro-v1 cell first. Four parts, each cell failing
soft (its error recorded, the next cell runs):

1. ``kernels``: every repro-v1 operation forward and backward (every matmul tile shape, transposed
   operands) and every optimizer kernel on the GPU (proofs.repro_cuda) against the CPU kernels
   (proofs.repro_kernels), bit for bit, and the PTX of every repro-v1 kernel holds no fused
   multiply-add; then repro-v2's contractions (the fused matmul of every tile shape against
   ``proofs.repro_kernels.FUSED.bmm``, linear, conv2d, causal attention) the same way, and the PTX
   of each fused matmul kernel holds ``fma.rn.f32`` (one rounding per term on the GPU too). Needs
   torch, numpy and numba's CUDA target only.
2. ``replay``: every registry model (tiny and about 10M parameters) with SGD and with Adam under
   repro-v1, and with Adam under repro-v2 (its optimizers are repro-v1's), trained ``--steps`` steps
   from the same spec, seed and batches on the CPU and on the GPU, every step clipped by the global
   norm (``CLIP``, below the models' norms: the sums and the scaling run every step); the sha256 of every parameter and
   optimizer slot (the bytes a checkpoint holds) and each step's loss must be equal. Needs the
   engine's imports too (pydantic, pycryptodome); the report names what is missing.
3. ``speed``: seconds per Adam step of the gpt at 10M and 124M parameters under repro-v1 and under
   repro-v2 on the GPU against plain torch on the same GPU (cuBLAS, TF32 off: float32 matmuls, as
   repro computes), same model and batch; the ratios repro-v1 / torch and repro-v2 / torch. Then, per
   gpt, clipping by the global norm over its gradients' shapes: repro's against torch's
   ``clip_grad_norm_``, in ms per call.
4. ``profile``: where one such step's time goes, per numerics (torch.profiler after a warm-up
   step): the step's wall time, the GPU's busy time (its kernels' sum), the number of kernel
   launches, and the ``--top`` kernels by GPU time.

Writes ``device_check.json`` and ``device_check.txt`` (a readable table) to ``--out``; exits 0 when
every checked cell ran and matched (speed and profile cells never fail the run), 1 otherwise (a cell
the time budget left out is counted apart from a mismatch, but fails the run too), and 2 without running a
cell where no usable CUDA GPU is found (torch's or numba's; the report says which).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import os
import platform
import re
import sys
import time
import traceback
import types
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from proofs.spec import Numerics

ROOT = Path(__file__).resolve().parents[1]
#: The sections whose cells check bits (speed and profile cells only measure: they never fail the run).
_CHECKED = ("kernels", "replay")
#: A section's cells: (name, the check it runs).
Cells = list[tuple[str, Callable[[], dict[str, Any]]]]


def _import_engine() -> str | None:
    """Import proofs' repro modules. When the package's ``__init__`` cannot load (a machine with
    only torch and numba), load its modules without it; returns what was missing, if anything."""
    try:
        importlib.import_module("proofs")
        return None
    except ImportError as exc:
        for name in [m for m in sys.modules if m == "proofs" or m.startswith("proofs.")]:
            del sys.modules[name]
        bare = types.ModuleType("proofs")
        bare.__path__ = [str(ROOT / "proofs")]
        sys.modules["proofs"] = bare
        return f"{type(exc).__name__}: {exc}"


def _numpy_aliases() -> None:
    """numba-cuda (seen with numba 0.68 on numpy 2.5.2) still calls ``numpy.row_stack``, which numpy
    2.5 removed: every kernel failed to compile until the alias was put back. Only missing names are set."""
    import numpy as np

    for old, new in (("row_stack", "vstack"), ("in1d", "isin"), ("trapz", "trapezoid")):
        if not hasattr(np, old) and hasattr(np, new):
            setattr(np, old, getattr(np, new))


def _same(a: Any, b: Any) -> bool:
    import numpy as np
    import torch

    def raw(x: Any) -> Any:
        if isinstance(x, torch.Tensor):
            x = x.detach().cpu().numpy()
        return np.ascontiguousarray(np.asarray(x))

    a, b = raw(a), raw(b)
    return bool(a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes())


def _cell(results: list[dict[str, Any]], section: str, name: str, fn: Callable[[], dict[str, Any]], deadline: float) -> None:
    row: dict[str, Any] = {"section": section, "name": name}
    if time.monotonic() > deadline:
        row.update(status="skipped", error="time budget spent (--budget-s)")
    else:
        started = time.monotonic()
        try:
            row.update(fn())
            row.setdefault("status", "ok")
        except Exception as exc:  # a cell fails soft: record it, go on
            row.update(status="error", error=f"{type(exc).__name__}: {exc}", trace=traceback.format_exc(limit=6)[-2000:])
        row["seconds"] = round(time.monotonic() - started, 2)
    results.append(row)
    print(f"[{section}] {name}: {row['status']} {row.get('detail', '')} {row.get('error', '')}".rstrip(), flush=True)


# ------------------------------------------------------------------ 1. kernels


def _kernel_cells(quick: bool) -> Cells:
    import numpy as np
    import torch

    from proofs import repro, repro_cuda
    from proofs import repro_kernels as K

    rng = np.random.default_rng(11)

    def randn(*shape: int, spread: float = 1.0) -> torch.Tensor:
        return torch.from_numpy((rng.standard_normal(shape) * np.exp(rng.standard_normal(shape) * spread)).astype(np.float32))

    def op(cpu_fn: Any, gpu_fn: Any, inputs: list[torch.Tensor]) -> Callable[[], dict[str, Any]]:
        def run() -> dict[str, Any]:
            outs = []
            for fn, dev in ((cpu_fn, "cpu"), (gpu_fn, "cuda")):
                leaves = [t.clone().to(dev).requires_grad_(t.is_floating_point()) for t in inputs]
                y = fn(*leaves)
                g = torch.from_numpy(np.random.default_rng(5).standard_normal(tuple(y.shape)).astype(np.float32)).to(dev)
                y.backward(g)
                outs.append([y] + [t.grad for t in leaves if t.grad is not None])
            bad = [i for i, (a, b) in enumerate(zip(outs[0], outs[1])) if not _same(a, b)]
            if len(outs[0]) != len(outs[1]):
                bad.append(-1)
            return {"status": "ok" if not bad else "MISMATCH", "detail": "forward and gradients equal" if not bad else f"differ: outputs {bad} (0 = forward)"}

        return run

    def matmul(shape: str, m: int, k: int, n: int, transposed: bool, fused: bool) -> Callable[[], dict[str, Any]]:
        """repro_cuda.bmm against the CPU's: repro-v1's ``K.bmm`` or, ``fused``, repro-v2's ``K.FUSED.bmm``."""

        def run() -> dict[str, Any]:
            base = randn(3, k, m) if transposed else randn(3, m, k)
            a, a_gpu = (base.transpose(1, 2), base.cuda().transpose(1, 2)) if transposed else (base, base.cuda())
            b = randn(3, k, n)
            ref = np.empty((3, m, n), np.float32)
            (K.FUSED if fused else K).bmm(np.ascontiguousarray(a.numpy()), b.numpy(), ref)
            out = repro_cuda.bmm(a_gpu, b.cuda(), shape, fused=fused)
            ok = _same(out, ref)
            return {"status": "ok" if ok else "MISMATCH", "detail": f"{m}x{k}x{n}"}

        return run

    s = 1 if quick else 2

    def matmuls(fused: bool) -> Cells:
        """The matmul of every tile shape, a plain and a transposed, repro-v1's or (``fused``) repro-v2's."""
        prefix = "repro-v2 " if fused else ""
        out: Cells = []
        for shape in repro_cuda.BMM_SHAPES:
            out.append((f"{prefix}bmm {shape}", matmul(shape, 67 * s, 45 * s, 131 * s, False, fused)))
            out.append((f"{prefix}bmm {shape} transposed a", matmul(shape, 67 * s, 45 * s, 131 * s, True, fused)))
        return out

    def contractions(fused: bool) -> Cells:
        """The operations whose sums are matmuls (autograd's ``apply`` takes ``fused`` last, no default)."""
        prefix = "repro-v2 " if fused else ""
        return [
            (
                f"{prefix}linear",
                op(
                    lambda x, w, b: repro._Linear.apply(x, w, b, fused),
                    lambda x, w, b: repro_cuda.Linear.apply(x, w, b, fused),
                    [randn(37, 50), randn(70, 50), randn(70)],
                ),
            ),
            (
                f"{prefix}linear few rows",
                op(
                    lambda x, w, b: repro._Linear.apply(x, w, b, fused),
                    lambda x, w, b: repro_cuda.Linear.apply(x, w, b, fused),
                    [randn(3, 300), randn(200, 300), randn(200)],
                ),
            ),
            (
                f"{prefix}conv2d 3x3",
                op(
                    lambda x, w, b: repro._Conv2d.apply(x, w, b, 1, fused),
                    lambda x, w, b: repro_cuda.Conv2d.apply(x, w, b, 1, fused),
                    [randn(4, 3, 9, 11), randn(8, 3, 3, 3), randn(8)],
                ),
            ),
            (
                f"{prefix}conv2d 5x5",
                op(
                    lambda x, w, b: repro._Conv2d.apply(x, w, b, 2, fused),
                    lambda x, w, b: repro_cuda.Conv2d.apply(x, w, b, 2, fused),
                    [randn(2, 2, 8, 8), randn(4, 2, 5, 5), randn(4)],
                ),
            ),
            (
                f"{prefix}causal_attention",
                op(
                    lambda q, k, v: repro._CausalAttention.apply(q, k, v, fused),
                    lambda q, k, v: repro_cuda.CausalAttention.apply(q, k, v, fused),
                    [randn(2, 3, 40 * s, 16) for _ in range(3)],
                ),
            ),
        ]

    # repro-v1's cells first, repro-v2's at the end of the section: a short --budget-s skips those
    cells: Cells = matmuls(False) + contractions(False)
    cells += [
        ("max_pool2", op(repro._MaxPool2.apply, repro_cuda.MaxPool2.apply, [randn(3, 4, 8, 10)])),
        ("mean_pixels", op(repro._MeanPixels.apply, repro_cuda.MeanPixels.apply, [randn(3, 5, 7, 7)])),
        (
            "layer_norm",
            op(
                lambda x, w, b: repro._LayerNorm.apply(x, w, b, 1e-5),
                lambda x, w, b: repro_cuda.LayerNorm.apply(x, w, b, 1e-5),
                [randn(4, 9, 48), randn(48), randn(48)],
            ),
        ),
        ("gelu", op(repro._Gelu.apply, repro_cuda.Gelu.apply, [randn(5, 333, spread=1.5)])),
        (
            "embedding",
            op(
                lambda w: repro._Embedding.apply(torch.tensor([[3, 1, 3, 7], [0, 3, 1, 7]]), w),
                lambda w: repro_cuda.Embedding.apply(torch.tensor([[3, 1, 3, 7], [0, 3, 1, 7]]).cuda(), w),
                [randn(9, 20)],
            ),
        ),
        (
            "cross_entropy",
            op(
                lambda z: repro._CrossEntropy.apply(z, torch.arange(30) % 17),
                lambda z: repro_cuda.CrossEntropy.apply(z, (torch.arange(30) % 17).cuda()),
                [randn(30, 17, spread=1.5)],
            ),
        ),
    ]

    def update(name: str, make: Callable[[], tuple[Any, ...]]) -> Callable[[], dict[str, Any]]:
        def run() -> dict[str, Any]:
            cpu_args = make()
            gpu_args = tuple(t.clone().cuda() if isinstance(t, torch.Tensor) else t for t in cpu_args)
            out_cpu = getattr(K, name)(*(t.numpy() if isinstance(t, torch.Tensor) else t for t in cpu_args))
            out_gpu = getattr(repro_cuda, name)(*(repro_cuda.array(t) if isinstance(t, torch.Tensor) else t for t in gpu_args))
            torch.cuda.synchronize()
            ok = all(_same(p, q) for p, q in zip(cpu_args, gpu_args) if isinstance(p, torch.Tensor)) and (out_cpu is None or out_cpu == out_gpu)
            return {"status": "ok" if ok else "MISMATCH"}

        return run

    f = np.float32
    n = 10007
    cells += [
        ("sgd_update", update("sgd_update", lambda: (randn(n), randn(n), randn(n), f(0.05), f(0.9), f(0.1), f(0.001), True))),
        (
            "adam_update",
            update("adam_update", lambda: (randn(n), randn(n), randn(n), randn(n).abs(), f(0.9), f(0.999), f(1e-8), f(0.01), f(0.003), f(0.3), f(1.0))),
        ),
        (
            "adamw_update",
            update("adam_update", lambda: (randn(n), randn(n), randn(n), randn(n).abs(), f(0.9), f(0.999), f(1e-8), f(0.0), f(0.003), f(0.3), f(0.999))),
        ),
        ("add_into", update("add_into", lambda: (randn(n), randn(n)))),
        ("divide", update("divide", lambda: (randn(n), f(3.0)))),
        ("scale", update("scale", lambda: (randn(n), f(0.37)))),
    ]

    def sum_squares() -> dict[str, Any]:
        """Clipping's sums, one launch for tensors of every length against a chunk (512): empty,
        one, a chunk and either side of it, several chunks, a large one."""
        grads = [randn(size) for size in (0, 1, 511, 512, 513, n, 1 << 20)]
        cpu = [K.sum_squares(g.numpy()) for g in grads]
        gpu = repro_cuda.sum_squares_each([g.cuda() for g in grads])
        return {"status": "ok" if cpu == gpu else "MISMATCH", "detail": f"{len(grads)} tensors, 0 to {1 << 20:,} elements"}

    cells.append(("sum_squares_each", sum_squares))

    def no_fma() -> dict[str, Any]:
        """The PTX of every repro-v1 kernel compiled by the cells above holds no fused multiply-add
        (repro-v2's matmul kernels, keyed ``(shape, True)``, hold them by design: not looked at here)."""
        kernels = [getattr(repro_cuda, name) for name in dir(repro_cuda) if name.endswith("_k")]
        kernels += [kernel for (_, fused), kernel in repro_cuda._bmm_kernels.items() if not fused]
        counted, with_fma = 0, []
        for kernel in kernels:
            for sig, ptx in kernel.inspect_asm().items():
                counted += 1
                if re.search(r"\bfma\.", ptx):
                    with_fma.append(f"{getattr(kernel, '__name__', kernel)}{sig}")
        if not counted:
            return {"status": "error", "error": "no compiled kernel to inspect"}
        return {"status": "ok" if not with_fma else "MISMATCH", "detail": f"{counted} compiled kernels, {len(with_fma)} with fma: {with_fma[:5]}"}

    cells.append(("ptx holds no fma", no_fma))

    def fma_rn() -> dict[str, Any]:
        """The PTX of repro-v2's matmul kernel, for every tile shape, holds ``fma.rn.f32``: each term
        one round-to-nearest fused multiply-add on the GPU, as on the CPU."""
        missing = [shape for shape in repro_cuda.BMM_SHAPES if (shape, True) not in repro_cuda._bmm_kernels]
        counted, found, without = 0, [], []
        for (shape, fused), kernel in repro_cuda._bmm_kernels.items():
            if not fused:
                continue
            for sig, ptx in kernel.inspect_asm().items():
                counted += 1
                n = ptx.count("fma.rn.f32")
                found.append(f"{shape}: {n}")
                if not n:
                    without.append(f"{shape}{sig}")
        if missing or not counted:
            return {"status": "error", "error": f"no compiled repro-v2 matmul kernel for tile shapes {missing or list(repro_cuda.BMM_SHAPES)}"}
        return {
            "status": "ok" if not without else "MISMATCH",
            "detail": f"{counted} compiled fused matmul kernels, fma.rn.f32 per kernel {', '.join(found)}" + (f"; none in {without}" if without else ""),
        }

    # repro-v2: its contractions (the rest of its kernels, and its optimizers, are repro-v1's, checked above)
    cells += matmuls(True) + contractions(True)
    cells.append(("repro-v2 matmul ptx holds fma.rn", fma_rn))
    return cells


# ------------------------------------------------------------------ 2. replay matrix

_LM = {"vocab_size": 128, "block_size": 64}
#: (model config, batch) per registry model and size.
MODELS: dict[str, dict[str, tuple[dict[str, Any], int]]] = {
    "tiny": {
        "mlp": ({"kind": "mlp", "input_dim": 2, "hidden": [16], "num_classes": 3}, 16),
        "cnn": ({"kind": "cnn", "in_channels": 1, "height": 16, "width": 16, "channels": [4], "hidden": 16, "num_classes": 4}, 16),
        "char-transformer": ({"kind": "char-transformer", "vocab_size": 128, "block_size": 8, "n_layer": 1, "n_head": 2, "n_embd": 16}, 16),
        "gpt": ({"kind": "gpt", "vocab_size": 128, "block_size": 8, "n_layer": 2, "n_head": 2, "n_embd": 16, "bias": False}, 16),
        "resnet": ({"kind": "resnet", "in_channels": 1, "height": 16, "width": 16, "channels": [4, 8], "blocks": 1, "num_classes": 4}, 16),
    },
    "10M": {
        "mlp": ({"kind": "mlp", "input_dim": 64, "hidden": [2048, 2048, 2048], "num_classes": 10}, 64),
        "cnn": ({"kind": "cnn", "in_channels": 1, "height": 16, "width": 16, "channels": [32, 64], "hidden": 8192, "num_classes": 4}, 16),
        "char-transformer": ({**_LM, "kind": "char-transformer", "n_layer": 12, "n_head": 8, "n_embd": 256}, 8),
        "gpt": ({**_LM, "kind": "gpt", "n_layer": 12, "n_head": 8, "n_embd": 256, "bias": True}, 8),
        "resnet": ({"kind": "resnet", "in_channels": 1, "height": 16, "width": 16, "channels": [128, 256, 384], "blocks": 2, "num_classes": 4}, 8),
    },
}
OPTIMIZERS = {
    "sgd": {"kind": "sgd", "lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.001},
    "adam": {"kind": "adam", "lr": 0.001, "weight_decay": 0.001},
}


#: The replay's max gradient norm: below a fresh model's, so that every step clips (the norm's
#: sums and the gradients' scaling both run on the GPU).
CLIP = 0.05


def _batches(cfg: dict[str, Any], batch: int, steps: int) -> list[tuple[Any, Any]]:
    import torch

    gen = torch.Generator().manual_seed(1234)
    out = []
    for _ in range(steps):
        if cfg["kind"] in ("gpt", "char-transformer"):
            tokens = torch.randint(0, cfg["vocab_size"], (batch, cfg["block_size"] + 1), generator=gen)
            out.append((tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()))
        elif cfg["kind"] == "mlp":
            out.append((torch.randn(batch, cfg["input_dim"], generator=gen), torch.randint(0, cfg["num_classes"], (batch,), generator=gen)))
        else:
            x = torch.randn(batch, cfg["in_channels"], cfg["height"], cfg["width"], generator=gen)
            out.append((x, torch.randint(0, cfg["num_classes"], (batch,), generator=gen)))
    return out


def _spec(cfg: dict[str, Any], optimizer: dict[str, Any], batch: int, steps: int, numerics: str = "repro-v1") -> Any:
    from proofs.spec import load_spec

    token = cfg["kind"] in ("gpt", "char-transformer")
    return load_spec(
        {
            "model": cfg,
            "dataset": {"cid": "QmDeviceCheck", "format": "safetensors", "size_bytes": 1, "targets": None if token else "y"},
            "optimizer": optimizer,
            "batch_size": batch,
            "steps": steps,
            "seed": 5,
            "checkpoint_interval": steps,
            "numerics": numerics,
            "grad_clip": CLIP,
        }
    )


def _step(model: Any, ops: Any, params: dict[str, Any], opt: Any, state: Any, x: Any, y: Any, index: int, lr: float, clip: float | None = None) -> Any:
    """``Trainer.train_step``'s sequence for one micro-batch: the loss, its gradients (made
    contiguous, as the trainer does), clipping by the global norm where ``clip`` is set, the
    optimizer's update; returns the loss."""
    for p in params.values():
        p.grad = None
    logits = model(x)
    loss = ops.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    loss.backward()
    for p in params.values():
        assert p.grad is not None
        p.grad = p.grad.contiguous()
    if clip is not None:
        from proofs.optim import clip_by_global_norm

        clip_by_global_norm({n: p.grad for n, p in params.items()}, clip, opt.repro)
    opt.update(params, state, index, lr)
    return loss


def _train(spec: Any, batches: list[tuple[Any, Any]], device: str) -> tuple[str, list[float], float]:
    """``Trainer.train_step``'s sequence (one micro-batch, the spec's clipping) on ``device``: the
    sha256 of every parameter's and optimizer slot's bytes after the steps, each step's loss, seconds
    per step."""
    import torch

    from proofs.models import build_model, ops_for
    from proofs.optim import build_optimizer, learning_rate

    model = build_model(spec, device)
    ops = ops_for(spec.numerics)
    params = dict(sorted(model.named_parameters()))
    opt = build_optimizer(spec.optimizer, spec.numerics)
    state = opt.init_state(params)
    losses = []
    started = time.perf_counter()
    for step, (x, y) in enumerate(batches):
        lr = learning_rate(spec.schedule, spec.optimizer.lr, spec.steps, step)
        loss = _step(model, ops, params, opt, state, x.to(device), y.to(device), step, lr, spec.grad_clip)
        losses.append(float(loss.detach().item()))
    if device != "cpu":
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - started) / max(1, len(batches))
    digest = hashlib.sha256()
    tensors = {**{f"param.{n}": p.detach() for n, p in params.items()}, **state}
    for name in sorted(tensors):
        digest.update(name.encode())
        digest.update(tensors[name].detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest(), losses, seconds


def _replay_cells(sizes: list[str], steps: int, numerics: str = "repro-v1", optimizers: tuple[str, ...] = tuple(OPTIMIZERS)) -> Cells:
    """One cell per size, registry model and optimizer: the CPU's and the GPU's training under
    ``numerics``. repro-v1's cells keep their names; the others are named after their numerics."""

    def cell(size: str, kind: str, opt: str) -> Callable[[], dict[str, Any]]:
        def run() -> dict[str, Any]:
            cfg, batch = MODELS[size][kind]
            spec = _spec(cfg, OPTIMIZERS[opt], batch, steps, numerics)
            batches = _batches(cfg, batch, steps)
            cpu = _train(spec, batches, "cpu")
            gpu = _train(spec, batches, "cuda")
            ok = cpu[0] == gpu[0] and cpu[1] == gpu[1]
            return {
                "status": "ok" if ok else "MISMATCH",
                "numerics": numerics,
                "params": spec.param_count(),
                "state_sha256_cpu": cpu[0],
                "state_sha256_gpu": gpu[0],
                "losses_cpu": cpu[1],
                "losses_gpu": gpu[1],
                "cpu_s_per_step": round(cpu[2], 4),
                "gpu_s_per_step": round(gpu[2], 4),
                "detail": f"{spec.param_count():,} params, {steps} steps: " + ("state and losses bit-identical" if ok else "DIFFER"),
            }

        return run

    prefix = "" if numerics == "repro-v1" else f"{numerics} "
    return [(f"{prefix}{size} {kind} {opt}", cell(size, kind, opt)) for size in sizes for kind in MODELS[size] for opt in optimizers]


# ------------------------------------------------------------------ 3. speed against cuBLAS

SPEED = {
    "gpt-10M": ({"kind": "gpt", "vocab_size": 8192, "block_size": 256, "n_layer": 12, "n_head": 8, "n_embd": 256, "bias": True}, 16),
    "gpt-124M": ({"kind": "gpt", "vocab_size": 50257, "block_size": 1024, "n_layer": 12, "n_head": 12, "n_embd": 768, "bias": True}, 4),
}


def _gpt_inputs(name: str) -> tuple[Any, Any, Any]:
    """The gpt config of ``SPEED[name]`` and one batch of tokens on the GPU; float32 matmuls in
    torch (TF32 off), as repro computes."""
    import torch

    from proofs.spec import GPTConfig

    cfg_raw, batch = SPEED[name]
    cfg = GPTConfig.model_validate(cfg_raw)
    torch.backends.cuda.matmul.allow_tf32 = False  # float32 matmuls on both sides
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    gen = torch.Generator().manual_seed(3)
    tokens = torch.randint(0, cfg.vocab_size, (batch, cfg.block_size + 1), generator=gen).cuda()
    return cfg, tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()


def _gpt_step(cfg: Any, x: Any, y: Any, numerics: Numerics) -> Callable[[int], None]:
    """One Adam step of a fresh gpt of ``cfg`` on the GPU under ``numerics`` (``torch``,
    ``repro-v1`` or ``repro-v2``), as a function of the step's index; the model, its optimizer
    state and its activations are freed with the function."""
    from proofs.models import REGISTRY, ops_for
    from proofs.optim import build_optimizer
    from proofs.spec import AdamConfig

    ops = ops_for(numerics)
    model = REGISTRY["gpt"](cfg, ops).to("cuda")
    params = dict(sorted(model.named_parameters()))
    opt = build_optimizer(AdamConfig(kind="adam", lr=1e-4), numerics)
    state = opt.init_state(params)

    def step(index: int) -> None:
        _step(model, ops, params, opt, state, x, y, index, 1e-4)

    return step


#: (label in the report, numerics): ``repro`` is repro-v1 (the name earlier reports used).
_SPEED_NUMERICS: tuple[tuple[str, Numerics], ...] = (("torch", "torch"), ("repro", "repro-v1"), ("repro_v2", "repro-v2"))


def _gpu_seconds(fn: Callable[[int], Any], calls: int) -> list[float]:
    """Seconds of each of ``calls`` calls ``fn(0)``, ``fn(1)``, ..., the GPU synchronized around each
    (the first compiles (numba) or warms up (cuBLAS))."""
    import torch

    times = []
    for index in range(calls):
        torch.cuda.synchronize()
        started = time.perf_counter()
        fn(index)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - started)
    return times


def _median_after_first(times: list[float]) -> float:
    """The median of ``times`` without the first (the warm-up)."""
    warm = sorted(times[1:])
    return warm[len(warm) // 2]


def _speed_cells(names: list[str], repeats: int) -> Cells:
    def cell(name: str) -> Callable[[], dict[str, Any]]:
        def run() -> dict[str, Any]:
            import torch

            cfg, x, y = _gpt_inputs(name)

            def timed(numerics: Numerics) -> list[float]:
                """Seconds of each of ``repeats`` + 1 Adam steps."""
                return _gpu_seconds(_gpt_step(cfg, x, y, numerics), repeats + 1)

            out: dict[str, Any] = {"params": cfg.param_count(), "batch": f"{x.shape[0]} x {cfg.block_size} tokens"}
            for label, numerics in _SPEED_NUMERICS:
                try:
                    times = timed(numerics)
                except Exception as exc:
                    if label != "repro_v2":
                        raise
                    out["repro_v2_error"] = f"{type(exc).__name__}: {exc}"  # repro-v1's and torch's figures stand
                    continue
                finally:
                    torch.cuda.empty_cache()
                out[f"{label}_s_per_step"] = round(_median_after_first(times), 4)
                out[f"{label}_first_step_s"] = round(times[0], 2)
            out["ratio_repro_over_torch"] = round(out["repro_s_per_step"] / out["torch_s_per_step"], 2)
            out["detail"] = f"torch {out['torch_s_per_step']} s; repro-v1 {out['repro_s_per_step']} s: {out['ratio_repro_over_torch']}x"
            if "repro_v2_s_per_step" in out:
                out["ratio_repro_v2_over_torch"] = round(out["repro_v2_s_per_step"] / out["torch_s_per_step"], 2)
                out["detail"] += f"; repro-v2 {out['repro_v2_s_per_step']} s: {out['ratio_repro_v2_over_torch']}x"
            else:
                out["detail"] += f"; repro-v2 failed: {out['repro_v2_error']}"
            return out

        return run

    return [(name, cell(name)) for name in names]


def _clip_cells(names: list[str], repeats: int) -> Cells:
    """Clipping by the global norm over gradients of the gpt ``name``'s parameter shapes (random,
    so that each call clips): repro's (:func:`proofs.optim.clip_by_global_norm`, one sequential float64
    sum per tensor, all tensors in one launch) against torch's ``clip_grad_norm_``."""

    def cell(name: str) -> Callable[[], dict[str, Any]]:
        def run() -> dict[str, Any]:
            import torch

            from proofs.models import REGISTRY, ops_for
            from proofs.optim import clip_by_global_norm

            def measured() -> tuple[float, float, list[int]]:
                """repro's and torch's seconds, and the gradients' sizes (the model freed on return)."""
                cfg, _, _ = _gpt_inputs(name)
                params = list(REGISTRY["gpt"](cfg, ops_for("torch")).to("cuda").parameters())
                gen = torch.Generator(device="cuda").manual_seed(4)
                grads = {}
                for i, p in enumerate(params):
                    p.grad = grads[f"{i:04d}"] = torch.randn(p.shape, generator=gen, device="cuda")
                fixed = _gpu_seconds(lambda _: clip_by_global_norm(grads, 1.0, True), repeats + 1)
                native = _gpu_seconds(lambda _: torch.nn.utils.clip_grad_norm_(params, 1.0), repeats + 1)
                return _median_after_first(fixed), _median_after_first(native), [g.numel() for g in grads.values()]

            try:
                fixed, native, sizes = measured()
            finally:
                torch.cuda.empty_cache()
            largest = max(sizes)
            return {
                "tensors": len(sizes),
                "largest_tensor": largest,
                "repro_clip_s": round(fixed, 5),
                "torch_clip_s": round(native, 5),
                "detail": f"{len(sizes)} tensors, the largest {largest:,} elements: repro {fixed * 1e3:.2f} ms, torch {native * 1e3:.2f} ms",
            }

        return run

    return [(f"{name} clip", cell(name)) for name in names]


# ------------------------------------------------------------------ 4. where a step's GPU time goes


def kernel_name(raw: str) -> str:
    """A readable name for a profiled GPU kernel. numba's kernels come mangled
    (``_ZN6cudapy6proofs10repro_cuda9_make_bmm12_3clocals_3e6kernelB2v1...``) or, from torch's
    profiler, demangled (``proofs::repro_cuda::_make_bmm::_3clocals_3e::kernel[abi:v26][abi:cw5...]``):
    both become ``_make_bmm.<locals>.kernel`` (the module path and numba's ABI tags dropped). torch's
    and cuBLAS's names are cut at their template or argument lists."""
    if raw.startswith("_ZN"):
        parts, i = [], 3
        while i < len(raw) and raw[i].isdigit():
            j = i
            while j < len(raw) and raw[j].isdigit():
                j += 1
            size = int(raw[i:j])
            parts.append(raw[j : j + size])
            i = j + size
        if len(parts) > 3:  # cudapy, the package, the module, then the function's path
            parts[-1] = re.sub(r"B\d+v\d+.*$", "", parts[-1])  # numba's ABI tag: B2v1B96cw5...
            return ".".join(parts[3:]).replace("_3clocals_3e", "<locals>")
    if raw.startswith("proofs::"):
        path = re.sub(r"\[abi:[^\]]*(\]|$)", "", raw).split("(", 1)[0].split("::")  # the profiler may cut a tag
        return ".".join(path[2:]).replace("_3clocals_3e", "<locals>")
    return raw.split("<", 1)[0].split("(", 1)[0][:80]


def _profile_cells(name: str, top: int) -> Cells:
    """Per numerics, one profiled Adam step of the gpt ``name`` after a warm-up step: the step's
    wall time, the GPU's busy time (the sum of its kernels' times), the number of kernel launches,
    and the ``top`` kernels by GPU time. A step whose kernels' sum is far below its wall time is
    bound by the launches (Python, numba's dispatch), not by the kernels."""

    def cell(numerics: Numerics) -> Callable[[], dict[str, Any]]:
        def run() -> dict[str, Any]:
            import torch
            from torch.autograd import DeviceType
            from torch.profiler import ProfilerActivity, profile

            cfg, x, y = _gpt_inputs(name)
            step = _gpt_step(cfg, x, y, numerics)
            try:
                step(0)  # compiles (numba) or warms up (cuBLAS)
                torch.cuda.synchronize()
                with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                    started = time.perf_counter()
                    step(1)
                    torch.cuda.synchronize()
                    wall = time.perf_counter() - started
            finally:
                del step
                torch.cuda.empty_cache()
            kernels: dict[str, list[float]] = {}
            for event in prof.events():  # kernels, copies and memsets: the GPU's own events
                if event.device_type == DeviceType.CUDA:
                    entry = kernels.setdefault(kernel_name(event.name), [0.0, 0])
                    entry[0] += event.time_range.elapsed_us() / 1e6
                    entry[1] += 1
            busy = sum(t for t, _ in kernels.values())
            launches = sum(int(c) for _, c in kernels.values())
            ranked = sorted(kernels.items(), key=lambda kv: -kv[1][0])[:top]
            return {
                "numerics": numerics,
                "wall_s": round(wall, 4),
                "gpu_busy_s": round(busy, 4),
                "launches": launches,
                "top_kernels": [{"kernel": k, "s": round(t, 5), "calls": int(c)} for k, (t, c) in ranked],
                "detail": f"{name} step {wall:.4f} s, GPU busy {busy:.4f} s ({busy / wall:.0%}), {launches} kernels; top: "
                + ", ".join(f"{k} {t * 1e3:.1f} ms/{int(c)}" for k, (t, c) in ranked[:4]),
            }

        return run

    return [(f"{name} {numerics}", cell(numerics)) for _, numerics in _SPEED_NUMERICS]


# ------------------------------------------------------------------ the run


def _environment(missing: str | None) -> dict[str, Any]:
    env: dict[str, Any] = {"python": sys.version.split()[0], "platform": platform.platform(), "engine_imports": missing or "all"}
    for mod in ("torch", "numpy", "numba", "numba_cuda", "pydantic", "Crypto", "safetensors"):
        try:
            env[mod] = getattr(importlib.import_module(mod), "__version__", "present")
        except Exception as exc:
            env[mod] = f"missing ({type(exc).__name__})"
    try:
        import torch

        env["cuda_available"] = torch.cuda.is_available()
        if torch.cuda.is_available():
            env["gpu"] = torch.cuda.get_device_name(0)
            env["torch_cuda"] = torch.version.cuda
        from proofs import repro_cuda

        env["numba_cuda"] = repro_cuda.unavailable() or "usable"
    except Exception as exc:
        env["numba_cuda"] = f"{type(exc).__name__}: {exc}"
    return env


def _no_gpu(env: dict[str, Any]) -> str | None:
    """Why no cell can run here (None: a CUDA GPU that torch and numba both use)."""
    why = []
    if env.get("cuda_available") is not True:
        why.append(f"torch sees no CUDA GPU (torch {env.get('torch')})")
    if env.get("numba_cuda") != "usable":
        why.append(f"numba's CUDA target: {env.get('numba_cuda')}")
    return "; ".join(why) or None


def _table(env: dict[str, Any], results: list[dict[str, Any]], note: str | None = None) -> str:
    lines = ["repro-v1 and repro-v2 device check", ""]
    lines += [f"{k}: {v}" for k, v in env.items()]
    if note is not None:
        return "\n".join([*lines, "", note]) + "\n"
    for section in ("kernels", "replay", "speed", "profile"):
        rows = [r for r in results if r["section"] == section]
        if not rows:
            continue
        lines += ["", f"== {section} ==", f"{'cell':<36} {'status':<9} {'s':>7}  detail"]
        for r in rows:
            lines.append(f"{r['name']:<36} {r['status']:<9} {r.get('seconds', 0):>7}  {r.get('detail', '')} {r.get('error', '')}".rstrip())
    checked = [r for r in results if r["section"] in _CHECKED]
    bad = [r["name"] for r in checked if r["status"] not in ("ok", "skipped")]
    skipped = sum(r["status"] == "skipped" for r in checked)
    ok = sum(r["status"] == "ok" for r in checked)
    v2 = [r for r in checked if r["name"].startswith("repro-v2 ")]
    v2_ok = sum(r["status"] == "ok" for r in v2)
    by_numerics = f" (repro-v1 {ok - v2_ok} of {len(checked) - len(v2)}, repro-v2 {v2_ok} of {len(v2)})"
    lines += [
        "",
        f"bit-identity cells: {ok} of {len(checked)} ok{by_numerics}"
        + (f"; not ok: {', '.join(bad)}" if bad else "")
        + (f"; {skipped} not run (--budget-s spent)" if skipped else ""),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog=(
            "Checks repro-v1 and repro-v2 (repro-v2's cells after repro-v1's in each section; exit 2 where no CUDA GPU is found)."
            "\n\nexamples:\n  python3 -m bench.device_check --out device-check\n  python3 -m bench.device_check --out dc --quick"
            "\n  python3 -m bench.device_check --out dc --only speed --speed gpt-124M"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--out", type=Path, required=True, help="directory for device_check.json and device_check.txt")
    parser.add_argument(
        "--quick", action="store_true", help="smaller kernel shapes, 2 replay steps, gpt-10M speed only (about 2 minutes); repro-v1 and repro-v2 both"
    )
    parser.add_argument("--steps", type=int, default=None, help="training steps per replay cell (default 3; --quick 2)")
    parser.add_argument(
        "--sizes",
        nargs="+",
        choices=sorted(MODELS),
        default=None,
        help="replay model sizes (default: tiny 10M); repro-v1 with SGD and Adam, repro-v2 with Adam",
    )
    parser.add_argument(
        "--speed", nargs="+", choices=sorted(SPEED), default=None, help="speed models (default: both; --quick gpt-10M); torch, repro-v1 and repro-v2 each"
    )
    parser.add_argument("--repeats", type=int, default=3, help="timed steps per speed cell (median), after one warm-up step")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=["kernels", "replay", "speed", "profile"],
        default=["kernels", "replay", "speed", "profile"],
        help="sections to run (default: all four)",
    )
    parser.add_argument(
        "--profile", nargs="+", choices=sorted(SPEED), default=None, help="gpt models whose step is profiled per kernel (default: both; --quick gpt-10M)"
    )
    parser.add_argument("--top", type=int, default=12, help="kernels listed per profiled step, by GPU time")
    parser.add_argument(
        "--budget-s",
        type=float,
        default=330.0,
        help="cells not started within this many seconds are recorded as skipped (repro-v2's come last in each section)",
    )
    args = parser.parse_args(argv)
    deadline = time.monotonic() + args.budget_s
    args.out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("NUMBA_NUM_THREADS", str(os.cpu_count() or 1))
    _numpy_aliases()
    missing = _import_engine()
    env = _environment(missing)
    print(json.dumps(env, indent=1), flush=True)
    absent = _no_gpu(env)
    if absent is not None:  # every cell compares the GPU with the CPU: none can run
        note = f"no usable CUDA GPU here: {absent}. No cell ran (exit 2)."
        report: dict[str, Any] = {
            "environment": env,
            "results": [],
            "no_gpu": absent,
            "argv": sys.argv[1:],
            "finished_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()),
        }
        (args.out / "device_check.json").write_text(json.dumps(report, indent=1, default=str))
        text = _table(env, [], note)
        (args.out / "device_check.txt").write_text(text)
        print(text)
        return 2
    results: list[dict[str, Any]] = []
    try:
        from proofs import repro

        repro.set_threads(os.cpu_count() or 1)  # the CPU side's speed only: threads change no bits
    except Exception as exc:
        results.append({"section": "kernels", "name": "import proofs.repro", "status": "error", "error": f"{type(exc).__name__}: {exc}"})
    sizes, steps = args.sizes or ["tiny", "10M"], args.steps or (2 if args.quick else 3)
    tiny, large = [s for s in sizes if s == "tiny"], [s for s in sizes if s != "tiny"]
    gpts = ["gpt-10M"] if args.quick else list(SPEED)  # the speed and profile sections' default models
    # the tiny replay before the speed cells, the 10M replay (the slowest on the CPU side) after them;
    # in each, repro-v2's cells (Adam only: its optimizers are repro-v1's) after repro-v1's
    sections: list[tuple[str, Callable[[], Cells]]] = [
        ("kernels", lambda: _kernel_cells(args.quick)),
        ("replay", lambda: _replay_cells(tiny, steps)),
        ("replay", lambda: _replay_cells(tiny, steps, "repro-v2", ("adam",))),
        ("speed", lambda: _speed_cells(args.speed or gpts, args.repeats) + _clip_cells(args.speed or gpts, args.repeats)),
        ("profile", lambda: [c for m in args.profile or gpts for c in _profile_cells(m, args.top)]),
        ("replay", lambda: _replay_cells(large, steps)),
        ("replay", lambda: _replay_cells(large, steps, "repro-v2", ("adam",))),
    ]
    for section, make in sections:
        if section not in args.only:
            continue
        try:
            cells = make()
        except Exception as exc:
            results.append(
                {
                    "section": section,
                    "name": "(set-up)",
                    "status": "error",
                    "error": f"{type(exc).__name__}: {exc}",
                    "trace": traceback.format_exc(limit=6)[-2000:],
                }
            )
            print(f"[{section}] set-up failed: {type(exc).__name__}: {exc}", flush=True)
            continue
        for name, fn in cells:
            _cell(results, section, name, fn, deadline)
    report = {"environment": env, "results": results, "argv": sys.argv[1:], "finished_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())}
    (args.out / "device_check.json").write_text(json.dumps(report, indent=1, default=str))
    text = _table(env, results)
    (args.out / "device_check.txt").write_text(text)
    print(text)
    checked = [r for r in results if r["section"] in _CHECKED]
    return 0 if checked and all(r["status"] == "ok" for r in checked) else 1


if __name__ == "__main__":
    sys.exit(main())
