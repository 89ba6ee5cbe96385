"""Score a trained model (a checkpoint) on held-out data: mean loss and accuracy."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.nn import functional as F

from proofs.checkpoint import decode_checkpoint
from proofs.data import BatchOrder, Dataset
from proofs.spec import JobSpec
from proofs.train import Runtime, Trainer, runtime

__all__ = ["Evaluation", "evaluate"]

#: Batches scored at most (bounds the work on a large held-out set).
MAX_EVAL_BATCHES = 256


@dataclass(frozen=True)
class Evaluation:
    """Mean cross-entropy and accuracy (next-character accuracy for the transformer)."""

    loss: float
    accuracy: float
    examples: int


def evaluate(spec: JobSpec, checkpoint: bytes, test: Dataset, rt: Runtime = Runtime()) -> Evaluation:
    """Load ``checkpoint`` (e.g. the final one) and score it on ``test`` (loaded with ``load_dataset``)."""
    trainer = Trainer(spec.model_copy(update={"init": None}), test, rt)  # the checkpoint replaces any starting weights
    trainer.load(decode_checkpoint(checkpoint, expect_spec=spec.spec_hash()))
    order = BatchOrder(spec, test)
    total_loss, correct, count = 0.0, 0, 0
    with runtime(rt), torch.no_grad():
        for step in range(min(order.steps_per_epoch, MAX_EVAL_BATCHES)):
            x, y = order.batch(step)
            logits = trainer.model(x.to(trainer.device))
            flat, target = logits.reshape(-1, logits.shape[-1]), y.reshape(-1).to(trainer.device)
            total_loss += float(F.cross_entropy(flat, target, reduction="sum"))
            correct += int((flat.argmax(dim=-1) == target).sum())
            count += target.numel()
    return Evaluation(loss=total_loss / count, accuracy=correct / count, examples=count)
