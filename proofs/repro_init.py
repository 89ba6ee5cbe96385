"""repro-v1's (and repro-v2's) seeded initialization: the same float32 bits from the same seed on every machine.

torch's initializers (``kaiming_uniform_``, ``normal_``) run per-ISA kernels: the default
(no SIMD) ATen build gives other bits than the AVX2/AVX-512 ones, so checkpoint 0 would
depend on the CPU. Here every draw is integer arithmetic and exact or once-rounded float64:

- random bits: numpy's PCG64 seeded with the tensor's own seed, ``random_raw`` (64-bit
  integers from 128-bit integer arithmetic; no floating point),
- a uniform: the top 24 bits of one raw integer, ``k`` in ``[0, 2**24)``; the value is
  ``(2k + 1 - 2**24) * 2**-24 * bound`` in float64: the first factor is exact (a symmetric
  grid on ``(-1, 1)``), the multiply by ``bound`` rounds once, the cast to float32 once,
- a normal: Irwin-Hall, the sum of 12 such 24-bit integers minus ``6 * 2**24`` (exact integer
  arithmetic), times ``2**-24`` (exact), times ``std`` (one float64 rounding), to float32
  (one rounding). Mean 0, variance 1, tails cut at 6 standard deviations.

No libm, no vector kernels: numpy's integer ufuncs and single float64 multiplies are
correctly rounded everywhere. Each tensor draws from its own stream, seeded by
``derive_seed(spec seed, "init/" + parameter name)``, so the order in which a model builds
its layers cannot change a bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch

from proofs.seeds import derive_seed

__all__ = ["Init", "draw", "tensor_seed"]

_BITS = 24
_IRWIN_HALL = 12
_BLOCK = 1 << 20  # normals drawn per block


@dataclass(frozen=True)
class Init:
    """One tensor's initial distribution: ``uniform`` on ``(-scale, scale)``, ``normal`` with
    mean 0 and standard deviation ``scale``, or the constant ``scale`` (``const``)."""

    kind: Literal["uniform", "normal", "const"]
    scale: float


def tensor_seed(seed: int, name: str) -> int:
    """The seed of parameter ``name``'s stream under the spec's ``seed``."""
    return derive_seed(seed, "init/" + name)


def _ints(gen: np.random.PCG64, count: int) -> np.ndarray:
    """The next ``count`` integers in ``[0, 2**24)`` of ``gen``: the top 24 bits of its raw
    64-bit outputs."""
    return (gen.random_raw(count) >> np.uint64(64 - _BITS)).astype(np.int64)


def _normal01(gen: np.random.PCG64, n: int) -> np.ndarray:
    """``n`` Irwin-Hall sums, each of 12 consecutive integers minus ``6 * 2**24``, as exact
    float64 multiples of ``2**-24``; drawn in blocks so memory stays bounded (the same stream)."""
    out = np.empty(n, np.float64)
    for start in range(0, n, _BLOCK):
        count = min(_BLOCK, n - start)
        ks = _ints(gen, count * _IRWIN_HALL).reshape(count, _IRWIN_HALL)
        sums = np.full(count, -(_IRWIN_HALL // 2) * (1 << _BITS), np.int64)
        for j in range(_IRWIN_HALL):  # integer adds: exact in any order
            sums += ks[:, j]
        out[start : start + count] = sums * 2.0**-_BITS
    return out


def draw(init: Init, seed: int, shape: tuple[int, ...]) -> torch.Tensor:
    """A float32 tensor of ``shape`` from ``init``, drawn from the stream seeded by ``seed``."""
    n = int(np.prod(shape, dtype=np.int64))
    gen = np.random.PCG64(seed)
    if init.kind == "const":
        values = np.full(n, init.scale, np.float64)
    elif init.kind == "uniform":
        grid = (2 * _ints(gen, n) + 1 - (1 << _BITS)).astype(np.float64) * 2.0**-_BITS  # exact
        values = grid * init.scale
    else:
        values = _normal01(gen, n) * init.scale  # one rounding
    return torch.from_numpy(values.astype(np.float32).reshape(shape))
