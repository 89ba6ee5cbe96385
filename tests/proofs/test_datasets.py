from __future__ import annotations

import pytest

from proofs import LimitExceeded, evaluate, load_dataset, parse_manifest, train_trace
from proofs.datasets import REFERENCE_JOBS, reference_job, shapes, spirals, text_tokens
from proofs.manifest import MAX_MANIFEST_BYTES


def test_builders_are_pure_functions_of_their_seed() -> None:
    assert spirals(3) == spirals(3) and spirals(3) != spirals(4)
    assert shapes(3, count=64) == shapes(3, count=64)
    assert text_tokens("train") != text_tokens("test")


@pytest.mark.parametrize("name", REFERENCE_JOBS)
def test_reference_jobs_load_and_fit_their_specs(name: str) -> None:
    job = reference_job(name, steps=100, checkpoint_interval=50)
    spec = job.spec("QmDataset")
    assert spec.dataset.size_bytes == len(job.dataset) and spec.segments == 2
    load_dataset(spec, job.dataset)
    assert job.test_set(spec).inputs.shape[0] > 0


def test_unknown_reference_job_names_the_choices() -> None:
    with pytest.raises(KeyError, match="mlp-spirals"):
        reference_job("imagenet")


def test_training_the_reference_mlp_beats_chance_on_held_out_data() -> None:
    job = reference_job("mlp-spirals", steps=300, checkpoint_interval=50)
    spec = job.spec("QmDataset")
    trace = train_trace(spec, load_dataset(spec, job.dataset))
    before = evaluate(spec, trace.checkpoints[0], job.test_set(spec))
    after = evaluate(spec, trace.checkpoints[-1], job.test_set(spec))
    assert after.loss < before.loss and after.accuracy > 0.6 > 1 / 3


def test_oversize_manifest_is_refused_before_parsing() -> None:
    with pytest.raises(LimitExceeded):
        parse_manifest(b" " * (MAX_MANIFEST_BYTES + 1))
