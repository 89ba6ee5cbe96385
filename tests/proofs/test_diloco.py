"""The multi-party engine (proofs/diloco.py): shards, int8 compression and its bytes, top-k with
error feedback, and the verified outer step (its bits, its order independence, its check)."""

from __future__ import annotations

import json
import math
import os
import struct
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from safetensors.torch import save as save_safetensors

from core.storage import file_cid
from proofs.checkpoint import decode_checkpoint, encode_checkpoint
from proofs.data import BatchOrder, Dataset, load_dataset
from proofs.datasets import spirals, text_tokens
from proofs.diloco import (
    MAGIC,
    Contribution,
    ContributionError,
    MultipartyConfig,
    OuterState,
    PartyRound,
    aggregate,
    check_aggregate,
    check_contribution,
    check_round,
    compress,
    contribution_hash,
    contribution_of,
    decode_contribution,
    decode_document,
    decompress,
    encode_contribution,
    encode_document,
    inner_spec,
    judge_round,
    party_dataset,
    party_job,
    pseudo_gradient,
    residual_after,
    shard_indices,
    shard_of,
    train_party,
)
from proofs.errors import ProofError
from proofs.pack import pack_images
from proofs.replay import check_start
from proofs.train import Trainer, train_trace
from tests.proofs.conftest import CHILD_LIVENESS_S, make_spec, replay_committed

CHILD = Path(__file__).with_name("diloco_child.py")
ROOT = Path(__file__).resolve().parents[2]  # the child imports this checkout's engine
STAMP = "0x" + "ab" * 32
SHAPES = {"a.weight": (7, 33), "a.bias": (7,), "b.weight": (3, 7), "c": (0,)}


def _tensors(seed: int, scale: float = 1.0) -> dict[str, torch.Tensor]:
    rng = np.random.Generator(np.random.PCG64(seed))
    return {n: torch.from_numpy((rng.standard_normal(s) * scale).astype(np.float32)) for n, s in SHAPES.items()}


def _round(parties: int = 4, cfg: MultipartyConfig | None = None) -> tuple[OuterState, dict[int, bytes], MultipartyConfig]:
    """A round's state (with a non-zero momentum) and ``parties`` encoded dense contributions."""
    cfg = cfg or MultipartyConfig(parties=parties, rounds=3, inner_steps=5, block_size=16)
    start = OuterState.start(_tensors(1))
    state = OuterState(1, start.params, _tensors(2, 0.01))
    contributions = {p: encode_contribution(compress(_tensors(10 + p, 0.05), cfg.block_size)[0]) for p in range(parties)}
    return state, contributions, cfg


# ----------------------------------------------------------------------------- compression


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(0, 700),
    block=st.sampled_from([1, 3, 16, 256]),
    exponent=st.integers(-40, 30),
    zeros=st.booleans(),
)
def test_int8_round_trip_is_within_the_quantization_bound(seed: int, n: int, block: int, exponent: int, zeros: bool) -> None:
    rng = np.random.Generator(np.random.PCG64(seed))
    x = (rng.standard_normal(n) * 2.0**exponent).astype(np.float32)
    if zeros and n:
        x[: min(n, block + 1)] = 0  # at least one whole zero block
    c, residual = compress({"w": torch.from_numpy(x)}, block)
    assert residual is None
    back = decode_contribution(encode_contribution(c))
    assert encode_contribution(back) == encode_contribution(c)
    y = decompress(back)["w"].numpy()
    scales = np.repeat(c.tensors["w"].scales, block)[:n].astype(np.float64)
    err = np.abs(y.astype(np.float64) - x.astype(np.float64))
    # half a step, one rounding of the product, and (a block whose max/127 underflows to 0) all of it
    bound = scales / 2 + np.abs(y) * 2.0**-24 + np.where(scales == 0, np.abs(x), 0) + 2.0**-149
    assert np.all(err <= bound)
    if zeros and n:
        assert c.tensors["w"].scales[0] == 0 and np.all(y[:block] == 0)
    assert np.all(np.abs(c.tensors["w"].values.astype(np.int16)) <= 127)


def test_compression_is_round_half_to_even_with_scale_max_over_127() -> None:
    x = np.array([127.0, 0.5, 1.5, -2.5, -127.0, 63.5], dtype=np.float32)
    c, _ = compress({"w": torch.from_numpy(x)}, 8)
    t = c.tensors["w"]
    assert t.scales.tolist() == [1.0]
    assert t.values.tolist() == [127, 0, 2, -2, -127, 64]


