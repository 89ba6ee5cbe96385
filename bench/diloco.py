"""Multi-party training, DiLoCo-style (issue 28): M parties x R rounds x H inner steps against one
party at equal compute, with the bytes each party sends and the cost of the verified outer step.

    .venv/bin/python -m bench.diloco [--job char-text] [--parties 4] [--rounds 10] [--inner-steps 25] [--batch 16] [--keep 0.1]

Everything runs here, side by side, under repro-v1 (the engine's bits), on one of the shipped
reference jobs (proofs/datasets) or on ``gpt-mini`` (the demo's GPT of 10.4M parameters on the
shipped Shakespeare: submitter.demo_job's spec and data, its test split the corpus's last 10%),
with its optimizer replaced by AdamW at a constant learning rate (gpt-mini's warmup-cosine
schedule dropped: over ``H`` inner steps it would restart every round; its gradient clipping kept):

1. **DiLoCo**: each round every party starts from the global model, runs ``H`` AdamW steps of batch
   ``B`` on its shard (proofs.diloco: shards by the spec's seed, rotating by round), compresses its
   pseudo-gradient to int8 with per-block scales (or top-k with error feedback, ``--keep``) and
   encodes it; the outer step (decode, mean in party order, Nesterov) makes the next global model.
2. **1 party, same examples**: ``M*R*H`` AdamW steps of batch ``B`` on the whole training set
   (the same number of examples seen, one after the other).
3. **1 party, per-step all-reduce**: ``R*H`` steps of batch ``M*B`` (what synchronous data
   parallelism over M parties computes: the same examples and wall time as DiLoCo's parties).

Printed: the final held-out loss of each (the reference job's test split), bytes per round per
party (the int8 contribution as encoded; fp32 pseudo-gradients; fp32 gradients all-reduced every
step, naive and ring), the same byte figures for gpt-mini's 10.4M parameters (from its shapes), the
outer step's time (decode + aggregate + state hash, the aggregator's work) and a check's (what
anyone runs to verify, :func:`proofs.diloco.check_aggregate`), against one inner step.
"""

from __future__ import annotations

import argparse
import math
import statistics
import time

import numpy as np
import torch
from rich.console import Console
from rich.table import Table

from proofs.data import Dataset, load_dataset
from proofs.datasets import REFERENCE_JOBS, ReferenceJob, reference_job
from proofs.diloco import MultipartyConfig, OuterState, aggregate, check_aggregate, compress, encode_contribution, pseudo_gradient, train_party
from proofs.models import build_model
from proofs.spec import JobSpec, load_spec
from proofs.train import Runtime, Trainer, held_out_loss


def _spec(base: JobSpec, *, steps: int, batch: int, lr: float) -> JobSpec:
    raw = base.to_json_dict()
    raw.update(steps=steps, checkpoint_interval=steps, batch_size=batch, optimizer={"kind": "adamw", "lr": lr, "weight_decay": 0.01})
    raw["numerics"] = "repro-v1"
    raw.pop("schedule", None)
    return load_spec(raw)


def _job(name: str) -> ReferenceJob:
    """A reference job, or gpt-mini as the demo builds it (its test split: shakespeare_tokens("test"))."""
    if name != "gpt-mini":
        return reference_job(name)
    from submitter.demo_job import GPT_JOBS, gpt_job

    sizes, steps, k, batch, _ = GPT_JOBS[name]
    return gpt_job(name, sizes, steps, k, batch)


def _loss(spec: JobSpec, train: Dataset, test: Dataset, params: dict[str, torch.Tensor]) -> float:
    trainer = Trainer(spec, Dataset(train.inputs, train.targets, held_out=test))
    with torch.no_grad():
        for name, p in trainer.params.items():
            p.copy_(params[name])
    return held_out_loss(trainer)


def _baseline(spec: JobSpec, train: Dataset, start: dict[str, torch.Tensor], rt: Runtime) -> tuple[dict[str, torch.Tensor], float]:
    trainer = Trainer(spec, train, rt)
    with torch.no_grad():
        for name, p in trainer.params.items():
            p.copy_(start[name])
    began = time.perf_counter()
    trainer.run(spec.steps)
    return {n: p.detach().clone() for n, p in trainer.params.items()}, time.perf_counter() - began


