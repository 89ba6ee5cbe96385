"""A trained model as plain PyTorch: a ``torch.export`` program, its weights and its architecture in
words (what ``veritrain model export`` writes), and its score on a held-out set (``model eval``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from torch.nn import functional as F

from proofs.checkpoint import decode_checkpoint
from proofs.data import Dataset
from proofs.models import build_model
from proofs.spec import CharTransformerConfig, GPTConfig, JobSpec

__all__ = ["MAX_EVAL_EXAMPLES", "export_model", "score"]

#: Examples scored at most by ``model eval`` (bounds the work on a large held-out file).
MAX_EVAL_EXAMPLES = 100_000

_LAYERS = {
    "mlp": "flatten; Linear layers input_dim -> hidden... -> num_classes, ReLU after each but the last; logits out",
    "cnn": "per channel stage: Conv2d(kernel_size, stride 1, padding kernel_size // 2) -> ReLU -> MaxPool2d(2); "
    "flatten (channels, height, width order) -> Linear(flat_features, hidden) -> ReLU -> Linear(hidden, num_classes); logits out",
    "char-transformer": "token + position embeddings; n_layer pre-LayerNorm blocks (causal self-attention with n_head heads, "
    "then Linear(n_embd, 4 n_embd) -> GELU (exact, erf) -> Linear); final LayerNorm; Linear head without bias; logits per position",
    "gpt": "GPT-2: token + position embeddings; n_layer pre-LayerNorm blocks (causal self-attention with n_head heads, "
    "then Linear(n_embd, 4 n_embd) -> GELU (exact, erf) -> Linear; biases only if bias); final LayerNorm; "
    "the head is the token embedding (tied: tok.weight); logits per position",
    "resnet": "Conv2d 3x3 stem -> ReLU; per channel stage (a MaxPool2d(2) before each but the first) blocks of "
    "ReLU(x + Conv2d 3x3(ReLU(Conv2d 3x3(x)))), the shortcut a 1x1 Conv2d where channels change; "
    "mean over pixels -> Linear(channels[-1], num_classes); logits out",
}


def _example_input(spec: JobSpec) -> torch.Tensor:
    m: Any = spec.model
    if m.kind == "mlp":
        return torch.zeros(2, m.input_dim)
    if m.kind in ("cnn", "resnet"):
        return torch.zeros(2, m.in_channels, m.height, m.width)
    return torch.zeros(2, m.block_size, dtype=torch.int64)


def export_model(spec_bytes: bytes, spec: JobSpec, checkpoint: bytes, out: Path) -> dict[str, object]:
    """Write the exported program, the weights, the architecture and the spec into ``out``
    (``checkpoint``: a sealed job's opened already, ``submitter.service.final_model``)."""
    params = decode_checkpoint(checkpoint, expect_spec=spec.spec_hash()).params()
    model = build_model(spec.model_copy(update={"numerics": "torch"})).eval()  # plain PyTorch operations, same parameters
    model.load_state_dict(params)
    x = _example_input(spec)
    dims: dict[int, Any] = {0: torch.export.Dim("batch", min=1, max=1 << 20)}
    if isinstance(spec.model, (CharTransformerConfig, GPTConfig)):
        dims[1] = torch.export.Dim("length", min=1, max=spec.model.block_size)
    program = torch.export.export(model, (x,), dynamic_shapes=(dims,))
    out.mkdir(parents=True, exist_ok=True)
    torch.export.save(program, out / "model.pt2")
    save_file({k: v.contiguous() for k, v in params.items()}, str(out / "weights.safetensors"))
    architecture: dict[str, object] = {
        "kind": spec.model.kind,
        "config": spec.model.model_dump(mode="json"),
        "input": {"shape": ["batch", *x.shape[1:]], "dtype": str(x.dtype).removeprefix("torch.")},
        "output": "logits (float32): classes for mlp, cnn and resnet, vocabulary per position for char-transformer and gpt",
        "layers": _LAYERS[spec.model.kind],
        "parameters": {k: list(v.shape) for k, v in params.items()},
        "load": 'torch.export.load("model.pt2").module()',
    }
    (out / "architecture.json").write_text(json.dumps(architecture, indent=2) + "\n")
    (out / "spec.json").write_bytes(spec_bytes)
    return architecture


def score(model: torch.nn.Module, test: Dataset, block: int) -> dict[str, float | int]:
    """Mean cross-entropy and accuracy of ``model`` over the held-out set in order (next-token for tokens:
    non-overlapping windows), at most :data:`MAX_EVAL_EXAMPLES` examples."""
    if test.is_tokens:
        tokens = test.inputs[: (min(len(test.inputs) - 1, MAX_EVAL_EXAMPLES) // block) * block + 1]
        x, y = tokens[:-1].reshape(-1, block), tokens[1:].reshape(-1, block)
    else:
        assert test.targets is not None
        x, y = test.inputs[:MAX_EVAL_EXAMPLES], test.targets[:MAX_EVAL_EXAMPLES]
    loss, correct, count = 0.0, 0, 0
    with torch.no_grad():
        for at in range(0, len(x), 1024):
            logits = model(x[at : at + 1024])
            flat, target = logits.reshape(-1, logits.shape[-1]), y[at : at + 1024].reshape(-1)
            loss += float(F.cross_entropy(flat, target, reduction="sum"))
            correct += int((flat.argmax(dim=-1) == target).sum())
            count += target.numel()
    return {"loss": loss / count, "accuracy": correct / count, "examples": count}
