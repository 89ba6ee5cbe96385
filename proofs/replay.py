"""The verifier's side: replay a segment and judge it; verify a sampled trace.

:func:`replay_segment` loads checkpoint ``i``, re-runs its ``k`` steps with the
spec's seeded batches, and compares the result with checkpoint ``i + 1``:

* ``exact`` mode: the replayed checkpoint's bytes must hash to the committed
  state hash (deterministic CPU replay gives distance 0);
* ``tolerance`` mode: a coordinate the replay leaves exactly unchanged must be exactly
  unchanged in the committed checkpoint (:func:`moved_frozen`), and the parameter vector
  and the optimizer-state vector must each be within the spec's relative-l2, linf and
  cosine thresholds. Drift on coordinates honest training never moves therefore fails at
  once, whatever its size (docs/proofs.md, "Tolerance mode").

In both modes, once its states hold, a segment's committed mean training loss (the manifest's
``losses``) must be the one the replay computes: bit for bit in ``exact`` mode, within
:data:`LOSS_RTOL` (relative) in ``tolerance`` mode; else it fails with ``wrong-loss``, so the
training curve a submitter is shown is verified data (docs/proofs.md, "Training curve").

In both modes a segment must do learning work: a replayed step in which some parameter
tensor gets an exactly zero gradient, or a segment after which parameters and
optimizer slots are bit-identical to its start, fails with ``no-work`` (the spec's
learning rate is always positive, so honest training never does that: a trace that
coasts through such states saves the compute it claims).

Checkpoint 0 is bound: it must be :func:`initial_state` of the spec
(:func:`check_start`), which :func:`verify_trace` checks on every trace, without
fetching anything.

:class:`TraceReplay` is the one replay of a trace every role and test uses: checkpoints fetched
once, leaf 0, segments and inner states; :func:`verify_trace` is its sampled use.

It returns a :class:`SegmentVerdict` (never prints, never raises on a bad
trace): served bytes that do not match the commitment, truncated or
non-canonical checkpoints, a wrong step or spec stamp, a false update-norm
claim, a state mismatch and a false loss all come back as a failed verdict with a
:class:`Reason` and a one-line detail naming the segment.
"""

from __future__ import annotations

import enum
import logging
import math
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch

from core.probe import Bytes32
from proofs.checkpoint import Checkpoint, decode_checkpoint, state_hash, update_norm
from proofs.data import Dataset
from proofs.errors import ManifestError, ProofError, SegmentOutOfRange
from proofs.manifest import Manifest, PageGetter, committed_manifest
from proofs.merkle import hex32
from proofs.sampling import DEFAULT_Q, DEFAULT_R, Selection, choose_segments
from proofs.spec import JobSpec, Tolerance
from proofs.steps import state_at
from proofs.train import Runtime, Trainer, model_held_out_loss, segment_loss

__all__ = [
    "Reason",
    "Distances",
    "SegmentVerdict",
    "TraceVerdict",
    "distances",
    "moved_frozen",
    "initial_state",
    "initial_state_hash",
    "check_start",
    "check_manifest",
    "check_committed_manifest",
    "check_norm",
    "check_loss",
    "check_held_out",
    "LOSS_RTOL",
    "Watched",
    "referee_step",
    "first_idle_step",
    "run_watching",
    "replay_segment",
    "TraceReplay",
    "verify_trace",
    "Fetch",
]

log = logging.getLogger(__name__)

#: ``fetch(checkpoint_index) -> bytes`` (the caller verifies bytes against their CID).
Fetch = Callable[[int], bytes]

#: Relative slack when comparing a claimed update norm with the recomputed one (JSON float round trip).
_NORM_RTOL = 1e-9

#: Tolerance mode: the largest relative difference between a committed mean loss and the replayed
#: one (exact mode compares bits). Replays under other thread counts and matmul precisions move it
#: by at most 1.1e-7 on the registry models (``proofs.calibrate`` measures it); the rest is room for
#: hardware we could not measure (docs/proofs.md, "Training curve").
LOSS_RTOL = 1e-3


