"""Adaptive cheaters against the verifier: caught per job, work saved, expected profit (issue 10).

    .venv/bin/python -m bench.adaptive_cheaters [--quick] [--seeds N] [--sizes 100,1000] [--p 0.1] [--bond 0.5]

1. For each attack of ``proofs.adversary`` (one jump; m jumps with honest-looking norms; a free
   start; coasting, with the jump segments' norms claimed honest-looking; drift in tolerance mode;
   a hyperparameter or data-order change confined to middle segments; mixes), a real trace of the
   MLP job with n = 1000 segments (200 with ``--quick``) is built and EVERY segment replayed once
   with the verifier's judgement (``replay_segment``; leaf 0 with ``check_start``), which gives the
   set of segments that fail when replayed. Then the verifier's sampling (``choose_segments`` with
   the claimed norms, the default Q = 2, R = 44, over ``--seeds`` on-chain seeds) is simulated on
   top of that set: a job is caught when its start is wrong or the sample holds a failing segment.
   (Replaying the sample of every seed for real would give the same verdicts 200 times over; the
   per-segment verdicts are real.) Printed side by side: work saved s (share of the job's compute
   the cheater did not spend), caught (measured), P (formula: 1 for a deterministic defence, else
   the worst-case hypergeometric of ``proofs.sampling``), and the expected gain over honest work,
   ``s*C - P*(W + B)``, at the deployment parameters: reward W = C (a job priced at its compute),
   solver bond B = solverBondBps * W (deploy/params/public.json).
   Issue 31 adds the cheats of few bad segments (``dead-units``, ``quiet-jumps``, ``tiny-gradient`` on
   separable blobs, ``tolerance-backdoor`` under torch numerics) and full replay at random: a job is
   fully replayed with probability ``--p`` (the contract's coin, ``proofs.full_replay_drawn``, drawn
   per seed; always for a spec that ``needs_full_replay``), which catches every trace that is not
   the honest one (compared leaf by leaf with an honest trace of the same spec). Each row is then
   also shown caught and gaining under that rule, measured and predicted
   (``caught_probability``). ``--p`` and ``--bond`` default to the deployment's
   (deploy/params/public.json: ``fullReplayRateBps``, ``solverBondBps``) where it has them, else
   p = 0.1 and B = 0.5 W.
2. Tolerance mode: a char-transformer job under the old whole-vector window (the char-text
   thresholds of docs/proofs.md); a cheater pushes the coordinates honest training never moves in
   every segment. How far its model drifts on inputs the data never holds after n segments that the
   old rule passes, and the segment where the new rule rejects it.
3. Norms: what checking every segment's norm would cost the verifier (fetch every checkpoint)
   against what the sample fetches, at the registry sizes and at 10M parameters.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from eth_utils import keccak
from rich.console import Console
from rich.table import Table

from proofs.adversary import CheatTrace, cheat, mix
from proofs.checkpoint import decode_checkpoint, encode_checkpoint, update_norm
from proofs.data import Dataset, load_dataset
from proofs.datasets import REFERENCE_JOBS, blobs, reference_job, spirals, text_tokens
from proofs.errors import ProofError
from proofs.optim import build_optimizer
from proofs.replay import Reason, check_start, distances, replay_segment
from proofs.sampling import DEFAULT_Q, DEFAULT_R, caught_probability, choose_segments, detection_probability, full_replay_drawn, needs_full_replay
from proofs.spec import CharTransformerConfig, JobSpec, Tolerance, load_spec
from proofs.train import Trainer, train_trace

console = Console(width=160)
PARAMS = Path(__file__).resolve().parents[1] / "deploy/params/public.json"
#: The char-text thresholds calibrated under the old whole-vector rule (docs/proofs.md).
OLD_WINDOW = Tolerance(mode="tolerance", l2=6.4e-4, linf=5e-3, cosine=2e-8)
#: Windows of a torch-numerics MLP job for ``tolerance-backdoor`` (10x the mlp's calibrated ones, rounded up).
TORCH_WINDOW = Tolerance(mode="tolerance", l2=1e-4, linf=1e-3, cosine=1e-8)
#: Where the deployment does not fix them yet: the full-replay rate and the solver bond (share of W).
FALLBACK_P, FALLBACK_BOND = 0.1, 0.5


def deployment_parameters() -> tuple[float, float, str]:
    """(p, B / W, where they come from): the deployment's fullReplayRateBps and solverBondBps."""
    market = json.loads(PARAMS.read_text())["market"]
    if "fullReplayRateBps" in market:
        return market["fullReplayRateBps"] / 1e4, market["solverBondBps"] / 1e4, "deploy/params/public.json"
    return FALLBACK_P, FALLBACK_BOND, "p = 0.1, B = 0.5 W: the public deployment has no full-replay rate"


