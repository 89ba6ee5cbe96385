from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from proofs.errors import LimitExceeded, ProofError, SpecError
from proofs.models import build_model
from proofs.spec import TOKEN_MODELS, CharTransformerConfig, CNNConfig, GPTConfig, JobSpec, Limits, MLPConfig, ResNetConfig, load_spec, training_memory_bytes

#: GPT-2 small in nanoGPT's configuration (the vocabulary unpadded).
GPT2_SMALL = {"kind": "gpt", "vocab_size": 50257, "block_size": 1024, "n_layer": 12, "n_head": 12, "n_embd": 768, "bias": True}
#: ResNet-20's layout for 32x32 RGB images.
RESNET = {"kind": "resnet", "in_channels": 3, "height": 32, "width": 32, "channels": [16, 32, 64], "blocks": 3, "num_classes": 10}


def base(**over: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "model": {"kind": "mlp", "input_dim": 4, "hidden": [8], "num_classes": 2},
        "dataset": {"cid": "QmData", "format": "npz", "size_bytes": 1000},
        "optimizer": {"kind": "sgd", "lr": 0.1, "momentum": 0.9},
        "batch_size": 8,
        "steps": 100,
        "seed": 1,
        "checkpoint_interval": 10,
    }
    raw.update(over)
    return raw


def test_spec_round_trips_through_canonical_bytes() -> None:
    spec = load_spec(base())
    assert load_spec(spec.canonical_bytes()) == spec
    assert load_spec(spec.canonical_bytes()).canonical_bytes() == spec.canonical_bytes()
    assert spec.segments == 10


def test_canonical_bytes_do_not_depend_on_key_order_or_whitespace() -> None:
    raw = base()
    shuffled = json.dumps(dict(reversed(list(raw.items()))), indent=4)
    assert load_spec(shuffled).canonical_bytes() == load_spec(json.dumps(raw)).canonical_bytes()
    assert load_spec(shuffled).spec_hash() == load_spec(raw).spec_hash()


def test_defaults_are_written_out_so_every_hyperparameter_is_pinned() -> None:
    body = json.loads(load_spec(base(optimizer={"kind": "adam", "lr": 0.001})).canonical_bytes())
    assert body["optimizer"] == {"kind": "adam", "lr": 0.001, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.0}
    assert body["tolerance"]["mode"] == "exact"


def test_training_options_added_later_leave_existing_specs_and_hashes_unchanged() -> None:
    spec = load_spec(base())
    # the hash this spec had before schedule, grad_clip, micro_batches, init and eval existed
    assert spec.spec_hash() == "0xeb09843767659b9c25d8e282c70b3fea5ba9702050780db50f994fe8b97fc283"
    body = json.loads(spec.canonical_bytes())
    assert not {"schedule", "grad_clip", "micro_batches", "init", "eval"} & set(body)
    defaults = load_spec(base(schedule={"kind": "constant"}, grad_clip=None, micro_batches=1, init=None, eval=None))
    assert defaults.canonical_bytes() == spec.canonical_bytes()
    full = load_spec(
        base(
            optimizer={"kind": "adamw", "lr": 0.01},
            schedule={"kind": "warmup-cosine", "warmup_steps": 10},
            grad_clip=1.0,
            micro_batches=2,
            init={"cid": "QmPretrained", "size_bytes": 4096},
            eval={"fraction": 0.1, "every": 20},
        )
    )
    body = json.loads(full.canonical_bytes())
    assert body["schedule"] == {"kind": "warmup-cosine", "warmup_steps": 10, "min_lr": 0.0}
    assert body["optimizer"] == {"kind": "adamw", "lr": 0.01, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.01}
    assert (body["grad_clip"], body["micro_batches"], body["init"]) == (1.0, 2, {"cid": "QmPretrained", "size_bytes": 4096})
    assert body["eval"] == {"count": None, "fraction": 0.1, "every": 20}
    assert load_spec(full.canonical_bytes()) == full
    assert full.spec_hash() != spec.spec_hash()


def test_spec_is_frozen() -> None:
    spec = load_spec(base())
    with pytest.raises(ValidationError):
        spec.steps = 5