class Reason(str, enum.Enum):
    OK = "ok"
    HASH_MISMATCH = "hash-mismatch"
    MALFORMED = "malformed-checkpoint"
    WRONG_STEP = "wrong-step"
    WRONG_SPEC = "wrong-spec"
    NORM_MISMATCH = "norm-mismatch"
    STATE_MISMATCH = "state-mismatch"
    OUT_OF_TOLERANCE = "out-of-tolerance"
    WRONG_START = "wrong-start"
    NO_WORK = "no-work"
    MALFORMED_MANIFEST = "malformed-manifest"
    WRONG_LOSS = "wrong-loss"
    WRONG_HELD_OUT_LOSS = "wrong-held-out-loss"


@dataclass(frozen=True)
class Distances:
    """Between a replayed vector ``a`` and a committed one ``b`` (float64):
    ``l2 = |a-b| / |b|`` (relative), ``linf = max |a-b|``, ``cosine = 1 - cos(a, b)``."""

    l2: float
    linf: float
    cosine: float

    def within(self, tol: Tolerance) -> bool:
        assert tol.l2 is not None and tol.linf is not None and tol.cosine is not None
        return self.l2 <= tol.l2 and self.linf <= tol.linf and self.cosine <= tol.cosine


@dataclass(frozen=True)
class SegmentVerdict:
    """The judgement of one segment; ``passed`` is ``reason is Reason.OK``."""

    segment: int
    passed: bool
    reason: Reason
    detail: str
    params: Distances | None = None
    optimizer: Distances | None = None
    replayed_hash: Bytes32 | None = None
    replayed_loss: float | None = None


@dataclass(frozen=True)
class TraceVerdict:
    """The sampled segments of a trace and their verdicts (ascending segment order)."""

    selection: Selection
    verdicts: tuple[SegmentVerdict, ...]

    @property
    def passed(self) -> bool:
        return all(v.passed for v in self.verdicts)

    @property
    def failures(self) -> tuple[SegmentVerdict, ...]:
        return tuple(v for v in self.verdicts if not v.passed)


#: float64 values made at a time when two states are compared (a 100M-parameter state is not copied whole).
_LEAF = 1 << 16


class _Flat:
    """The float64 values of tensors flattened and concatenated in sorted-name order, read a range at a time."""

    def __init__(self, tensors: Mapping[str, torch.Tensor]) -> None:
        self.parts = [tensors[k].detach().cpu().reshape(-1) for k in sorted(tensors)]
        self.starts = np.cumsum([0, *(len(p) for p in self.parts)])
        self.size = int(self.starts[-1])

    def read(self, lo: int, hi: int) -> np.ndarray:
        first = int(np.searchsorted(self.starts, lo, side="right")) - 1
        pieces = []
        for i in range(first, len(self.parts)):
            start = int(self.starts[i])
            if start >= hi:
                break
            pieces.append(self.parts[i][max(lo - start, 0) : hi - start].numpy().astype(np.float64))
        return np.concatenate(pieces) if pieces else np.zeros(0)


def _sums(a: _Flat, b: _Flat, lo: int, n: int) -> tuple[float, float, float, float, float]:
    """``sum(b*b), sum(a*a), sum(d*d), sum(a*b)`` and ``max|d|`` (d = a - b) over values ``lo..lo+n``.
    The sums split ranges exactly where numpy's pairwise summation does, so each is bit for bit
    ``np.sum`` over the whole flattened vector, with ``_LEAF`` values in memory at a time."""
    if n <= _LEAF:
        x, y = a.read(lo, lo + n), b.read(lo, lo + n)
        d = x - y
        return float(np.sum(y * y)), float(np.sum(x * x)), float(np.sum(d * d)), float(np.sum(x * y)), float(np.max(np.abs(d))) if n else 0.0
    half = n // 2
    half -= half % 8
    left, right = _sums(a, b, lo, half), _sums(a, b, lo + half, n - half)
    return left[0] + right[0], left[1] + right[1], left[2] + right[2], left[3] + right[3], max(left[4], right[4])


