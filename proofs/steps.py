"""Step-level recompute for disputes: the state at any step inside a segment (a bisection
midpoint), and one step from an agreed state for a referee (:func:`execute_step`). The bisection's
position math is the game's: ``core.dispute``.
"""

from __future__ import annotations

from proofs.checkpoint import decode_checkpoint
from proofs.data import Dataset
from proofs.errors import ProofError
from proofs.spec import JobSpec
from proofs.train import Runtime, Trainer

__all__ = ["state_at", "execute_step"]


def state_at(spec: JobSpec, dataset: Dataset, checkpoint: bytes, step: int, rt: Runtime = Runtime()) -> bytes:
    """Canonical checkpoint bytes of the state after global step ``step``, replayed from
    ``checkpoint`` (any earlier state of the same job, e.g. the segment's start)."""
    ckpt = decode_checkpoint(checkpoint, expect_spec=spec.spec_hash(), data_key=dataset.data_key)
    if not ckpt.step <= step <= spec.steps:
        raise ProofError(f"step {step} is not between the checkpoint's step {ckpt.step} and the job's {spec.steps}")
    trainer = Trainer(spec, dataset, rt)
    trainer.load(ckpt)
    trainer.run(step - ckpt.step)
    return trainer.to_bytes()


def execute_step(spec: JobSpec, dataset: Dataset, state: bytes, rt: Runtime = Runtime()) -> bytes:
    """The referee's job: the state after one step from the agreed ``state``."""
    step = decode_checkpoint(state, expect_spec=spec.spec_hash(), data_key=dataset.data_key).step
    return state_at(spec, dataset, state, step + 1, rt)
