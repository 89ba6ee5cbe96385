"""The optimizers a spec may name, written out so that their whole state is explicit,
and what happens to a step's gradients before them.

Every slot starts at zero and is saved in each checkpoint, so one training step
is a pure function of (checkpoint, batch): what a replay and a referee need.
The arithmetic is PyTorch's single-tensor (non-foreach) formulas, run by torch
(``numerics: torch``) or by the fixed-sequence float32 kernels of
:mod:`proofs.repro_kernels` or :mod:`proofs.repro_cuda` (``repro-v1`` and ``repro-v2``: no fused multiply-add in an update, the same bits on CPU and GPU).

A step, in order (docs/formats.md states each formula):

1. micro-batch gradients summed in micro-batch order, then divided by their count
   (:func:`accumulate`, :func:`average`);
2. clipping by the global L2 norm (:func:`clip_by_global_norm`);
3. the update with the scheduled learning rate of the global step (:func:`learning_rate`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import torch

from proofs import repro
from proofs.numerics import profile
from proofs.spec import AdamConfig, AdamWConfig, Numerics, OptimizerConfig, ScheduleConfig, SGDConfig

__all__ = [
    "Optimizer",
    "SGD",
    "Adam",
    "AdamW",
    "build_optimizer",
    "learning_rate",
    "accumulate",
    "average",
    "clip_by_global_norm",
    "CLIP_EPS",
]

#: Added to the global norm before dividing, as ``torch.nn.utils.clip_grad_norm_`` does.
CLIP_EPS = 1e-6


class Optimizer:
    """State slots per parameter and an in-place update of one step."""

    slots: tuple[str, ...] = ()
    repro: bool = False

    def init_state(self, params: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """Zero-filled slots, keyed ``optim.<param>.<slot>`` as in a checkpoint."""
        return {f"optim.{n}.{s}": torch.zeros_like(p) for n, p in params.items() for s in self.slots}

    @torch.no_grad()
    def update(self, params: Mapping[str, torch.Tensor], state: Mapping[str, torch.Tensor], step: int, lr: float) -> None:  # pragma: no cover - interface
        """Update ``params`` in place from their ``.grad`` at global ``step`` (from 0) with the
        float64 learning rate ``lr`` (:func:`learning_rate`)."""
        raise NotImplementedError


class SGD(Optimizer):
    def __init__(self, cfg: SGDConfig, repro: bool = False) -> None:
        self.cfg = cfg
        self.repro = repro
        self.slots = ("momentum",) if cfg.momentum > 0 else ()

    @torch.no_grad()
    def update(self, params: Mapping[str, torch.Tensor], state: Mapping[str, torch.Tensor], step: int, lr: float) -> None:
        c = self.cfg
        if self.repro:
            f = np.float32
            groups = []
            for name, p in params.items():
                assert p.grad is not None
                g = p.grad.contiguous()
                groups.append((p.detach(), g, state[f"optim.{name}.momentum"] if c.momentum > 0 else g))  # no momentum: never touched
            repro.each("sgd_update", groups, f(lr), f(c.momentum), f(c.dampening), f(c.weight_decay), c.nesterov)
            return
        for name, p in params.items():
            assert p.grad is not None
            g = p.grad if c.weight_decay == 0 else p.grad.add(p, alpha=c.weight_decay)
            if c.momentum > 0:
                momentum = state[f"optim.{name}.momentum"]
                momentum.mul_(c.momentum).add_(g, alpha=1.0 - c.dampening)
                g = g.add(momentum, alpha=c.momentum) if c.nesterov else momentum
            p.add_(g, alpha=-lr)


class Adam(Optimizer):
    """Adam; with ``decoupled`` (AdamW) the weight decay scales the parameters by
    ``1 - lr*wd`` (rounded to float32 once) before the step instead of entering the gradient."""

    slots = ("exp_avg", "exp_avg_sq")

    def __init__(self, cfg: AdamConfig | AdamWConfig, repro: bool = False) -> None:
        self.cfg = cfg
        self.repro = repro
        self.decoupled = isinstance(cfg, AdamWConfig)

    @torch.no_grad()
    def update(self, params: Mapping[str, torch.Tensor], state: Mapping[str, torch.Tensor], step: int, lr: float) -> None:
        c = self.cfg
        t = step + 1  # bias correction counts this update
        coupled_wd = 0.0 if self.decoupled else c.weight_decay
        decay = 1.0 - lr * c.weight_decay if self.decoupled and c.weight_decay != 0 else 1.0
        if self.repro:
            # beta**t by squaring: correctly rounded float64 multiplies, not the platform's pow
            bc1 = 1.0 - _power(c.beta1, t)
            bc2_sqrt = math.sqrt(1.0 - _power(c.beta2, t))
            f = np.float32
            groups = []
            for name, p in params.items():
                assert p.grad is not None
                groups.append((p.detach(), p.grad.contiguous(), state[f"optim.{name}.exp_avg"], state[f"optim.{name}.exp_avg_sq"]))
            # the decoupled decay in the same kernel; on a GPU one launch for every parameter
            repro.each("adam_update", groups, f(c.beta1), f(c.beta2), f(c.eps), f(coupled_wd), f(lr / bc1), f(bc2_sqrt), f(decay))
            return
        if decay != 1.0:
            for p in params.values():
                p.mul_(decay)
        bc1 = 1.0 - c.beta1**t
        bc2_sqrt = math.sqrt(1.0 - c.beta2**t)
        for name, p in params.items():
            assert p.grad is not None
            g = p.grad if coupled_wd == 0 else p.grad.add(p, alpha=coupled_wd)
            m = state[f"optim.{name}.exp_avg"]
            v = state[f"optim.{name}.exp_avg_sq"]
            m.mul_(c.beta1).add_(g, alpha=1.0 - c.beta1)
            v.mul_(c.beta2).addcmul_(g, g, value=1.0 - c.beta2)
            denom = (v.sqrt() / bc2_sqrt).add_(c.eps)
            p.addcdiv_(m, denom, value=-lr / bc1)


def _power(x: float, n: int) -> float:
    """x**n for n >= 1 by binary exponentiation (a fixed sequence of float64 multiplies)."""
    result, base = 1.0, x
    while n:
        if n & 1:
            result *= base
        base *= base
        n >>= 1
    return result


class AdamW(Adam):
    """``torch.optim.AdamW``: :class:`Adam` with decoupled weight decay."""


def build_optimizer(cfg: OptimizerConfig, numerics: Numerics = "torch") -> Optimizer:
    fixed = profile(numerics).repro
    if isinstance(cfg, SGDConfig):
        return SGD(cfg, fixed)
    return AdamW(cfg, fixed) if isinstance(cfg, AdamWConfig) else Adam(cfg, fixed)


# ----------------------------------------------------------------- the learning-rate schedule

#: 1/(2k+1)! for sin's Taylor series on |u| <= pi/2 (truncation error < 1e-18).
_SIN_C = tuple(1.0 / math.factorial(2 * k + 1) for k in range(11))


def _cos_pi(x: float) -> float:
    """cos(pi*x) for x in [0, 1], as sin(pi*(1/2 - x)) by a fixed Horner sequence of float64
    + and * (no libm, whose cos may differ by a bit between platforms)."""
    u = math.pi * (0.5 - x)
    u2 = u * u
    acc = 0.0
    for k in range(len(_SIN_C) - 1, -1, -1):
        acc = acc * u2 + (_SIN_C[k] if k % 2 == 0 else -_SIN_C[k])
    return u * acc


def learning_rate(schedule: ScheduleConfig, lr: float, steps: int, t: int) -> float:
    """The float64 learning rate of global step ``t`` (0-based) of a ``steps``-step job:
    ``lr * (t+1) / w`` while ``t < w = warmup_steps``; then ``lr`` (``constant``) or
    ``min_lr + (lr - min_lr) * (1 + cos(pi * (t-w) / (steps-w))) / 2`` (``warmup-cosine``:
    ``lr`` at step ``w``, decaying towards ``min_lr``, which step ``steps``, one past the last,
    would reach: every step's rate stays above ``min_lr``, so above 0).
    Each optimizer rounds what it derives from it to float32 once."""
    w = schedule.warmup_steps
    if t < w:
        return lr * (t + 1) / w
    if schedule.kind == "constant":
        return lr
    progress = (t - w) / (steps - w)
    return schedule.min_lr + (lr - schedule.min_lr) * (1.0 + _cos_pi(progress)) / 2.0


# ----------------------------------------------------------------- gradients before the update


@torch.no_grad()
def accumulate(acc: Mapping[str, torch.Tensor], grads: Mapping[str, torch.Tensor], fixed: bool) -> None:
    """``acc += grads`` elementwise in float32 (one more micro-batch, in micro-batch order);
    ``fixed``: through the repro kernels."""
    if fixed:
        repro.each("add_into", [(a, grads[name].contiguous()) for name, a in acc.items()])
        return
    for name, a in acc.items():
        a.add_(grads[name])


@torch.no_grad()
def average(acc: Mapping[str, torch.Tensor], count: int, fixed: bool) -> None:
    """``acc /= count`` elementwise, one correctly rounded float32 division each."""
    if fixed:
        repro.each("divide", [(a,) for a in acc.values()], np.float32(count))
        return
    for a in acc.values():
        a.div_(count)


@torch.no_grad()
def clip_by_global_norm(grads: Mapping[str, torch.Tensor], max_norm: float, fixed: bool) -> float:
    """Scale the (contiguous) gradients in place so that their global L2 norm is at most about
    ``max_norm``; returns the norm before clipping.

    ``norm = sqrt(S)``, ``S`` the float64 sum over tensors in sorted-name order of each
    tensor's float64 sum of squares (``repro-v1``: elements in index order, one rounding per
    add; ``torch``: torch's float64 sum). ``coef = max_norm / (norm + CLIP_EPS)`` in float64;
    when ``coef < 1`` every gradient element is multiplied by ``float32(coef)``.
    """
    ordered = [grads[name] for name in sorted(grads)]
    total = 0.0
    for part in repro.sum_squares(ordered) if fixed else [float(g.double().square().sum()) for g in ordered]:
        total += part
    norm = math.sqrt(total)
    coef = max_norm / (norm + CLIP_EPS)
    if coef < 1.0:
        if fixed:
            repro.each("scale", [(g,) for g in grads.values()], np.float32(coef))
        else:
            for g in grads.values():
                g.mul_(np.float32(coef).item())
    return norm