def distances(replayed: Mapping[str, torch.Tensor], committed: Mapping[str, torch.Tensor]) -> Distances:
    """Distances between two states with the same tensor names, over their flattened values."""
    if sorted(replayed) != sorted(committed):
        raise ProofError("cannot compare states with different tensors")
    a, b = _Flat(replayed), _Flat(committed)
    bb, aa, dd, ab, linf = _sums(a, b, 0, a.size)
    norm_b, norm_a, norm_d = math.sqrt(bb), math.sqrt(aa), math.sqrt(dd)
    l2 = norm_d / norm_b if norm_b > 0 else (0.0 if norm_d == 0 else math.inf)
    if norm_d == 0:
        cosine = 0.0
    elif norm_a == 0 or norm_b == 0:
        cosine = 1.0
    else:
        cosine = max(0.0, 1.0 - ab / (norm_a * norm_b))
    return Distances(l2=l2, linf=linf, cosine=cosine)


def moved_frozen(start: Mapping[str, torch.Tensor], replayed: Mapping[str, torch.Tensor], committed: Mapping[str, torch.Tensor]) -> int:
    """How many coordinates the replay left exactly unchanged (``replayed == start``) the committed
    state changed (``committed != start``). Tolerance mode requires none: what honest training does
    not move (the embedding row of a token the data never holds, a unit with no gradient) is not
    moved by other hardware either, so any change there is the solver's own, however small."""
    if not sorted(start) == sorted(replayed) == sorted(committed):
        raise ProofError("cannot compare states with different tensors")
    return sum(int(torch.count_nonzero((replayed[k] == start[k]) & (committed[k] != start[k]))) for k in start)


def initial_state(spec: JobSpec, dataset: Dataset) -> bytes:
    """Checkpoint 0 of every honest trace of ``spec``: the spec's seeded initialization, or the
    pretrained model it names (``spec.init``, carried by ``dataset``), zero optimizer slots,
    step 0."""
    return Trainer(spec, dataset).to_bytes()


def initial_state_hash(spec: JobSpec, dataset: Dataset) -> Bytes32:
    """The state hash leaf 0 of every honest trace of ``spec`` commits to."""
    return Trainer(spec, dataset).state_hash()


def check_start(spec: JobSpec, dataset: Dataset, committed: Bytes32) -> SegmentVerdict:
    """Segment 0's start: the committed leaf 0 must be :func:`initial_state_hash` of the spec.
    A trace that starts anywhere else fails on segment 0 with ``wrong-start``, however its
    segments replay; a referee of a game on segment 0 rules the same way (``rolebase.dispute``)."""
    expected = initial_state_hash(spec, dataset)
    start = "seeded initialization" if spec.init is None else f"pretrained model {spec.init.cid}"
    if committed != expected:
        return _fail(0, Reason.WRONG_START, f"checkpoint 0 is {hex32(committed)}, the spec's {start} is {hex32(expected)}")
    return SegmentVerdict(0, True, Reason.OK, f"segment 0: checkpoint 0 is the spec's {start} {hex32(expected)}")


def check_manifest(spec: JobSpec, manifest: Manifest, checkpoint_count: int, final_cid: str) -> SegmentVerdict:
    """A manifest whose root is the committed root (so its leaves open a game) against the rest of
    what the chain committed with it (checkpoint count, final model CID) and the spec. Anything
    else fails segment 0 with ``malformed-manifest``: the trace the chain names is not the one the
    manifest describes, whatever its segments replay; a referee of a trace game rules the same
    way, without training (``rolebase.dispute``)."""
    try:
        manifest.check_spec(spec)
    except ManifestError as exc:
        return _fail(0, Reason.MALFORMED_MANIFEST, str(exc))
    if len(manifest.checkpoints) != checkpoint_count:
        return _fail(0, Reason.MALFORMED_MANIFEST, f"manifest lists {len(manifest.checkpoints)} checkpoints, {checkpoint_count} were committed")
    if manifest.final_cid != final_cid:
        return _fail(0, Reason.MALFORMED_MANIFEST, f"manifest's final checkpoint {manifest.final_cid} is not the committed model {final_cid}")
    return SegmentVerdict(0, True, Reason.OK, "the manifest is the committed trace of the spec")


