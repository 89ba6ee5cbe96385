"""The Committer (checkpoints hashed and written off the training thread) gives the bytes, state hashes,
CIDs and update norms of the plain path, keeps one checkpoint in flight, and fails the job on a failed write."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from core.storage import LocalStore
from proofs.checkpoint import StateBuffer, decode_checkpoint, encode_checkpoint, hash_state, state_hash, update_norm
from proofs.data import load_dataset
from proofs.datasets import reference_job
from proofs.replay import _LEAF, distances, moved_frozen
from proofs.train import Committed, Committer, Trainer, train_trace


def _job(name: str = "char-text", steps: int = 30, k: int = 10) -> tuple[Trainer, int]:
    ref = reference_job(name, steps=steps, checkpoint_interval=k)
    spec = ref.spec("QmBench")
    return Trainer(spec, load_dataset(spec, ref.dataset)), k


@pytest.mark.parametrize("name", ["mlp-spirals", "cnn-shapes", "char-text"])
def test_committed_bytes_hashes_cids_and_norms_are_those_of_the_plain_path(name: str, tmp_path: Path) -> None:
    trainer, k = _job(name)
    twin, _ = _job(name)
    store = LocalStore(tmp_path)
    written: list[bytes] = []
    done: list[Committed] = []
    with Committer(lambda _i, data: written.append(bytes(data)), done.append) as committer:
        for index in range(4):
            committer.commit(index, trainer, float(index) if index else None)
            trainer.run(k)
    # the plain path: encode, keccak, ``ipfs add``'s CID, the norm against a clone
    before = None
    for index in range(4):
        data = encode_checkpoint(twin.step, twin.tensors(), twin.stamp)
        params = {n: p.detach().clone() for n, p in twin.params.items()}
        assert written[index] == data
        assert done[index] == Committed(
            index, state_hash(data), store.put(data), float(index) if index else None, update_norm(before, params) if before else None
        )
        before = params
        twin.run(k)


def test_train_trace_keeps_and_puts_what_it_commits(tmp_path: Path) -> None:
    ref = reference_job("mlp-spirals", steps=40, checkpoint_interval=10)
    spec = ref.spec("QmBench")
    store = LocalStore(tmp_path)
    trace = train_trace(spec, load_dataset(spec, ref.dataset), put=store.put)
    assert list(trace.state_hashes) == [state_hash(c) for c in trace.checkpoints]
    assert list(trace.cids) == [store.put(c) for c in trace.checkpoints]
    params = [decode_checkpoint(c).params() for c in trace.checkpoints]
    assert list(trace.update_norms) == [update_norm(a, b) for a, b in zip(params, params[1:])]


def test_one_checkpoint_in_flight_in_one_reused_buffer() -> None:
    trainer, k = _job()
    events: list[str] = []
    buffers: set[int] = set()

    def write(index: int, data: memoryview) -> None:
        events.append(f"write {index}")
        buffers.add(id(data.obj))

    def record(done: Committed) -> None:
        events.append(f"record {done.index}")

    with Committer(write, record) as committer:
        for index in range(4):
            committer.commit(index, trainer, 1.0 if index else None)
            events.append(f"handed {index}")
            trainer.run(k)
    # checkpoint i+1 is copied into the buffer only once checkpoint i is written and recorded
    assert [e for e in events if not e.startswith("handed")] == [f"{what} {i}" for i in range(4) for what in ("write", "record")]
    assert all(events.index(f"record {i}") < events.index(f"handed {i + 1}") for i in range(3))
    assert len(buffers) == 1


def test_a_failed_write_fails_the_training_not_silently() -> None:
    trainer, k = _job()

    def write(index: int, _data: memoryview) -> None:
        if index == 2:
            raise OSError("disk full")

    done: list[Committed] = []
    with pytest.raises(OSError, match="disk full"), Committer(write, done.append) as committer:
        for index in range(4):
            committer.commit(index, trainer, 1.0 if index else None)
            trainer.run(k)
    assert [c.index for c in done] == [0, 1]  # the failed checkpoint is never recorded
    with pytest.raises(OSError, match="disk full"):  # a failing put fails train_trace the same way
        ref = reference_job("mlp-spirals", steps=20, checkpoint_interval=10)
        spec = ref.spec("QmBench")
        train_trace(spec, load_dataset(spec, ref.dataset), put=lambda _data: (_ for _ in ()).throw(OSError("disk full")))


def test_state_buffer_and_in_place_hash_are_the_encoding() -> None:
    trainer, k = _job()
    buffer = StateBuffer()
    for _ in range(2):
        data = encode_checkpoint(trainer.step, trainer.tensors(), trainer.stamp)
        assert bytes(buffer.write(trainer.step, trainer.tensors(), trainer.stamp)) == data == bytes(buffer.view())
        assert hash_state(trainer.step, trainer.tensors(), trainer.stamp) == trainer.state_hash() == state_hash(data)
        trainer.run(k)


def test_decoded_tensors_are_views_of_the_bytes() -> None:
    trainer, _ = _job()
    data = bytearray(trainer.to_bytes())
    ckpt = decode_checkpoint(memoryview(data))
    start = np.frombuffer(data, dtype=np.uint8).ctypes.data
    for name, t in ckpt.tensors.items():
        assert start <= t.data_ptr() < start + len(data)
        assert torch.equal(t, trainer.tensors()[name])
    assert decode_checkpoint(bytes(data)).to_bytes() == bytes(data)


def test_distances_in_pieces_are_the_whole_vector_sums() -> None:
    g = torch.Generator().manual_seed(3)
    shapes = {"a": (3 * _LEAF + 17,), "b": (129, 1031), "c": (5,), "d": (0,)}
    x = {n: torch.randn(s, generator=g) for n, s in shapes.items()}
    y = {n: t + 1e-3 * torch.randn(t.shape, generator=g) for n, t in x.items()}
    got = distances(x, y)
    a = np.concatenate([x[n].numpy().astype(np.float64).ravel() for n in sorted(x)])
    b = np.concatenate([y[n].numpy().astype(np.float64).ravel() for n in sorted(y)])
    d = a - b
    norm_a, norm_b, norm_d = (math.sqrt(float(np.sum(v * v))) for v in (a, b, d))
    assert got.l2 == norm_d / norm_b
    assert got.linf == float(np.max(np.abs(d)))
    assert got.cosine == max(0.0, 1.0 - float(np.sum(a * b)) / (norm_a * norm_b))
    frozen = {n: t.clone() for n, t in x.items()}
    frozen["b"].view(-1)[:10] = y["b"].view(-1)[:10]
    assert moved_frozen(x, frozen, y) == int(np.count_nonzero((a == np.concatenate([frozen[n].numpy().ravel() for n in sorted(x)])) & (b != a)))
