"""A job's training curve: each segment's mean training loss, as its solver committed it, and the
final model's held-out loss when the spec holds out a split (``spec.eval``).

The manifest (its CID stored on chain at commit) lists one mean loss per segment of ``k``
steps (``proofs.train.segment_loss``), and every verifier that replays a segment fails it if
the loss is not the one training gives (``wrong-loss``; every verifier also evaluates the final
checkpoint on the held-out split: ``wrong-held-out-loss``), so once a report passes
(:func:`replay_checked`) the curve is verified data, read here from the committed manifest (its
root checked against the committed root)::

    curve = job_curve(protocol, store, job_id)        # None before the solver commits
    curve.to_json()                                   # exact values: float32 loss and its bits
    draw_curve(curve, Path("curve.png"))              # an 800x450 PNG (Agg backend)

Used by ``veritrain submit show JOB [--curve FILE]`` and by the demo.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.cid import Cid
from core.contracts import JobId, JobState, Protocol, TraceCommitment
from core.storage import ContentStore
from proofs.manifest import MANIFEST_BLOCK, Manifest, committed_manifest
from submitter.service import commitment, get_job

__all__ = ["CurvePoint", "TrainingCurve", "training_curve", "replay_checked", "committed_curve", "job_curve", "draw_curve", "draw_lines", "CURVE_SIZE_PX"]

#: Width and height of :func:`draw_curve`'s PNG, in pixels.
CURVE_SIZE_PX = (800, 450)
_DPI = 100


@dataclass(frozen=True)
class CurvePoint:
    """Segment ``segment``: steps ``first_step`` to ``last_step`` (the batches ``first_step`` to
    ``last_step - 1``) and their mean training loss, a float32 value."""

    segment: int
    first_step: int
    last_step: int
    loss: float

    def to_json(self) -> dict[str, Any]:
        return {
            "segment": self.segment,
            "steps": [self.first_step, self.last_step],
            "loss": self.loss,
            "loss_f32": "0x" + struct.pack(">f", self.loss).hex(),  # the committed bits
        }


@dataclass(frozen=True)
class TrainingCurve:
    """The curve of one committed trace: its manifest's CID and one point per segment."""

    manifest_cid: Cid
    points: tuple[CurvePoint, ...]
    held_out_loss: float | None = None  # the final model's, when the spec holds out a split (a float32)

    def to_json(self) -> dict[str, Any]:
        held = None if self.held_out_loss is None else {"loss": self.held_out_loss, "loss_f32": "0x" + struct.pack(">f", self.held_out_loss).hex()}
        return {"manifest_cid": self.manifest_cid, "points": [p.to_json() for p in self.points], "held_out": held}

    def stride(self, rows: int) -> int:
        """Every how many segments :meth:`sampled` takes one, to show at most about ``rows``."""
        return max(1, -(-len(self.points) // rows))

    def sampled(self, rows: int) -> tuple[CurvePoint, ...]:
        """Every :meth:`stride`-th point from the first, and the last: a long curve in a short table."""
        stride = self.stride(rows)
        picked = self.points[::stride]
        return picked if picked[-1] == self.points[-1] else (*picked, self.points[-1])


def training_curve(manifest: Manifest, manifest_cid: Cid) -> TrainingCurve:
    """The curve a parsed manifest commits to."""
    k = manifest.checkpoint_interval
    points = tuple(CurvePoint(i, i * k, (i + 1) * k, loss) for i, loss in enumerate(manifest.losses))
    return TrainingCurve(manifest_cid, points, manifest.held_out_loss)


def replay_checked(state: JobState) -> bool:
    """Whether the committed curve and held-out loss of a job in ``state`` are checked: a verifier's
    report passed (VERIFIED, then FINALIZED). While VERIFYING, DATA_CHALLENGED or DISPUTED they are
    the solver's claims."""
    return state in (JobState.VERIFIED, JobState.FINALIZED)


def committed_curve(store: ContentStore, done: TraceCommitment) -> TrainingCurve:
    """The curve of a commitment: the manifest fetched by the committed CID (the store checks the
    bytes against it), parsed (bounded) and refused unless its root is the committed root
    (:class:`proofs.ProofError`)."""
    manifest = committed_manifest(store.get(done.manifest_cid, MANIFEST_BLOCK), done.trace_root, lambda page: store.get(page, MANIFEST_BLOCK))
    return training_curve(manifest, done.manifest_cid)


def job_curve(protocol: Protocol, store: ContentStore, job_id: int) -> TrainingCurve | None:
    """The curve of the job's current commitment (:func:`committed_curve`); None before its solver commits."""
    done = commitment(protocol, JobId(job_id), get_job(protocol, job_id))
    return None if done is None else committed_curve(store, done)


def draw_curve(curve: TrainingCurve, out: Path, *, title: str | None = None) -> Path:
    """Draw ``curve`` (mean loss against the segment's last step) to the PNG ``out`` (:func:`draw_lines`)."""
    steps, losses = [p.last_step for p in curve.points], [p.loss for p in curve.points]
    return draw_lines([(None, steps, losses)], out, title=title or f"training curve (manifest {curve.manifest_cid})")


def draw_lines(lines: Sequence[tuple[str | None, Sequence[float], Sequence[float]]], out: Path, *, title: str) -> Path:
    """Draw each ``(label, steps, losses)`` line (a legend when any is labelled) to the PNG ``out``, of
    :data:`CURVE_SIZE_PX` pixels, with matplotlib's Agg backend (no display, no pyplot state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # imported here: only drawing needs it
    from matplotlib.figure import Figure

    width, height = CURVE_SIZE_PX
    figure = Figure(figsize=(width / _DPI, height / _DPI), dpi=_DPI)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for label, steps, losses in lines:
        axes.plot(steps, losses, marker="o", markersize=3, linewidth=1.5, label=label)
    if any(label for label, _, _ in lines):
        axes.legend(fontsize=8)
    axes.set_xlabel("training step")
    axes.set_ylabel("mean training loss over the segment")
    axes.set_title(title, fontsize=10)
    axes.grid(True, alpha=0.3)
    figure.tight_layout()
    figure.savefig(out, format="png", dpi=_DPI)
    return out
