"""Calibration ("profiling"): how far an honest replay drifts when the numerics change,
and the tolerance thresholds that follow from it.

:func:`calibrate` replays segments (from checkpoints of a profiling trace) under a reference
:class:`~proofs.train.Runtime` and under each perturbation (thread count,
deterministic algorithms off, float32 matmul precision, and CPU vs GPU when a GPU
exists), measures the :class:`~proofs.replay.Distances` of each perturbed end
state to the reference one (and counts the coordinates the reference left unchanged that
the perturbation changed: tolerance mode rejects any, :func:`~proofs.replay.moved_frozen`;
and how far the segment's mean training loss moved, which :data:`~proofs.replay.LOSS_RTOL` bounds),
and sets every threshold to the largest distance seen times a safety factor (default :data:`SAFETY_FACTOR` = 10, the gap the
Proof-of-Learning authors report between same-machine and cross-machine error),
never below a floor, so that tolerance mode admits honest hardware variation and
little else.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from proofs.checkpoint import decode_checkpoint
from proofs.data import Dataset
from proofs.errors import ProofError
from proofs.replay import Distances, distances, moved_frozen
from proofs.spec import JobSpec, Tolerance
from proofs.train import Runtime, Trainer, segment_loss

__all__ = ["SAFETY_FACTOR", "FLOORS", "Perturbation", "Calibration", "default_perturbations", "calibrate"]

log = logging.getLogger(__name__)

SAFETY_FACTOR = 10.0
#: Smallest thresholds handed out (relative l2, linf, cosine): float32 rounding scale.
FLOORS = Distances(l2=1e-6, linf=1e-6, cosine=1e-9)


@dataclass(frozen=True)
class Perturbation:
    """One measured runtime and its distance to the reference replay; ``moved_frozen``: coordinates
    the reference replay left unchanged that this runtime changed (tolerance mode rejects any);
    ``loss``: relative difference of the segment's mean training loss to the reference one."""

    name: str
    runtime: Runtime
    params: Distances
    optimizer: Distances
    moved_frozen: int = 0
    loss: float = 0.0

    @property
    def exact(self) -> bool:
        return self.params == Distances(0.0, 0.0, 0.0) and self.optimizer == Distances(0.0, 0.0, 0.0)


@dataclass(frozen=True)
class Calibration:
    reference: Runtime
    perturbations: tuple[Perturbation, ...]
    safety_factor: float
    tolerance: Tolerance


def default_perturbations(reference: Runtime = Runtime()) -> list[tuple[str, Runtime]]:
    """Threads 1 vs 2, deterministic off, matmul precision high/medium, and the GPU if there is one."""
    out = [
        ("threads=2", Runtime(threads=2)),
        ("deterministic=off", Runtime(deterministic=False)),
        ("threads=2,deterministic=off", Runtime(threads=2, deterministic=False)),
        ("matmul=high", Runtime(matmul_precision="high")),
        ("matmul=medium", Runtime(matmul_precision="medium")),
    ]
    if torch.cuda.is_available():
        out += [
            ("cuda", Runtime(device="cuda")),
            ("cuda,deterministic=off", Runtime(device="cuda", deterministic=False)),
            ("cuda,matmul=high(tf32)", Runtime(device="cuda", matmul_precision="high")),
        ]
    return [(name, rt) for name, rt in out if rt != reference]


def _replay(spec: JobSpec, dataset: Dataset, start: bytes, rt: Runtime) -> tuple[dict[str, torch.Tensor], float]:
    trainer = Trainer(spec, dataset, rt)
    trainer.load(decode_checkpoint(start, expect_spec=spec.spec_hash(), data_key=dataset.data_key))
    loss = segment_loss(trainer.run(spec.checkpoint_interval))
    return {k: v.detach().cpu().clone() for k, v in trainer.tensors().items()}, loss


def _split(state: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    return (
        {k: v for k, v in state.items() if k.startswith("param.")},
        {k: v for k, v in state.items() if k.startswith("optim.")},
    )


def calibrate(
    spec: JobSpec,
    dataset: Dataset,
    starts: Sequence[bytes],
    *,
    reference: Runtime = Runtime(),
    perturbations: Sequence[tuple[str, Runtime]] | None = None,
    safety_factor: float = SAFETY_FACTOR,
) -> Calibration:
    """Replay the segment starting at each checkpoint in ``starts`` under every perturbation
    and derive thresholds from the largest distance seen.

    Reproduction error grows along training (on the char transformer ~100x between the
    first segment and the middle of a job), so ``starts`` should be spread over a
    profiling trace, not only checkpoint 0.
    """
    if not starts:
        raise ProofError("calibration needs at least one start checkpoint")
    runs = perturbations if perturbations is not None else default_perturbations(reference)
    measured = []
    for start in starts:
        begin = dict(decode_checkpoint(start, expect_spec=spec.spec_hash(), data_key=dataset.data_key).tensors)
        reference_end, reference_loss = _replay(spec, dataset, start, reference)
        ref_params, ref_optim = _split(reference_end)
        for name, rt in runs:
            end, loss = _replay(spec, dataset, start, rt)
            params, optim = _split(end)
            drift = abs(loss - reference_loss) / abs(reference_loss) if reference_loss else abs(loss)
            p = Perturbation(name, rt, distances(params, ref_params), distances(optim, ref_optim), moved_frozen(begin, reference_end, end), drift)
            log.info(
                "calibration",
                extra={"perturbation": name, "l2": p.params.l2, "linf": p.params.linf, "moved_frozen": p.moved_frozen, "loss_drift": p.loss},
            )
            measured.append(p)

    def threshold(field: str) -> float:
        worst = max([getattr(m.params, field) for m in measured] + [getattr(m.optimizer, field) for m in measured] + [0.0])
        return max(worst * safety_factor, getattr(FLOORS, field))

    tol = Tolerance(mode="tolerance", l2=threshold("l2"), linf=threshold("linf"), cosine=threshold("cosine"))
    return Calibration(reference=reference, perturbations=tuple(measured), safety_factor=safety_factor, tolerance=tol)
