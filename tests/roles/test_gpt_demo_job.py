"""The gpt demo jobs' pieces (``veritrain demo --job gpt-mini``), without the network: the shipped
Shakespeare corpus packed with the shipped tokenizer, a ~10M-parameter GPT spec whose checkpoints
no 30M-gas block could carry (the availability court answers for them), and text sampled before and after training (the
tiny variant, trained here for real)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from core.gas import max_published_checkpoint_bytes
from core.storage import file_cid
from proofs.data import load_dataset
from proofs.replay import initial_state
from proofs.tokenizer import shipped
from proofs.train import Trainer
from submitter.demo_job import BPE_CODEC, GPT_JOBS, TEXT_CODECS, build_demo_job, evaluate_model, posted_spec, sample_text
from tests.roles.test_solver_judge import BLOCK_GAS_30M

CORPUS = resources.files("proofs").joinpath("datasets/shakespeare.txt").read_bytes()


def test_gpt_mini_is_a_10m_gpt_on_the_packed_corpus_with_checkpoints_no_30m_block_carries(tmp_path: Path) -> None:
    job = build_demo_job("gpt-mini", tmp_path)
    data = job.data_path.read_bytes()
    spec = posted_spec(job, file_cid(data))
    assert spec.model.kind == "gpt" and 10_000_000 <= spec.param_count() <= 11_000_000
    assert spec.dataset.format == "u16" and spec.optimizer.kind == "adamw" and spec.schedule.kind == "warmup-cosine" and spec.grad_clip == 1.0
    tokens = load_dataset(spec, data).inputs
    assert shipped().decode(tokens[:200].tolist()) == CORPUS[: len(shipped().decode_bytes(tokens[:200].tolist()))].decode()
    checkpoint = len(initial_state(spec, load_dataset(spec, data)))
    assert max_published_checkpoint_bytes(BLOCK_GAS_30M) < checkpoint
    assert json.loads(job.spec_path.read_text())["numerics"] == "torch"


def test_gpt_tiny_writes_text_before_and_after_training(tmp_path: Path) -> None:
    job = build_demo_job("gpt-tiny", tmp_path)
    data = job.data_path.read_bytes()
    cid = file_cid(data)
    spec = posted_spec(job, cid)
    before = sample_text(job, cid)
    assert before is not None and before.startswith("Romeo.\n") and len(before) > 100
    assert sample_text(job, cid) == before  # seeded
    trainer = Trainer(spec, load_dataset(spec, data))
    trainer.run(spec.steps)
    model = tmp_path / "model.safetensors"
    model.write_bytes(trainer.to_bytes())
    after = sample_text(job, cid, model.read_bytes())
    assert after is not None and after.startswith("Romeo.\n") and after != before
    assert evaluate_model(job, model, cid)["test_loss"] < 8.0  # below chance (ln 4096 = 8.3)


def test_a_gpt_wider_than_the_tokenizer_writes_only_ids_the_tokenizer_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """GPT-2 small's 50,257 ids over the shipped 4,096-token tokenizer (the 124M bench): its untrained
    weights would draw ids no tokenizer reads; the sample draws among the tokenizer's."""
    sizes, steps, k, batch, _ = GPT_JOBS["gpt-tiny"]
    monkeypatch.setitem(GPT_JOBS, "gpt-wide", ({**sizes, "vocab_size": 50_257}, steps, k, batch, "gpt-tiny with GPT-2's vocabulary"))
    monkeypatch.setitem(TEXT_CODECS, "gpt-wide", BPE_CODEC)
    job = build_demo_job("gpt-wide", tmp_path)
    cid = file_cid(job.data_path.read_bytes())
    text = sample_text(job, cid)
    assert text is not None and text.startswith("Romeo.\n") and len(text) > 100
