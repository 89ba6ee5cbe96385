"""repro-v1's seeded initialization: the same float32 bits from the same seed on every machine.

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


@dataclass(frozen=True)
class Init:
    """One tensor's initial distribution: ``uniform`` on ``(-scale, scale)``, ``normal`` with
    mean 0 and standard deviation ``scale``, or the constant ``scale`` (``const``)."""

    kind: Literal["uniform", "normal", "const"]
    scale: float


def tensor_seed(seed: int, name: str) -> int:
    """The seed of parameter ``name``'s stream under the spec's ``seed``."""
    return derive_seed(seed, "init/" + name)


def _ints(seed: int, count: int) -> np.ndarray:
    """``count`` integers in ``[0, 2**24)``: the top 24 bits of PCG64's raw 64-bit outputs."""
    raw = np.random.PCG64(seed).random_raw(count)
    return (raw >> np.uint64(64 - _BITS)).astype(np.int64)


def draw(init: Init, seed: int, shape: tuple[int, ...]) -> torch.Tensor:
    """A float32 tensor of ``shape`` from ``init``, drawn from the stream seeded by ``seed``."""
    n = int(np.prod(shape, dtype=np.int64))
    if init.kind == "const":
        values = np.full(n, init.scale, np.float64)
    elif init.kind == "uniform":
        grid = (2 * _ints(seed, n) + 1 - (1 << _BITS)).astype(np.float64) * 2.0**-_BITS  # exact
        values = grid * init.scale
    else:
        sums = _ints(seed, n * _IRWIN_HALL).reshape(n, _IRWIN_HALL).sum(axis=1) - _IRWIN_HALL // 2 * (1 << _BITS)
        values = (sums.astype(np.float64) * 2.0**-_BITS) * init.scale  # exact, then one rounding
    return torch.from_numpy(values.astype(np.float32).reshape(shape))
