from __future__ import annotations

import math
import struct

import numpy as np
import pytest
import torch
from safetensors.torch import save as safetensors_save

from proofs.checkpoint import decode_checkpoint, encode_checkpoint, state_hash, update_norm
from proofs.errors import CheckpointError, HashMismatch, LimitExceeded
from proofs.spec import Limits

SPEC = "0x" + "11" * 32


def sample() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    return {"param.b": torch.randn(3, generator=g), "param.a": torch.randn(2, 5, generator=g), "optim.a.momentum": torch.zeros(2, 5)}


def test_round_trip_keeps_step_spec_and_bits() -> None:
    data = encode_checkpoint(40, sample(), SPEC)
    ckpt = decode_checkpoint(data, expect_hash=state_hash(data), expect_spec=SPEC)
    assert ckpt.step == 40 and ckpt.spec_hash == SPEC
    for name, t in sample().items():
        assert torch.equal(ckpt.tensors[name], t)
    assert ckpt.to_bytes() == data
    assert sorted(ckpt.params()) == ["a", "b"]


def test_encoding_is_canonical_whatever_the_insertion_order() -> None:
    tensors = sample()
    reordered = dict(reversed(list(tensors.items())))
    assert encode_checkpoint(1, tensors, SPEC) == encode_checkpoint(1, reordered, SPEC)
    data = encode_checkpoint(1, tensors, SPEC)
    (head,) = struct.unpack("<Q", data[:8])
    assert head % 8 == 0


@pytest.mark.parametrize("cut", [0, 5, 8, 40, -1, -7])
def test_truncated_checkpoint_is_a_clear_error(cut: int) -> None:
    data = encode_checkpoint(1, sample(), SPEC)
    with pytest.raises(CheckpointError, match="truncated|safetensors"):
        decode_checkpoint(data[:cut])


def test_flipped_byte_fails_the_committed_hash() -> None:
    data = bytearray(encode_checkpoint(1, sample(), SPEC))
    committed = state_hash(bytes(data))
    data[-3] ^= 0x01
    with pytest.raises(HashMismatch, match="committed"):
        decode_checkpoint(bytes(data), expect_hash=committed)


def test_valid_safetensors_that_is_not_canonical_is_refused() -> None:
    # The library's own writer: valid safetensors, but other header layout and metadata order.
    data = safetensors_save(sample(), metadata={"step": "1", "spec": SPEC, "format": "veritrain-checkpoint/1"})
    if data == encode_checkpoint(1, sample(), SPEC):
        pytest.skip("safetensors wrote the canonical form itself")
    with pytest.raises(CheckpointError, match="canonical"):
        decode_checkpoint(data)


def test_wrong_format_tag_spec_and_dtype_are_refused() -> None:
    with pytest.raises(CheckpointError, match="format"):
        decode_checkpoint(safetensors_save(sample()))
    with pytest.raises(CheckpointError, match="spec"):
        decode_checkpoint(encode_checkpoint(1, sample(), SPEC), expect_spec="0x" + "22" * 32)
    with pytest.raises(CheckpointError, match="float32"):
        encode_checkpoint(1, {"param.x": torch.zeros(2, dtype=torch.float64)}, SPEC)
    doubles = safetensors_save({"param.x": torch.zeros(2, dtype=torch.float64)}, metadata={"format": "veritrain-checkpoint/1", "spec": SPEC, "step": "0"})
    with pytest.raises(CheckpointError, match="float32"):
        decode_checkpoint(doubles)


def test_oversize_checkpoint_is_refused_before_hashing() -> None:
    class Huge(bytes):
        def __len__(self) -> int:
            return Limits.CHECKPOINT_BYTES + 1

    with pytest.raises(LimitExceeded):
        decode_checkpoint(Huge(b"x"))


def test_update_norm_is_the_l2_norm_of_the_difference() -> None:
    a = {"w": torch.tensor([1.0, 2.0]), "b": torch.tensor([0.0])}
    b = {"w": torch.tensor([4.0, 6.0]), "b": torch.tensor([0.0])}
    assert update_norm(a, b) == 5.0
    with pytest.raises(CheckpointError):
        update_norm(a, {"w": b["w"]})


def _norm_through_float64_copies(before: dict[str, torch.Tensor], after: dict[str, torch.Tensor]) -> float:
    """update_norm as it was computed before (whole float64 copies, numpy's sum): the committed
    norms of every trace made since are these bits."""
    parts = []
    for name in sorted(before):
        d = after[name].numpy().astype(np.float64) - before[name].numpy().astype(np.float64)
        parts.append(float(np.sum(d * d)))
    return math.sqrt(math.fsum(parts))


def test_update_norm_has_the_bits_of_numpys_sum_over_float64_copies() -> None:
    rng = np.random.default_rng(7)
    sizes = [*range(300), 1023, 8191, 8192, 8193, 100_003, 1 << 20]
    for n in sizes:
        scale = np.float32(10.0 ** rng.uniform(-4, 3))
        a = (rng.standard_normal(n) * scale).astype(np.float32)
        b = (a + rng.standard_normal(n).astype(np.float32) * np.float32(1e-3) * scale).astype(np.float32)
        before, after = {"w": torch.from_numpy(a)}, {"w": torch.from_numpy(b)}
        assert update_norm(before, after) == _norm_through_float64_copies(before, after), n
    before = {"w": torch.from_numpy(rng.standard_normal((301, 997)).astype(np.float32)), "b": torch.zeros(5), "e": torch.zeros(0)}
    after = {"w": before["w"] * 1.001, "b": torch.ones(5) / 3, "e": torch.zeros(0)}
    assert update_norm(before, after) == _norm_through_float64_copies(before, after)
    with pytest.raises(CheckpointError):
        update_norm(before, {**after, "b": torch.zeros(6)})