def _spec(kind: str, data: bytes, steps: int, k: int, **extra: object) -> JobSpec:
    models = {
        "mlp": {"kind": "mlp", "input_dim": 2, "hidden": [16], "num_classes": 3},
        "char-transformer": {"kind": "char-transformer", "vocab_size": 128, "block_size": 8, "n_layer": 1, "n_head": 2, "n_embd": 16},
    }
    raw = {
        "model": models[kind],
        "dataset": {"cid": "QmBench", "format": "safetensors", "size_bytes": len(data), "targets": None if kind != "mlp" else "y"},
        "optimizer": {"kind": "sgd", "lr": 0.05, "momentum": 0.9} if kind == "mlp" else {"kind": "adam", "lr": 0.01},
        "batch_size": 16, "steps": steps, "seed": 5, "checkpoint_interval": k, **extra,
    }  # fmt: skip
    return load_spec(raw)


def _failing(spec: JobSpec, dataset, faked: CheatTrace, norms: list[float]) -> tuple[bool, set[int]]:
    """Whether the start is wrong, and every segment whose replay fails (all replayed once)."""
    t = faked.trace
    wrong_start = not check_start(spec, dataset, t.state_hashes[0]).passed
    fails = set()
    for seg in range(spec.segments):
        v = replay_segment(spec, dataset, seg, t.checkpoints[seg], t.checkpoints[seg + 1], claimed_norm=norms[seg])
        if not v.passed:
            fails.add(seg)
    return wrong_start, fails


def _seed(i: int) -> bytes:
    return keccak(b"veritrain/bench/adaptive" + i.to_bytes(8, "big"))


