"""A spec's numerics as one profile: which kernels compute a step, whether their bits depend on the
machine, and which devices can run them. Chosen once per spec (:func:`profile`) and asked wherever
a role or the engine used to test the ``numerics`` string or the device (docs/numerics.md).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from proofs.spec import Numerics

__all__ = ["NumericsProfile", "PROFILES", "profile"]


@dataclass(frozen=True)
class NumericsProfile:
    """``repro``: the fixed-sequence kernels of :mod:`proofs.repro` (their seeded initialization,
    optimizer and accumulation kernels too), else plain torch. ``portable``: the bits depend on the
    inputs only, so exact replay holds between any two machines and devices that run the profile;
    else only between machines with the same kernels (or in tolerance mode). ``devices``: the torch
    device types whose kernels compute it. ``fused``: the repro kernels' contractions (matmul,
    convolution) round each term once, a fused multiply-add (repro-v2), not a multiply then an add."""

    name: Numerics
    repro: bool
    portable: bool
    devices: tuple[str, ...]
    fused: bool = False

    def fault(self, device: str) -> str | None:
        """Why a step cannot compute on ``device`` here (None: it can)."""
        kind = device.partition(":")[0]  # a torch device string: "cuda:1" is a cuda device
        if kind not in self.devices:
            return f"numerics {self.name} runs on {' or '.join(self.devices)}, not {device}"
        if self.repro and kind == "cuda":
            why = importlib.import_module("proofs.repro_cuda").unavailable()
            if why is not None:
                return f"numerics {self.name} cannot run on {device} here: {why}"
        return None


PROFILES: dict[str, NumericsProfile] = {
    "repro-v1": NumericsProfile("repro-v1", repro=True, portable=True, devices=("cpu", "cuda")),
    "repro-v2": NumericsProfile("repro-v2", repro=True, portable=True, devices=("cpu", "cuda"), fused=True),
    "torch": NumericsProfile("torch", repro=False, portable=False, devices=("cpu", "cuda")),
}


def profile(numerics: Numerics) -> NumericsProfile:
    """The profile of a spec's ``numerics`` field."""
    return PROFILES[numerics]
