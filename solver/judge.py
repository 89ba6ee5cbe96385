"""The solver's spec judge: before any claim, whether this solver can finish a job.

:class:`SpecJudge` fetches the spec by CID (bounded, verified by the store), validates it, checks it
against this solver's :class:`Limits`, fetches the dataset and loads it against the spec (tensors,
shapes, dtypes, vocabulary; never a pickle), dry-runs a few steps and writes a checkpoint to measure
its own speed, and estimates the training time (``fits_window`` then compares it with the job's
commit window). The verdict is kept per spec CID in the records: a bad spec costs one fetch, across
restarts too. A sealed dataset (docs/sealing.md) is judged with the job's data key, the verdict kept
per spec CID and key (a spec reposted under another key commitment is judged again: its dataset may
not open with that key); without a key its verdict says so, not final, and the solver asks for one.
A hostile submitter's job that cannot be run is never claimed, so never slashed (docs/roles.md, "A
solver that cannot be drained"). :func:`measure_flops` is the speed a solver advertises. The training
itself is :mod:`solver.work`'s.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from core.cid import Cid, digest_to_cid
from core.errors import VeritrainError
from core.sealing import key_hash
from core.storage import ContentNotFound, ContentStore, StoreUnavailable, file_cid
from proofs import optim
from proofs.checkpoint import state_hash
from proofs.data import Dataset, load_dataset
from proofs.datasets import reference_job
from proofs.errors import ProofError
from proofs.numerics import profile
from proofs.replay import run_watching
from proofs.sampling import needs_full_replay
from proofs.spec import JobSpec, load_spec, training_memory_bytes
from proofs.spec import Limits as SpecLimits
from proofs.train import Runtime, Trainer
from rolebase.capabilities import ESTIMATE_SAFETY, claim_misfit, step_flop
from rolebase.events import SPEC_JUDGED
from rolebase.inputs import fetch_inputs, input_names
from solver.policy import Limits, SpecCheck
from solver.state import SolverDb, SpecVerdict

log = logging.getLogger(__name__)


#: Steps of the dry run that measures this solver's speed on a spec, and the longest full step it runs.
DRY_RUN_STEPS = 2
DRY_RUN_STEP_CAP_S = 10.0
#: The measured times are multiplied by ESTIMATE_SAFETY (a loaded machine, noise); then the fixed seconds are added.
ESTIMATE_FIXED_S = 2.0
#: The reference job whose step time gives the speed a solver advertises, and the steps timed on it.
SPEED_REFERENCE = "char-text"
SPEED_STEPS = 10
#: Content not in storage is looked for again after this long, doubling up to the maximum.
RETRY_FIRST_S = 30.0
RETRY_MAX_S = 3600.0


class SpecJudge:
    """``deployment`` (chain id and market address) keys the verdicts kept in the records, with the
    device when it is not the CPU (a speed estimate, a numerics refusal hold on one device only).
    No spec is refused for its checkpoints' size or count: a challenged checkpoint of any size is
    answered through the availability court, and a manifest of any length is a root of about 2 KB
    and pages (proofs.manifest), far under what a block holds."""

    def __init__(
        self,
        store: ContentStore,
        db: SolverDb,
        limits: Limits,
        deployment: str,
        *,
        rt: Runtime = Runtime(),
        clock: Callable[[], float] = time.time,
        background: bool = False,
        judged: Callable[[], None] = lambda: None,
    ) -> None:
        """``background``: judge on a thread of its own, one spec at a time, and answer "being judged" until
        the verdict is in the records (the daemon: a spec whose fetch stalls, or a long dry run, never holds
        its loop); else judge in the call (tests, ``submit post --dry-run``). ``judged`` is called on that
        thread once it is done (the daemon rings its loop's bell: the next poll ticks and may claim)."""
        self.store = store
        self.background = background
        self.judged = judged
        self._judging: threading.Thread | None = None
        self.db = db
        self.limits = limits
        self.deployment = deployment if rt.device == "cpu" else f"{deployment}@{rt.device}"
        self.rt = rt  # where jobs train (--device): a spec whose numerics cannot run there is refused
        self.clock = clock
        self._budget = limits.new_specs_per_tick

    def new_tick(self) -> None:
        """A new tick: ``new_specs_per_tick`` more specs may be judged."""
        self._budget = self.limits.new_specs_per_tick

    def check(self, spec_digest: bytes, data_key: bytes | None = None) -> SpecCheck:
        """The verdict on a spec: from the records, else judged now (within this tick's budget).
        ``data_key``: the job's, when we hold one (what opens a sealed dataset)."""
        cid = digest_to_cid(spec_digest)
        cached = self.db.spec_verdict(self.deployment, _verdict_key(cid, data_key))
        if cached is not None and (cached.check.final or self.clock() < cached.retry_at):
            return cached.check
        if self._budget <= 0 or (self._judging is not None and self._judging.is_alive()):
            return SpecCheck(False, "not judged yet", final=False)  # next tick
        self._budget -= 1
        if self.background:
            self._judging = threading.Thread(target=self._verdict_logged, args=(cid, cached, data_key), name=f"judge {cid}", daemon=True)
            self._judging.start()
            return SpecCheck(False, "being judged", final=False)
        return self._verdict(cid, cached, data_key)

    def _verdict_logged(self, cid: Cid, cached: SpecVerdict | None, data_key: bytes | None) -> None:
        try:
            self._verdict(cid, cached, data_key)
        except Exception as exc:  # noqa: BLE001 - a transient RPC error, say: judged again at a later tick
            log.warning("spec judgement failed, judged again later", extra={"spec": cid, "error": f"{type(exc).__name__}: {exc}"})
        finally:
            self.judged()

    def _verdict(self, cid: Cid, cached: SpecVerdict | None, data_key: bytes | None) -> SpecCheck:
        """Judge the spec now and record the verdict (not our store's trouble: that says nothing of it)."""
        try:
            check = self._judge(cid, data_key)
        except StoreUnavailable as exc:  # our store's trouble says nothing about the spec: not recorded
            return SpecCheck(False, f"{type(exc).__name__}: {exc}", final=False)
        retry_s = 0.0 if check.final else min(RETRY_MAX_S, 2 * cached.retry_s if cached is not None and cached.retry_s else RETRY_FIRST_S)
        self.db.set_spec_verdict(self.deployment, _verdict_key(cid, data_key), SpecVerdict(check, retry_s, self.clock() + retry_s))
        if cached is None or cached.check.reason != check.reason:  # once per spec (and when the reason changes)
            log.info(SPEC_JUDGED, extra={"spec": cid, "runnable": check.runnable, "reason": check.reason, "train_s": round(check.train_s, 1)})
        return check

    def _judge(self, cid: Cid, data_key: bytes | None) -> SpecCheck:
        try:
            spec = load_spec(self.store.get(cid, SpecLimits.SPEC_BYTES))
        except StoreUnavailable:
            raise
        except ContentNotFound:
            return SpecCheck(False, f"spec {cid} is not in storage", final=False)
        except VeritrainError as exc:  # too large, forged, malformed
            return SpecCheck(False, f"{type(exc).__name__}: {exc}")
        over = self._over_limits(spec) or profile(spec.numerics).fault(self.rt.device)
        if over:
            return SpecCheck(False, over, spec.steps)
        if spec.dataset.sealed and data_key is None:  # judged again with the key once a wrap to us opens
            return SpecCheck(False, "the dataset is sealed and we hold no data key for it yet", spec.steps, final=False, sealed=True)
        try:
            data, init = fetch_inputs(self.store, spec, data_key)  # each verified against its CID, a sealed dataset opened
        except StoreUnavailable:
            raise
        except ContentNotFound as exc:
            what = next((what for what, cid in input_names(spec) if cid == exc.cid), "job input")
            return SpecCheck(False, f"{what} {exc.cid} is not in storage", spec.steps, final=False)
        except VeritrainError as exc:  # larger than the spec says, forged, not a CID
            return SpecCheck(False, f"dataset or pretrained model: {type(exc).__name__}: {exc}", spec.steps)
        try:
            dry = _estimate(spec, load_dataset(spec, data, init, data_key), self.rt)
        except IdleTraining as exc:
            return SpecCheck(False, f"training does no learning work, which verifiers fail: {exc}", spec.steps)
        except ProofError as exc:
            return SpecCheck(False, f"dataset does not fit the spec: {exc}", spec.steps)
        except Exception as exc:  # noqa: BLE001 - any failure of the engine on a stranger's spec and data: not runnable
            return SpecCheck(False, f"dry run failed: {type(exc).__name__}: {str(exc)[:200]}", spec.steps)
        return SpecCheck(
            True,
            "",
            spec.steps,
            dry.train_s,
            checkpoints=spec.segments + 1,
            checkpoint_bytes=dry.checkpoint_bytes,
            segment_s=dry.segment_s,
            full_replay=needs_full_replay(spec),
            memory_bytes=training_memory_bytes(spec),
            sealed=spec.dataset.sealed,
        )

    def _over_limits(self, spec: JobSpec) -> str:
        """Why this solver refuses ``spec`` from its limits alone: the one check a submitter's fit runs
        against its advert too (``rolebase.capabilities.claim_misfit``), with our memory."""
        lim = self.limits
        return claim_misfit(
            spec,
            max_params=lim.max_params,
            max_dataset_bytes=lim.max_dataset_bytes,
            max_steps=lim.max_steps,
            max_memory_bytes=lim.max_memory_bytes,
        )


def _verdict_key(cid: Cid, data_key: bytes | None) -> str:
    """What a verdict is kept under: the spec's CID, and with a data key that key's hash too (a sealed
    dataset judged with one key says nothing of another)."""
    return cid if data_key is None else f"{cid}#0x{key_hash(data_key).hex()}"


class IdleTraining(ProofError):
    """A dry-run step did no learning work (a parameter tensor's gradient exactly zero): every
    verifier fails such a step (``no-work``, proofs.replay), so an honest solver must not claim it."""


@dataclass(frozen=True)
class DryRun:
    """What a dry run measured: the estimated training time, the estimated time of one segment (what
    regenerating a dropped checkpoint costs per segment: solver.retention) and checkpoint 0's size."""

    train_s: float
    segment_s: float
    checkpoint_bytes: int


def _estimate(spec: JobSpec, dataset: Dataset, rt: Runtime = Runtime()) -> DryRun:
    """Seconds to train ``spec`` here, and one segment of it, and checkpoint 0's size, from a dry
    run: a checkpoint encoded and hashed (each is written, re-read for upload and stored: three
    times that; any size: a challenged checkpoint is answered through the availability court,
    docs/protocol.md), then steps on one example (the
    first untimed: kernels compile on first use, once per process). A full step that this puts
    above ``DRY_RUN_STEP_CAP_S`` is not run (a stranger's spec must not stall the solver, whose
    other jobs have clocks): the one-example time times the batch size stands for it; else one
    full step untimed and ``DRY_RUN_STEPS`` timed. A full step that did no learning work, or steps
    that leave every parameter bit-identical (a learning rate that underflows: verifiers fail a
    segment whose parameters and slots do not change), raise :class:`IdleTraining` (a submitter's
    data or learning rate that kills training at once)."""
    trainer = Trainer(spec, dataset, rt)
    started = time.monotonic()
    first = trainer.to_bytes()
    state_hash(first)
    checkpoint_s = time.monotonic() - started
    single = Trainer(spec.model_copy(update={"batch_size": 1}), dataset, rt)
    single.run(1)
    started = time.monotonic()
    single.run(1)
    step_s = (time.monotonic() - started) * spec.batch_size
    if step_s <= DRY_RUN_STEP_CAP_S:
        start = {name: p.detach().clone() for name, p in trainer.params.items()}
        idle = run_watching(trainer, 1).idle
        started = time.monotonic()
        idle = run_watching(trainer, DRY_RUN_STEPS).idle or idle
        step_s = (time.monotonic() - started) / DRY_RUN_STEPS
        if idle is not None:
            raise IdleTraining(f"{idle[1]} has an exactly zero gradient in a dry-run step")
        if all(torch.equal(p, start[name]) for name, p in trainer.params.items()):
            lr = optim.learning_rate(spec.schedule, spec.optimizer.lr, spec.steps, 0)
            raise IdleTraining(f"{1 + DRY_RUN_STEPS} dry-run steps leave every parameter bit-identical (learning rate {lr:g} underflows)")
    train_s = ESTIMATE_FIXED_S + ESTIMATE_SAFETY * (spec.steps * step_s + 3 * (spec.segments + 1) * checkpoint_s)
    return DryRun(train_s, ESTIMATE_SAFETY * (spec.checkpoint_interval * step_s + checkpoint_s), len(first))


def measure_flops(rt: Runtime = Runtime()) -> int:
    """This machine's training speed in FLOP/s as rolebase.capabilities counts it: the fastest of
    ``SPEED_STEPS`` steps of the ``SPEED_REFERENCE`` job (after one untimed step: kernels compile on
    first use), trained as the solver trains (``rt``, the job's numerics: repro-v1, or torch's on a
    device repro-v1 does not run on). The fastest step, since other processes only ever slow a step
    down: it is what is measured again after a restart on a busy machine."""
    job = reference_job(SPEED_REFERENCE)
    spec = job.spec(file_cid(job.dataset))
    if profile(spec.numerics).fault(rt.device) is not None:
        spec = spec.model_copy(update={"numerics": "torch"})
    trainer = Trainer(spec, load_dataset(spec, job.dataset), rt)
    trainer.run(1)
    times = []
    for _ in range(SPEED_STEPS):
        started = time.monotonic()
        trainer.run(1)
        times.append(time.monotonic() - started)
    return max(1, round(step_flop(spec) / min(times)))