def check_committed_manifest(
    spec: JobSpec, data: bytes, root: Bytes32, checkpoint_count: int, final_cid: str, page: PageGetter | None = None
) -> SegmentVerdict:
    """The committed manifest's root block (and pages, read with ``page``) as a referee of a manifest
    game judges them: they must be :func:`committed_manifest` and pass :func:`check_manifest`.
    Anything else fails segment 0 with ``malformed-manifest``."""
    try:
        manifest = committed_manifest(data, root, page)
    except ProofError as exc:
        return _fail(0, Reason.MALFORMED_MANIFEST, str(exc))
    return check_manifest(spec, manifest, checkpoint_count, final_cid)


def _norm_fault(segment: int, first: Checkpoint, last: Checkpoint, claimed: float) -> SegmentVerdict | None:
    actual = update_norm(first.params(), last.params())
    if math.isclose(actual, claimed, rel_tol=_NORM_RTOL, abs_tol=1e-12):
        return None
    return _fail(segment, Reason.NORM_MISMATCH, f"update norm is {actual!r}, the manifest claims {claimed!r}")


def check_norm(segment: int, start: bytes, end: bytes, claimed: float, data_key: bytes | None = None) -> SegmentVerdict:
    """The manifest's update norm of ``segment`` against the one its committed checkpoints give,
    without training: what a referee checks in a game on the segment (``rolebase.dispute``); a
    sealed job's checkpoints are opened with its ``data_key``."""
    fault = _norm_fault(segment, decode_checkpoint(start, data_key=data_key), decode_checkpoint(end, data_key=data_key), claimed)
    return fault or SegmentVerdict(segment, True, Reason.OK, f"segment {segment}: update norm {claimed!r} as claimed")


def _idle_tensor(trainer: Trainer) -> str | None:
    """After a step: the first parameter tensor whose gradient was exactly zero (no learning work)."""
    for name, p in trainer.params.items():
        if p.grad is None or not bool(torch.any(p.grad)):
            return name
    return None


class Watched(NamedTuple):
    """What :func:`run_watching` saw: the first idle step (local index, tensor) or None, and the
    mean training loss of the steps run (:func:`proofs.train.segment_loss`)."""

    idle: tuple[int, str] | None
    loss: float


def run_watching(trainer: Trainer, steps: int) -> Watched:
    """Advance ``steps`` steps, watching each for a parameter tensor with a zero gradient."""
    idle: list[tuple[int, str]] = []
    first = trainer.step

    def watch(step: int, _total: int) -> None:
        if not idle and (name := _idle_tensor(trainer)) is not None:
            idle.append((step - 1 - first, name))

    losses = trainer.run(steps, watch)
    return Watched(idle[0] if idle else None, segment_loss(losses))


def first_idle_step(spec: JobSpec, dataset: Dataset, start: bytes, steps: int, rt: Runtime = Runtime()) -> int | None:
    """Replay ``steps`` steps from checkpoint bytes ``start``: the index (0-based, from the start)
    of the first step that did no learning work, or None. A challenger steers a dispute over a
    ``no-work`` segment to that step (``rolebase.dispute``)."""
    trainer = Trainer(spec, dataset, rt)
    trainer.load(decode_checkpoint(start, expect_spec=spec.spec_hash(), data_key=dataset.data_key))
    found = run_watching(trainer, steps).idle
    return None if found is None else found[0]


def referee_step(spec: JobSpec, dataset: Dataset, state: bytes, rt: Runtime = Runtime()) -> tuple[bytes, str | None]:
    """A referee's one step from ``state``: the state after it and, if the step did no learning
    work, the parameter tensor whose gradient was exactly zero (the defender is then wrong
    whatever state it posted)."""
    trainer = Trainer(spec, dataset, rt)
    trainer.load(decode_checkpoint(state, expect_spec=spec.spec_hash(), data_key=dataset.data_key))
    found = run_watching(trainer, 1).idle
    return trainer.to_bytes(), None if found is None else found[1]


