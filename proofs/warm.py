"""Compile every repro kernel a job will run on this machine, before a job needs it.

numba compiles a kernel on its first call and keeps the machine code in its disk cache (the
``__pycache__`` beside :mod:`proofs.repro_kernels`, or ``NUMBA_CACHE_DIR``), by source and CPU. On a
fresh install, then, the first job's first steps compile every kernel they call: both numerics and
both builds took 2.7 minutes of one core on a 2-core Xeon, where a solver's first segment or a
verifier's first replay waited for them (docs/numerics.md, "Kernels compiled ahead").

:func:`warm` trains each reference job (:data:`proofs.datasets.REFERENCE_JOBS`: the MLP, CNN,
character transformer, GPT and ResNet with SGD, Adam and AdamW) two steps under ``repro-v1`` and
``repro-v2``, once on every kernel's serial build and once on its parallel one, with micro-batches,
clipping by global norm and a held-out split (the options with kernels of their own); and runs the
matmul on a transposed operand far enough apart to be copied first. From a warm cache it loads every
kernel in seconds. The kernels' bits do not depend on it: it only moves the compile earlier.

    python -m proofs.warm        # or: veritrain warm
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numba
import numpy as np

from proofs import repro_kernels as K
from proofs.data import load_dataset
from proofs.datasets import REFERENCE_JOBS, reference_job
from proofs.numerics import PROFILES
from proofs.spec import load_spec
from proofs.train import Runtime, train_trace

__all__ = ["STEPS", "kernels", "warm"]

#: The numerics whose kernels run on a CPU here (:mod:`proofs.repro_kernels`).
_NUMERICS = tuple(name for name, p in PROFILES.items() if p.repro)
#: Each build and the threshold that gives it: every call under :data:`proofs.repro_kernels.PARALLEL_MIN`
#: (the serial builds), then every call at it or over (the parallel ones).
_BUILDS = (("serial", math.inf), ("parallel", 0.0))
#: What :func:`warm` reports, one at a time: a numerics, a build and a reference job.
STEPS = len(_NUMERICS) * len(_BUILDS) * len(REFERENCE_JOBS)


def _train(numerics: str, job: str) -> None:
    ref = reference_job(job, steps=2, checkpoint_interval=2)
    spec = load_spec(
        {
            **ref.template,
            "numerics": numerics,
            "dataset": {**ref.template["dataset"], "cid": "QmWarmKernels", "size_bytes": len(ref.dataset)},
            "micro_batches": 2,
            "grad_clip": 1.0,
            "eval": {"fraction": 0.1, "every": 2},
        }
    )
    # two threads: through numba's workqueue one thread runs the serial builds only
    train_trace(spec, load_dataset(spec, ref.dataset), Runtime(threads=2))


def _far_transposed(numerics: str) -> None:
    """The matmul of a transposed ``a`` whose k steps lie a KiB apart under a wide output, which ``bmm``
    copies contiguous first (``_contiguous``), as the weight gradient of a linear of 256 features or more does."""
    a = np.zeros((1, 8, 256), np.float32).transpose(0, 2, 1)
    (K.FUSED if PROFILES[numerics].fused else K).bmm(a, np.zeros((1, 8, 512), np.float32), np.empty((1, 256, 512), np.float32))


def warm(progress: Callable[[str], None] | None = None) -> None:
    """Train the reference jobs under each numerics and build (numba compiles each kernel they call, or
    loads it from its cache), telling ``progress`` each of the :data:`STEPS` before it runs; the kernels'
    threshold between builds is restored after."""
    saved = K.PARALLEL_MIN
    try:
        for numerics in _NUMERICS:
            for build, limit in _BUILDS:
                K.PARALLEL_MIN = limit
                for job in REFERENCE_JOBS:
                    if progress is not None:
                        progress(f"{numerics}, {build} builds: {job}")
                    _train(numerics, job)
                _far_transposed(numerics)
    finally:
        K.PARALLEL_MIN = saved


def kernels() -> dict[str, numba.core.registry.CPUDispatcher]:
    """Every numba dispatcher of the CPU kernels by its function's name: repro-v1's and repro-v2's
    (``<name>_fma``), both builds of a parallel kernel (``<name>`` and ``<name>_serial``)."""
    found: dict[str, numba.core.registry.CPUDispatcher] = {}
    for names in (vars(K), K.FUSED.bmm.__globals__):
        for obj in list(names.values()):
            for fn in (obj, getattr(obj, "kernel", None), getattr(obj, "serial", None)):
                if isinstance(fn, numba.core.registry.CPUDispatcher):
                    found[fn.py_func.__name__] = fn
    return found


def main() -> None:
    warm(progress=lambda what: print(what, flush=True))


if __name__ == "__main__":
    main()
