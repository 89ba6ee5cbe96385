"""Training as people do it: AdamW, the learning-rate schedule, clipping by global norm and
gradient accumulation, each against its PyTorch reference, checkpoints that carry it all, and
fine-tuning from a pretrained model named by CID (checkpoint 0 must be that model), and a
held-out evaluation split whose loss is reported, not trained on.

Bit-exact replay of these features under other kernels is in tests/proofs/test_repro.py.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.torch import save

from proofs.adversary import cheat
from proofs.checkpoint import decode_checkpoint
from proofs.data import load_dataset
from proofs.errors import DatasetError, SpecError
from proofs.evaluate import evaluate
from proofs.manifest import parse_manifest
from proofs.optim import _cos_pi, build_optimizer, clip_by_global_norm, learning_rate
from proofs.replay import Reason, check_held_out, check_manifest, check_start, replay_segment
from proofs.spec import AdamWConfig, ScheduleConfig
from proofs.train import Runtime, Trainer, model_held_out_loss, train_trace

NUMERICS = ["repro-v1", "torch"]


def _tensors(seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {"a.weight": torch.randn(7, 5, generator=g), "b.bias": torch.randn(11, generator=g), "c": torch.randn(3, 4, 2, generator=g)}


def test_cos_pi_polynomial_is_accurate() -> None:
    xs = np.linspace(0.0, 1.0, 10001)
    assert max(abs(_cos_pi(float(x)) - math.cos(math.pi * x)) for x in xs) < 1e-15


def test_learning_rate_schedule() -> None:
    constant = ScheduleConfig()
    assert all(learning_rate(constant, 0.3, 50, t) == 0.3 for t in range(50))  # today's behaviour, exactly
    warm = ScheduleConfig(kind="constant", warmup_steps=4)
    assert [learning_rate(warm, 0.4, 10, t) for t in range(6)] == [0.1, 0.2, 0.30000000000000004, 0.4, 0.4, 0.4]
    cos = ScheduleConfig(kind="warmup-cosine", warmup_steps=5, min_lr=0.01)
    lrs = [learning_rate(cos, 0.1, 25, t) for t in range(25)]
    assert lrs[4] == 0.1 and abs(lrs[5] - 0.1) < 1e-17 and 0.01 < lrs[-1] < 0.011
    for t in range(5, 25):
        ref = 0.01 + 0.09 * (1 + math.cos(math.pi * (t - 5) / 20)) / 2
        assert abs(lrs[t] - ref) < 1e-16
    assert all(a > b for a, b in zip(lrs[5:], lrs[6:]))
    assert learning_rate(cos, 0.1, 25, 24) > learning_rate(ScheduleConfig(kind="warmup-cosine", warmup_steps=5), 0.1, 25, 24) > 0


@pytest.mark.parametrize("numerics", NUMERICS)
def test_adamw_matches_torch_optim_adamw(numerics: str) -> None:
    cfg = AdamWConfig(lr=0.01, beta1=0.8, beta2=0.95, eps=1e-6, weight_decay=0.1)
    ours = {n: p.clone().requires_grad_() for n, p in _tensors(1).items()}
    theirs = {n: p.clone().requires_grad_() for n, p in _tensors(1).items()}
    opt = build_optimizer(cfg, numerics)  # type: ignore[arg-type]
    state = opt.init_state(ours)
    ref = torch.optim.AdamW(theirs.values(), lr=0.01, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.1, foreach=False)
    for step in range(6):
        grads = _tensors(10 + step)
        for n in ours:
            ours[n].grad, theirs[n].grad = grads[n].clone(), grads[n].clone()
        opt.update(ours, state, step, cfg.lr)
        ref.step()
    for n in ours:
        torch.testing.assert_close(ours[n].detach(), theirs[n].detach(), rtol=1e-6, atol=1e-7)
        torch.testing.assert_close(state[f"optim.{n}.exp_avg_sq"], ref.state[theirs[n]]["exp_avg_sq"], rtol=1e-6, atol=1e-9)
    assert not torch.equal(ours["c"].detach(), _tensors(1)["c"])


@pytest.mark.parametrize("numerics", NUMERICS)
def test_clipping_by_global_norm_matches_torch(numerics: str) -> None:
    repro = numerics == "repro-v1"
    grads = _tensors(2)
    params = [torch.nn.Parameter(torch.zeros_like(g)) for g in grads.values()]
    for p, g in zip(params, grads.values()):
        p.grad = g.clone()
    total = float(torch.nn.utils.clip_grad_norm_(params, 0.1, foreach=False))
    norm = clip_by_global_norm(grads, 0.1, repro)
    assert abs(norm - total) < 1e-5 * total
    for g, p in zip(grads.values(), params):
        torch.testing.assert_close(g, p.grad, rtol=1e-6, atol=1e-8)
    assert abs(math.sqrt(sum(float(g.double().square().sum()) for g in grads.values())) - 0.1) < 1e-6
    under = _tensors(3)
    before = {n: g.clone() for n, g in under.items()}
    clip_by_global_norm(under, 1e3, repro)
    assert all(torch.equal(under[n], before[n]) for n in under)  # under the limit: not a bit changes


@pytest.mark.parametrize("numerics", NUMERICS)
def test_micro_batches_give_the_full_batch_step(make_spec, datasets, numerics: str) -> None:
    opt = {"kind": "sgd", "lr": 0.5}
    trainers = [
        Trainer(
            make_spec("mlp", datasets["mlp"], optimizer=opt, micro_batches=m, numerics=numerics),
            load_dataset(make_spec("mlp", datasets["mlp"]), datasets["mlp"]),
        )
        for m in (1, 4)
    ]
    losses = [t.run(1)[0] for t in trainers]
    assert abs(losses[0] - losses[1]) < 1e-6
    for n, p in trainers[0].params.items():
        torch.testing.assert_close(trainers[1].params[n].detach(), p.detach(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("numerics", NUMERICS)
def test_checkpoints_carry_adamw_state_and_the_schedule_runs_on_the_global_step(make_spec, datasets, training_features, numerics: str) -> None:
    spec = make_spec("mlp", datasets["mlp"], numerics=numerics, **training_features)
    dataset = load_dataset(spec, datasets["mlp"])
    trace = train_trace(spec, dataset)
    zero = decode_checkpoint(trace.checkpoints[0])
    assert zero.step == 0 and zero.spec_hash == spec.spec_hash()
    slots = {k.rsplit(".", 1)[1] for k in zero.optimizer_state()}
    assert slots == {"exp_avg", "exp_avg_sq"} and all(not t.any() for t in zero.optimizer_state().values())
    middle = decode_checkpoint(trace.checkpoints[2])
    assert middle.step == 8 and all(t.any() for t in middle.optimizer_state().values())
    # a segment replays from its own checkpoint: the schedule reads the checkpoint's global step
    verdict = replay_segment(spec, dataset, 2, trace.checkpoints[2], trace.checkpoints[3], end_hash=trace.state_hashes[3], claimed_loss=trace.losses[2])
    assert verdict.passed, verdict.detail
    local = Trainer(spec, dataset)
    local.load(middle)
    local.step = 0  # a schedule restarted at the segment's start: another state
    local.run(spec.checkpoint_interval)
    assert local.tensors()["param.layers.0.weight"].ne(decode_checkpoint(trace.checkpoints[3]).tensors["param.layers.0.weight"]).any()


def test_each_feature_changes_the_trajectory(make_spec, datasets, training_features) -> None:
    data = datasets["mlp"]
    final = {}
    for drop in (None, "schedule", "grad_clip", "micro_batches", "eval"):
        features = {k: v for k, v in training_features.items() if k != drop}
        spec = make_spec("mlp", data, **features)
        final[drop] = train_trace(spec, load_dataset(spec, data), keep=False).state_hashes[-1]  # the held-out split is the spec's
    assert len(set(final.values())) == 5


# ----------------------------------------------------------------- fine-tuning from a pretrained model named by CID


def _pretrained(make_spec, datasets) -> tuple[bytes, dict[str, torch.Tensor]]:
    """Weights as ``veritrain model export`` writes them: another job's final parameters."""
    spec = make_spec("mlp", datasets["mlp"], steps=8)
    final = decode_checkpoint(train_trace(spec, load_dataset(spec, datasets["mlp"])).checkpoints[-1]).params()
    return save(final), final