def _loss_matches(spec: JobSpec, replayed: float, claimed: float) -> bool:
    """Whether a committed mean loss is the replayed one: the same float32 in exact mode, within
    :data:`LOSS_RTOL` of it in tolerance mode."""
    if spec.tolerance.mode == "exact":
        return replayed == claimed
    return abs(replayed - claimed) <= LOSS_RTOL * abs(replayed)


def _loss_fault(spec: JobSpec, segment: int, replayed: float, claimed: float, **extra: object) -> SegmentVerdict | None:
    if _loss_matches(spec, replayed, claimed):
        return None
    bound = "" if spec.tolerance.mode == "exact" else f" (more than {LOSS_RTOL:g} relative)"
    return _fail(segment, Reason.WRONG_LOSS, f"mean training loss is {replayed!r}, the manifest claims {claimed!r}{bound}", **extra)


def check_loss(spec: JobSpec, dataset: Dataset, segment: int, start: bytes, claimed: float, rt: Runtime = Runtime()) -> SegmentVerdict:
    """The manifest's mean training loss of ``segment`` against the one ``k`` steps of training from
    checkpoint bytes ``start`` (leaf ``segment``) give: what a referee of a game on the segment checks
    once the isolated step holds (``rolebase.dispute``). The loss depends on the start alone, so the
    committed end plays no part."""
    trainer = Trainer(spec, dataset, rt)
    trainer.load(decode_checkpoint(start, expect_spec=spec.spec_hash(), data_key=dataset.data_key))
    replayed = run_watching(trainer, spec.checkpoint_interval).loss
    fault = _loss_fault(spec, segment, replayed, claimed, replayed_loss=replayed)
    return fault or SegmentVerdict(segment, True, Reason.OK, f"segment {segment}: mean training loss {claimed!r} as claimed", replayed_loss=replayed)


def check_held_out(spec: JobSpec, dataset: Dataset, final: bytes, final_hash: Bytes32, claimed: float, rt: Runtime = Runtime()) -> SegmentVerdict:
    """The manifest's held-out loss against the one the final checkpoint's model gives on the spec's
    held-out split (:func:`proofs.train.model_held_out_loss`), judged as a segment's loss (bits in exact mode,
    :data:`LOSS_RTOL` in tolerance mode) on the last segment, the one that ends in that checkpoint:
    a function of the committed final bytes alone, so a referee rules on it without training
    (``rolebase.dispute``). The held-out loss the replay computed is the verdict's ``replayed_loss``."""
    last = spec.segments - 1
    if (actual := state_hash(final)) != final_hash:
        return _fail(last, Reason.HASH_MISMATCH, f"checkpoint {spec.segments} hashes to {hex32(actual)}, committed {hex32(final_hash)}")
    try:
        replayed = model_held_out_loss(spec, dataset, final, rt)
    except ProofError as exc:
        return _fail(last, Reason.MALFORMED, f"checkpoint {spec.segments}: {exc}")
    if _loss_matches(spec, replayed, claimed):
        return SegmentVerdict(last, True, Reason.OK, f"held-out loss {claimed!r} as claimed", replayed_loss=replayed)
    bound = "" if spec.tolerance.mode == "exact" else f" (more than {LOSS_RTOL:g} relative)"
    return _fail(
        last, Reason.WRONG_HELD_OUT_LOSS, f"the final model's held-out loss is {replayed!r}, the manifest claims {claimed!r}{bound}", replayed_loss=replayed
    )


def _fail(segment: int, reason: Reason, detail: str, **extra: object) -> SegmentVerdict:
    log.info("segment failed", extra={"segment": segment, "reason": reason.value, "detail": detail})
    return SegmentVerdict(segment=segment, passed=False, reason=reason, detail=f"segment {segment}: {detail}", **extra)  # type: ignore[arg-type]


