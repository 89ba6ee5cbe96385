"""Child process of tests/proofs/test_repro.py: compile the repro kernels afresh, run every
op forward and backward on one thread (the kernels' serial builds) and on two (their parallel
builds), and print the names of the compiled repro-v1 kernels whose native code holds a fused
multiply-add instruction (``fused``: empty is the pass); and the same ops under repro-v2 on one
thread (its serial builds: compiling its parallel ones too took the test from 2 to 5 minutes),
with the names of its compiled kernels whose code holds none (``unfused``: empty is the pass where
the CPU has FMA).

    NUMBA_CACHE_DIR=EMPTY_DIR python tests/proofs/fma_child.py

Numba shows no assembly for code loaded from its cache, so the test points the cache at an
empty folder: every kernel is compiled here, for this machine's instruction set.
"""

from __future__ import annotations

import json
import math
import re

import numba
import torch

from proofs import repro
from proofs import repro_kernels as K

FMA = re.compile(r"\bv?f(n)?m(add|sub)\d")


def run_ops(fused: bool) -> None:
    gen = torch.Generator().manual_seed(0)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen).requires_grad_()

    outs = [
        repro.linear(randn(5, 70), randn(67, 70), randn(67), fused=fused),
        repro.linear(randn(80, 70), randn(67, 70), randn(67), fused=fused),
        repro.conv2d(randn(2, 3, 8, 8), randn(5, 3, 3, 3), randn(5), 1, fused=fused),
        repro.max_pool2(randn(2, 3, 6, 8)),
        repro.layer_norm(randn(3, 24), randn(24), randn(24)),
        repro.gelu(randn(100)),
        repro.causal_attention(randn(2, 3, 7, 4), randn(2, 3, 7, 4), randn(2, 3, 7, 4), fused=fused),
        repro.embedding(torch.tensor([3, 1, 3]), randn(4, 6)),
    ]
    loss = repro.cross_entropy(randn(9, 7), torch.tensor([0, 6, 3, 3, 1, 2, 5, 4, 0]))
    (sum(o.sum() for o in outs) + loss).backward()


def main() -> None:
    K.PARALLEL_MIN = math.inf  # no call's work reaches it: the serial builds, of both numerics
    repro.set_threads(1)
    run_ops(False)
    run_ops(True)
    K.PARALLEL_MIN = 0  # every call's does: repro-v1's parallel builds (repro-v2's are the same source, and its serial ones show the intrinsic)
    repro.set_threads(2)
    run_ops(False)
    v1, v2 = compiled(vars(K)), compiled(K.FUSED.bmm.__globals__)
    v2 = {name: fn for name, fn in v2.items() if v1.get(name) is not fn}  # repro-v2's own builds (_fma)
    print(
        json.dumps(
            {
                "compiled": len(v1),
                "fused": [name for name, fn in v1.items() if holds_fma(fn)],
                "compiled_v2": sorted(v2),
                "unfused": [name for name, fn in v2.items() if not holds_fma(fn)],
            }
        )
    )


def compiled(names: dict[str, object]) -> dict[str, numba.core.registry.CPUDispatcher]:
    """The compiled numba dispatchers among ``names`` (a parallel kernel's two builds are behind its wrapper)."""
    kernels = dict(names)
    kernels.update({f"{name}.{build}": getattr(fn, build) for name, fn in names.items() for build in ("kernel", "serial") if hasattr(fn, build)})
    return {name: fn for name, fn in kernels.items() if isinstance(fn, numba.core.registry.CPUDispatcher) and fn.signatures}


def holds_fma(fn: numba.core.registry.CPUDispatcher) -> bool:
    return any(FMA.search(asm) for asm in fn.inspect_asm().values())


if __name__ == "__main__":
    main()
