"""Cheating solvers, for tests, benchmarks and ``veritrain demo --cheat``.

Each strategy (stable names in :data:`STRATEGIES`) produces a complete,
self-consistent trace (checkpoint bytes, hashes, update norms, Merkle tree, so
the manifest and root verify) in which the ``bad_segments`` were not trained
as the spec says. Every segment outside ``bad_segments`` is honest work from
the (possibly faked) state before it, so replay fails exactly on the bad ones:

* ``skip-steps``: train half of the segment's steps and extrapolate the rest;
* ``wrong-lr``: train the segment with half the learning rate;
* ``wrong-data``: train the segment on batches from another data order;
* ``copy-weights``: checkpoints taken from another run (another seed);
* ``fake-final``: the final checkpoint is fabricated (the last update, repeated);
* ``tamper``: one tensor changed in one committed checkpoint (both segments
  touching it fail).

Every strategy commits the mean training loss of the steps its own training ran on each
segment (a segment it did not train at all claims the loss before it). A false claim about honest work
(:data:`FALSE_CLAIMS`) trains every segment as the spec says and lies in the manifest only:

* ``false-loss``: a prettier training curve, the loss of ``bad_segments`` (by default the
  second half) committed at 0.8x what training computed; caught by the loss check
  (``wrong-loss``) of a replay, and by a referee's replay of the segment's losses.

The adaptive cheaters (:data:`ADAPTIVE`, issue 10) know the verifier's rules and pick
their fakes to fit them; each is caught only by a defence that names its class:

* ``free-start``: checkpoint 0 is a state of the cheater's choosing (here another
  seed's initialization, also for a spec that fine-tunes from a pretrained model), every
  segment honest from there: caught by the bound start;
* ``coast``: jumps into a state where training does no work (every parameter and slot
  zero: only the output bias still learns, and its gradient is label counting), coasts
  through the middle segments, jumps back to the state it left and trains the rest:
  the jumps fail replay, the coasting segments fail ``no-work``;
* ``quiet-jumps``: m segments not trained at all, each replaced by a step along the
  previous update scaled to half the previous segment's norm, so no fake stands out to
  top-Q;
* ``half-batch``: a hyperparameter change confined to middle segments (half the batch:
  half the compute);
* ``tolerance-drift`` (tolerance-mode specs): every segment honest, plus a small push on
  coordinates honest training never moves (the embedding of a token the data never
  holds), within the old whole-vector window each time: a backdoor that adds up.

:func:`mix` plays any per-segment mix of their moves (:data:`MOVES`), with or without a
free start. ``CheatTrace.work_saved`` is the share of the job's compute the cheater did not
spend (:data:`WORK_SAVED`, :data:`MOVES`), for the economics of docs/proofs.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from proofs.checkpoint import Checkpoint, decode_checkpoint, encode_checkpoint, state_hash, update_norm
from proofs.data import BatchOrder, Dataset
from proofs.errors import ProofError
from proofs.merkle import TraceTree
from proofs.seeds import derive_seed
from proofs.spec import JobSpec
from proofs.train import Runtime, Trace, Trainer, segment_loss

__all__ = ["STRATEGIES", "ADAPTIVE", "FALSE_CLAIMS", "ALL_STRATEGIES", "WORK_SAVED", "MOVES", "CheatTrace", "cheat", "mix"]

STRATEGIES = ("skip-steps", "wrong-lr", "wrong-data", "copy-weights", "fake-final", "tamper")
ADAPTIVE = ("free-start", "coast", "quiet-jumps", "half-batch", "tolerance-drift")
FALSE_CLAIMS = ("false-loss",)
ALL_STRATEGIES = STRATEGIES + ADAPTIVE + FALSE_CLAIMS

#: Share of a bad segment's training compute a classic strategy (or a false claim) does not spend.
WORK_SAVED = {"skip-steps": 0.5, "wrong-lr": 0.0, "wrong-data": 0.0, "copy-weights": 0.0, "fake-final": 1.0, "tamper": 0.0, "false-loss": 0.0}

#: What ``false-loss`` commits for a bad segment's loss, as a share of the computed one.
PRETTIER = 0.8


class ForgedTrainer(Trainer):
    """Trains ``spec`` (possibly another spec than the job's) on data order ``data_seed`` (None: the
    spec's own), stamping its checkpoints with ``stamp``, the honest spec's hash, as a cheater would."""

    def __init__(self, spec: JobSpec, dataset: Dataset, rt: Runtime, *, stamp: str, data_seed: int | None = None) -> None:
        super().__init__(spec, dataset, rt)
        self.stamp = stamp
        if data_seed is not None:
            self.order = BatchOrder(spec, dataset, seed=data_seed)


@dataclass(frozen=True)
class CheatTrace:
    """A cheating trace (with checkpoint bytes) and the segments where replay must fail."""

    strategy: str
    trace: Trace
    bad_segments: tuple[int, ...]
    work_saved: float = 0.0  # share of the job's training compute the cheater did not spend


def _default_segments(strategy: str, n: int) -> tuple[int, ...]:
    if strategy in ("copy-weights", "tolerance-drift"):
        return tuple(range(n))
    if strategy == "fake-final":
        return (n - 1,)
    if strategy == "free-start":
        return (0,)
    if strategy in ("coast", "half-batch"):
        return tuple(range(n // 4, max(n // 4 + 1, 3 * n // 4)))
    if strategy == "false-loss":
        return tuple(range(n // 2, n))
    if strategy == "quiet-jumps":
        return tuple(sorted({n // 3, 2 * n // 3}))
    return (n // 2,)


def cheat(
    strategy: str,
    spec: JobSpec,
    dataset: Dataset,
    *,
    segments: Sequence[int] | None = None,
    rt: Runtime = Runtime(),
) -> CheatTrace:
    """A trace of ``spec`` faked by ``strategy`` on ``segments`` (a default per strategy).

    For ``tamper`` the segments name the checkpoints changed: tampering checkpoint
    ``c`` breaks segments ``c - 1`` and ``c``. ``fake-final`` always fakes the last one.
    """
    if strategy not in ALL_STRATEGIES:
        raise ProofError(f"no adversary strategy {strategy!r}; choose one of {', '.join(ALL_STRATEGIES)}")
    n, k = spec.segments, spec.checkpoint_interval
    chosen = tuple(sorted(set(segments))) if segments is not None else _default_segments(strategy, n)
    if strategy == "fake-final":
        chosen = (n - 1,)
    if strategy == "free-start":
        chosen = (0,)
    if strategy == "coast" and chosen != tuple(range(chosen[0], chosen[-1] + 1)):
        raise ProofError(f"coast fakes one contiguous run of segments, not {chosen}")
    if strategy == "tolerance-drift" and spec.tolerance.mode != "tolerance":
        raise ProofError("tolerance-drift attacks tolerance-mode specs only")
    if strategy in ADAPTIVE:
        return _adaptive(strategy, spec, dataset, chosen, rt)
    if strategy == "tamper" and segments is None:
        chosen = (max(1, n // 2),)
    if not chosen or any(not 0 <= s < n + (strategy == "tamper") for s in chosen):
        raise ProofError(f"segments {chosen} are not in a trace of {n} segments")

    honest = Trainer(spec, dataset, rt)
    stamp = spec.spec_hash()
    other = _other_run(strategy, spec, dataset, rt)
    checkpoints = [honest.to_bytes()]
    losses: list[float] = []
    for seg in range(n):
        if strategy in ("tamper", "false-loss") or seg not in chosen:
            computed = honest.run(k)
        elif strategy == "copy-weights":
            assert other is not None
            computed = other.run(k)
            honest.load(other.checkpoint())
        else:
            computed = _fake_segment(strategy, spec, dataset, honest, rt, stamp)
        losses.append(segment_loss(computed) if computed else losses[-1] if losses else 0.0)
        if strategy == "false-loss" and seg in chosen:
            losses[-1] = float(np.float32(losses[-1] * PRETTIER))
        checkpoints.append(honest.to_bytes())

    bad = chosen
    if strategy == "tamper":
        for c in chosen:
            checkpoints[c] = _tampered(checkpoints[c], stamp)
        bad = tuple(sorted({s for c in chosen for s in (c - 1, c) if 0 <= s < n}))
    saved = WORK_SAVED[strategy] * len(chosen) / n
    return CheatTrace(strategy=strategy, trace=_assemble(spec, checkpoints, losses), bad_segments=bad, work_saved=saved)


def _other_run(strategy: str, spec: JobSpec, dataset: Dataset, rt: Runtime) -> Trainer | None:
    if strategy != "copy-weights":
        return None
    twin = spec.model_copy(update={"seed": derive_seed(spec.seed, "adversary")})
    return ForgedTrainer(twin, dataset, rt, stamp=spec.spec_hash())


def _fake_segment(strategy: str, spec: JobSpec, dataset: Dataset, trainer: Trainer, rt: Runtime, stamp: str) -> list[float]:
    """Advance ``trainer`` by one segment the wrong way; the losses of the steps it did train."""
    k = spec.checkpoint_interval
    if strategy == "skip-steps":
        before = {n: p.detach().clone() for n, p in trainer.params.items()}
        done = k // 2
        losses = trainer.run(done)
        with torch.no_grad():
            for name, p in trainer.params.items():
                p.copy_(before[name] + (p - before[name]) * (k / max(done, 1)))
        trainer.step += k - done
        return losses
    if strategy in ("wrong-lr", "wrong-data"):
        if strategy == "wrong-lr":
            bent = spec.model_copy(update={"optimizer": spec.optimizer.model_copy(update={"lr": spec.optimizer.lr * 0.5})})
            crook = ForgedTrainer(bent, trainer.order.dataset, rt, stamp=stamp)
        else:
            crook = ForgedTrainer(spec, trainer.order.dataset, rt, data_seed=derive_seed(spec.seed, "adversary"), stamp=stamp)
        crook.load(trainer.checkpoint())
        losses = crook.run(k)
        trainer.load(crook.checkpoint())
        return losses
    if strategy == "fake-final":
        # No training at all: repeat the previous segment's update (a plausible-looking extrapolation).
        before = {n: p.detach().clone() for n, p in trainer.params.items()}
        probe = Trainer(spec, trainer.order.dataset, rt)
        probe.load(trainer.checkpoint())
        losses = probe.run(1)  # one cheap step to get a direction
        with torch.no_grad():
            for name, p in trainer.params.items():
                p.copy_(before[name] + (probe.params[name].detach() - before[name]) * k)
        trainer.step += k
        return losses
    raise ProofError(f"{strategy} fakes no segment")


#: What one segment of an adaptive plan does, and the share of its compute it skips.
MOVES = {"honest": 0.0, "coast-in": 1.0, "coast": 1.0, "coast-out": 1.0, "quiet-jump": 1.0, "half-batch": 0.5, "drift": 0.0}


def _plan(strategy: str, n: int, chosen: tuple[int, ...]) -> dict[int, str]:
    if strategy == "free-start":
        return {}
    if strategy == "coast":
        plan = dict.fromkeys(chosen, "coast")
        plan[chosen[0]] = "coast-in"
        if len(chosen) > 1 and chosen[-1] < n - 1:
            plan[chosen[-1]] = "coast-out"
        return plan
    move = {"quiet-jumps": "quiet-jump", "half-batch": "half-batch", "tolerance-drift": "drift"}[strategy]
    return dict.fromkeys(chosen, move)


def _adaptive(strategy: str, spec: JobSpec, dataset: Dataset, chosen: tuple[int, ...], rt: Runtime) -> CheatTrace:
    faked = mix(spec, dataset, _plan(strategy, spec.segments, chosen), free_start=strategy == "free-start", rt=rt)
    return CheatTrace(strategy, faked.trace, faked.bad_segments, faked.work_saved)


def mix(spec: JobSpec, dataset: Dataset, plan: Mapping[int, str], *, free_start: bool = False, rt: Runtime = Runtime()) -> CheatTrace:
    """An adaptive cheat mixing the classes: ``plan`` maps segments to a move of :data:`MOVES`
    (the others are trained honestly); ``free_start`` starts from another seed's initialization.
    A ``coast-out`` returns to the state the last ``coast-in`` left."""
    n, k = spec.segments, spec.checkpoint_interval
    if any(not 0 <= seg < n or move not in MOVES for seg, move in plan.items()):
        raise ProofError(f"plan {dict(plan)} is not moves of {', '.join(MOVES)} on segments of a trace of {n}")
    if "drift" in plan.values() and spec.tolerance.mode != "tolerance":
        raise ProofError("drift attacks tolerance-mode specs only")
    stamp = spec.spec_hash()
    trainer = Trainer(spec, dataset, rt)
    if free_start:  # a fine-tuning spec's cheater skips the pretrained model too
        twin = spec.model_copy(update={"seed": derive_seed(spec.seed, "adversary"), "init": None})
        trainer.load(ForgedTrainer(twin, dataset, rt, stamp=stamp).checkpoint())
    checkpoints = [trainer.to_bytes()]
    losses: list[float] = []
    previous = {name: p.detach().clone() for name, p in trainer.params.items()}
    left: Checkpoint | None = None
    for seg in range(n):
        move = plan.get(seg, "honest")
        before = {name: p.detach().clone() for name, p in trainer.params.items()}
        computed: list[float] = []  # a move that trains nothing claims the loss before it
        if move in ("honest", "coast"):
            computed = trainer.run(k)  # coasting: what replay gives, bought for the price of label counts
        elif move == "coast-in":  # every parameter and slot zero: only the output bias still learns
            left = trainer.checkpoint()
            with torch.no_grad():
                for t in trainer.tensors().values():
                    t.zero_()
            trainer.step += k
        elif move == "coast-out":
            if left is None:
                raise ProofError(f"coast-out at segment {seg} without an earlier coast-in")
            trainer.load(Checkpoint(trainer.step + k, stamp, left.tensors))
        elif move == "quiet-jump":  # no training: half the previous update again
            with torch.no_grad():
                for name, p in trainer.params.items():
                    p.add_((before[name] - previous[name]) * 0.5)
            trainer.step += k
        elif move == "half-batch":
            bent = spec.model_copy(update={"batch_size": max(1, spec.batch_size // 2)})
            crook = ForgedTrainer(bent, dataset, rt, stamp=stamp)
            crook.load(trainer.checkpoint())
            computed = crook.run(k)
            trainer.load(crook.checkpoint())
        else:  # drift
            computed = trainer.run(k)
            _drift(spec, trainer, before)
        losses.append(segment_loss(computed) if computed else losses[-1] if losses else 0.0)
        previous = before
        checkpoints.append(trainer.to_bytes())
    bad = tuple(sorted(set(plan) | ({0} if free_start else set())))
    saved = sum(MOVES[m] for m in plan.values()) / n
    return CheatTrace(strategy="mix", trace=_assemble(spec, checkpoints, losses), bad_segments=bad, work_saved=saved)


def _drift(spec: JobSpec, trainer: Trainer, before: dict[str, torch.Tensor]) -> None:
    """Push the coordinates this segment left unchanged, the same way every segment, by half of what
    the old whole-vector window let through (relative l2, cosine, linf): a backdoor in the making."""
    tol = spec.tolerance
    assert tol.l2 is not None and tol.linf is not None and tol.cosine is not None
    with torch.no_grad():
        frozen = {name: p == before[name] for name, p in trainer.params.items()}
        count = sum(int(m.sum()) for m in frozen.values())
        if count == 0:
            raise ProofError("tolerance-drift needs coordinates honest training leaves unchanged; this job moves them all")
        total = math.sqrt(sum(float((p.double() ** 2).sum()) for p in trainer.params.values()))
        push = min(0.5 * min(tol.l2, math.sqrt(2 * tol.cosine)) * total / math.sqrt(count), 0.5 * tol.linf)
        for name, p in trainer.params.items():  # alternating signs: a mean shift would vanish in a LayerNorm
            signs = 1.0 - 2.0 * (torch.arange(p.numel()) % 2).to(p.dtype).view(p.shape)
            p.add_(frozen[name].to(p.dtype) * signs * push)


def _tampered(data: bytes, stamp: str) -> bytes:
    ckpt = decode_checkpoint(data)
    tensors = {k: v.clone() for k, v in ckpt.tensors.items()}
    first = sorted(k for k in tensors if k.startswith("param."))[0]
    tensors[first].view(-1)[0] += 1e-3
    return encode_checkpoint(ckpt.step, tensors, stamp)


def _assemble(spec: JobSpec, checkpoints: list[bytes], losses: list[float]) -> Trace:
    params = [decode_checkpoint(c).params() for c in checkpoints]
    norms = tuple(update_norm(a, b) for a, b in zip(params, params[1:]))
    hashes = tuple(state_hash(c) for c in checkpoints)
    return Trace(spec=spec, state_hashes=hashes, update_norms=norms, losses=tuple(losses), tree=TraceTree(hashes), checkpoints=tuple(checkpoints))