def replay_segment(
    spec: JobSpec,
    dataset: Dataset,
    segment: int,
    start: bytes,
    end: bytes,
    *,
    start_hash: Bytes32 | None = None,
    end_hash: Bytes32 | None = None,
    claimed_norm: float | None = None,
    claimed_loss: float | None = None,
    rt: Runtime = Runtime(),
) -> SegmentVerdict:
    """Re-run segment ``segment`` from checkpoint bytes ``start`` and judge ``end``.

    ``start_hash``/``end_hash`` are the committed state hashes (leaves ``segment`` and
    ``segment + 1``); ``claimed_norm`` and ``claimed_loss`` the manifest's update norm and mean
    training loss for the segment (the loss is judged last, once the states hold).
    """
    n, k = spec.segments, spec.checkpoint_interval
    if not 0 <= segment < n:
        raise SegmentOutOfRange("segment", segment, n)
    decoded: list[Checkpoint] = []
    hashes: list[Bytes32] = []
    for label, data, committed, index in (("start", start, start_hash, segment), ("end", end, end_hash, segment + 1)):
        actual = state_hash(data)
        hashes.append(actual)
        if committed is not None and actual != committed:
            return _fail(segment, Reason.HASH_MISMATCH, f"checkpoint {index} hashes to {hex32(actual)}, committed {hex32(committed)}")
        try:
            ckpt = decode_checkpoint(data, data_key=dataset.data_key)
        except ProofError as exc:
            return _fail(segment, Reason.MALFORMED, f"checkpoint {index} ({label}): {exc}")
        if ckpt.spec_hash != spec.spec_hash():
            return _fail(segment, Reason.WRONG_SPEC, f"checkpoint {index} is stamped for spec {ckpt.spec_hash}")
        if ckpt.step != index * k:
            return _fail(segment, Reason.WRONG_STEP, f"checkpoint {index} claims step {ckpt.step}, expected {index * k}")
        decoded.append(ckpt)
    first, last = decoded
    trainer = Trainer(spec, dataset, rt)
    try:
        trainer.load(first)
        trainer.check_fits(last)  # the end checkpoint must fit the model and optimizer too
    except ProofError as exc:
        return _fail(segment, Reason.MALFORMED, str(exc))
    if claimed_norm is not None and (false_norm := _norm_fault(segment, first, last, claimed_norm)) is not None:
        return false_norm
    idle, loss = run_watching(trainer, k)
    replayed_hash = trainer.state_hash()
    ours = {name: t.detach().cpu() for name, t in trainer.tensors().items()}
    param_names = [n for n in ours if n.startswith("param.")]
    param_d = distances({n: ours[n] for n in param_names}, {n: last.tensors[n] for n in param_names})
    optim_d = distances({n: v for n, v in ours.items() if n.startswith("optim.")}, dict(last.optimizer_state()))
    extra = {"params": param_d, "optimizer": optim_d, "replayed_hash": replayed_hash, "replayed_loss": loss}
    if idle is not None:
        step, name = idle
        return _fail(segment, Reason.NO_WORK, f"step {segment * k + step} did no learning work: {name} has a zero gradient", **extra)
    if all(torch.equal(first.tensors[n], last.tensors[n]) for n in first.tensors):
        return _fail(segment, Reason.NO_WORK, "parameters and optimizer slots are bit-identical to the start", **extra)

    def false_loss() -> SegmentVerdict | None:  # judged once the states hold
        return None if claimed_loss is None else _loss_fault(spec, segment, loss, claimed_loss, **extra)

    committed_hash = hashes[1]
    if replayed_hash == committed_hash:
        return false_loss() or SegmentVerdict(segment, True, Reason.OK, f"segment {segment}: replay reproduces {hex32(committed_hash)}", **extra)  # type: ignore[arg-type]
    if spec.tolerance.mode == "exact":
        return _fail(
            segment,
            Reason.STATE_MISMATCH,
            f"replay gives {hex32(replayed_hash)}, committed {hex32(committed_hash)} (param l2 {param_d.l2:.3g}, linf {param_d.linf:.3g})",
            **extra,
        )
    if frozen := moved_frozen(first.tensors, ours, last.tensors):
        return _fail(segment, Reason.OUT_OF_TOLERANCE, f"{frozen} coordinates the replay leaves unchanged were changed", **extra)
    if param_d.within(spec.tolerance) and optim_d.within(spec.tolerance):
        return false_loss() or SegmentVerdict(segment, True, Reason.OK, f"segment {segment}: within tolerance (param l2 {param_d.l2:.3g})", **extra)  # type: ignore[arg-type]
    return _fail(
        segment,
        Reason.OUT_OF_TOLERANCE,
        f"param distances l2 {param_d.l2:.3g} linf {param_d.linf:.3g} cos {param_d.cosine:.3g}, "
        f"optimizer l2 {optim_d.l2:.3g}, over thresholds {spec.tolerance.l2:g}/{spec.tolerance.linf:g}/{spec.tolerance.cosine:g}",
        **extra,
    )