@pytest.mark.parametrize(
    ("over", "needle"),
    [
        ({"steps": 105}, "multiple of checkpoint_interval"),
        ({"extra_field": 1}, "extra_field"),
        ({"model": {"kind": "vit", "input_dim": 4}}, "model"),
        ({"model": {"kind": "mlp", "input_dim": 4, "hidden": [8], "num_classes": 2, "code": "import os"}}, "code"),
        ({"optimizer": {"kind": "sgd", "lr": -1.0}}, "optimizer.sgd.lr"),
        ({"optimizer": {"kind": "sgd", "lr": 0.1, "nesterov": True}}, "nesterov"),
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": "8"}, "batch_size"),
        ({"seed": -1}, "seed"),
        ({"steps": Limits.STEPS + 10}, "steps"),
        ({"dataset": {"cid": "Qm/../etc", "format": "npz", "size_bytes": 10}}, "dataset.cid"),
        ({"dataset": {"cid": "QmData", "format": "pickle", "size_bytes": 10}}, "dataset.format"),
        ({"dataset": {"cid": "QmData", "format": "npz", "size_bytes": Limits.DATASET_BYTES + 1}}, "size_bytes"),
        ({"dataset": {"cid": "QmData", "format": "npz", "size_bytes": 10, "targets": None}}, "needs dataset.targets"),
        ({"model": {"kind": "mlp", "input_dim": 8192, "hidden": [8192, 8192], "num_classes": 2}}, "parameters"),
        ({"tolerance": {"mode": "exact", "l2": 0.1}}, "exact mode takes no thresholds"),
        ({"tolerance": {"mode": "tolerance", "l2": 0.1}}, "needs l2, linf and cosine"),
        ({"steps": 1_000_000, "checkpoint_interval": 1}, "segments"),
        ({"model": {"kind": "cnn", "in_channels": 1, "height": 10, "width": 16, "channels": [4, 4], "hidden": 8, "num_classes": 2}}, "divisible"),
        ({"micro_batches": 3}, "multiple of micro_batches"),
        ({"init": {"cid": "Qm/../x", "size_bytes": 10}}, "init.cid"),
        ({"init": {"cid": "QmModel", "size_bytes": 10**9}}, "init.size_bytes"),
        ({"micro_batches": 0}, "micro_batches"),
        ({"grad_clip": 0.0}, "grad_clip"),
        ({"schedule": {"kind": "warmup-cosine", "warmup_steps": 100}}, "leaves no room"),
        ({"schedule": {"kind": "constant", "warmup_steps": 101}}, "leaves no room"),
        ({"schedule": {"kind": "linear"}}, "schedule.kind"),
        ({"schedule": {"kind": "warmup-cosine", "min_lr": 0.2}}, "above optimizer.lr"),
        ({"optimizer": {"kind": "adamw", "lr": 0.1, "weight_decay": 2.0}}, "optimizer.adamw.weight_decay"),
        ({"model": {**GPT2_SMALL, "n_head": 5}}, "n_embd 768 must be divisible by n_head 5"),
        ({"model": {**GPT2_SMALL, "n_layer": Limits.LAYERS + 1}}, "model.gpt.n_layer"),
        ({"model": {**GPT2_SMALL, "vocab_size": Limits.VOCAB + 1}}, "model.gpt.vocab_size"),
        ({"model": GPT2_SMALL}, "a gpt reads one token tensor: dataset.targets must be null"),
        ({"model": {**RESNET, "height": 30}}, "divisible by 2**(len(channels) - 1) = 4 (got 30x32)"),
        ({"model": {**RESNET, "blocks": 9}}, "model.resnet.blocks"),
    ],
)
def test_malformed_specs_raise_clear_errors(over: dict[str, Any], needle: str) -> None:
    with pytest.raises(SpecError) as info:
        load_spec(base(**over))
    assert needle in str(info.value)


@pytest.mark.parametrize("text", [b"not json", b"[1, 2]", b'{"steps": NaN}', b"\xff\xfe"])
def test_non_object_or_non_json_input_is_a_spec_error(text: bytes) -> None:
    with pytest.raises(SpecError):
        load_spec(text)


def test_oversize_spec_is_refused_before_parsing() -> None:
    with pytest.raises(LimitExceeded) as info:
        load_spec(b" " * (Limits.SPEC_BYTES + 1))
    assert isinstance(info.value, ProofError)


