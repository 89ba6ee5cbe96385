"""``veritrain model export`` for the gpt and the resnet: the exported program in plain PyTorch
computes the checkpoint's network, and the gpt's tied weight is one tensor in the weights file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from proofs.checkpoint import decode_checkpoint
from proofs.data import load_dataset
from proofs.datasets import reference_job
from proofs.export import export_model
from proofs.models import build_model
from proofs.replay import initial_state


@pytest.mark.parametrize("name", ["gpt-text", "resnet-shapes"])
def test_exported_program_is_the_checkpoints_network(name: str, tmp_path: Path) -> None:
    job = reference_job(name, steps=50, checkpoint_interval=50)
    spec = job.spec("QmData")
    checkpoint = initial_state(spec, load_dataset(spec, job.dataset))
    export_model(spec.canonical_bytes(), spec, checkpoint, tmp_path)
    program = torch.export.load(str(tmp_path / "model.pt2")).module()
    weights = load_file(str(tmp_path / "weights.safetensors"))
    assert weights.keys() == decode_checkpoint(checkpoint).params().keys()
    reference = build_model(spec.model_copy(update={"numerics": "torch"}))
    reference.load_state_dict(weights)
    x = torch.randint(0, 128, (3, 20)) if spec.model.kind == "gpt" else torch.randn(3, 1, 16, 16)
    torch.testing.assert_close(program(x), reference(x))
    architecture = json.loads((tmp_path / "architecture.json").read_text())
    if spec.model.kind == "gpt":
        assert "tok.weight" in weights and not any("head" in n for n in weights) and "tied" in architecture["layers"]
    else:
        assert "stages.1.0.shortcut.weight" in weights and "mean over pixels" in architecture["layers"]
