"""Child process of tests/proofs/test_repro.py: compile the repro-v1 kernels afresh, run every
op forward and backward on one thread (the kernels' serial builds) and on two (their parallel
builds), and print the names of the compiled kernels whose native code
holds a fused multiply-add instruction (one JSON list; empty is the pass).

    NUMBA_CACHE_DIR=EMPTY_DIR python tests/proofs/fma_child.py

Numba shows no assembly for code loaded from its cache, so the test points the cache at an
empty folder: every kernel is compiled here, for this machine's instruction set.
"""

from __future__ import annotations

import json
import re

import numba
import torch

from proofs import repro
from proofs import repro_kernels as K

FMA = re.compile(r"\bv?f(n)?m(add|sub)\d")


def run_ops() -> None:
    gen = torch.Generator().manual_seed(0)

    def randn(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=gen).requires_grad_()

    outs = [
        repro.linear(randn(5, 70), randn(67, 70), randn(67)),
        repro.conv2d(randn(2, 3, 8, 8), randn(5, 3, 3, 3), randn(5), 1),
        repro.max_pool2(randn(2, 3, 6, 8)),
        repro.layer_norm(randn(3, 24), randn(24), randn(24)),
        repro.gelu(randn(100)),
        repro.causal_attention(randn(2, 3, 7, 4), randn(2, 3, 7, 4), randn(2, 3, 7, 4)),
        repro.embedding(torch.tensor([3, 1, 3]), randn(4, 6)),
    ]
    loss = repro.cross_entropy(randn(9, 7), torch.tensor([0, 6, 3, 3, 1, 2, 5, 4, 0]))
    (sum(o.sum() for o in outs) + loss).backward()


def main() -> None:
    repro.set_threads(1)
    run_ops()  # the serial builds
    repro.set_threads(2)
    K.PARALLEL_MIN = 0
    run_ops()  # the parallel builds
    # the kernels' numba dispatchers (a parallel kernel's two builds are behind its wrapper)
    kernels = dict(vars(K))
    kernels.update({f"{name}.{build}": getattr(fn, build) for name, fn in vars(K).items() for build in ("kernel", "serial") if hasattr(fn, build)})
    compiled = {name: fn for name, fn in kernels.items() if isinstance(fn, numba.core.registry.CPUDispatcher) and fn.signatures}
    fused = [name for name, fn in compiled.items() if any(FMA.search(asm) for asm in fn.inspect_asm().values())]
    print(json.dumps({"compiled": len(compiled), "fused": fused}))


if __name__ == "__main__":
    main()
