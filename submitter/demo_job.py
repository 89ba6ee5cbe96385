"""Ready-made jobs on the proofs engine's shipped datasets: for the demo, the e2e tests and first steps.

:func:`build_demo_job` writes a spec file (without its dataset CID and size, which
``submit post --data`` fills in) and the dataset next to it, exactly what a person
would hand to ``veritrain submit post``; :func:`evaluate_model` scores a fetched model
on the dataset's held-out split.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from core.contracts import TokenAmount
from proofs import Evaluation, evaluate, load_dataset, load_spec
from proofs.datasets import reference_job
from submitter.errors import SubmitError

#: name -> (reference job of the proofs engine, steps, checkpoint interval, what it is)
DEMO_JOBS: dict[str, tuple[str, int, int, str]] = {
    "mlp-spirals": ("mlp-spirals", 1000, 50, "MLP 2-64-64-3 on 3 interleaved spirals, SGD+momentum, 1000 steps, k=50"),
    "char-text": ("char-text", 600, 50, "2-layer character transformer on the shipped tale, Adam, 600 steps, k=50"),
    "cnn-shapes": ("cnn-shapes", 400, 50, "2-conv CNN on 16x16 noisy shapes, Adam, 400 steps, k=50"),
    "tiny": ("mlp-spirals", 200, 20, "MLP on spirals, 200 steps, k=20 (tests)"),
}


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


def build_demo_job(name: str, folder: Path, *, steps: int | None = None, checkpoint_interval: int | None = None) -> DemoJob:
    """Write ``spec.json`` and ``dataset.safetensors`` for demo job ``name`` into ``folder``."""
    if name not in DEMO_JOBS:
        raise SubmitError(f"no demo job {name!r}; choose one of {', '.join(DEMO_JOBS)}")
    reference, default_steps, default_k, description = DEMO_JOBS[name]
    job = reference_job(reference, steps=steps or default_steps, checkpoint_interval=checkpoint_interval or default_k)
    folder.mkdir(parents=True, exist_ok=True)
    spec_path = folder / "spec.json"
    data_path = folder / "dataset.safetensors"
    spec_path.write_text(json.dumps(job.template, indent=2) + "\n")
    data_path.write_bytes(job.dataset)
    if steps or checkpoint_interval:
        description = f"{reference}, {job.template['steps']} steps, k={job.template['checkpoint_interval']}"
    return DemoJob(name, description, spec_path, data_path, job.test_dataset)


def evaluate_model(job: DemoJob, model_path: Path, dataset_cid: str) -> dict[str, float]:
    """Test loss and accuracy of a fetched model (the final checkpoint) on the held-out split."""
    raw = json.loads(job.spec_path.read_text())
    train_bytes = job.data_path.read_bytes()
    spec = load_spec({**raw, "dataset": {**raw["dataset"], "cid": dataset_cid, "size_bytes": len(train_bytes)}})
    test_spec = spec.model_copy(update={"dataset": spec.dataset.model_copy(update={"size_bytes": len(job.test_data)})})
    result: Evaluation = evaluate(spec, model_path.read_bytes(), load_dataset(test_spec, job.test_data))
    return {"test_loss": round(result.loss, 4), "test_accuracy": round(result.accuracy, 4), "test_examples": result.examples}