class TraceReplay:
    """The one way a trace is replayed, by the verifier, the whistleblower, the tests and the bench:
    its checkpoints fetched once each through ``fetch`` (the caller's bounded, hash-checked
    download), leaf 0 against the spec (:meth:`start`), segments (:meth:`segment`) and inner
    states (:meth:`state`). Which segments and states, in which order, is the caller's policy;
    segments must be replayed in ascending order, so a segment's replay drops every checkpoint
    before it."""

    def __init__(self, spec: JobSpec, dataset: Dataset, manifest: Manifest, fetch: Fetch, *, rt: Runtime = Runtime()) -> None:
        self.spec, self.dataset, self.manifest, self.rt = spec, dataset, manifest, rt
        self._fetch = fetch
        self._cache: dict[int, bytes] = {}

    def checkpoint(self, index: int) -> bytes:
        """Checkpoint ``index``'s bytes, fetched on first use."""
        if index not in self._cache:
            self._cache[index] = self._fetch(index)
        return self._cache[index]

    def start(self) -> SegmentVerdict:
        """Leaf 0 against the spec's initialization (:func:`check_start`); fetches nothing."""
        return check_start(self.spec, self.dataset, self.manifest.state_hashes[0])

    def segment(self, segment: int) -> SegmentVerdict:
        """:func:`replay_segment` of ``segment`` against the manifest's commitments."""
        for index in [i for i in self._cache if i < segment]:
            del self._cache[index]
        m = self.manifest
        return replay_segment(
            self.spec,
            self.dataset,
            segment,
            self.checkpoint(segment),
            self.checkpoint(segment + 1),
            start_hash=m.state_hashes[segment],
            end_hash=m.state_hashes[segment + 1],
            claimed_norm=m.update_norms[segment],
            claimed_loss=m.losses[segment],
            rt=self.rt,
        )

    def held_out(self) -> SegmentVerdict:
        """:func:`check_held_out` of the manifest's held-out loss (the spec must hold out a split:
        :meth:`Manifest.check_spec`), from the final checkpoint."""
        m, n = self.manifest, self.spec.segments
        assert m.held_out_loss is not None, "check_spec: a spec with eval has a manifest with a held-out loss"
        return check_held_out(self.spec, self.dataset, self.checkpoint(n), m.state_hashes[n], m.held_out_loss, self.rt)

    def state(self, segment: int, step: int) -> bytes:
        """The canonical state after inner step ``step`` of ``segment``, replayed from its start."""
        return state_at(self.spec, self.dataset, self.checkpoint(segment), segment * self.spec.checkpoint_interval + step, self.rt)

    def chain(self) -> Iterator[tuple[SegmentVerdict, bytes]]:
        """A full replay in exact mode: every segment in order, each from the state this replay itself
        reached, starting from the spec's initialization (:func:`initial_state`), so no checkpoint is
        fetched. Yields each segment's verdict with the state it started from (the committed
        checkpoint's bytes whenever the verdicts so far passed: equal hashes are equal bytes) and
        stops after the first failure, where a trace game opens. A segment passes when the replay
        reproduces its committed end leaf, did learning work, and the committed update norm and
        mean loss are those of the replayed states. :meth:`start` first: leaf 0 must be the spec's."""
        if self.spec.tolerance.mode != "exact":
            raise ProofError("a chained replay compares state hashes: tolerance mode replays each segment from its checkpoint")
        m = self.manifest
        state = initial_state(self.spec, self.dataset)
        for segment in range(m.segments):
            verdict, end = _chained_segment(
                self.spec, self.dataset, segment, state, m.state_hashes[segment + 1], m.update_norms[segment], m.losses[segment], self.rt
            )
            yield verdict, state
            if not verdict.passed:
                return
            state = end