def test_top_k_keeps_the_largest_ties_to_the_lower_index_and_feeds_back_the_rest() -> None:
    v = np.array([1.0, -3.0, 3.0, 0.5, -3.0, 2.0, 0.0, 0.25], dtype=np.float32)
    c, residual = compress({"w": torch.from_numpy(v)}, 4, keep=0.3)  # ceil(2.4) = 3 kept
    t = c.tensors["w"]
    assert t.indices is not None and t.indices.tolist() == [1, 2, 4]
    assert residual is not None
    sent = decompress(c)["w"].numpy()
    assert np.array_equal(np.subtract(v, sent), residual["w"].numpy())
    assert sent[[0, 3, 5, 6, 7]].tolist() == [0.0] * 5
    # the residual goes out in a later round: over rounds, what was sent plus what is held is what was made
    deltas = [_tensors(20 + r, 0.1) for r in range(6)]
    carried = None
    total_sent = {n: np.zeros(s, dtype=np.float64) for n, s in SHAPES.items()}
    for d in deltas:
        c, carried = compress(d, 16, keep=0.2, residual=carried)
        for n, s in decompress(c).items():
            total_sent[n] += s.numpy()
    assert carried is not None
    for n in SHAPES:
        made = sum(d[n].numpy().astype(np.float64) for d in deltas)
        assert np.allclose(total_sent[n] + carried[n].numpy(), made, atol=1e-5)


def test_compression_refuses_non_finite_values() -> None:
    with pytest.raises(ProofError, match="NaN or infinite"):
        compress({"w": torch.tensor([1.0, math.nan])})


# ----------------------------------------------------------------------------- bytes


def _one_tensor(kind: int, values: bytes, scales: list[float], shape: tuple[int, ...], indices: list[int] | None = None, name: bytes = b"w") -> bytes:
    head = MAGIC + struct.pack("<II", 4, 1) + struct.pack("<H", len(name)) + name + struct.pack("<B", len(shape)) + struct.pack(f"<{len(shape)}I", *shape)
    body = struct.pack("<B", kind)
    if kind == 1:
        assert indices is not None
        body += struct.pack("<I", len(indices)) + struct.pack(f"<{len(indices)}I", *indices)
    return head + body + struct.pack(f"<{len(scales)}f", *scales) + values


def test_decoder_takes_a_hand_written_layout() -> None:
    c = decode_contribution(_one_tensor(0, bytes([1, 2, 255, 0, 5]), [0.5, 2.0], (5,)))
    assert decompress(c)["w"].tolist() == [0.5, 1.0, -0.5, 0.0, 10.0]
    c = decode_contribution(_one_tensor(1, bytes([1, 2]), [0.5], (2, 3), [0, 5]))
    assert decompress(c)["w"].tolist() == [[0.5, 0.0, 0.0], [0.0, 0.0, 1.0]]


@pytest.mark.parametrize(
    ("data", "match"),
    [
        (b"", "truncated"),
        (b"VTDLC02\x00" + bytes(8), "magic"),
        (MAGIC + struct.pack("<II", 0, 0), "block size"),
        (_one_tensor(0, bytes(5), [0.5, 2.0], (5,)) + b"\x00", "trailing"),
        (_one_tensor(0, bytes(4), [0.5, 2.0], (5,)), "truncated"),
        (_one_tensor(0, bytes(5), [0.5], (5,)), "truncated"),
        (_one_tensor(0, bytes(5), [math.nan, 1.0], (5,)), "NaN"),
        (_one_tensor(0, bytes(5), [math.inf, 1.0], (5,)), "NaN"),
        (_one_tensor(0, bytes(5), [-1.0, 1.0], (5,)), "negative"),
        (_one_tensor(0, bytes([0x80, 0, 0, 0, 0]), [1.0, 1.0], (5,)), "-128"),
        (_one_tensor(0, bytes([0, 0, 0, 0, 3]), [1.0, 0.0], (5,)), "scale is 0"),
        (_one_tensor(1, bytes(2), [1.0], (5,), [3, 3]), "ascending"),
        (_one_tensor(1, bytes(2), [1.0], (5,), [3, 5]), "ascending"),
        (_one_tensor(1, bytes(6), [1.0, 1.0], (5,), [0, 1, 2, 3, 4, 4]), "keeps 6 of 5"),
        (_one_tensor(2, bytes(5), [1.0, 1.0], (5,)), "kind"),
        (_one_tensor(0, bytes(5), [1.0, 1.0], (5,), name=b"a b"), "printable"),
        (_one_tensor(0, b"", [], (65536, 65536)), "more than"),
        (MAGIC + struct.pack("<II", 4, 5000), "tensors"),
    ],
)
def test_decoder_rejects_malformed_bytes(data: bytes, match: str) -> None:
    with pytest.raises(ContributionError, match=match):
        decode_contribution(data)


