"""Ready-made jobs on the proofs engine's shipped datasets: for the demo, the e2e tests and first steps.

The gpt jobs (:data:`GPT_JOBS`) train a GPT on the shipped Shakespeare corpus, packed with the
shipped tokenizer (``u16``, as ``veritrain data pack text`` does); their checkpoints (AdamW: 12
bytes a parameter) are larger than a 30M-gas block lets a solver publish, and run on the default
(mainnet-sized) devnet all the same: a challenged checkpoint goes through the availability court.

:func:`build_demo_job` writes a spec file (without its dataset CID and size, which
``submit post --data`` fills in) and the dataset next to it, exactly what a person
would hand to ``veritrain submit post``; :func:`evaluate_model` scores a fetched model
on the dataset's held-out split and :func:`sample_text` shows what a text model writes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from core.contracts import TokenAmount
from proofs.data import load_dataset
from proofs.datasets import ReferenceJob, reference_job, shakespeare_tokens
from proofs.evaluate import Evaluation, evaluate, sample_tokens
from proofs.replay import initial_state
from proofs.spec import JobSpec, load_spec
from proofs.tokenizer import shipped
from submitter.errors import SubmitError

#: name -> (reference job of the proofs engine, steps, checkpoint interval, what it is)
DEMO_JOBS: dict[str, tuple[str, int, int, str]] = {
    "mlp-spirals": ("mlp-spirals", 1000, 50, "MLP 2-64-64-3 on 3 interleaved spirals, SGD+momentum, 1000 steps, k=50"),
    "char-text": ("char-text", 600, 50, "2-layer character transformer on the shipped tale, Adam, 600 steps, k=50"),
    "cnn-shapes": ("cnn-shapes", 400, 50, "2-conv CNN on 16x16 noisy shapes, Adam, 400 steps, k=50"),
    "tiny": ("mlp-spirals", 200, 20, "MLP on spirals, 200 steps, k=20 (tests)"),
}
#: name -> (GPT sizes, steps, checkpoint interval, batch size, what it is): AdamW, a warmup of a tenth
#: of the steps then cosine decay, gradients clipped to norm 1, torch numerics (fast BLAS; solver and
#: verifier run on the same kind of CPU).
GPT_JOBS: dict[str, tuple[dict[str, int], int, int, int, str]] = {
    "gpt-mini": (
        {"block_size": 64, "n_layer": 5, "n_head": 6, "n_embd": 384},
        200,
        50,
        8,
        "GPT of 10.4M parameters on the shipped Shakespeare (BPE tokens), AdamW, warmup-cosine, 200 steps of 8x64 tokens, k=50",
    ),
    "gpt2-small": (
        {"vocab_size": 50257, "block_size": 1024, "n_layer": 12, "n_head": 12, "n_embd": 768},
        20,
        10,
        1,
        "GPT-2 small (124M parameters: its 50,257-token vocabulary, 12 layers, 12 heads, 768 wide, 1024 tokens of context) on the shipped Shakespeare, AdamW, 20 steps of 1x1024 tokens, k=10 (bench)",
    ),
    "gpt-tiny": (
        {"block_size": 16, "n_layer": 1, "n_head": 2, "n_embd": 32},
        20,
        10,
        4,
        "GPT of 144k parameters on the shipped Shakespeare, 20 steps, k=10 (tests)",
    ),
}
#: The gpt jobs' commit window: the devnet's longest (``maxCommitWindow``), room for a busy machine.
GPT_COMMIT_WINDOW = 900


@dataclass(frozen=True)
class TextCodec:
    """How a text model's tokens are written and read, and the prompt its samples continue."""

    encode: Callable[[str], list[int]]
    decode: Callable[[Sequence[int]], str]
    prompt: str
    vocab_size: Callable[[], int]  # the ids ``decode`` reads: a sample draws among these only


#: The shipped tale is ASCII, one token per byte.
BYTES_CODEC = TextCodec(lambda text: list(text.encode("ascii")), lambda tokens: bytes(tokens).decode("ascii", errors="replace"), "The ", lambda: 256)
#: The shipped tokenizer's tokens; a sample starts as the corpus's speeches do.
BPE_CODEC = TextCodec(lambda text: list(shipped().encode(text)), lambda tokens: shipped().decode(tokens), "Romeo.\n", lambda: shipped().vocab_size)
#: Demo jobs that model text, and how their tokens read.
TEXT_CODECS: dict[str, TextCodec] = {"char-text": BYTES_CODEC, **dict.fromkeys(GPT_JOBS, BPE_CODEC)}
#: Tokens sampled before and after training.
SAMPLE_TOKENS = 120


