"""Cheating solvers, for tests, benchmarks and ``veritrain demo --cheat``.

Each strategy (stable names in :data:`proofs.strategies.STRATEGIES`) produces a complete,
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
(:data:`proofs.strategies.FALSE_CLAIMS`) trains every segment as the spec says and lies in the manifest only:

* ``false-loss``: a prettier training curve, the loss of ``bad_segments`` (by default the
  second half) committed at 0.8x what training computed; caught by the loss check
  (``wrong-loss``) of a replay, and by a referee's replay of the segment's losses.

The adaptive cheaters (:data:`proofs.strategies.ADAPTIVE`, issue 10) know the verifier's rules and pick
their fakes to fit them; each is caught only by a defence that names its class:

* ``free-start``: checkpoint 0 is a state of the cheater's choosing (here another
  seed's initialization, also for a spec that fine-tunes from a pretrained model), every
  segment honest from there: caught by the bound start;
* ``coast``: jumps into a state where training does no work (every parameter and slot
  zero: only the output bias still learns, and its gradient is label counting), coasts
  through the middle segments, jumps back to the state it left and trains the rest:
  the jumps fail replay, the coasting segments fail ``no-work``;
* ``quiet-jump`` (a move of :func:`mix`): a segment not trained at all, replaced by a step
  along the previous update scaled to half the previous segment's norm, so no fake stands
  out to top-Q;
* ``half-batch``: a hyperparameter change confined to middle segments (half the batch:
  half the compute);
* ``tolerance-drift`` (tolerance-mode specs): every segment honest, plus a small push on
  coordinates honest training never moves (the embedding of a token the data never
  holds), within the old whole-vector window each time: a backdoor that adds up.

:func:`mix` plays any per-segment mix of their moves (:data:`MOVES`), with or without a
free start. ``CheatTrace.work_saved`` is the share of the job's compute the cheater did not
spend (:data:`WORK_SAVED`, :data:`MOVES`), for the economics of docs/proofs.md.

The cheats of issue 31 (:data:`proofs.strategies.FEW_BAD`) need one bad segment or a few, so sampled replay
catches them at about (Q + R) / n; only a full replay (every segment) catches them whatever n:

* ``dead-units`` (MLP specs): segment 0 jumps from the seeded initialization to a network in
  which every hidden layer keeps one unit (the others' in-weights, bias, out-weights and slots
  zero; the kept unit's bias raised so it is active on every training example), its norm claimed
  as the median of the others. Every later segment is the spec's own training of that state,
  which replays bit for bit and gives every tensor a gradient (``no-work`` never fires); the
  dead units' gradients are exactly zero, so a network one unit wide computes the same bits:
  those segments are credited with the multiply-adds of the dead units
  (:func:`dead_units_saving`);
* ``quiet-jumps`` (MLP specs): the same dead state reached through m small faked segments
  (segments 0..m-1: :data:`QUIET_JUMPS`, or more where a jump would move further than half an
  honest segment, at most n/2), each taking 1/m of the way (the dead coordinates scaled down,
  zero at the last), whose committed norms are all true;
* ``tiny-gradient`` (MLP specs): after Q honest segments (whose true norms fill top-Q), one
  segment jumps to a model trained cheaply off the trace until
  it classifies every training example, its output layer scaled so that the smallest margin is
  :data:`SATURATED_MARGIN` and its slots zero, its norm claimed as the median of the others: every later step's gradient is tiny but not zero
  (``no-work`` does not fire), the parameters stay bit-identical and only the slots move. Those
  segments are credited with :data:`MOVES` ``["stationary"]``: with the parameters fixed each
  example's gradient repeats every epoch, so a cheater caching them only sums a batch;
* ``tolerance-backdoor`` (tolerance-mode specs, e.g. ``"numerics": "torch"``): every segment
  honest, then a push on the coordinates its steps moved, at :data:`BACKDOOR_SHARE` of the
  windows: no segment fails replay (``bad_segments`` is empty) but the trace is not the honest
  one; a backdoor that adds up. Only a replay that compares states without windows (the same
  hardware) tells it apart, which is why tolerance mode is always fully replayed and shown
  as a weaker guarantee (:func:`proofs.sampling.needs_full_replay`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch

from proofs.checkpoint import Checkpoint, decode_checkpoint, encode_checkpoint, seal_state, state_hash, update_norm
from proofs.data import BatchOrder, Dataset
from proofs.errors import ProofError
from proofs.merkle import TraceTree
from proofs.sampling import DEFAULT_Q
from proofs.seeds import derive_seed
from proofs.spec import JobSpec, MLPConfig
from proofs.strategies import ADAPTIVE, ALL_STRATEGIES, inapplicable
from proofs.train import Runtime, Trace, Trainer, runtime, segment_loss

__all__ = [
    "dead_units_saving",
    "WORK_SAVED",
    "MOVES",
    "CheatTrace",
    "cheat",
    "mix",
]

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
    if strategy == "dead-units":
        return (0,)
    if strategy == "tiny-gradient":  # after Q honest segments, whose norms fill top-Q (the jump claims 0)
        return (min(DEFAULT_Q, n - 1),)
    if strategy == "tolerance-backdoor":
        return tuple(range(n))
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
    if (misfit := inapplicable(strategy, spec)) is not None:
        raise ProofError(misfit)
    if strategy == "quiet-jumps" and segments is None:
        chosen = tuple(range(_quiet_count(spec, dataset, rt)))
    if strategy in ("dead-units", "tiny-gradient") and len(chosen) != 1:
        raise ProofError(f"{strategy} fakes one segment, not {chosen}")
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
            checkpoints[c] = _tampered(checkpoints[c], stamp, dataset.data_key)
        bad = tuple(sorted({s for c in chosen for s in (c - 1, c) if 0 <= s < n}))
    saved = WORK_SAVED[strategy] * len(chosen) / n
    return CheatTrace(strategy=strategy, trace=_assemble(spec, checkpoints, losses, dataset.data_key), bad_segments=bad, work_saved=saved)


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


#: What one segment of an adaptive plan does, and the share of its compute it skips. ``narrow``
#: (training a dead-units state) skips :func:`dead_units_saving`; ``saturate`` skips a segment but
#: pays its off-trace fitting run; ``stationary`` (training in which the parameters cannot change)
#: sums cached per-example gradients instead of a forward and a backward pass: a third of a step.
MOVES = {
    "honest": 0.0, "coast-in": 1.0, "coast": 1.0, "coast-out": 1.0, "quiet-jump": 1.0, "half-batch": 0.5, "drift": 0.0,
    "kill": 1.0, "quiet-kill": 1.0, "narrow": 0.0, "saturate": 1.0, "stationary": 2 / 3, "push": 0.0,
}  # fmt: skip
#: Moves whose segment replays (honest training of whatever state the trace is in, or a push within
#: the windows): never among the bad segments.
REPLAYS = frozenset({"honest", "narrow", "stationary", "push"})
#: Moves that claim the median of the other segments' norms for their own (a big jump's true norm
#: would put it in top-Q).
LIES = frozenset({"kill", "saturate"})
#: ``quiet-jumps``: how many faked segments share the way into the dead state.
QUIET_JUMPS = 12
#: ``tiny-gradient``: the smallest training margin (logit of the label over the next) after scaling;
#: exp(-40) is about 4e-18, so a gradient is tiny and still far above float32's smallest numbers.
SATURATED_MARGIN = 20.0
#: ``tolerance-backdoor``: the share of each window a push uses.
BACKDOOR_SHARE = 0.9


def dead_units_saving(spec: JobSpec) -> float:
    """The share of an MLP step's multiply-adds that the dead units of ``dead-units`` take: a network
    one unit wide per hidden layer computes the rest, with the same bits."""
    model = spec.model
    if model.kind != "mlp":
        raise ProofError(f"dead units are defined for MLP specs, not {model.kind}")
    full = (model.input_dim, *model.hidden, model.num_classes)
    narrow = (model.input_dim, *(1 for _ in model.hidden), model.num_classes)
    macs = lambda dims: sum(a * b for a, b in zip(dims, dims[1:]))  # noqa: E731
    return 1.0 - macs(narrow) / macs(full)


def _plan(strategy: str, n: int, chosen: tuple[int, ...]) -> dict[int, str]:
    if strategy == "free-start":
        return {}
    if strategy == "coast":
        plan = dict.fromkeys(chosen, "coast")
        plan[chosen[0]] = "coast-in"
        if len(chosen) > 1 and chosen[-1] < n - 1:
            plan[chosen[-1]] = "coast-out"
        return plan
    if strategy in ("dead-units", "quiet-jumps", "tiny-gradient"):
        jump, after = {"dead-units": ("kill", "narrow"), "quiet-jumps": ("quiet-kill", "narrow"), "tiny-gradient": ("saturate", "stationary")}[strategy]
        return {**dict.fromkeys(range(chosen[-1] + 1, n), after), **dict.fromkeys(chosen, jump)}
    move = {"half-batch": "half-batch", "tolerance-drift": "drift", "tolerance-backdoor": "push"}[strategy]
    return dict.fromkeys(chosen, move)


def _adaptive(strategy: str, spec: JobSpec, dataset: Dataset, chosen: tuple[int, ...], rt: Runtime) -> CheatTrace:
    faked = mix(spec, dataset, _plan(strategy, spec.segments, chosen), free_start=strategy == "free-start", rt=rt)
    return CheatTrace(strategy, faked.trace, faked.bad_segments, faked.work_saved)


def _quiet_count(spec: JobSpec, dataset: Dataset, rt: Runtime) -> int:
    """How many quiet jumps: :data:`QUIET_JUMPS`, or more where each would move further than half
    an honest first segment (so none stands out to top-Q), at most half the job's segments."""
    trainer = Trainer(spec, dataset, rt)
    start = {name: p.detach().clone() for name, p in trainer.params.items()}
    dead = _Killer(trainer, 1)
    distance = math.sqrt(sum(float((start[n][~dead.live[n]].double() ** 2).sum()) for n in start))
    trainer.run(spec.checkpoint_interval)
    first = math.sqrt(sum(float(((p.detach() - start[n]).double() ** 2).sum()) for n, p in trainer.params.items()))
    return max(1, min(max(QUIET_JUMPS, math.ceil(distance / (0.5 * first))), spec.segments // 2))


class _Killer:
    """The dead-units state of an MLP: one unit kept per hidden layer (the one with the largest
    in-weights), every other unit's in-weights, bias, out-weights and their slots taken to zero
    over ``jumps`` faked segments (1/jumps of the way each), the kept units' biases raised at the
    last so each is active on every training example (its tensors keep a gradient)."""

    def __init__(self, trainer: Trainer, jumps: int) -> None:
        self.jumps, self.done = jumps, 0
        assert isinstance(trainer.spec.model, MLPConfig)
        hidden = len(trainer.spec.model.hidden)
        params = trainer.params
        self.kept = [int(params[f"layers.{i}.weight"].detach().norm(dim=1).argmax()) for i in range(hidden)]
        self.live = {name: torch.ones_like(p, dtype=torch.bool) for name, p in params.items()}
        for i, unit in enumerate(self.kept):
            dead = torch.ones(params[f"layers.{i}.bias"].shape[0], dtype=torch.bool)
            dead[unit] = False
            self.live[f"layers.{i}.weight"][dead, :] = False
            self.live[f"layers.{i}.bias"][dead] = False
            self.live[f"layers.{i + 1}.weight"][:, dead] = False

    def jump(self, trainer: Trainer, dataset: Dataset) -> None:
        keep = 1.0 - 1.0 / (self.jumps - self.done)  # 0 at the last jump: exactly dead
        self.done += 1
        with torch.no_grad():
            for key, t in trainer.tensors().items():
                name = key.removeprefix("param.") if key.startswith("param.") else key.split(".", 1)[1].rsplit(".", 1)[0]
                t.copy_(torch.where(self.live[name], t, t * keep))
            for i, raise_by in enumerate(self._raises(trainer, dataset)):  # the same share of the way
                trainer.params[f"layers.{i}.bias"][self.kept[i]] += float(np.float32(raise_by * (1.0 - keep)))

    def _raises(self, trainer: Trainer, dataset: Dataset) -> list[float]:
        """How much each kept unit's bias must rise for it to be active (pre-activation >= 0.1) on
        every training example, in the network of the live coordinates alone."""
        x, out = dataset.inputs.flatten(1).double(), []
        for i, unit in enumerate(self.kept):
            weight = (trainer.params[f"layers.{i}.weight"].detach() * self.live[f"layers.{i}.weight"]).double()
            bias = (trainer.params[f"layers.{i}.bias"].detach() * self.live[f"layers.{i}.bias"]).double()
            pre = x @ weight.T + bias
            out.append(max(0.0, 0.1 - float(pre[:, unit].min())))
            bias[unit] += out[-1]
            x = torch.relu(x @ weight.T + bias)
        return out


def _saturate(spec: JobSpec, dataset: Dataset, trainer: Trainer, rt: Runtime) -> int:
    """``tiny-gradient``'s jump: a copy trained off the trace until it classifies every training
    example (at most the job's steps), its output layer scaled to a smallest margin of
    :data:`SATURATED_MARGIN`, its slots zero, loaded one segment on. The steps the copy trained."""
    k, fit = spec.checkpoint_interval, Trainer(spec, dataset, rt)
    fit.load(trainer.checkpoint())
    assert dataset.targets is not None
    spent = 0
    while (margin := _smallest_margin(fit, dataset.inputs, dataset.targets)) <= 0:
        if spent >= spec.steps:
            raise ProofError(f"tiny-gradient needs a model that classifies every training example; {spent} steps did not fit this job's data")
        fit.run(k)
        spent += k
    assert isinstance(spec.model, MLPConfig)
    last = f"layers.{len(spec.model.hidden)}"
    with torch.no_grad():
        for name in (f"{last}.weight", f"{last}.bias"):
            fit.params[name].mul_(SATURATED_MARGIN / margin)
        for slot in fit.state.values():
            slot.zero_()
    state = fit.checkpoint()
    trainer.load(Checkpoint(trainer.step + k, state.spec_hash, state.tensors))
    probe = Trainer(spec, dataset, rt)
    probe.load(trainer.checkpoint())
    probe.run(1)
    if any(not torch.equal(probe.params[n], p) for n, p in trainer.params.items()):
        raise ProofError("tiny-gradient: a step still moves the scaled model's parameters on this spec (weight decay, or margins too small)")
    return spent


def _smallest_margin(trainer: Trainer, x: torch.Tensor, y: torch.Tensor) -> float:
    """The smallest logit of the label over the largest other logit, over every training example."""
    with torch.no_grad(), runtime(trainer.rt):
        logits = trainer.model(x).double()
    label = logits.gather(1, y.view(-1, 1)).squeeze(1)
    other = logits.scatter(1, y.view(-1, 1), float("-inf")).max(dim=1).values
    return float((label - other).min())


def mix(spec: JobSpec, dataset: Dataset, plan: Mapping[int, str], *, free_start: bool = False, rt: Runtime = Runtime()) -> CheatTrace:
    """An adaptive cheat mixing the classes: ``plan`` maps segments to a move of :data:`MOVES`
    (the others are trained honestly); ``free_start`` starts from another seed's initialization.
    A ``coast-out`` returns to the state the last ``coast-in`` left. The ``kill`` and ``quiet-kill``
    moves of a plan share the way into one dead-units state; a ``kill`` or ``saturate`` claims the
    median of the other segments' norms (:data:`LIES`: a lie that keeps it out of top-Q), every
    other norm is true."""
    n, k = spec.segments, spec.checkpoint_interval
    if any(not 0 <= seg < n or move not in MOVES for seg, move in plan.items()):
        raise ProofError(f"plan {dict(plan)} is not moves of {', '.join(MOVES)} on segments of a trace of {n}")
    if {"drift", "push"} & set(plan.values()) and spec.tolerance.mode != "tolerance":
        raise ProofError("drift and push attack tolerance-mode specs only")
    stamp = spec.spec_hash()
    trainer = Trainer(spec, dataset, rt)
    if free_start:  # a fine-tuning spec's cheater skips the pretrained model too
        twin = spec.model_copy(update={"seed": derive_seed(spec.seed, "adversary"), "init": None})
        trainer.load(ForgedTrainer(twin, dataset, rt, stamp=stamp).checkpoint())
    checkpoints = [trainer.to_bytes()]
    losses: list[float] = []
    previous = {name: p.detach().clone() for name, p in trainer.params.items()}
    left: Checkpoint | None = None
    killer: _Killer | None = None
    saved = 0.0
    for seg in range(n):
        move = plan.get(seg, "honest")
        saved += dead_units_saving(spec) if move == "narrow" else MOVES[move]
        before = {name: p.detach().clone() for name, p in trainer.params.items()}
        computed: list[float] = []  # a move that trains nothing claims the loss before it
        if move in ("honest", "coast", "narrow", "stationary"):
            computed = trainer.run(k)  # what replay gives, bought cheaper (coast: label counts; MOVES)
        elif move in ("kill", "quiet-kill"):
            if killer is None:
                killer = _Killer(trainer, sum(m in ("kill", "quiet-kill") for m in plan.values()))
            killer.jump(trainer, dataset)
            trainer.step += k
        elif move == "saturate":
            saved -= _saturate(spec, dataset, trainer, rt) / k
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
        elif move == "drift":
            computed = trainer.run(k)
            _push(spec, trainer, before, moved=False, share=0.5)
        else:  # push
            computed = trainer.run(k)
            _push(spec, trainer, before, moved=True, share=BACKDOOR_SHARE)
        losses.append(segment_loss(computed) if computed else losses[-1] if losses else 0.0)
        previous = before
        checkpoints.append(trainer.to_bytes())
    bad = tuple(sorted({s for s, m in plan.items() if m not in REPLAYS} | ({0} if free_start else set())))
    trace = _assemble(spec, checkpoints, losses, dataset.data_key)
    if lies := [s for s, m in plan.items() if m in LIES]:
        typical = float(np.median([x for s, x in enumerate(trace.update_norms) if s not in lies] or [0.0]))
        trace = replace(trace, update_norms=tuple(typical if s in lies else x for s, x in enumerate(trace.update_norms)))
    return CheatTrace(strategy="mix", trace=trace, bad_segments=bad, work_saved=saved / n)


def _push(spec: JobSpec, trainer: Trainer, before: dict[str, torch.Tensor], *, moved: bool, share: float) -> None:
    """Push the coordinates this segment moved (``moved``) or left unchanged, the same way every
    segment, by ``share`` of what the whole-vector windows let through (relative l2, cosine, linf):
    a backdoor in the making. ``drift`` (0.5, unchanged coordinates) is what the old rule passed;
    ``push`` (0.9, moved coordinates) is what the rule of unchanged coordinates cannot see."""
    tol = spec.tolerance
    assert tol.l2 is not None and tol.linf is not None and tol.cosine is not None
    with torch.no_grad():
        chosen = {name: (p != before[name]) if moved else (p == before[name]) for name, p in trainer.params.items()}
        count = sum(int(m.sum()) for m in chosen.values())
        if count == 0:
            what = "moves" if moved else "leaves unchanged"
            raise ProofError(f"a push needs coordinates honest training {what}; this segment has none")
        total = math.sqrt(sum(float((p.double() ** 2).sum()) for p in trainer.params.values()))
        push = min(share * min(tol.l2, math.sqrt(2 * tol.cosine)) * total / math.sqrt(count), share * tol.linf)
        for name, p in trainer.params.items():  # alternating signs: a mean shift would vanish in a LayerNorm
            signs = 1.0 - 2.0 * (torch.arange(p.numel()) % 2).to(p.dtype).view(p.shape)
            p.add_(chosen[name].to(p.dtype) * signs * push)


def _tampered(data: bytes, stamp: str, data_key: bytes | None) -> bytes:
    ckpt = decode_checkpoint(data, data_key=data_key)
    tensors = {k: v.clone() for k, v in ckpt.tensors.items()}
    first = sorted(k for k in tensors if k.startswith("param."))[0]
    tensors[first].view(-1)[0] += 1e-3
    return bytes(seal_state(encode_checkpoint(ckpt.step, tensors, stamp), data_key))


def _assemble(spec: JobSpec, checkpoints: list[bytes], losses: list[float], data_key: bytes | None) -> Trace:
    params = [decode_checkpoint(c, data_key=data_key).params() for c in checkpoints]
    norms = tuple(update_norm(a, b) for a, b in zip(params, params[1:]))
    hashes = tuple(state_hash(c) for c in checkpoints)
    return Trace(spec=spec, state_hashes=hashes, update_norms=norms, losses=tuple(losses), tree=TraceTree(hashes), checkpoints=tuple(checkpoints))