def test_decoder_rejects_unsorted_names_and_oversize_input() -> None:
    c, _ = compress(_tensors(3), 16)
    data = encode_contribution(c)
    with pytest.raises(ContributionError, match="at most"):
        decode_contribution(data, max_bytes=len(data) - 1)
    two = {"b": c.tensors["a.bias"], "a": c.tensors["a.bias"]}
    swapped = b"".join(
        [MAGIC, struct.pack("<II", 16, 2)] + [encode_contribution(Contribution(16, {n: t}))[len(MAGIC) + 8 :] for n, t in two.items()]  # "b" before "a"
    )
    with pytest.raises(ContributionError, match="ascending"):
        decode_contribution(swapped)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_decoder_never_fails_otherwise_on_mutated_bytes(data: st.DataObject) -> None:
    """Truncated, extended or corrupted bytes either decode to canonical bytes or raise ContributionError."""
    c, _ = compress(_tensors(data.draw(st.integers(0, 3))), 16, keep=data.draw(st.sampled_from([None, 0.3])))
    raw = bytearray(encode_contribution(c))
    action = data.draw(st.sampled_from(["cut", "extend", "flip"]))
    if action == "cut":
        raw = raw[: data.draw(st.integers(0, len(raw) - 1))]
    elif action == "extend":
        raw += data.draw(st.binary(min_size=1, max_size=16))
    else:
        for _ in range(data.draw(st.integers(1, 4))):
            raw[data.draw(st.integers(0, len(raw) - 1))] ^= data.draw(st.integers(1, 255))
    try:
        decoded = decode_contribution(bytes(raw))
    except ContributionError:
        return
    assert encode_contribution(decoded) == bytes(raw)  # what decodes is canonical: one contribution, one hash


# ----------------------------------------------------------------------------- the outer step


def test_outer_step_is_the_mean_then_nesterov() -> None:
    state, contributions, cfg = _round()
    nxt, included = aggregate(state, contributions, cfg)
    assert included == (0, 1, 2, 3) and nxt.round == 2
    for name in SHAPES:
        mean = sum(decompress(decode_contribution(contributions[p]))[name].double() for p in range(4)) / 4
        buf = state.momentum[name].double() * cfg.outer_momentum + mean
        want = state.params[name].double() - cfg.outer_lr * (mean + cfg.outer_momentum * buf)
        assert torch.allclose(nxt.momentum[name].double(), buf, atol=1e-6)
        assert torch.allclose(nxt.params[name].double(), want, atol=1e-5)
    # torch's own SGD with Nesterov momentum (dampening 0) agrees, as a formula
    p = torch.nn.Parameter(state.params["a.weight"].clone())
    opt = torch.optim.SGD([p], lr=cfg.outer_lr, momentum=cfg.outer_momentum, nesterov=True)
    opt.state[p]["momentum_buffer"] = state.momentum["a.weight"].clone()
    p.grad = torch.stack([decompress(decode_contribution(contributions[q]))["a.weight"] for q in range(4)]).sum(0) / 4
    opt.step()
    assert torch.allclose(p.detach(), nxt.params["a.weight"], atol=1e-6)


def test_aggregate_does_not_depend_on_the_order_contributions_arrive_in() -> None:
    state, contributions, cfg = _round(5)
    want = aggregate(state, contributions, cfg)[0].state_hash(STAMP)
    rng = np.random.Generator(np.random.PCG64(4))
    for _ in range(5):
        order = rng.permutation(5).tolist()
        shuffled = {p: contributions[p] for p in order}
        assert list(shuffled) == order
        assert aggregate(state, shuffled, cfg)[0].state_hash(STAMP) == want
        decoded = {p: decode_contribution(contributions[p]) for p in reversed(order)}
        assert aggregate(state, decoded, cfg)[0].state_hash(STAMP) == want
    assert check_aggregate(state, contributions, cfg, STAMP, want)


