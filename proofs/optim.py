"""The optimizers a spec may name, written out so that their whole state is explicit.

Every slot starts at zero and is saved in each checkpoint, so one training step
is a pure function of (checkpoint, batch): what a replay and a referee need.
The arithmetic is PyTorch's single-tensor (non-foreach) formulas, run by torch
(``numerics: torch``) or by the fixed-sequence float32 kernels of
:mod:`proofs.repro_kernels` (``repro-v1``: no fused multiply-add on any CPU).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import torch

from proofs import repro_kernels
from proofs.spec import AdamConfig, Numerics, OptimizerConfig, SGDConfig

__all__ = ["Optimizer", "SGD", "Adam", "build_optimizer"]


class Optimizer:
    """State slots per parameter and an in-place update of one step."""

    slots: tuple[str, ...] = ()
    repro: bool = False

    def init_state(self, params: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Zero-filled slots, keyed ``optim.<param>.<slot>`` as in a checkpoint."""
        return {f"optim.{n}.{s}": torch.zeros_like(p) for n, p in params.items() for s in self.slots}

    @torch.no_grad()
    def update(self, params: Mapping[str, torch.Tensor], state: Mapping[str, torch.Tensor], step: int) -> None:  # pragma: no cover - interface
        raise NotImplementedError


class SGD(Optimizer):
    def __init__(self, cfg: SGDConfig, repro: bool = False) -> None:
        self.cfg = cfg
        self.repro = repro
        self.slots = ("momentum",) if cfg.momentum > 0 else ()

    @torch.no_grad()
    def update(self, params: Mapping[str, torch.Tensor], state: Mapping[str, torch.Tensor], step: int) -> None:
        c = self.cfg
        if self.repro:
            f = np.float32
            for name, p in params.items():
                assert p.grad is not None
                buf = state[f"optim.{name}.momentum"].numpy().reshape(-1) if c.momentum > 0 else np.empty(0, np.float32)
                repro_kernels.sgd_update(
                    p.detach().numpy().reshape(-1),
                    p.grad.contiguous().numpy().reshape(-1),
                    buf,
                    f(c.lr),
                    f(c.momentum),
                    f(c.dampening),
                    f(c.weight_decay),
                    c.nesterov,
                )
            return
        for name, p in params.items():
            assert p.grad is not None
            g = p.grad if c.weight_decay == 0 else p.grad.add(p, alpha=c.weight_decay)
            if c.momentum > 0:
                momentum = state[f"optim.{name}.momentum"]
                momentum.mul_(c.momentum).add_(g, alpha=1.0 - c.dampening)
                g = g.add(momentum, alpha=c.momentum) if c.nesterov else momentum
            p.add_(g, alpha=-c.lr)


class Adam(Optimizer):
    slots = ("exp_avg", "exp_avg_sq")

    def __init__(self, cfg: AdamConfig, repro: bool = False) -> None:
        self.cfg = cfg
        self.repro = repro

    @torch.no_grad()
    def update(self, params: Mapping[str, torch.Tensor], state: Mapping[str, torch.Tensor], step: int) -> None:
        c = self.cfg
        t = step + 1  # bias correction counts this update
        if self.repro:
            # beta**t by squaring: correctly rounded float64 multiplies, not the platform's pow
            bc1 = 1.0 - _power(c.beta1, t)
            bc2_sqrt = math.sqrt(1.0 - _power(c.beta2, t))
            f = np.float32
            for name, p in params.items():
                assert p.grad is not None
                repro_kernels.adam_update(
                    p.detach().numpy().reshape(-1),
                    p.grad.contiguous().numpy().reshape(-1),
                    state[f"optim.{name}.exp_avg"].numpy().reshape(-1),
                    state[f"optim.{name}.exp_avg_sq"].numpy().reshape(-1),
                    f(c.beta1),
                    f(c.beta2),
                    f(c.eps),
                    f(c.weight_decay),
                    f(c.lr / bc1),
                    f(bc2_sqrt),
                )
            return
        bc1 = 1.0 - c.beta1**t
        bc2_sqrt = math.sqrt(1.0 - c.beta2**t)
        for name, p in params.items():
            assert p.grad is not None
            g = p.grad if c.weight_decay == 0 else p.grad.add(p, alpha=c.weight_decay)
            m = state[f"optim.{name}.exp_avg"]
            v = state[f"optim.{name}.exp_avg_sq"]
            m.mul_(c.beta1).add_(g, alpha=1.0 - c.beta1)
            v.mul_(c.beta2).addcmul_(g, g, value=1.0 - c.beta2)
            denom = (v.sqrt() / bc2_sqrt).add_(c.eps)
            p.addcdiv_(m, denom, value=-c.lr / bc1)


def _power(x: float, n: int) -> float:
    """x**n for n >= 1 by binary exponentiation (a fixed sequence of float64 multiplies)."""
    result, base = 1.0, x
    while n:
        if n & 1:
            result *= base
        base *= base
        n >>= 1
    return result


def build_optimizer(cfg: OptimizerConfig, numerics: Numerics = "torch") -> Optimizer:
    repro = numerics == "repro-v1"
    return SGD(cfg, repro) if isinstance(cfg, SGDConfig) else Adam(cfg, repro)