@pytest.mark.parametrize(
    "cfg",
    [
        MLPConfig(input_dim=7, hidden=(5, 3), num_classes=4),
        MLPConfig(input_dim=7, hidden=(), num_classes=2),
        CNNConfig(in_channels=3, height=8, width=16, channels=(4, 6), kernel_size=5, hidden=9, num_classes=3),
        CharTransformerConfig(vocab_size=30, block_size=12, n_layer=2, n_head=2, n_embd=8),
        GPTConfig(vocab_size=30, block_size=12, n_layer=3, n_head=2, n_embd=8),
        GPTConfig(vocab_size=30, block_size=12, n_layer=2, n_head=4, n_embd=8, bias=False),
        ResNetConfig(in_channels=3, height=8, width=12, channels=(4, 4, 6), blocks=2, num_classes=5),
        ResNetConfig(in_channels=2, height=4, width=4, channels=(3,), blocks=1, num_classes=2),
    ],
)
def test_param_count_formula_matches_the_built_model(cfg: Any) -> None:
    raw = base(model=cfg.model_dump(mode="json"))
    if cfg.kind in TOKEN_MODELS:
        raw["dataset"] = {**raw["dataset"], "targets": None}
    spec = load_spec(raw)
    assert sum(p.numel() for p in build_model(spec).parameters()) == cfg.param_count()


@settings(max_examples=60, deadline=None)
@given(
    hidden=st.lists(st.integers(1, 64), max_size=3),
    lr=st.floats(1e-6, 10.0, allow_nan=False),
    momentum=st.floats(0.0, 0.99),
    k=st.integers(1, 50),
    segments=st.integers(1, 100),
    seed=st.integers(0, 2**63 - 1),
)
def test_any_valid_spec_round_trips(hidden: list[int], lr: float, momentum: float, k: int, segments: int, seed: int) -> None:
    spec = load_spec(
        base(
            model={"kind": "mlp", "input_dim": 3, "hidden": hidden, "num_classes": 2},
            optimizer={"kind": "sgd", "lr": lr, "momentum": momentum},
            steps=k * segments,
            checkpoint_interval=k,
            seed=seed,
        )
    )
    again = load_spec(spec.canonical_bytes())
    assert again == spec and again.spec_hash() == spec.spec_hash()
    assert isinstance(again, JobSpec)


def gpt2_small(sequences_per_micro_batch: int) -> dict[str, Any]:
    """A GPT-2-small job: batches of 8 micro-batches of that many 1024-token windows, a 256 MiB token file."""
    dataset = {"cid": "QmTokens", "format": "safetensors", "size_bytes": Limits.DATASET_BYTES, "targets": None}
    return base(model=GPT2_SMALL, dataset=dataset, optimizer={"kind": "adamw", "lr": 6e-4}, batch_size=8 * sequences_per_micro_batch, micro_batches=8)


def test_gpt2_small_validates_with_its_124m_parameters_and_fits_in_memory() -> None:
    spec = load_spec(gpt2_small(4))
    assert spec.param_count() == 124_439_808 <= Limits.PARAMS  # nanoGPT's 123.65M plus the 0.79M position embedding
    assert 20 << 30 < training_memory_bytes(spec) <= Limits.MEMORY_BYTES
    assert load_spec(json.loads(spec.canonical_bytes())) == spec


def test_a_spec_whose_training_needs_more_memory_than_the_limit_is_refused_with_the_estimate() -> None:
    with pytest.raises(SpecError) as info:
        load_spec(gpt2_small(8))
    message = str(info.value)
    assert "training needs about 36.3 GiB of memory; at most 24 GiB are accepted" in message and "\n" not in message
    # the same training in more, smaller micro-batches fits
    assert load_spec({**gpt2_small(8), "micro_batches": 16}).batch_size == 64


def test_memory_estimate_counts_state_activations_and_data() -> None:
    small = load_spec(base())
    adam = load_spec(base(optimizer={"kind": "adam", "lr": 0.1}))
    assert training_memory_bytes(adam) - training_memory_bytes(small) == 3 * 4 * small.param_count()  # one slot more, and its checkpoint copies
    bigger_batch = load_spec(base(batch_size=16))
    assert training_memory_bytes(bigger_batch) - training_memory_bytes(small) == 2 * 4 * 8 * small.model.activation_floats()
    more_data = load_spec(base(dataset={"cid": "QmData", "format": "npz", "size_bytes": 2000}))
    assert training_memory_bytes(more_data) - training_memory_bytes(small) == 8 * 1000