def test_one_value_changed_in_any_contribution_changes_the_aggregate() -> None:
    state, contributions, cfg = _round(3)
    want = aggregate(state, contributions, cfg)[0].state_hash(STAMP)
    seen = {want}
    for party in range(3):
        c = decode_contribution(contributions[party])
        for name, t in c.tensors.items():
            if not t.values.size:
                continue
            at = int(np.argmax(t.scales > 0)) * c.block_size  # a value of a block with a scale
            values = t.values.copy()
            values[at] = values[at] - 1 if values[at] > -127 else values[at] + 1
            forged = Contribution(c.block_size, {**c.tensors, name: type(t)(t.shape, t.indices, t.scales, values)})
            changed = dict(contributions)
            changed[party] = encode_contribution(forged)
            got = aggregate(state, changed, cfg)[0].state_hash(STAMP)
            assert not check_aggregate(state, changed, cfg, STAMP, want)
            assert got not in seen
            seen.add(got)


def test_cutting_a_party_out_is_the_mean_over_the_rest() -> None:
    state, contributions, cfg = _round(4)
    without, included = aggregate(state, contributions, cfg, exclude={2})
    rest, _ = aggregate(state, {p: c for p, c in contributions.items() if p != 2}, cfg)
    assert included == (0, 1, 3)
    assert without.state_hash(STAMP) == rest.state_hash(STAMP)
    assert check_aggregate(state, contributions, cfg, STAMP, rest.state_hash(STAMP), exclude={2})
    assert not check_aggregate(state, contributions, cfg, STAMP, rest.state_hash(STAMP))


def test_contributions_that_do_not_decode_or_fit_count_as_not_committed_and_the_quorum_holds() -> None:
    state, contributions, cfg = _round(4, MultipartyConfig(parties=4, rounds=1, inner_steps=1, block_size=16, quorum=3))
    rest = aggregate(state, {p: contributions[p] for p in (0, 1, 3)}, cfg)[0].state_hash(STAMP)
    broken = dict(contributions)
    broken[2] = contributions[2][:-1]
    assert aggregate(state, broken, cfg)[1] == (0, 1, 3)
    assert check_aggregate(state, broken, cfg, STAMP, rest)
    misfit = dict(contributions)
    misfit[2] = encode_contribution(compress({"a.bias": torch.ones(7)}, 16)[0])
    assert aggregate(state, misfit, cfg)[0].state_hash(STAMP) == rest
    with pytest.raises(ProofError, match="quorum"):
        aggregate(state, broken, cfg, exclude={0})
    assert not check_aggregate(state, broken, cfg, STAMP, rest, exclude={0})


def test_outer_state_is_a_checkpoint_that_round_trips() -> None:
    state, contributions, cfg = _round(2)
    nxt, _ = aggregate(state, contributions, cfg)
    data = nxt.to_bytes(STAMP)
    back = OuterState.from_checkpoint(decode_checkpoint(data, expect_hash=nxt.state_hash(STAMP), expect_spec=STAMP))
    assert back.round == 2 and back.state_hash(STAMP) == nxt.state_hash(STAMP)


