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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from proofs.checkpoint import decode_checkpoint, encode_checkpoint, state_hash, update_norm
from proofs.data import Dataset
from proofs.errors import ProofError
from proofs.merkle import TraceTree
from proofs.seeds import derive_seed
from proofs.spec import JobSpec
from proofs.train import Runtime, Trace, Trainer

__all__ = ["STRATEGIES", "CheatTrace", "cheat"]

STRATEGIES = ("skip-steps", "wrong-lr", "wrong-data", "copy-weights", "fake-final", "tamper")


@dataclass(frozen=True)
class CheatTrace:
    """A cheating trace (with checkpoint bytes) and the segments where replay must fail."""

    strategy: str
    trace: Trace
    bad_segments: tuple[int, ...]


def _default_segments(strategy: str, n: int) -> tuple[int, ...]:
    if strategy == "copy-weights":
        return tuple(range(n))
    if strategy == "fake-final":
        return (n - 1,)
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
    if strategy not in STRATEGIES:
        raise ProofError(f"no adversary strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
    n, k = spec.segments, spec.checkpoint_interval
    chosen = tuple(sorted(set(segments))) if segments is not None else _default_segments(strategy, n)
    if strategy == "fake-final":
        chosen = (n - 1,)
    if strategy == "tamper" and segments is None:
        chosen = (max(1, n // 2),)
    if not chosen or any(not 0 <= s < n + (strategy == "tamper") for s in chosen):
        raise ProofError(f"segments {chosen} are not in a trace of {n} segments")

    honest = Trainer(spec, dataset, rt)
    stamp = spec.spec_hash()
    other = _other_run(strategy, spec, dataset, rt)
    checkpoints = [honest.to_bytes()]
    for seg in range(n):
        if strategy == "tamper" or seg not in chosen:
            honest.run(k)
        elif strategy == "copy-weights":
            assert other is not None
            other.run(k)
            honest.load(other.checkpoint())
        else:
            _fake_segment(strategy, spec, dataset, honest, rt, stamp)
        checkpoints.append(honest.to_bytes())

    bad = chosen
    if strategy == "tamper":
        for c in chosen:
            checkpoints[c] = _tampered(checkpoints[c], stamp)
        bad = tuple(sorted({s for c in chosen for s in (c - 1, c) if 0 <= s < n}))
    return CheatTrace(strategy=strategy, trace=_assemble(spec, checkpoints), bad_segments=bad)


def _other_run(strategy: str, spec: JobSpec, dataset: Dataset, rt: Runtime) -> Trainer | None:
    if strategy != "copy-weights":
        return None
    twin = spec.model_copy(update={"seed": derive_seed(spec.seed, "adversary")})
    return Trainer(twin, dataset, rt, stamp=spec.spec_hash())


def _fake_segment(strategy: str, spec: JobSpec, dataset: Dataset, trainer: Trainer, rt: Runtime, stamp: str) -> None:
    """Advance ``trainer`` by one segment the wrong way."""
    k = spec.checkpoint_interval
    if strategy == "skip-steps":
        before = {n: p.detach().clone() for n, p in trainer.params.items()}
        done = k // 2
        trainer.run(done)
        with torch.no_grad():
            for name, p in trainer.params.items():
                p.copy_(before[name] + (p - before[name]) * (k / max(done, 1)))
        trainer.step += k - done
    elif strategy in ("wrong-lr", "wrong-data"):
        if strategy == "wrong-lr":
            bent = spec.model_copy(update={"optimizer": spec.optimizer.model_copy(update={"lr": spec.optimizer.lr * 0.5})})
            crook = Trainer(bent, trainer.order.dataset, rt, stamp=stamp)
        else:
            crook = Trainer(spec, trainer.order.dataset, rt, data_seed=derive_seed(spec.seed, "adversary"), stamp=stamp)
        crook.load(trainer.checkpoint())
        crook.run(k)
        trainer.load(crook.checkpoint())
    elif strategy == "fake-final":
        # No training at all: repeat the previous segment's update (a plausible-looking extrapolation).
        before = {n: p.detach().clone() for n, p in trainer.params.items()}
        probe = Trainer(spec, trainer.order.dataset, rt)
        probe.load(trainer.checkpoint())
        probe.run(1)  # one cheap step to get a direction
        with torch.no_grad():
            for name, p in trainer.params.items():
                p.copy_(before[name] + (probe.params[name].detach() - before[name]) * k)
        trainer.step += k


def _tampered(data: bytes, stamp: str) -> bytes:
    ckpt = decode_checkpoint(data)
    tensors = {k: v.clone() for k, v in ckpt.tensors.items()}
    first = sorted(k for k in tensors if k.startswith("param."))[0]
    tensors[first].view(-1)[0] += 1e-3
    return encode_checkpoint(ckpt.step, tensors, stamp)


def _assemble(spec: JobSpec, checkpoints: list[bytes]) -> Trace:
    params = [decode_checkpoint(c).params() for c in checkpoints]
    norms = tuple(update_norm(a, b) for a, b in zip(params, params[1:]))
    hashes = tuple(state_hash(c) for c in checkpoints)
    return Trace(spec=spec, state_hashes=hashes, update_norms=norms, tree=TraceTree(hashes), checkpoints=tuple(checkpoints))