def _attacks(n: int) -> list[tuple[str, str, dict]]:
    """(row label, how to build it, arguments)."""
    mid = n // 2
    tenth = max(1, n // 10)
    spread = lambda m: tuple(sorted({int(n * 0.2 + i * (n * 0.6) / m) for i in range(m)}))  # noqa: E731
    return [
        ("one jump", "mix", {"plan": {mid: "quiet-jump"}}),
        (f"m = {max(1, n // 100)} jumps, honest-looking norms", "mix", {"plan": dict.fromkeys(spread(max(1, n // 100)), "quiet-jump")}),
        (f"m = {max(1, n // 20)} jumps, honest-looking norms", "mix", {"plan": dict.fromkeys(spread(max(1, n // 20)), "quiet-jump")}),
        (f"m = {tenth} jumps, honest-looking norms", "mix", {"plan": dict.fromkeys(spread(tenth), "quiet-jump")}),
        ("free start", "cheat", {"strategy": "free-start"}),
        ("free start + 1% jumps", "mix", {"plan": dict.fromkeys(spread(max(1, n // 100)), "quiet-jump"), "free_start": True}),
        ("coast 10% (norm claims honest-looking)", "cheat", {"strategy": "coast", "segments": tuple(range(mid, mid + tenth)), "lie": True}),
        ("coast from the middle to the end", "cheat", {"strategy": "coast", "segments": tuple(range(mid, n))}),
        ("drift, tolerance mode, every segment", "cheat", {"strategy": "tolerance-drift", "tolerance": True}),
        ("drift, tolerance mode, 10% middle", "mix", {"plan": {s: "drift" for s in range(mid, mid + tenth)}, "tolerance": True}),
        ("half batch on 10% middle segments", "cheat", {"strategy": "half-batch", "segments": tuple(range(mid, mid + tenth))}),
        ("data order on 10% middle segments", "cheat", {"strategy": "wrong-data", "segments": tuple(range(mid, mid + tenth))}),
        ("dead-units: one jump into a one-unit-wide net, small norm claimed", "cheat", {"strategy": "dead-units"}),
        ("quiet-jumps: into the same state, every norm true", "cheat", {"strategy": "quiet-jumps"}),
        ("tiny-gradient: a saturated model (blobs), parameters frozen", "cheat", {"strategy": "tiny-gradient", "data": "blobs"}),
        ("tolerance-backdoor: 0.9x the windows on moved coordinates (torch)", "cheat", {"strategy": "tolerance-backdoor", "torch": True}),
        ("mix: 2% jumps + 2% half batch + 2% coast", "mix", {
            "plan": {**{s: "quiet-jump" for s in spread(max(1, n // 50))},
                     **{s + 1: "half-batch" for s in spread(max(1, n // 50))},
                     **{s: "coast" if s > n // 4 else "coast-in" for s in range(n // 4, n // 4 + max(1, n // 50))},
                     n // 4 + max(1, n // 50): "coast-out"},
            "lie": True}),
    ]  # fmt: skip


def detection(n: int, seeds: int, p: float, bond: float, source: str, only: str | None = None) -> list[dict[str, Any]]:
    spirals_data, blob_data = spirals(1, per_class=64), blobs(1)
    jobs: dict[tuple[str, str], tuple[JobSpec, Dataset, tuple]] = {}

    def job(data: str, variant: str) -> tuple[JobSpec, Dataset, tuple]:
        """A spec, its dataset and its honest trace's leaves, per dataset and numerics variant."""
        if (data, variant) not in jobs:
            raw = blob_data if data == "blobs" else spirals_data
            extra: dict[str, object] = {"tolerance": OLD_WINDOW.model_dump()} if variant == "old-window" else {}
            if variant == "torch":
                extra = {"numerics": "torch", "tolerance": TORCH_WINDOW.model_dump()}
            spec = _spec("mlp", raw, 2 * n, 2, **extra)
            dataset = load_dataset(spec, raw)
            jobs[data, variant] = (spec, dataset, train_trace(spec, dataset).state_hashes)
        return jobs[data, variant]

    rows: list[dict[str, Any]] = []
    table = Table(title=f"Cheats against the verifier, MLP job of n = {n} segments (k = 2), Q = {DEFAULT_Q}, R = {DEFAULT_R}, {seeds} seeds; "
                  f"gain over honest work in units of the compute cost C, at W = C, B = {bond:g} W; full replay at p = {p:g} ({source})")  # fmt: skip
    for col in (
        "attack",
        "bad",
        "s",
        "caught sampled (meas / pred)",
        "gain sampled (meas / pred)",
        "caught with full replay (meas / pred)",
        "gain with full replay (meas / pred)",
        "how",
    ):
        table.add_column(col, justify="left" if col in ("attack", "how") else "right")
    for label, how, args in _attacks(n):
        if only is not None and not any(word in label for word in only.split(",")):
            continue
        started = time.monotonic()
        variant = "torch" if args.get("torch") else "old-window" if args.get("tolerance") else "exact"
        spec, dataset, reference = job(str(args.get("data", "spirals")), variant)
        try:
            if how == "cheat":
                faked = cheat(args["strategy"], spec, dataset, segments=args.get("segments"))
            else:
                faked = mix(spec, dataset, args["plan"], free_start=args.get("free_start", False))
        except ProofError as exc:  # a cheat that does not apply at this size
            console.print(f"{label}: not applicable at n = {n}: {exc}")
            continue
        norms = list(faked.trace.update_norms)
        if args.get("lie"):  # the faked segments claim a typical honest norm, to stay out of top-Q
            typical = float(np.median(norms))
            for s in faked.bad_segments:
                norms[s] = typical
        wrong_start, fails = _failing(spec, dataset, faked, norms)
        differs = faked.trace.state_hashes != reference  # what a full replay from the seeded start sees
        always = needs_full_replay(spec)
        caught = caught_full = 0
        for i in range(seeds):
            sampled = wrong_start or bool(fails & set(choose_segments(norms, _seed(i), DEFAULT_Q, DEFAULT_R).segments))
            caught += sampled
            caught_full += sampled or (differs and (always or full_replay_drawn(_seed(i), round(p * 1e4))))
        if wrong_start or (n - 1) in fails:
            predicted, defence = 1.0, "start bound" if wrong_start else "last segment always replayed"
        else:
            predicted, defence = detection_probability(len(fails), n, DEFAULT_Q, DEFAULT_R), "sampling (worst case)"
        predicted_full = caught_probability(predicted, 1.0 if always else p, differs=differs)
        reasons = sorted({r.value for r in _reasons(spec, dataset, faked, fails)})
        cost = 1 + bond
        row: dict[str, Any] = {"attack": label, "n": n, "bad": len(fails) + wrong_start, "saved": faked.work_saved,
               "caught": caught / seeds, "predicted": predicted, "gain": faked.work_saved - predicted * cost,
               "measured_gain": faked.work_saved - caught / seeds * cost,
               "caught_full": caught_full / seeds, "predicted_full": predicted_full, "gain_full": faked.work_saved - predicted_full * cost,
               "measured_gain_full": faked.work_saved - caught_full / seeds * cost, "differs": differs, "always_full": always,
               "defence": defence, "reasons": reasons, "seconds": round(time.monotonic() - started, 1)}  # fmt: skip
        rows.append(row)
        full_how = "always (needs_full_replay)" if always else f"p = {p:g}"
        table.add_row(label, str(row["bad"]), f"{faked.work_saved:.3f}", f"{row['caught']:.3f} / {predicted:.3f}",
                      f"{row['measured_gain']:+.3f} / {row['gain']:+.3f}", f"{row['caught_full']:.3f} / {predicted_full:.3f}",
                      f"{row['measured_gain_full']:+.3f} / {row['gain_full']:+.3f}",
                      f"{defence}: {', '.join(reasons) or 'no segment fails'}; full replay {full_how}{'' if differs else ' (the honest trace)'}")  # fmt: skip
    console.print(table)
    for row in rows:  # the bond that would make it lose: s < P * (1 + B / W)
        saved, caught_p = float(row["saved"]), float(row["predicted_full"])
        if 0 < caught_p and saved >= caught_p * (1 + bond):
            console.print(f"{row['attack']}: gains at B = {bond:g} W; loses for B > {saved / caught_p - 1:.2f} W at p = {p:g}")
    return rows


def _reasons(spec: JobSpec, dataset, faked: CheatTrace, fails: set[int]) -> list[Reason]:
    """The verdict reasons of (up to three of) the failing segments, for the table."""
    t = faked.trace
    out = [check_start(spec, dataset, t.state_hashes[0]).reason] if not check_start(spec, dataset, t.state_hashes[0]).passed else []
    for seg in sorted(fails)[:3]:
        out.append(replay_segment(spec, dataset, seg, t.checkpoints[seg], t.checkpoints[seg + 1]).reason)
    return out


def drift(n: int) -> None:
    data = text_tokens()
    spec = _spec("char-transformer", data, 2 * n, 2, tolerance=OLD_WINDOW.model_dump())
    dataset = load_dataset(spec, data)
    faked = cheat("tolerance-drift", spec, dataset)
    t = faked.trace
    old_passes, new_first_fail = 0, None
    for seg in range(n):
        trainer = Trainer(spec, dataset)
        trainer.load(decode_checkpoint(t.checkpoints[seg]))
        trainer.run(spec.checkpoint_interval)
        ours = {f"param.{k}": p.detach() for k, p in trainer.params.items()}
        theirs = {k: v for k, v in decode_checkpoint(t.checkpoints[seg + 1]).tensors.items() if k.startswith("param.")}
        old_passes += distances(ours, theirs).within(OLD_WINDOW)
        if new_first_fail is None and not replay_segment(spec, dataset, seg, t.checkpoints[seg], t.checkpoints[seg + 1]).passed:
            new_first_fail = seg
    honest = Trainer(spec, dataset)
    honest.run(spec.steps)
    drifted = Trainer(spec, dataset)
    drifted.load(decode_checkpoint(t.checkpoints[-1]))
    assert isinstance(spec.model, CharTransformerConfig)
    seen = set(dataset.inputs.tolist())
    unseen = torch.tensor([[c for c in range(128) if c not in seen][: spec.model.block_size]])
    with torch.no_grad():
        a, b = honest.model(unseen), drifted.model(unseen)
        known = torch.tensor([list(dataset.inputs[: spec.model.block_size].tolist())])
        a2, b2 = honest.model(known), drifted.model(known)
    first, last = decode_checkpoint(t.checkpoints[0]).params(), decode_checkpoint(t.checkpoints[-1]).params()
    moved = max(float((last[k] - first[k]).abs().max()) for k in first)
    console.print(f"\nTolerance mode, char-transformer, n = {n} segments, old window l2/linf/cos {OLD_WINDOW.l2:g}/{OLD_WINDOW.linf:g}/{OLD_WINDOW.cosine:g}:")
    console.print(f"  old rule passes {old_passes}/{n} drifted segments; largest coordinate pushed {moved:.3g} in total; "
                  f"logits on a never-seen input moved by up to {float((a - b).abs().max()):.3g} (on training text {float((a2 - b2).abs().max()):.3g})")  # fmt: skip
    console.print(f"  new rule (no change where the replay changes nothing): first segment rejected = {new_first_fail}")


def norms_cost() -> None:
    console.print("\nChecking every norm (fetch every checkpoint) vs the sample (2 * (Q + 1 + R) checkpoints), n = 1000:")
    table = Table()
    for col in ("model", "params", "checkpoint bytes", "every checkpoint", "the sample", "ratio", "decode + norm / checkpoint"):
        table.add_column(col, justify="right")
    sizes = []
    for name in REFERENCE_JOBS:
        spec = reference_job(name).spec("QmX")
        sizes.append((name, spec, spec.model.param_count()))
    big = reference_job("char-text").spec("QmX")
    big = big.model_copy(update={"model": big.model.model_copy(update={"n_embd": 320, "n_layer": 8, "n_head": 4, "block_size": 128})})
    sizes.append(("10M transformer", big, big.model.param_count()))
    sample = 2 * (DEFAULT_Q + 1 + DEFAULT_R)
    for name, spec, count in sizes:
        slots = len(build_optimizer(spec.optimizer).slots)
        tensors = {"param.w": torch.randn(count), **{f"optim.w.{i}": torch.randn(count) for i in range(slots)}}
        data = encode_checkpoint(1, tensors, "0x" + "00" * 32)
        started = time.monotonic()
        ckpt = decode_checkpoint(data)
        update_norm(ckpt.params(), ckpt.params())
        each = time.monotonic() - started
        table.add_row(name, f"{count:,}", f"{len(data) / 1e6:.2f} MB", f"{1001 * len(data) / 1e9:.2f} GB", f"{sample * len(data) / 1e9:.3f} GB",
                      f"{1001 / sample:.1f}x", f"{each * 1e3:.0f} ms (x1001 = {each * 1001:.0f} s)")  # fmt: skip
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="n = 200 segments, 200 seeds, 50 drift segments")
    parser.add_argument("--seeds", type=int, default=None, help="on-chain seeds per attack (default 500, 200 with --quick)")
    parser.add_argument("--sizes", default=None, help="segments per job, comma-separated (default 100,1000; 200 with --quick); alone: section 1 only")
    parser.add_argument("--p", type=float, default=None, help="full-replay probability (default: the deployment's, else 0.1)")
    parser.add_argument("--bond", type=float, default=None, help="solver bond as a share of the reward (default: the deployment's, else 0.5)")
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    parser.add_argument("--only", default=None, help="only the attacks whose label holds one of these comma-separated words (e.g. dead-units,tiny-gradient)")
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")] if args.sizes else [200] if args.quick else [100, 1000]
    seeds = args.seeds or (200 if args.quick else 500)
    p, bond, source = deployment_parameters()
    if args.p is not None or args.bond is not None:
        p, bond, source = args.p if args.p is not None else p, args.bond if args.bond is not None else bond, "--p / --bond"
    started = time.monotonic()
    rows = [row for n in sizes for row in detection(n, seeds, p, bond, source, args.only)]
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))
    if args.sizes is not None:
        console.print(f"\n{time.monotonic() - started:.0f} s")
        return
    drift(50 if args.quick else 100)
    norms_cost()
    console.print(f"\n{time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
