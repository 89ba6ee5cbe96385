"""A sealed job's checkpoints (docs/sealing.md, step 4): sealed canonically under its data key, so a
leaf is the keccak256 of sealed bytes that anyone can check against it, and only a key holder can
train, replay or referee from them."""

from __future__ import annotations

from typing import Any

import pytest

from core.sealing import MAGIC, new_data_key, open_canonical, seal
from proofs.adversary import cheat
from proofs.checkpoint import decode_checkpoint, state_hash
from proofs.data import load_dataset
from proofs.errors import CheckpointError, ProofError
from proofs.replay import Reason, check_norm, replay_segment
from proofs.steps import execute_step
from proofs.train import Trainer, train_trace
from tests.proofs.conftest import make_spec, replay_committed

KEY = bytes(range(32))


@pytest.fixture(scope="module")
def sealed(datasets: dict[str, bytes]) -> Any:
    data = datasets["mlp"]
    spec = make_spec(
        "mlp", data, steps=12, dataset={"cid": "QmTestDataset", "format": "safetensors", "size_bytes": len(data) + 100, "targets": "y", "sealed": True}
    )
    dataset = load_dataset(spec, data, data_key=KEY)
    return spec, dataset, train_trace(spec, dataset)


def test_every_checkpoint_is_sealed_and_its_leaf_is_the_sealed_bytes_hash(sealed) -> None:
    spec, dataset, trace = sealed
    assert len(trace.checkpoints) == spec.segments + 1
    for data, leaf in zip(trace.checkpoints, trace.state_hashes):
        assert data[: len(MAGIC)] == MAGIC
        assert state_hash(data) == leaf
        assert decode_checkpoint(data, data_key=KEY, expect_hash=leaf).spec_hash == spec.spec_hash()
    assert train_trace(spec, dataset).state_hashes == trace.state_hashes  # deterministic: a regenerated checkpoint keeps its CID
    assert Trainer(spec, dataset).state_hash() == trace.state_hashes[0]


def test_a_sealed_trace_replays_with_the_key_and_is_unreadable_without(sealed, datasets: dict[str, bytes]) -> None:
    spec, dataset, trace = sealed
    for seg in range(spec.segments):
        assert replay_committed(spec, dataset, trace, seg).passed
    assert check_norm(1, trace.checkpoints[1], trace.checkpoints[2], trace.update_norms[1], KEY).passed
    after = execute_step(spec, dataset, trace.checkpoints[1])
    assert after[: len(MAGIC)] == MAGIC and decode_checkpoint(after, data_key=KEY).step == spec.checkpoint_interval + 1
    with pytest.raises(CheckpointError, match="data key is needed"):
        decode_checkpoint(trace.checkpoints[1])
    with pytest.raises(CheckpointError, match="does not open"):
        decode_checkpoint(trace.checkpoints[1], data_key=new_data_key())
    with pytest.raises(ProofError, match="load its dataset with the key"):
        Trainer(spec, load_dataset(spec, datasets["mlp"]))  # the plaintext without the key: no checkpoint can be made


def test_a_checkpoint_sealed_any_other_way_fails_its_segment(sealed) -> None:
    spec, dataset, trace = sealed
    plain = open_canonical(KEY, trace.checkpoints[2])
    for other in (plain, seal(KEY, plain)):  # the plaintext itself; a valid sealing with a random nonce prefix
        verdict = replay_segment(spec, dataset, 1, trace.checkpoints[1], other, end_hash=state_hash(other))
        assert not verdict.passed and verdict.reason is Reason.MALFORMED, verdict.detail


@pytest.mark.parametrize("strategy", ["tamper", "skip-steps", "wrong-data"])
def test_a_cheat_on_a_sealed_job_is_caught_at_its_bad_segments(strategy: str, sealed) -> None:
    spec, dataset, _ = sealed
    faked = cheat(strategy, spec, dataset)
    assert all(c[: len(MAGIC)] == MAGIC for c in faked.trace.checkpoints)
    for seg in range(spec.segments):
        verdict = replay_committed(spec, dataset, faked.trace, seg)
        assert verdict.passed == (seg not in faked.bad_segments), (strategy, seg, verdict.detail)