def _fine_tune(make_spec, datasets, weights: bytes, **over: Any) -> Any:
    return make_spec("mlp", datasets["mlp"], init={"cid": "QmPretrained", "size_bytes": len(weights)}, **over)


@pytest.mark.parametrize("numerics", NUMERICS)
def test_fine_tuning_starts_from_the_named_model_and_a_trace_that_does_not_is_rejected(make_spec, datasets, numerics: str) -> None:
    weights, final = _pretrained(make_spec, datasets)
    spec = _fine_tune(make_spec, datasets, weights, numerics=numerics, optimizer={"kind": "adamw", "lr": 0.01})
    dataset = load_dataset(spec, datasets["mlp"], weights)
    trace = train_trace(spec, dataset)
    zero = decode_checkpoint(trace.checkpoints[0])
    assert zero.step == 0 and all(torch.equal(zero.params()[n], t) for n, t in final.items())
    assert all(not t.any() for t in zero.optimizer_state().values())
    assert check_start(spec, dataset, trace.state_hashes[0]).passed
    assert replay_segment(spec, dataset, 0, trace.checkpoints[0], trace.checkpoints[1], end_hash=trace.state_hashes[1]).passed
    assert evaluate(spec, trace.checkpoints[-1], load_dataset(make_spec("mlp", datasets["mlp"]), datasets["mlp"])).examples > 0
    # a trace trained from the seeded initialization instead, every segment honest from there
    faked = cheat("free-start", spec, dataset)
    start = check_start(spec, dataset, faked.trace.state_hashes[0])
    assert not start.passed and start.reason is Reason.WRONG_START and "pretrained model QmPretrained" in start.detail
    seeded = load_dataset(make_spec("mlp", datasets["mlp"], numerics=numerics), datasets["mlp"])
    plain = train_trace(spec.model_copy(update={"init": None}), seeded, keep=False)
    assert not check_start(spec, dataset, plain.state_hashes[0]).passed