def test_aggregate_and_compression_are_bit_identical_under_other_kernel_settings(tmp_path: Path) -> None:
    """numpy's SIMD dispatch cut to its baseline (and ATen's to its default) in a child: the same hashes."""
    state, contributions, cfg = _round(4, MultipartyConfig(parties=4, rounds=3, inner_steps=5, block_size=16, keep=None))
    # sizes that are not multiples of any vector width, and a large tensor, so the vector loops run
    big = {"a.weight": (513, 37), "a.bias": (1001,), "b.weight": (3, 7), "c": (0,)}
    rng = np.random.Generator(np.random.PCG64(9))

    def draw(scale: float) -> dict[str, torch.Tensor]:
        return {n: torch.from_numpy((rng.standard_normal(s) * scale).astype(np.float32)) for n, s in big.items()}

    state = OuterState(3, draw(1.0), draw(0.01))
    contributions = {p: encode_contribution(compress(draw(0.05), 16, keep=0.3 if p == 1 else None)[0]) for p in range(4)}
    delta = draw(0.1)
    (tmp_path / "state.ckpt").write_bytes(state.to_bytes(STAMP))
    for p, data in contributions.items():
        (tmp_path / f"party{p}.bin").write_bytes(data)
    (tmp_path / "delta.safetensors").write_bytes(save_safetensors(dict(delta)))
    fields = {"parties": 4, "rounds": 3, "inner_steps": 5, "block_size": 16, "stamp": STAMP}
    (tmp_path / "config.json").write_text(json.dumps(fields))
    here = {
        "aggregate": "0x" + aggregate(state, contributions, cfg)[0].state_hash(STAMP).hex(),
        "dense": "0x" + contribution_hash(encode_contribution(compress(delta, 16)[0])).hex(),
        "topk": "0x" + contribution_hash(encode_contribution(compress(delta, 16, keep=0.1, residual={k: v * 0.5 for k, v in delta.items()})[0])).hex(),
    }
    settings_ = [
        {"NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR", "ATEN_CPU_CAPABILITY": "default"},
        {"ATEN_CPU_CAPABILITY": "avx2"},
    ]
    for env in settings_:
        proc = subprocess.run(
            [sys.executable, str(CHILD), str(tmp_path)],
            env={**os.environ, **env, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=CHILD_LIVENESS_S,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert json.loads(proc.stdout.strip().splitlines()[-1]) == here, env


# ----------------------------------------------------------------------------- shards and inner work


def test_shards_partition_the_examples_and_rotate_by_round() -> None:
    for examples, parties in [(10, 3), (1000, 4), (7, 7)]:
        shards = [shard_indices(5, examples, parties, s) for s in range(parties)]
        joined = torch.cat(shards).sort().values
        assert torch.equal(joined, torch.arange(examples))
        assert all(torch.equal(s, s.sort().values) for s in shards)
        assert max(len(s) for s in shards) - min(len(s) for s in shards) <= 1
    assert torch.equal(shard_indices(5, 1000, 4, 1), shard_indices(5, 1000, 4, 1))
    assert not torch.equal(shard_indices(5, 1000, 4, 1), shard_indices(6, 1000, 4, 1))
    assert [shard_of(r, 1, 4) for r in range(5)] == [1, 2, 3, 0, 1]
    assert sorted(shard_of(3, p, 4) for p in range(4)) == [0, 1, 2, 3]


def test_token_shards_cover_every_window_once() -> None:
    data = text_tokens()
    spec = make_spec("char-transformer", data)
    dataset = load_dataset(spec, data)
    block = spec.model.block_size  # type: ignore[union-attr]
    starts = []
    for party in range(3):
        shard = party_dataset(spec, dataset, 0, party, 3)
        starts.append(BatchOrder(spec, shard).examples)
    assert sum(starts) == dataset.inputs.shape[0] - block
    first = party_dataset(spec, dataset, 0, 0, 3)
    assert torch.equal(first.inputs, dataset.inputs[: first.inputs.shape[0]])
    assert torch.equal(party_dataset(spec, dataset, 1, 2, 3).inputs, first.inputs)  # shard (2 + 1) mod 3


def test_party_training_is_deterministic_and_moves_the_model() -> None:
    data = spirals(1, per_class=64)
    spec = make_spec("mlp", data, optimizer={"kind": "adamw", "lr": 0.01})
    dataset = load_dataset(spec, data)
    cfg = MultipartyConfig(parties=2, rounds=2, inner_steps=6, block_size=32)
    inner = inner_spec(spec, cfg, 1, 1)
    assert inner.steps == 6 and inner.checkpoint_interval == 6 and inner.seed != spec.seed
    state = OuterState.start(Trainer(spec, dataset).params)
    after, losses = train_party(spec, dataset, cfg, state, 1)
    again, _ = train_party(spec, dataset, cfg, state, 1)
    other, _ = train_party(spec, dataset, cfg, state, 0)
    assert len(losses) == 6
    delta = pseudo_gradient(state.params, after)
    assert all(torch.equal(after[n], again[n]) for n in after)
    assert any(not torch.equal(after[n], other[n]) for n in after)
    assert all(bool((d != 0).any()) for d in delta.values())
    c, _ = compress(delta, cfg.block_size)
    nxt, _ = aggregate(state, {0: encode_contribution(compress(pseudo_gradient(state.params, other), 32)[0]), 1: encode_contribution(c)}, cfg)
    assert nxt.round == 1 and check_aggregate(
        state, {1: c.to_bytes(), 0: compress(pseudo_gradient(state.params, other), 32)[0]}, cfg, STAMP, nxt.state_hash(STAMP)
    )


def test_dataset_of_a_party_keeps_no_held_out_split() -> None:
    data = spirals(1, per_class=64)
    spec = make_spec("mlp", data)
    ds = Dataset(inputs=torch.zeros(40, 2), targets=torch.zeros(40, dtype=torch.int64))
    with pytest.raises(ProofError, match="fewer than one batch"):
        party_dataset(spec, ds, 0, 0, 4)
    shard = party_dataset(spec, Dataset(inputs=torch.arange(200.0).reshape(100, 2), targets=torch.zeros(100, dtype=torch.int64)), 2, 1, 4)
    assert shard.held_out is None and shard.inputs.shape == (25, 2)


# ----------------------------------------------------------------------------- a party's work as an ordinary job


def _images() -> bytes:
    rng = np.random.Generator(np.random.PCG64(3))
    return pack_images(rng.integers(0, 256, (96, 1, 16, 16), dtype=np.uint8), rng.integers(0, 4, 96))


@pytest.mark.parametrize(("kind", "data", "dtype"), [("mlp", spirals(1, per_class=64), "F32"), ("cnn", _images(), "U8"), ("gpt", text_tokens(), "U16")])
def test_a_party_job_names_its_shard_and_the_global_model_and_loads_them_back_exactly(kind: str, data: bytes, dtype: str) -> None:
    spec = make_spec(kind, data)
    dataset = load_dataset(spec, data)
    cfg = MultipartyConfig(parties=3, rounds=2, inner_steps=8)
    state = OuterState(1, OuterState.start(Trainer(spec, dataset).params).params, _zeros_like(Trainer(spec, dataset).params))
    job = party_job(spec, dataset, cfg, state, 2)
    assert job.spec.dataset.cid == file_cid(job.shard) and job.spec.dataset.size_bytes == len(job.shard)
    assert job.spec.init is not None and job.spec.init.cid == file_cid(job.init)
    assert json.loads(job.shard[8 : 8 + struct.unpack("<Q", job.shard[:8])[0]])["x"]["dtype"] == dtype  # compact: what the data was
    loaded, shard = job.dataset(), party_dataset(spec, dataset, 1, 2, 3)
    assert torch.equal(loaded.inputs.to(shard.inputs.dtype), shard.inputs)
    if shard.targets is None:
        assert loaded.targets is None
    else:
        assert loaded.targets is not None and torch.equal(loaded.targets, shard.targets)
    again = party_job(spec, dataset, cfg, state, 2)
    assert (again.spec, again.shard, again.init) == (job.spec, job.shard, job.init)  # every party, verifier and referee derives the same job
    assert party_job(spec, dataset, cfg, state, 0).spec.dataset.cid != job.spec.dataset.cid


def _zeros_like(params: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {n: torch.zeros(p.shape) for n, p in params.items()}


def test_a_party_trace_is_an_ordinary_trace_that_starts_from_the_global_model() -> None:
    data = spirals(1, per_class=64)
    spec = make_spec("mlp", data, optimizer={"kind": "adamw", "lr": 0.01})
    dataset = load_dataset(spec, data)
    cfg = MultipartyConfig(parties=2, rounds=2, inner_steps=8)
    start = OuterState.start(Trainer(spec, dataset).params)
    moved, _ = train_party(spec, dataset, cfg, start, 0)
    state = OuterState(1, moved, _zeros_like(moved))  # round 1's global model is not the seeded initialization
    job = party_job(spec, dataset, cfg, state, 1)
    trace = train_trace(job.spec, job.dataset())
    first = decode_checkpoint(trace.checkpoints[0]).params()
    assert all(torch.equal(first[n], state.params[n]) for n in first)
    assert check_start(job.spec, job.dataset(), trace.state_hashes[0]).passed
    for seg in range(job.spec.segments):
        assert replay_committed(job.spec, job.dataset(), trace, seg).passed
    after, _ = train_party(spec, dataset, cfg, state, 1)
    last = decode_checkpoint(trace.checkpoints[-1]).params()
    assert all(torch.equal(last[n], after[n]) for n in last)  # the contribution is a function of the committed trace
    elsewhere = party_job(spec, dataset, cfg, start, 1)  # the same party's job from round 0's model
    assert not check_start(job.spec, job.dataset(), train_trace(elsewhere.spec, elsewhere.dataset()).state_hashes[0]).passed


@pytest.mark.parametrize("keep", [None, 0.25])
def test_a_contribution_is_checked_against_its_party_trace_without_training(keep: float | None) -> None:
    data = spirals(1, per_class=64)
    spec = make_spec("mlp", data, optimizer={"kind": "adamw", "lr": 0.01})
    dataset = load_dataset(spec, data)
    cfg = MultipartyConfig(parties=2, rounds=2, inner_steps=8, block_size=32, keep=keep)
    state = OuterState.start(Trainer(spec, dataset).params)
    finals = {}
    for party in (0, 1):
        job = party_job(spec, dataset, cfg, state, party)
        finals[party] = train_trace(job.spec, job.dataset()).checkpoints[-1]
    residual = None if keep is None else _zeros_like(state.params)
    own, carried = contribution_of(state, finals[1], cfg, residual)
    after, _ = train_party(spec, dataset, cfg, state, 1)
    expected, carried_too = compress(pseudo_gradient(state.params, after), cfg.block_size, keep=keep, residual=residual)
    assert own == encode_contribution(expected)  # what the party would have committed
    assert (carried is None) == (keep is None) and (carried is None or all(torch.equal(carried[n], carried_too[n]) for n in carried))  # type: ignore[index]
    assert check_contribution(state, finals[1], own, cfg, residual) is None
    copied = contribution_of(state, finals[0], cfg, residual)[0]
    assert "hashes to" in (check_contribution(state, finals[1], copied, cfg, residual) or "")  # another party's, copied
    denser = contribution_of(state, finals[1], MultipartyConfig(parties=2, rounds=2, inner_steps=8, block_size=64, keep=keep), residual)[0]
    assert check_contribution(state, finals[1], denser, cfg, residual) is not None  # other compression settings
    other = OuterState.start(_zeros_like(state.params) | {"net.0.weight": torch.zeros(1)})
    assert "follows from" in (check_contribution(other, finals[1], own, cfg, residual) or "")  # a final state that does not fit


def _final(state: OuterState, seed: int) -> bytes:
    """A party trace's last checkpoint: the global model moved by a seeded step."""
    step = _tensors(seed, 0.05)
    return encode_checkpoint(5, {f"param.{n}": p - step[n] for n, p in state.params.items()}, STAMP)


def test_a_round_is_judged_from_its_committed_inputs_and_a_wrong_aggregate_is_named() -> None:
    cfg = MultipartyConfig(parties=4, rounds=3, inner_steps=5, block_size=16, quorum=2)
    state, _, _ = _round(4, cfg)
    finals = {p: _final(state, 20 + p) for p in range(4)}
    own = {p: contribution_of(state, finals[p], cfg)[0] for p in range(4)}
    rounds = {
        0: PartyRound(own[0], finals[0], spec_ok=True, verified=True),
        1: PartyRound(own[1], finals[1], spec_ok=True, verified=True),
        2: PartyRound(own[0], finals[2], spec_ok=True, verified=True),  # copied party 0's contribution
        3: PartyRound(own[3], finals[3], spec_ok=True, verified=False),  # right, but its trace is not verified yet
    }
    verdict = judge_round(state, rounds, cfg)
    assert (verdict.included, verdict.wrong, verdict.masks()) == ((0, 1), (2,), (0b0011, 0b0100))
    honest, _ = aggregate(state, {0: own[0], 1: own[1]}, cfg)
    assert verdict.state is not None and verdict.state_hash(STAMP) == honest.state_hash(STAMP)
    claimed = verdict.state_hash(STAMP)
    assert check_round(state, rounds, cfg, STAMP, claimed, 0b0011, 0b0100) is None
    with_cheater, _ = aggregate(state, {0: own[0], 1: own[1], 2: own[0]}, cfg)
    assert "inputs give 0x3 and 0x4" in (check_round(state, rounds, cfg, STAMP, with_cheater.state_hash(STAMP), 0b0111, 0) or "")
    assert "state hash" in (check_round(state, rounds, cfg, STAMP, with_cheater.state_hash(STAMP), 0b0011, 0b0100) or "")
    assert check_round(state, rounds, cfg, STAMP, claimed, 0b0011, 0) is not None  # the copier not called wrong
    other_spec = dict(rounds) | {1: PartyRound(own[1], finals[1], spec_ok=False, verified=True)}
    void = judge_round(state, other_spec, cfg)  # party 1 trained another job: wrong, and one right party is below the quorum
    assert (void.state, void.included, void.wrong, void.state_hash(STAMP)) == (None, (0,), (1, 2), bytes(32))
    unserved = dict(rounds) | {2: PartyRound(own[0], None, spec_ok=True, verified=True)}
    assert judge_round(state, unserved, cfg).masks() == (0b0011, 0)  # an unserved trace is the availability game's
    withheld = dict(rounds) | {2: PartyRound(own[0], None, spec_ok=False, verified=True)}
    assert judge_round(state, withheld, cfg).masks() == (0b0011, 0b0100)  # another spec is wrong, served or not


def test_a_top_k_round_is_judged_with_the_residual_each_party_came_in_with() -> None:
    """Top-k with error feedback on chain: a party's contribution of round 1 depends on the residual
    its round 0 left, which every judge derives from committed things (``residual_after``); a party
    that drops its residual (or keeps one its round 0 did not leave) is called wrong."""
    cfg = MultipartyConfig(parties=2, rounds=2, inner_steps=5, block_size=16, keep=0.25, quorum=1)
    state, _, _ = _round(2, cfg)
    finals0 = {p: _final(state, 40 + p) for p in range(2)}
    own0 = {p: contribution_of(state, finals0[p], cfg)[0] for p in range(2)}
    verdict0 = judge_round(state, {p: PartyRound(own0[p], finals0[p], True, True) for p in range(2)}, cfg)
    assert verdict0.included == (0, 1) and verdict0.state is not None
    came_in = {p: residual_after(state, finals0[p], cfg, None) for p in range(2)}
    assert all(r is not None and any(bool(t.abs().sum() > 0) for t in r.values()) for r in came_in.values())  # what top-k did not send
    assert residual_after(state, finals0[0], replace(cfg, keep=None), None) is None  # dense int8 carries nothing

    state1 = verdict0.state
    finals1 = {p: _final(state1, 50 + p) for p in range(2)}
    own1 = {p: contribution_of(state1, finals1[p], cfg, came_in[p])[0] for p in range(2)}
    forgot = contribution_of(state1, finals1[1], cfg, None)[0]  # party 1 committing as if it had no residual
    assert forgot != own1[1]
    rounds = {p: PartyRound(own1[p], finals1[p], True, True, came_in[p]) for p in range(2)}
    verdict1 = judge_round(state1, rounds, cfg)
    expected, _ = aggregate(state1, own1, cfg)
    assert verdict1.included == (0, 1) and verdict1.state is not None and verdict1.state_hash(STAMP) == expected.state_hash(STAMP)
    assert judge_round(state1, rounds | {1: PartyRound(forgot, finals1[1], True, True, came_in[1])}, cfg).wrong == (1,)
    assert judge_round(state1, rounds | {1: PartyRound(own1[1], finals1[1], True, True, None)}, cfg).wrong == (1,)  # a judge must use it too


def test_a_job_document_round_trips_canonically_and_refuses_anything_else() -> None:
    for keep in (None, 0.05, 1):
        cfg = MultipartyConfig(parties=4, rounds=10, inner_steps=25, block_size=256, keep=keep, quorum=3)
        data = encode_document("bafkspec", cfg)
        assert decode_document(data) == ("bafkspec", cfg)
    raw = json.loads(encode_document("bafkspec", MultipartyConfig(parties=4, rounds=10, inner_steps=25, quorum=3)))
    assert raw["keep"] is None and raw["format"] == "veritrain-diloco/1"
    for change, why in [
        ({"keep": "0.1"}, "keep a number or null"),
        ({"keep": 1.5}, "keep 1.5 is outside"),
        ({"parties": 4.0}, "counts integers"),
        ({"quorum": 5}, "quorum 5 is outside"),
        ({"extra": 1}, "fields must be exactly"),
        ({"format": "veritrain-diloco/0"}, "not a veritrain-diloco/1 document"),
    ]:
        with pytest.raises(ProofError, match=why):
            decode_document(json.dumps(raw | change, sort_keys=True, separators=(",", ":")).encode())
    with pytest.raises(ProofError, match="canonical"):
        decode_document(json.dumps(raw, sort_keys=True).encode())  # spaces: another CID for the same job
    with pytest.raises(ProofError):
        decode_document(b"[" * 10_000)
