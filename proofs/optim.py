"""The optimizers a spec may name, written out so that their whole state is explicit.

Every slot starts at zero and is saved in each checkpoint, so one training step
is a pure function of (checkpoint, batch): what a replay and a referee need.
The arithmetic is PyTorch's single-tensor (non-foreach) formulas.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch

from proofs.spec import AdamConfig, OptimizerConfig, SGDConfig

__all__ = ["Optimizer", "SGD", "Adam", "build_optimizer"]


class Optimizer:
    """State slots per parameter and an in-place update of one step."""

    slots: tuple[str, ...] = ()

    def init_state(self, params: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Zero-filled slots, keyed ``optim.<param>.<slot>`` as in a checkpoint."""
        return {f"optim.{n}.{s}": torch.zeros_like(p) for n, p in params.items() for s in self.slots}

    @torch.no_grad()
    def update(
        self, params: Mapping[str, torch.Tensor], state: Mapping[str, torch.Tensor], step: int
    ) -> None:  # pragma: no cover - interface
        raise NotImplementedError


class SGD(Optimizer):
    def __init__(self, cfg: SGDConfig) -> None:
        self.cfg = cfg
        self.slots = ("momentum",) if cfg.momentum > 0 else ()

    @torch.no_grad()
    def update(self, params: Mapping[str, torch.Tensor], state: Mapping[str, torch.Tensor], step: int) -> None:
        c = self.cfg
        for name, p in params.items():
            assert p.grad is not None
            g = p.grad if c.weight_decay == 0 else p.grad.add(p, alpha=c.weight_decay)
            if c.momentum > 0:
                buf = state[f"optim.{name}.momentum"]
                buf.mul_(c.momentum).add_(g, alpha=1.0 - c.dampening)
                g = g.add(buf, alpha=c.momentum) if c.nesterov else buf
            p.add_(g, alpha=-c.lr)


class Adam(Optimizer):
    slots = ("exp_avg", "exp_avg_sq")

    def __init__(self, cfg: AdamConfig) -> None:
        self.cfg = cfg

    @torch.no_grad()
    def update(self, params: Mapping[str, torch.Tensor], state: Mapping[str, torch.Tensor], step: int) -> None:
        c = self.cfg
        t = step + 1  # bias correction counts this update
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


def build_optimizer(cfg: OptimizerConfig) -> Optimizer:
    return SGD(cfg) if isinstance(cfg, SGDConfig) else Adam(cfg)