def test_pretrained_weights_that_do_not_fit_are_refused(make_spec, datasets) -> None:
    weights, final = _pretrained(make_spec, datasets)
    spec = _fine_tune(make_spec, datasets, weights)
    with pytest.raises(DatasetError, match="its weights are needed"):
        load_dataset(spec, datasets["mlp"])
    with pytest.raises(DatasetError, match="names no init model"):
        load_dataset(make_spec("mlp", datasets["mlp"]), datasets["mlp"], weights)
    with pytest.raises(DatasetError, match="not valid safetensors"):
        load_dataset(spec, datasets["mlp"], b"\x00" * len(weights))
    with pytest.raises(DatasetError, match="the spec says"):
        load_dataset(spec, datasets["mlp"], weights + b" ")
    doubles = save({n: t.double() for n, t in final.items()})
    with pytest.raises(DatasetError, match="float32"):
        load_dataset(_fine_tune(make_spec, datasets, doubles), datasets["mlp"], doubles)
    for bad, needle in [
        ({k: v for k, v in final.items() if k != "layers.0.bias"}, "names must match"),
        ({**final, "layers.0.bias": torch.zeros(3)}, "layers.0.bias"),
    ]:
        data = save(bad)
        other = _fine_tune(make_spec, datasets, data)
        with pytest.raises(DatasetError, match=needle):
            Trainer(other, load_dataset(other, datasets["mlp"], data))


# ----------------------------------------------------------------- a held-out evaluation split


