"""Score a trained model (a checkpoint) on held-out data (mean loss and accuracy), and sample text
from a token model (what a person looks at before and after training)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch.nn import functional as F

from proofs.checkpoint import decode_checkpoint
from proofs.data import BatchOrder, Dataset
from proofs.errors import ProofError
from proofs.models import build_model
from proofs.spec import CharTransformerConfig, GPTConfig, JobSpec
from proofs.train import Runtime, Trainer, runtime

__all__ = ["Evaluation", "evaluate", "sample_tokens"]

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


def sample_tokens(
    spec: JobSpec,
    checkpoint: bytes,
    prompt: Sequence[int],
    count: int,
    *,
    seed: int = 0,
    temperature: float = 0.8,
    top_k: int = 40,
    vocab: int | None = None,
) -> list[int]:
    """``count`` tokens continuing ``prompt`` (at least one token), drawn from a token model's
    ``checkpoint``: each from the last position's logits over ``temperature``, cut to the ``top_k``
    likeliest, by a generator seeded with ``seed``; the context is the last ``block_size`` tokens.
    ``vocab``: draw only among the first ``vocab`` ids, the ones the tokenizer reads (a model wider
    than its tokenizer, GPT-2's 50,257 ids over a 4,096-token one, otherwise writes ids nothing reads).
    For people to read (the demo's text before and after training): nothing is committed or
    replayed from it, so it runs with torch's default settings."""
    cfg = spec.model
    if not isinstance(cfg, (CharTransformerConfig, GPTConfig)):
        raise ProofError(f"a {cfg.kind} does not generate tokens")
    if not prompt or any(not 0 <= t < cfg.vocab_size for t in prompt):
        raise ProofError(f"the prompt needs at least one token, each below the vocabulary size {cfg.vocab_size}")
    model = build_model(spec.model_copy(update={"init": None}))  # the checkpoint replaces any starting weights
    params = decode_checkpoint(checkpoint, expect_spec=spec.spec_hash()).params()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(params[name])
        tokens = list(prompt)
        generator = torch.Generator().manual_seed(seed)
        for _ in range(count):
            context = torch.tensor([tokens[-cfg.block_size :]], dtype=torch.int64)
            logits = model(context)[0, -1, :vocab] / temperature
            top = torch.topk(logits, min(top_k, logits.numel()))
            choice = torch.multinomial(torch.softmax(top.values, dim=-1), 1, generator=generator)
            tokens.append(int(top.indices[choice]))
    return tokens[len(prompt) :]