@dataclass(frozen=True)
class DemoJob:
    name: str
    description: str
    spec_path: Path
    data_path: Path
    test_data: bytes
    reward: TokenAmount = TokenAmount(10 * 10**18)
    fee: TokenAmount = TokenAmount(2 * 10**18)
    commit_window: int = 600
    text: TextCodec | None = None


def build_demo_job(name: str, folder: Path, *, steps: int | None = None, checkpoint_interval: int | None = None) -> DemoJob:
    """Write ``spec.json`` and ``dataset.safetensors`` for demo job ``name`` into ``folder``."""
    if name in GPT_JOBS:
        sizes, default_steps, default_k, batch, description = GPT_JOBS[name]
        job = gpt_job(name, sizes, steps or default_steps, checkpoint_interval or default_k, batch)
        reference, window = name, GPT_COMMIT_WINDOW
    elif name in DEMO_JOBS:
        reference, default_steps, default_k, description = DEMO_JOBS[name]
        job = reference_job(reference, steps=steps or default_steps, checkpoint_interval=checkpoint_interval or default_k)
        window = DemoJob.commit_window
    else:
        raise SubmitError(f"no demo job {name!r}; choose one of {', '.join([*DEMO_JOBS, *GPT_JOBS])}")
    folder.mkdir(parents=True, exist_ok=True)
    spec_path = folder / "spec.json"
    data_path = folder / "dataset.safetensors"
    spec_path.write_text(json.dumps(job.template, indent=2) + "\n")
    data_path.write_bytes(job.dataset)
    if steps or checkpoint_interval:
        description = f"{reference}, {job.template['steps']} steps, k={job.template['checkpoint_interval']}"
    return DemoJob(name, description, spec_path, data_path, job.test_dataset, commit_window=window, text=TEXT_CODECS.get(reference))


def gpt_job(name: str, sizes: dict[str, int], steps: int, checkpoint_interval: int, batch_size: int) -> ReferenceJob:
    """A GPT of ``sizes`` on the shipped Shakespeare corpus (``u16`` tokens of the shipped tokenizer)."""
    template = {
        "model": {"kind": "gpt", "vocab_size": shipped().vocab_size, **sizes, "bias": False},
        "dataset": {"format": "u16", "inputs": "x", "targets": None},
        "optimizer": {"kind": "adamw", "lr": 0.002, "weight_decay": 0.1},
        "schedule": {"kind": "warmup-cosine", "warmup_steps": max(1, steps // 10), "min_lr": 0.0002},
        "grad_clip": 1.0,
        "numerics": "torch",
        "batch_size": batch_size,
        "steps": steps,
        "seed": 5,
        "checkpoint_interval": checkpoint_interval,
    }
    return ReferenceJob(name, shakespeare_tokens("train"), shakespeare_tokens("test"), template)


def posted_spec(job: DemoJob, dataset_cid: str) -> JobSpec:
    """The spec as posted: the file with its dataset's CID and size filled in."""
    raw = json.loads(job.spec_path.read_text())
    return load_spec({**raw, "dataset": {**raw["dataset"], "cid": dataset_cid, "size_bytes": job.data_path.stat().st_size}})


def sample_text(job: DemoJob, dataset_cid: str, model: bytes | None = None) -> str | None:
    """What the job's text model writes after its prompt: with ``model`` (a checkpoint, e.g. the final
    one), else with its initial weights (checkpoint 0, computed here from the spec); None for a job
    that does not model text."""
    if job.text is None:
        return None
    spec = posted_spec(job, dataset_cid)
    checkpoint = model if model is not None else initial_state(spec, load_dataset(spec, job.data_path.read_bytes()))
    tokens = sample_tokens(spec, checkpoint, job.text.encode(job.text.prompt), SAMPLE_TOKENS, seed=spec.seed, vocab=job.text.vocab_size())
    return job.text.prompt + job.text.decode(tokens)


def evaluate_model(job: DemoJob, model_path: Path, dataset_cid: str) -> dict[str, float]:
    """Test loss and accuracy of a fetched model (the final checkpoint) on the held-out split."""
    spec = posted_spec(job, dataset_cid)
    test_spec = spec.model_copy(update={"dataset": spec.dataset.model_copy(update={"size_bytes": len(job.test_data)})})
    result: Evaluation = evaluate(spec, model_path.read_bytes(), load_dataset(test_spec, job.test_data))
    return {"test_loss": round(result.loss, 4), "test_accuracy": round(result.accuracy, 4), "test_examples": result.examples}