@pytest.mark.parametrize("kind", ["mlp", "char-transformer"])
def test_the_held_out_split_is_never_trained_on_and_its_loss_is_reported(make_spec, datasets, kind: str) -> None:
    data = datasets[kind]
    full = load_dataset(make_spec(kind, data), data)
    held = {"count": 40} if kind == "mlp" else {"fraction": 0.25}
    spec = make_spec(kind, data, eval={**held, "every": 8}, steps=16)
    dataset = load_dataset(spec, data)
    assert dataset.held_out is not None and load_dataset(spec, data).held_out.inputs.equal(dataset.held_out.inputs)  # type: ignore[union-attr]
    if kind == "mlp":
        assert (len(dataset.inputs), len(dataset.held_out.inputs)) == (len(full.inputs) - 40, 40)
        rows = {tuple(r) for r in dataset.inputs.tolist()}
        assert not rows & {tuple(r) for r in dataset.held_out.inputs.tolist()}  # disjoint (the spirals have no repeated point)
        assert len(rows | {tuple(r) for r in dataset.held_out.inputs.tolist()}) == len(full.inputs)
    else:
        cut = len(full.inputs) - len(full.inputs) // 4
        assert dataset.inputs.equal(full.inputs[:cut]) and dataset.held_out.inputs.equal(full.inputs[cut:])
    order = Trainer(spec, dataset).order
    assert int(max(order.indices(s).max() for s in range(spec.steps))) + order.block < len(dataset.inputs)  # batches stay in the training part
    trace = train_trace(spec, dataset)
    assert [s for s, _ in trace.eval_losses] == [0, 8, 16]
    assert trace.eval_losses[-1][1] < trace.eval_losses[0][1]  # the model learns what it never saw
    assert train_trace(spec, dataset, Runtime(threads=2)).eval_losses == trace.eval_losses
    unsplit = make_spec(kind, data, steps=16)
    assert train_trace(unsplit, load_dataset(unsplit, data)).state_hashes != trace.state_hashes  # the held-out examples are left out


@pytest.mark.parametrize("kind", ["mlp", "char-transformer"])
def test_the_final_held_out_loss_is_committed_and_checked_from_the_final_checkpoint(make_spec, datasets, kind: str) -> None:
    """The buyer's held-out result: the manifest commits the final model's held-out loss, which the
    final checkpoint alone reproduces bit for bit; a false one fails the last segment, and a manifest
    that lacks it (or claims one for a spec without a split) is not the trace of the spec."""
    data = datasets[kind]
    spec = make_spec(kind, data, eval={"fraction": 0.25, "every": 8}, steps=16)
    dataset = load_dataset(spec, data)
    trace = train_trace(spec, dataset)
    assert trace.held_out_loss == trace.eval_losses[-1][1] == model_held_out_loss(spec, dataset, trace.checkpoints[-1])
    cids = [f"Qm{i}" for i in range(len(trace.state_hashes))]
    manifest = trace.manifest("QmSpec", cids)
    assert parse_manifest(manifest.canonical_bytes(), spec).held_out_loss == trace.held_out_loss
    final, final_hash, last = trace.checkpoints[-1], trace.state_hashes[-1], spec.segments - 1
    honest = check_held_out(spec, dataset, final, final_hash, trace.held_out_loss)
    assert honest.passed and honest.replayed_loss == trace.held_out_loss
    prettier = float(np.float32(trace.held_out_loss * 0.9))
    false = check_held_out(spec, dataset, final, final_hash, prettier)
    assert not false.passed and false.reason is Reason.WRONG_HELD_OUT_LOSS and false.segment == last and false.replayed_loss == trace.held_out_loss
    assert check_held_out(spec, dataset, trace.checkpoints[-2], final_hash, trace.held_out_loss).reason is Reason.HASH_MISMATCH
    lacking = manifest.model_copy(update={"held_out_loss": None})
    assert b"held_out_loss" not in lacking.canonical_bytes()  # a manifest without one keeps its old bytes
    assert not check_manifest(spec, lacking, len(cids), cids[-1]).passed
    unsplit = make_spec(kind, data, steps=16)
    plain = train_trace(unsplit, load_dataset(unsplit, data))
    assert plain.held_out_loss is None
    assert not check_manifest(unsplit, plain.manifest("QmSpec", cids).model_copy(update={"held_out_loss": 1.0}), len(cids), cids[-1]).passed


def test_eval_specs_that_do_not_fit_are_refused(make_spec, datasets) -> None:
    with pytest.raises(SpecError, match="exactly one of count and fraction"):
        make_spec("mlp", datasets["mlp"], eval={"count": 4, "fraction": 0.1, "every": 4})
    with pytest.raises(SpecError, match="multiple of checkpoint_interval"):
        make_spec("mlp", datasets["mlp"], eval={"count": 4, "every": 6})
    with pytest.raises(DatasetError, match="fewer than one batch"):
        load_dataset(make_spec("mlp", datasets["mlp"], eval={"count": 190, "every": 4}), datasets["mlp"])
    with pytest.raises(DatasetError, match="no window"):
        load_dataset(make_spec("char-transformer", datasets["char-transformer"], eval={"count": 5, "every": 4}), datasets["char-transformer"])
