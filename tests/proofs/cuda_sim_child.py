"""Run under ``NUMBA_ENABLE_CUDASIM=1`` (set before numba loads): the CUDA kernels of
proofs.repro_cuda in numba's simulator against the CPU kernels, bit for bit.

``kernels``: every kernel forward and backward on tiny odd shapes (every matmul tile shape), the
contractions under both numerics (repro-v2: each multiply-add fused);
``train KIND NUMERICS``: two training steps of a tiny registry model with SGD and with Adam, once on
the CPU kernels and once through the CUDA ones (``proofs.repro`` dispatches every operation there),
comparing state hashes. Prints one JSON line: {"mismatches": [...], "checked": n}.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numba
import numpy as np
import torch

sys.setswitchinterval(1e-5)  # the simulator's block manager polls its threads: hand the GIL over often

from numba.cuda.simulator import kernelapi  # noqa: E402
from numba.np import numpy_support  # noqa: E402

_numba_shared_array = kernelapi.FakeCUDAShared.array


def _shared_array(self: Any, shape: Any, dtype: Any) -> np.ndarray:
    """numba's simulated ``cuda.shared.array`` (one array per launch for each line that asks; blocks
    run one after another), made atomic. numba's own looks the line up, then allocates and stores on
    a miss: two threads that both missed held two arrays, and what one staged the others never read
    (the matmul's tiles of a and b), so bits differed in some runs and not others, the more often the
    busier the machine (issue 27; on a GPU the kernels were bit-identical). The same lookup, by the
    caller's file and line, as one ``dict.setdefault`` (a single step under the GIL)."""
    if shape == 0:  # dynamic shared memory: one preallocated buffer, no race
        return _numba_shared_array(self, shape, dtype)
    if isinstance(dtype, numba.types.Type):
        dtype = numpy_support.as_dtype(dtype)
    caller = sys._getframe(1)
    return self._allocations.setdefault((caller.f_code.co_filename, caller.f_lineno), np.empty(shape, dtype))


kernelapi.FakeCUDAShared.array = _shared_array

from proofs import repro, repro_cuda  # noqa: E402
from proofs import repro_kernels as K  # noqa: E402
from proofs.data import load_dataset  # noqa: E402
from proofs.datasets import shapes, spirals, text_tokens  # noqa: E402
from proofs.train import Trainer  # noqa: E402

sys.path.insert(0, str(Path(__file__).parent))
from conftest import fma32, make_spec  # type: ignore[import-not-found]  # noqa: E402

assert repro_cuda.SIM, "run with NUMBA_ENABLE_CUDASIM=1"
rng = np.random.default_rng(7)
mismatches: list[str] = []
checked = 0


def same(name: str, a: Any, b: Any) -> None:
    global checked
    checked += 1
    a = np.ascontiguousarray(a.detach().numpy() if isinstance(a, torch.Tensor) else np.asarray(a))
    b = np.ascontiguousarray(b.detach().numpy() if isinstance(b, torch.Tensor) else np.asarray(b))
    if a.dtype != b.dtype or a.shape != b.shape or a.tobytes() != b.tobytes():
        mismatches.append(name)


def randn(*shape: int, spread: float = 1.0) -> torch.Tensor:
    """Values over many binades (so that any change of rounding order shows)."""
    x = rng.standard_normal(shape) * np.exp(rng.standard_normal(shape) * spread)
    return torch.from_numpy(x.astype(np.float32))


def both(cpu_fn: Any, cuda_fn: Any, inputs: list[torch.Tensor], name: str) -> None:
    """Forward and backward (a random output gradient) of the CPU and the CUDA autograd function."""
    outs = []
    for fn in (cpu_fn, cuda_fn):
        leaves = [t.clone().requires_grad_(t.is_floating_point()) for t in inputs]
        y = fn(*leaves)
        g = torch.from_numpy(np.random.default_rng(3).standard_normal(y.shape).astype(np.float32))
        y.backward(g)
        outs.append((y, [t.grad for t in leaves]))
    same(name, outs[0][0], outs[1][0])
    for i, (a, b) in enumerate(zip(outs[0][1], outs[1][1])):
        if a is not None or b is not None:
            same(f"{name} grad {i}", a, b)


def kernels() -> None:
    C = repro_cuda
    a, b = randn(2, 7, 13), randn(2, 13, 9)
    at = randn(2, 13, 7).transpose(1, 2)  # a transposed view, read in place on the GPU
    bt = randn(2, 9, 13).transpose(1, 2)
    for fused, cpu in ((False, K), (True, K.FUSED)):
        ref = np.empty((2, 7, 9), np.float32)
        cpu.bmm(a.numpy(), b.numpy(), ref)
        ref_t = np.empty((2, 7, 9), np.float32)
        cpu.bmm(np.ascontiguousarray(at.numpy()), b.numpy(), ref_t)
        ref_bt = np.empty((2, 7, 9), np.float32)
        cpu.bmm(a.numpy(), np.ascontiguousarray(bt.numpy()), ref_bt)
        for shape in C.BMM_SHAPES:
            same(f"bmm {shape} fused={fused}", C.bmm(a, b, shape, fused), ref)
            same(f"bmm {shape} strided a fused={fused}", C.bmm(at, b, shape, fused), ref_t)
            same(f"bmm {shape} strided b fused={fused}", C.bmm(a, bt, shape, fused), ref_bt)
    # the simulator's fused multiply-add (numba's own rounds twice): exact on ties, cancellation,
    # subnormals, overflow and infinities
    x, y, z = randn(300, spread=3.0).numpy(), randn(300, spread=3.0).numpy(), randn(300, spread=3.0).numpy()
    z[:100] = -(x[:100].astype(np.float64) * y[:100]).astype(np.float32)  # cancellation: the product's rounding error is the result
    edge = np.array([1 + 2**-23, 1 - 2**-24, 2**-126, 2**-149, 3e38, np.inf, -np.inf, 0.0, -0.0, 1e-30], np.float32)
    x, y, z = (np.concatenate([v, np.roll(edge, r)]) for v, r in ((x, 0), (y, 3), (z, 7)))
    same("ffma", np.array([C.ffma(p, q, r) for p, q, r in zip(x, y, z)], np.float32), fma32(x, y, z))
    x64 = np.concatenate([rng.standard_normal(40) * 30, [0.0, -0.0, 1e-310, 700.0, -700.0, 1e300]])
    same("exp64", [C.exp64(v) for v in x64], [K.exp64(v) for v in x64])
    same("log64", [C.log64(abs(v)) for v in x64], [K.log64(abs(v)) for v in x64])
    same("tanh64", [C.tanh64(v / 10) for v in x64], [K.tanh64(v / 10) for v in x64])

    for fused in (False, True):
        both(
            lambda x, w, b: repro._Linear.apply(x, w, b, fused),
            lambda x, w, b: C.Linear.apply(x, w, b, fused),
            [randn(5, 6), randn(3, 6), randn(3)],
            f"linear {fused}",
        )
        both(
            lambda x, w, b: repro._Linear.apply(x, w, b, fused),
            lambda x, w, b: C.Linear.apply(x, w, b, fused),
            [randn(2, 9, 4), randn(5, 4), randn(5)],
            f"linear many rows {fused}",
        )
        both(
            lambda x, w, b: repro._Conv2d.apply(x, w, b, 1, fused),
            lambda x, w, b: C.Conv2d.apply(x, w, b, 1, fused),
            [randn(2, 2, 5, 6), randn(3, 2, 3, 3), randn(3)],
            f"conv2d 3x3 {fused}",
        )
        both(
            lambda x, w, b: repro._Conv2d.apply(x, w, b, 2, fused),
            lambda x, w, b: C.Conv2d.apply(x, w, b, 2, fused),
            [randn(1, 1, 5, 5), randn(2, 1, 5, 5), randn(2)],
            f"conv2d 5x5 {fused}",
        )
        both(
            lambda q, k, v: repro._CausalAttention.apply(q, k, v, fused),
            lambda q, k, v: C.CausalAttention.apply(q, k, v, fused),
            [randn(1, 2, 11, 3), randn(1, 2, 11, 3), randn(1, 2, 11, 3)],  # rows of up to 11: two chunks of a row's block
            f"causal_attention {fused}",
        )
    both(repro._MaxPool2.apply, C.MaxPool2.apply, [randn(2, 2, 4, 6)], "max_pool2")
    both(repro._MeanPixels.apply, C.MeanPixels.apply, [randn(2, 3, 3, 5)], "mean_pixels")
    for bias in (True, False):
        both(
            lambda x, w, b: repro._LayerNorm.apply(x, w, b if bias else None, 1e-5),
            lambda x, w, b: C.LayerNorm.apply(x, w, b if bias else None, 1e-5),
            [randn(3, 7, 19), randn(19), randn(19)],  # 21 rows (column sums: whole groups and a rest), 19 columns (3 chunks)
            f"layer_norm bias={bias}",
        )
    both(repro._Gelu.apply, C.Gelu.apply, [randn(3, 11, spread=1.5)], "gelu")
    idx = torch.tensor([[3, 1, 3], [0, 3, 1]])
    both(lambda w: repro._Embedding.apply(idx, w), lambda w: C.Embedding.apply(idx, w), [randn(5, 4)], "embedding")
    targets = torch.tensor([2, 0, 16, 6, 1])
    both(lambda z: repro._CrossEntropy.apply(z, targets), lambda z: C.CrossEntropy.apply(z, targets), [randn(5, 17, spread=1.5)], "cross_entropy")
    # equal maxima (+0 and -0) met by different threads of a row's block, and rows of several chunks: the CPU's bits
    zeros = torch.tensor([[-0.0, -1.0, 0.0, -2.0, 0.0, -0.0, -3.0, -1.0, 0.0], [0.0, -1.0, -0.0, -2.0, -0.0, 0.0, -3.0, -1.0, -0.0]])
    both(
        lambda z: repro._CrossEntropy.apply(z, torch.tensor([1, 2])),
        lambda z: C.CrossEntropy.apply(z, torch.tensor([1, 2])),
        [zeros],
        "cross_entropy signed zeros",
    )

    f = np.float32
    for name, args in [
        ("sgd_update", lambda: (randn(37), randn(37), randn(37), f(0.05), f(0.9), f(0.1), f(0.001), True)),
        ("sgd_update", lambda: (randn(37), randn(37), torch.empty(0), f(0.05), f(0.0), f(0.0), f(0.0), False)),
        ("adam_update", lambda: (randn(37), randn(37), randn(37), randn(37).abs(), f(0.9), f(0.999), f(1e-8), f(0.01), f(0.003), f(0.3), f(1.0))),
        ("adam_update", lambda: (randn(37), randn(37), randn(37), randn(37).abs(), f(0.9), f(0.999), f(1e-8), f(0.0), f(0.003), f(0.3), f(0.999))),
        ("add_into", lambda: (randn(37), randn(37))),
        ("divide", lambda: (randn(37), f(3.0))),
        ("scale", lambda: (randn(37), f(0.37))),
    ]:
        cpu_args, gpu_args = args(), None
        gpu_args = tuple(t.clone() if isinstance(t, torch.Tensor) else t for t in cpu_args)
        getattr(K, name)(*(t.numpy() if isinstance(t, torch.Tensor) else t for t in cpu_args))
        getattr(C, name)(*(C.array(t) if isinstance(t, torch.Tensor) else t for t in gpu_args))
        for i, (p, q) in enumerate(zip(cpu_args, gpu_args)):
            if isinstance(p, torch.Tensor):
                same(f"{name} arg {i}", p, q)
    # the updates over every parameter in one launch (repro_cuda.each), against a call per tensor on
    # the CPU: tensors of several shapes, an empty one among them
    for name, width, scalars in [
        ("adam_update", 4, (f(0.9), f(0.999), f(1e-8), f(0.0), f(0.003), f(0.3), f(0.999))),
        ("sgd_update", 3, (f(0.05), f(0.9), f(0.1), f(0.001), True)),
        ("add_into", 2, ()),
        ("divide", 1, (f(3.0),)),
        ("scale", 1, (f(0.37),)),
    ]:
        cpu_groups = [tuple(randn(*shape).abs() if q == 3 else randn(*shape) for q in range(width)) for shape in [(3, 5), (0,), (7,), (2, 2, 2)]]
        gpu_groups = [tuple(t.clone() for t in group) for group in cpu_groups]
        for group in cpu_groups:
            getattr(K, name)(*(t.reshape(-1).numpy() for t in group), *scalars)
        C.each(getattr(C, name), gpu_groups, *scalars)
        for index, (cpu_group, gpu_group) in enumerate(zip(cpu_groups, gpu_groups, strict=True)):
            for arg, (cpu_t, gpu_t) in enumerate(zip(cpu_group, gpu_group, strict=True)):
                same(f"each {name} group {index} arg {arg}", cpu_t, gpu_t)
    # clipping's sums, one launch for tensors of every length against the chunk (8 here): several
    # chunks and a partial one, exactly one, under one, empty, a matrix
    grads = [randn(41, spread=4.0), randn(0), randn(8, spread=4.0), randn(1), randn(3, 5, spread=4.0)]
    same("sum_squares_each", C.sum_squares_each(grads), [K.sum_squares(g.reshape(-1).numpy()) for g in grads])


#: Tiny models: the simulator runs each CUDA thread as a Python thread.
MODELS = {
    "mlp": {"kind": "mlp", "input_dim": 2, "hidden": [8], "num_classes": 3},
    "cnn": {"kind": "cnn", "in_channels": 1, "height": 10, "width": 10, "channels": [2], "hidden": 8, "num_classes": 4},
    "char-transformer": {"kind": "char-transformer", "vocab_size": 128, "block_size": 4, "n_layer": 1, "n_head": 2, "n_embd": 8},
    "gpt": {"kind": "gpt", "vocab_size": 128, "block_size": 4, "n_layer": 1, "n_head": 2, "n_embd": 8, "bias": False},
    "resnet": {"kind": "resnet", "in_channels": 1, "height": 10, "width": 10, "channels": [2, 2], "blocks": 1, "num_classes": 4},
}
OPTIMIZERS = {
    "sgd": {"kind": "sgd", "lr": 0.05, "momentum": 0.9, "nesterov": True, "weight_decay": 0.001},
    "adam": {"kind": "adam", "lr": 0.01, "weight_decay": 0.001},
}


def train(kind: str, numerics: str) -> None:
    data = {"mlp": spirals(1, per_class=8), "cnn": shapes(1, count=8, size=10), "resnet": shapes(1, count=8, size=10)}.get(kind) or text_tokens()
    cpu_path = repro._on_cuda
    # repro-v2's optimizers are repro-v1's (its contractions differ): Adam alone under it
    for opt, cfg in OPTIMIZERS.items() if numerics == "repro-v1" else [("adam", OPTIMIZERS["adam"])]:
        batch = 1 if kind == "resnet" else 2  # the resnet's 7 convolutions are the slowest to simulate
        # a max norm below the models' gradient norms: every step's sums and scaling run the kernels
        spec = make_spec(kind, data, model=MODELS[kind], optimizer=cfg, batch_size=batch, steps=4, checkpoint_interval=2, numerics=numerics, grad_clip=0.05)
        dataset = load_dataset(spec, data)
        hashes = []
        for on_cuda in (cpu_path, lambda t: True):  # every repro operation and update through the CUDA kernels
            repro._on_cuda = on_cuda
            trainer = Trainer(spec, dataset)
            losses = trainer.run(2)
            hashes.append((trainer.state_hash(), losses))
        repro._on_cuda = cpu_path
        same(f"{kind}-{opt} state hash after 2 steps", np.frombuffer(hashes[0][0], np.uint8), np.frombuffer(hashes[1][0], np.uint8))
        same(f"{kind}-{opt} losses", np.array(hashes[0][1], np.float32), np.array(hashes[1][1], np.float32))


if __name__ == "__main__":
    if sys.argv[1] == "kernels":
        kernels()
    else:
        train(sys.argv[2], sys.argv[3])
    print(json.dumps({"mismatches": mismatches, "checked": checked}))
