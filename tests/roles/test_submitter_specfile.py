"""``submit post --init``: the pretrained weights a fine-tuning job starts from are checked against
the spec's model before anything is uploaded, uploaded with the dataset, and named in the spec by CID."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import save

from core.storage import LocalStore, file_cid
from proofs.checkpoint import decode_checkpoint
from proofs.data import load_dataset
from proofs.datasets import reference_job
from proofs.replay import initial_state
from submitter.errors import SubmitError
from submitter.specfile import publish, read_job


def test_pretrained_weights_are_checked_uploaded_and_named_by_cid(tmp_path: Path) -> None:
    ref = reference_job("mlp-spirals", steps=20, checkpoint_interval=10)
    template = {k: v for k, v in ref.template.items() if k != "dataset"} | {"dataset": {"format": "safetensors"}}
    spec_path, data_path = tmp_path / "job.json", tmp_path / "data.safetensors"
    spec_path.write_text(json.dumps(template))
    data_path.write_bytes(ref.dataset)
    seeded = ref.spec(file_cid(ref.dataset))
    params = decode_checkpoint(initial_state(seeded, load_dataset(seeded, ref.dataset))).params()
    weights = {name: t + 1.0 for name, t in params.items()}
    init_path = tmp_path / "weights.safetensors"
    init_path.write_bytes(save(weights))
    store = LocalStore(tmp_path / "store")

    draft = read_job(spec_path, data_path, store, init_path)
    assert draft.spec.init is not None and draft.spec.init.cid == file_cid(init_path.read_bytes())
    assert not store.has(draft.spec.init.cid)  # nothing uploaded before publish
    publish(draft, store)
    assert store.get(draft.spec.init.cid, draft.spec.init.size_bytes) == init_path.read_bytes()
    zero = decode_checkpoint(initial_state(draft.spec, load_dataset(draft.spec, ref.dataset, init_path.read_bytes())))
    assert all(torch.equal(zero.params()[n], t) for n, t in weights.items())  # checkpoint 0 is the named model

    named = tmp_path / "named.json"  # a spec naming weights already in the store needs no --init
    named.write_text(json.dumps(template | {"init": draft.spec.init.model_dump()}))
    assert read_job(named, data_path, store).spec == draft.spec
    missing = tmp_path / "missing.json"
    missing.write_text(json.dumps(template | {"init": {"cid": file_cid(b"other"), "size_bytes": 5}}))
    with pytest.raises(SubmitError, match="give the file with --init"):
        read_job(missing, data_path, store)
    init_path.write_bytes(save({name: t for name, t in weights.items() if name != "layers.0.bias"}))
    with pytest.raises(SubmitError, match="names must match"):
        read_job(spec_path, data_path, store, init_path)