def _chained_segment(
    spec: JobSpec, dataset: Dataset, segment: int, start: bytes, end_hash: Bytes32, claimed_norm: float | None, claimed_loss: float | None, rt: Runtime
) -> tuple[SegmentVerdict, bytes]:
    """:meth:`TraceReplay.chain`'s judgement of one segment from our own start state: the same
    faults as :func:`replay_segment` (no work, another end state, a false norm or loss), found
    without the solver's checkpoints."""
    first = decode_checkpoint(start, expect_spec=spec.spec_hash(), data_key=dataset.data_key)
    trainer = Trainer(spec, dataset, rt)
    trainer.load(first)
    idle, loss = run_watching(trainer, spec.checkpoint_interval)
    end = trainer.to_bytes()
    replayed_hash = state_hash(end)
    extra = {"replayed_hash": replayed_hash, "replayed_loss": loss}
    if idle is not None:
        step, name = idle
        return _fail(
            segment, Reason.NO_WORK, f"step {segment * spec.checkpoint_interval + step} did no learning work: {name} has a zero gradient", **extra
        ), end
    if replayed_hash != end_hash:
        return _fail(
            segment, Reason.STATE_MISMATCH, f"replay from checkpoint 0 gives {hex32(replayed_hash)} at leaf {segment + 1}, committed {hex32(end_hash)}", **extra
        ), end
    last = decode_checkpoint(end, data_key=dataset.data_key)
    if all(torch.equal(first.tensors[n], last.tensors[n]) for n in first.tensors):
        return _fail(segment, Reason.NO_WORK, "parameters and optimizer slots are bit-identical to the start", **extra), end
    if claimed_norm is not None and (false_norm := _norm_fault(segment, first, last, claimed_norm)) is not None:
        return false_norm, end
    if claimed_loss is not None and (false_loss := _loss_fault(spec, segment, loss, claimed_loss, **extra)) is not None:
        return false_loss, end
    return SegmentVerdict(segment, True, Reason.OK, f"segment {segment}: replay from checkpoint 0 reproduces {hex32(end_hash)}", **extra), end  # type: ignore[arg-type]


def verify_trace(
    spec: JobSpec,
    dataset: Dataset,
    manifest: Manifest,
    fetch: Fetch,
    seed: bytes | str,
    q: int = DEFAULT_Q,
    r: int = DEFAULT_R,
    *,
    rt: Runtime = Runtime(),
) -> TraceVerdict:
    """Select segments from ``seed`` and replay each against the manifest's commitments.

    ``manifest`` must already be parsed (its root is then the tree of its hashes);
    it is checked against ``spec`` here. Each checkpoint is fetched at most once. Leaf 0 is
    checked against the spec's initialization first (:func:`check_start`, no fetch): a wrong
    start is a failed verdict on segment 0 whether or not segment 0 is sampled.
    """
    manifest.check_spec(spec)
    selection = choose_segments(manifest.update_norms, seed, q, r)
    replay = TraceReplay(spec, dataset, manifest, fetch, rt=rt)
    start = replay.start()
    if not start.passed:
        return TraceVerdict(selection=selection, verdicts=(start,))
    return TraceVerdict(selection=selection, verdicts=tuple(replay.segment(seg) for seg in selection.segments))
