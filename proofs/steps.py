"""Step-level recompute for disputes: states inside a segment, one step for a referee,
and the bisection position math.

In a dispute over segment ``j`` both parties agree on the state at step
``lo = j*k`` (leaf ``j``) and disagree at ``hi = (j+1)*k`` (leaf ``j+1``). Each
move the solver posts the state hash at ``mid = (lo + hi) // 2``; the challenger
agrees (``lo = mid``) or disagrees (``hi = mid``). After ``ceil(log2 k)`` moves
``hi = lo + 1`` and referees re-execute the single step ``lo -> lo + 1`` from the
agreed state (:func:`execute_step`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from proofs.checkpoint import decode_checkpoint
from proofs.data import Dataset
from proofs.errors import ProofError, SegmentOutOfRange
from proofs.spec import JobSpec
from proofs.train import Runtime, Trainer

__all__ = ["state_at", "execute_step", "Bisection", "midpoint", "max_moves", "bisect", "segment_bounds"]


def segment_bounds(spec: JobSpec, segment: int) -> tuple[int, int]:
    """``(first_step, last_step)`` global steps of segment ``segment``'s endpoints."""
    if not 0 <= segment < spec.segments:
        raise SegmentOutOfRange("segment", segment, spec.segments)
    k = spec.checkpoint_interval
    return segment * k, (segment + 1) * k


def state_at(spec: JobSpec, dataset: Dataset, checkpoint: bytes, step: int, rt: Runtime = Runtime()) -> bytes:
    """Canonical checkpoint bytes of the state after global step ``step``, replayed from
    ``checkpoint`` (any earlier state of the same job, e.g. the segment's start)."""
    ckpt = decode_checkpoint(checkpoint, expect_spec=spec.spec_hash())
    if not ckpt.step <= step <= spec.steps:
        raise ProofError(f"step {step} is not between the checkpoint's step {ckpt.step} and the job's {spec.steps}")
    trainer = Trainer(spec, dataset, rt)
    trainer.load(ckpt)
    trainer.run(step - ckpt.step)
    return trainer.to_bytes()


def execute_step(spec: JobSpec, dataset: Dataset, state: bytes, rt: Runtime = Runtime()) -> bytes:
    """The referee's job: the state after one step from the agreed ``state``."""
    step = decode_checkpoint(state, expect_spec=spec.spec_hash()).step
    return state_at(spec, dataset, state, step + 1, rt)


def midpoint(lo: int, hi: int) -> int:
    return (lo + hi) // 2


def max_moves(k: int) -> int:
    """Moves to narrow ``k`` steps to one: ``ceil(log2 k)`` (0 for ``k = 1``)."""
    if k < 1:
        raise ProofError(f"a segment has at least one step, got {k}")
    return (k - 1).bit_length()


@dataclass(frozen=True)
class Bisection:
    """One position of the game: agreed at step ``lo``, disputed at step ``hi``."""

    lo: int
    hi: int

    def __post_init__(self) -> None:
        if self.hi <= self.lo:
            raise ProofError(f"bisection needs lo < hi, got [{self.lo}, {self.hi}]")

    @property
    def mid(self) -> int:
        return midpoint(self.lo, self.hi)

    @property
    def done(self) -> bool:
        return self.hi - self.lo == 1

    def agree(self) -> Bisection:
        return Bisection(self.mid, self.hi)

    def disagree(self) -> Bisection:
        return Bisection(self.lo, self.mid)


def bisect(lo: int, hi: int, disagrees_at: Callable[[int], bool]) -> tuple[Bisection, int]:
    """Play the game out: ``disagrees_at(step)`` is the challenger's answer to the solver's
    posted state at ``step``. Returns the final one-step position and the number of moves."""
    pos, moves = Bisection(lo, hi), 0
    while not pos.done:
        pos = pos.disagree() if disagrees_at(pos.mid) else pos.agree()
        moves += 1
    return pos, moves