def _int8_bytes(shapes: list[tuple[str, tuple[int, ...]]], block: int) -> int:
    """The encoded size of a dense int8 contribution of these tensors (proofs.diloco's layout)."""
    size = 16
    for name, shape in shapes:
        n = math.prod(shape)
        size += 2 + len(name) + 1 + 4 * len(shape) + 1 + 4 * -(-n // block) + n
    return size


def _gpt_mini_shapes() -> list[tuple[str, tuple[int, ...]]]:
    spec = _job("gpt-mini").spec("QmGptMini")
    return [(n, tuple(p.shape)) for n, p in sorted(build_model(spec, torch.device("cpu")).named_parameters())]


def _gpt_mini_outer(shapes: list[tuple[str, tuple[int, ...]]], cfg: MultipartyConfig) -> tuple[float, float, float]:
    """Seconds to compress one pseudo-gradient, to run the outer step (decode, aggregate, state hash)
    and to check it, at gpt-mini's shapes with synthetic values (the arithmetic does not depend on them)."""
    rng = np.random.Generator(np.random.PCG64(0))

    def draw(scale: float) -> dict[str, torch.Tensor]:
        return {n: torch.from_numpy(rng.standard_normal(s, dtype=np.float32) * np.float32(scale)) for n, s in shapes}

    state = OuterState(1, draw(0.02), draw(1e-3))
    t0 = time.perf_counter()
    first = encode_contribution(compress(draw(1e-3), cfg.block_size, keep=cfg.keep)[0])
    compress_s = time.perf_counter() - t0
    contributions = {0: first, **{p: encode_contribution(compress(draw(1e-3), cfg.block_size, keep=cfg.keep)[0]) for p in range(1, cfg.parties)}}
    t0 = time.perf_counter()
    nxt, _ = aggregate(state, contributions, cfg)
    claimed = nxt.state_hash("0x" + "00" * 32)
    outer_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    assert check_aggregate(state, contributions, cfg, "0x" + "00" * 32, claimed)
    return compress_s, outer_s, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.diloco", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--job",
        default="char-text",
        choices=(*REFERENCE_JOBS, "gpt-mini"),
        help="a shipped reference job, or gpt-mini (the demo's 10.4M-parameter GPT on Shakespeare: slow on a CPU); "
        "mlp-spirals is solved to ~0 loss by every run: not a comparison",
    )
    parser.add_argument("--parties", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--inner-steps", type=int, default=25)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.003, help="inner AdamW learning rate (and the baselines')")
    parser.add_argument("--outer-lr", type=float, default=0.7)
    parser.add_argument("--outer-momentum", type=float, default=0.9)
    parser.add_argument("--block", type=int, default=256)
    parser.add_argument("--keep", type=float, default=None, help="top-k fraction with error feedback (default: dense int8)")
    args = parser.parse_args()
    console = Console(width=150)
    m, r, h, b = args.parties, args.rounds, args.inner_steps, args.batch
    cfg = MultipartyConfig(m, r, h, args.outer_lr, args.outer_momentum, args.block, args.keep)
    job = _job(args.job)
    base = job.spec("QmBenchDataset")
    train = load_dataset(base, job.dataset)
    test = job.test_set(base)
    spec = _spec(base, steps=h, batch=b, lr=args.lr)
    stamp = spec.spec_hash()
    rt = Runtime()
    start = {n: p.detach().clone() for n, p in Trainer(spec, train, rt).params.items()}
    params = spec.param_count()
    console.print(
        f"[bold]{args.job}[/] ({params:,} parameters), {m} parties x {r} rounds x {h} AdamW steps of batch {b}, outer lr {cfg.outer_lr}, momentum {cfg.outer_momentum}, "
        + (f"top-{cfg.keep:g}" if cfg.keep else "int8")
        + f", block {cfg.block_size}"
    )

    # 1. DiLoCo
    state = OuterState.start(start)
    residuals: dict[int, dict[str, torch.Tensor] | None] = dict.fromkeys(range(m))
    sent: list[int] = []
    inner_s, outer_s, check_s = 0.0, [], []
    began = time.perf_counter()
    for _ in range(r):
        contributions = {}
        for party in range(m):
            t0 = time.perf_counter()
            after, _ = train_party(spec, train, cfg, state, party, rt)
            inner_s += time.perf_counter() - t0
            c, residuals[party] = compress(pseudo_gradient(state.params, after), cfg.block_size, keep=cfg.keep, residual=residuals[party])
            contributions[party] = encode_contribution(c)
            sent.append(len(contributions[party]))
        t0 = time.perf_counter()
        nxt, _ = aggregate(state, contributions, cfg)
        claimed = nxt.state_hash(stamp)
        outer_s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        assert check_aggregate(state, contributions, cfg, stamp, claimed)
        check_s.append(time.perf_counter() - t0)
        state = nxt
    diloco_wall = time.perf_counter() - began
    diloco_loss = _loss(spec, train, test, dict(state.params))
    # 2. and 3.
    seq_params, seq_s = _baseline(_spec(base, steps=m * r * h, batch=b, lr=args.lr), train, start, rt)
    dp_params, dp_s = _baseline(_spec(base, steps=r * h, batch=m * b, lr=args.lr), train, start, rt)
    start_loss = _loss(spec, train, test, start)

    table = Table(title=f"held-out loss ({len(test.inputs):,} test examples or tokens); start {start_loss:.4f}")
    for col in ("run", "steps x batch", "held-out loss", "DiLoCo minus this", "time (s)"):
        table.add_column(col, justify="right" if col != "run" else "left")
    seq_loss = _loss(spec, train, test, seq_params)
    dp_loss = _loss(spec, train, test, dp_params)
    table.add_row(f"DiLoCo, {m} parties", f"{m} x {r * h} x {b}", f"{diloco_loss:.4f}", "", f"{diloco_wall:.1f} ({inner_s / m:.1f} per party)")
    table.add_row("1 party, same examples", f"{m * r * h} x {b}", f"{seq_loss:.4f}", f"{diloco_loss - seq_loss:+.4f}", f"{seq_s:.1f}")
    table.add_row("1 party, per-step all-reduce", f"{r * h} x {m * b}", f"{dp_loss:.4f}", f"{diloco_loss - dp_loss:+.4f}", f"{dp_s:.1f}")
    console.print(table)

    shapes = [(n, tuple(t.shape)) for n, t in sorted(start.items())]
    gpt = _gpt_mini_shapes()
    gpt_params = sum(math.prod(s) for _, s in gpt)
    bytes_table = Table(title="bytes per round per party")
    for col in ("what", f"{args.job} ({params:,})", f"gpt-mini ({gpt_params:,})", "vs int8"):
        bytes_table.add_column(col, justify="right" if col != "what" else "left")
    here_int8 = statistics.mean(sent)
    assert cfg.keep or here_int8 == _int8_bytes(shapes, cfg.block_size)  # the size formula used for gpt-mini
    gpt_int8 = _int8_bytes(gpt, cfg.block_size)
    rows = [
        ("int8 contribution" + (f" (top-{cfg.keep:g}, measured)" if cfg.keep else " (as encoded)"), here_int8, gpt_int8 if not cfg.keep else float("nan")),
        ("fp32 pseudo-gradient", 4 * params, 4 * gpt_params),
        (f"fp32 gradient every step to a parameter server ({h} x 4P)", 4 * params * h, 4 * gpt_params * h),
        (f"fp32 ring all-reduce every step, sent ({h} x 2(M-1)/M x 4P)", 4 * params * h * 2 * (m - 1) / m, 4 * gpt_params * h * 2 * (m - 1) / m),
    ]
    for what, here, there in rows:
        bytes_table.add_row(what, f"{here:,.0f}", "-" if math.isnan(there) else f"{there:,.0f}", f"{here / here_int8:.1f}x")
    console.print(bytes_table)
    step_s = seq_s / (m * r * h)  # the sequential baseline's (the parties' time includes building a trainer each round)
    console.print(
        f"outer step (decode {m} contributions, mean, Nesterov, state hash): median {statistics.median(outer_s) * 1e3:.2f} ms; "
        f"check_aggregate (anyone's verification) median {statistics.median(check_s) * 1e3:.2f} ms; "
        f"one inner step {step_s * 1e3:.2f} ms, {h} of them {h * step_s * 1e3:.0f} ms"
    )
    compress_s, gpt_outer_s, gpt_check_s = _gpt_mini_outer(gpt, cfg)
    console.print(
        f"at gpt-mini's {gpt_params:,} parameters ({m} synthetic contributions): compress one {compress_s:.2f} s, "
        f"outer step {gpt_outer_s:.2f} s, check_aggregate {gpt_check_s:.2f} s"
    )


if __name__ == "__main__":
    main()
