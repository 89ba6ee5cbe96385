"""The verifier's work: fetch what the solver committed, sample segments, replay them, write the report.

Every byte comes from the content store by CID (verified there) and every checkpoint is
also checked against the state hash in the manifest, whose root must be the one on
chain. The segments come from the proofs engine's sampling seeded by the ``assignSeed`` of
this verifier's ``VerifierAssigned`` event (keccak256(drawSeed): fixed after the solver
committed, new with every draw, and independent of who was drawn), plus the report's probe segments.
Before any replay, a manifest whose root is the committed one is checked against the rest of the
commitment and the spec (``proofs.check_manifest``), and leaf 0 against the spec's (seeded or pretrained)
initialization (``proofs.check_start``): either false, the trace fails on segment 0, where the
dispute opens from the manifest's own leaves. A manifest that does not parse, or whose root is not
the committed one, gives no leaves to open a game with: it is challenged on chain until the solver
publishes it there (or is slashed), then the report fails on the manifest itself
(``failed_segment`` is ``MANIFEST_ITEM``) and the verifier opens a manifest game
(``DisputeGame.openOnManifest``), where the referees judge the bytes the chain holds.

A passing report commits to ``probeCount`` probes (``proofs.probes``): for each slot, the
state hash at the inner step the assign seed fixes in the slot's segment, recomputed from the
segment's start checkpoint once the segment replayed (``proofs.TraceReplay``, the one replay of a
trace the whistleblower, tests and bench use too). The solver
never committed those states: they prove the replay. On a job forced on this verifier
(:class:`verifier.policy.Draw`) probe 0 is published as ``forced_hash`` of the true one
(:func:`published_probes`); the verdict is always the true one and the report says nothing of it.

A sealed job's dataset (``spec.dataset.sealed``: docs/sealing.md) is opened with the data key the
loader found for us (``key_of``: a wrap to us that opened, or the revealed key, kept in the records);
the policy replays such a job only once it holds one.

A trace the solver does not serve (manifest or checkpoint missing from the store, or bytes
that are not the committed ones) is taken from the chain if the solver published it there, else
retried for a few seconds, then challenged (:mod:`core.availability`): every checkpoint the replay
needs is fetched first, and :class:`core.availability.ContentUnavailable` names all that are lacking,
which the responder challenges in one court case.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from core.agent import StopFlag, Stopped
from core.availability import Availability, ContentPending, ContentUnavailable, Wanted
from core.cid import Cid, digest_to_cid
from core.contracts import MANIFEST_ITEM, Bytes32, JobId, Protocol, TraceCommitment
from core.dispute import ZERO32
from core.errors import SealingError, VeritrainError
from core.storage import ContentStore, StorageError
from proofs.checkpoint import state_hash
from proofs.data import Dataset
from proofs.errors import ProofError
from proofs.manifest import MANIFEST_BLOCK, Manifest, committed_manifest
from proofs.merkle import hex32
from proofs.probes import Probe, ProbeTree, forced_hash, probe_json, probe_positions
from proofs.replay import SegmentVerdict, TraceReplay, check_manifest
from proofs.sampling import DEFAULT_Q, DEFAULT_R, choose_segments
from proofs.spec import JobSpec, Limits, load_spec
from proofs.steps import state_at
from proofs.train import Runtime
from rolebase.device import job_fault
from rolebase.events import REPLAY_DONE, SEGMENT_REPLAYED
from rolebase.inputs import fetch_dataset
from rolebase.watchers import MarketWatcher
from verifier.policy import Draw

log = logging.getLogger(__name__)


def _verdict_entry(v: SegmentVerdict) -> dict[str, object]:
    """A segment's verdict as the report JSON lists it, with the mean training loss the replay
    computed when it got that far (``wrong-loss``: the manifest claims another)."""
    entry: dict[str, object] = {"segment": v.segment, "passed": v.passed, "reason": v.reason.value, "detail": v.detail}
    if v.replayed_loss is not None:
        entry["replayed_loss"] = v.replayed_loss
    return entry


class InspectionDeferred(VeritrainError):
    """Content the verdict needs is not available yet; the next tick tries again."""


@dataclass(frozen=True)
class Verdict:
    passed: bool
    report_cid: Cid
    summary: str  # e.g. "4/4 segments ok" or the first failure
    probe_root: Bytes32  # of the published probes; zero on a failing report (it publishes none)
    failed_segment: int | None = None  # the first failing segment replayed: where the dispute opens
    probes: tuple[Probe, ...] = ()  # what report() publishes on chain, slot i at i; () on a fail


class _Failed(Exception):
    """Internal: the trace is bad before any replay (unserved, inconsistent with the chain)."""


class _ManifestFault(_Failed):
    """Internal: the committed manifest gives no leaves (it does not parse, or names another root)
    and is published on chain: the report fails on the manifest itself (a manifest game)."""


def published_probes(probes: Sequence[Probe], forced: bool) -> list[Probe]:
    """The probes a report publishes: the true ones, except probe 0 of a job forced on us, whose state
    hash is ``forced_hash`` of the true one (a value no replay gives: docs/incentives.md)."""
    return [replace(p, state_hash=forced_hash(p.state_hash)) if forced and p.index == 0 else p for p in probes]


class TraceVerifier:
    """The honest verifier's replay of a drawn job. Test adversaries override :meth:`_replay` and
    :meth:`_conclude` (``verifier.adversary``); nothing here knows of them."""

    def __init__(
        self,
        protocol: Protocol,
        store: ContentStore,
        watcher: MarketWatcher,
        stop: StopFlag,
        *,
        q: int = DEFAULT_Q,
        r: int = DEFAULT_R,
        rt: Runtime = Runtime(),
        key_of: Callable[[JobId], bytes | None] = lambda _: None,
    ) -> None:
        """``key_of``: a sealed job's data key as we hold it (None: none, its dataset cannot be opened)."""
        self.protocol = protocol
        self.store = store
        self.watcher = watcher  # what a job was posted with and committed to
        self.stop = stop
        self.key_of = key_of
        self.rt = rt  # where segments are replayed (--device)
        self.q = q
        self.r = r
        self._probe_count: int | None = None
        self.availability = Availability(protocol, store)

    @property
    def probe_count(self) -> int:
        """The market's ``probeCount`` (immutable: read once)."""
        if self._probe_count is None:
            self._probe_count = self.protocol.market.params().probe_count
        return self._probe_count

    def _get(self, job_id: JobId, item: int, cid: str, limit: int, deadline: int, what: str, expect_hash: Bytes32 | None = None) -> bytes:
        """``item`` of the job by its CID (and, for a checkpoint, its committed ``expect_hash``), or its
        copy published on chain; else retried a while, then ContentUnavailable (the item is challenged)."""
        try:
            return self.availability.fetch(job_id, item, cid, limit, deadline, what, expect_hash)
        except ContentPending as exc:
            raise InspectionDeferred(str(exc)) from None

    def _manifest_fault(self, job_id: JobId, problem: str) -> _ManifestFault:
        """A manifest that gives no leaves is judged by the referees on the bytes the chain holds:
        challenged until the solver publishes it (ContentUnavailable), then a manifest game."""
        if not self.protocol.market.is_published(job_id, MANIFEST_ITEM):
            raise ContentUnavailable(job_id, MANIFEST_ITEM, f"{problem}; the referees need it on chain", on_chain=True)
        return _ManifestFault(problem)

    def inspect(self, job_id: JobId, deadline: int, draw: Draw) -> Verdict:
        started = time.monotonic()
        job = self.protocol.market.get_job(job_id)
        committed = self.watcher.commitment(job_id, job.trace_root)
        seed = bytes(draw.assign_seed)
        report: dict[str, object] = {"job": int(job_id), "manifest": committed.manifest_cid, "assign_seed": hex32(seed), "q": self.q, "r": self.r}
        try:
            spec = load_spec(self.store.get(digest_to_cid(self.watcher.spec_cid(job_id)), Limits.SPEC_BYTES))
            dataset = fetch_dataset(self.store, spec, self.key_of(job_id) if spec.dataset.sealed else None)
        except (ProofError, StorageError, SealingError) as exc:  # the submitter's spec or data (or its key): not the solver's fault
            raise VeritrainError(f"job {job_id}: cannot load spec or dataset: {exc}") from exc
        fault = job_fault(job_id, spec, self.rt)
        if fault is not None:  # our device, not the solver's trace: no report rather than a false fail
            raise VeritrainError(fault)
        failed_segment: int | None = None
        probes: list[Probe] = []
        try:
            verdicts, probes = self._judge(job_id, spec, dataset, committed, deadline, seed, report)
            passed, failed_segment, summary = self._conclude(verdicts)
        except _ManifestFault as exc:
            passed, summary, failed_segment = False, str(exc), MANIFEST_ITEM
            report["verdicts"] = [{"segment": 0, "passed": False, "reason": "malformed-manifest", "detail": str(exc)}]
        except _Failed as exc:
            passed, summary = False, str(exc)
        except ProofError as exc:  # anything else the engine refuses in what the solver served
            passed, summary = False, f"{type(exc).__name__}: {exc}"
        if draw.forced:
            log.debug("forced", extra={"job": job_id})
        # A pass always has them all; a fail publishes none (report() rejects probes on a fail).
        shown = published_probes(probes, draw.forced) if passed and len(probes) == self.probe_count else []
        probe_root = ProbeTree(shown).root if shown else ZERO32
        report.update({"passed": passed, "summary": summary, "probes": [probe_json(p) for p in shown], "probe_root": hex32(probe_root)})
        report_cid = self.store.put(json.dumps(report, sort_keys=True).encode())
        log.info(REPLAY_DONE, extra={"job": job_id, "passed": passed, "summary": summary, "seconds": round(time.monotonic() - started, 2)})
        return Verdict(passed, report_cid, summary, probe_root, failed_segment, tuple(shown))

    def _judge(
        self,
        job_id: JobId,
        spec: JobSpec,
        dataset: Dataset,
        committed: TraceCommitment,
        deadline: int,
        seed: bytes,
        report: dict[str, object],
    ) -> tuple[list[SegmentVerdict], list[Probe]]:
        """The verdicts of the replayed segments (the sample and the probe segments) and the true
        probes of the segments that replayed (all of them when the trace passes)."""
        manifest_cid = committed.manifest_cid
        data = self._get(job_id, MANIFEST_ITEM, manifest_cid, MANIFEST_BLOCK, deadline, "manifest")  # its root block
        try:
            manifest = committed_manifest(data, committed.trace_root, lambda page: self.availability.manifest_page(page, deadline))
        except ContentPending as exc:
            raise InspectionDeferred(str(exc)) from None
        except ProofError as exc:
            raise self._manifest_fault(job_id, f"manifest {manifest_cid}: {exc}") from None
        # its leaves open a game on segment 0, where referees find it is not the committed trace of the spec
        consistent = check_manifest(spec, manifest, committed.checkpoint_count, committed.final_model_cid)
        if not consistent.passed:
            report["verdicts"] = [_verdict_entry(consistent)]
            return [consistent], []
        k = spec.checkpoint_interval
        positions = probe_positions(seed, self.probe_count, len(manifest.checkpoints), k)
        if self.protocol.market.is_full_replay(job_id):  # chosen by the draw, or posted so: every segment (docs/protocol.md)
            report["full_replay"] = True
            replayed = list(range(manifest.segments))
        else:
            selection = choose_segments(manifest.update_norms, seed, self.q, self.r)
            replayed = sorted(set(selection.segments) | {segment for _, segment, _ in positions})
        report["segments"] = replayed
        return self._replay(job_id, spec, dataset, manifest, replayed, positions, deadline, report)

    def _conclude(self, verdicts: Sequence[SegmentVerdict]) -> tuple[bool, int | None, str]:
        """The report's outcome from the replayed segments: passed, the first failed segment, a summary."""
        failures = [v for v in verdicts if not v.passed]
        summary = f"{len(verdicts) - len(failures)}/{len(verdicts)} segments ok" + (f"; {failures[0].detail}" if failures else "")
        return not failures, min((v.segment for v in failures), default=None), summary

    def _replay(
        self,
        job_id: JobId,
        spec: JobSpec,
        dataset: Dataset,
        manifest: Manifest,
        replayed: list[int],
        positions: Sequence[tuple[int, int, int]],
        deadline: int,
        report: dict[str, object],
    ) -> tuple[list[SegmentVerdict], list[Probe]]:
        """Replay ``replayed`` (its start first), and the true probes of the segments that pass. Every
        checkpoint they need is fetched first, so one challenge names all that are lacking (a chained full
        replay needs none). Only a drawn full replay chains: a sample that happens to cover every segment
        still fetches its checkpoints, so a solver that withholds them is challenged whatever the sample."""
        chained = bool(report.get("full_replay")) and spec.tolerance.mode == "exact"
        needed = [] if chained else sorted({i for segment in replayed for i in (segment, segment + 1)})
        wanted = [Wanted(i, manifest.checkpoint_cids[i], Limits.CHECKPOINT_BYTES, f"checkpoint {i}", manifest.state_hashes[i]) for i in needed]
        try:
            self.availability.gather(job_id, wanted, deadline)
        except ContentPending as exc:
            raise InspectionDeferred(str(exc)) from None
        replay = TraceReplay(
            spec,
            dataset,
            manifest,
            lambda i: self._get(job_id, i, manifest.checkpoint_cids[i], Limits.CHECKPOINT_BYTES, deadline, f"checkpoint {i}", manifest.state_hashes[i]),
            rt=self.rt,
        )
        start = replay.start()  # no fetch: leaf 0 is the spec's init or the trace fails
        if not start.passed:
            report["verdicts"] = [_verdict_entry(start)]
            return [start], []
        if chained:
            return self._chain(job_id, spec, dataset, replay, positions, report)
        verdicts: list[SegmentVerdict] = []
        probes: list[Probe] = []
        for segment in replayed:
            if self.stop.is_set():
                raise Stopped(f"job {job_id}: replay stopped; it starts again on restart")
            verdict = replay.segment(segment)
            if verdict.passed:  # a probe in a segment that does not replay is moot: the report fails
                probes += [Probe(i, segment, step, state_hash(replay.state(segment, step))) for i, _, step in (p for p in positions if p[1] == segment)]
            verdicts.append(verdict)
            log.info(SEGMENT_REPLAYED, extra={"job": job_id, "segment": segment, "passed": verdict.passed, "reason": verdict.reason.value})
        return _with_held_out(replay, verdicts, probes, report, spec.eval is not None)

    def _chain(
        self, job_id: JobId, spec: JobSpec, dataset: Dataset, replay: TraceReplay, positions: Sequence[tuple[int, int, int]], report: dict[str, object]
    ) -> tuple[list[SegmentVerdict], list[Probe]]:
        """Every segment in exact mode: one replay from the seeded initialization that fetches no
        checkpoint (``TraceReplay.chain``), up to the first segment whose end is not the committed
        leaf; each probe from the start state the chain reached."""
        k = spec.checkpoint_interval
        verdicts: list[SegmentVerdict] = []
        probes: list[Probe] = []
        for verdict, start in replay.chain():
            if self.stop.is_set():
                raise Stopped(f"job {job_id}: replay stopped; it starts again on restart")
            segment = verdict.segment
            if verdict.passed:
                probes += [
                    Probe(i, segment, step, state_hash(state_at(spec, dataset, start, segment * k + step, self.rt))) for i, s, step in positions if s == segment
                ]
            verdicts.append(verdict)
            log.info(SEGMENT_REPLAYED, extra={"job": job_id, "segment": segment, "passed": verdict.passed, "reason": verdict.reason.value})
        # the one checkpoint a chain fetches, the final, only when every segment reached it
        return _with_held_out(replay, verdicts, probes, report, spec.eval is not None and all(v.passed for v in verdicts))


def _with_held_out(
    replay: TraceReplay, verdicts: list[SegmentVerdict], probes: list[Probe], report: dict[str, object], held_out: bool
) -> tuple[list[SegmentVerdict], list[Probe]]:
    """The replay's verdicts and probes, closed: with ``held_out``, the buyer's held-out result from the
    final checkpoint (shown once a report passes) as the last verdict; the verdicts written into ``report``."""
    if held_out:
        held = replay.held_out()
        verdicts.append(held)
        report["held_out_loss"] = held.replayed_loss
    report["verdicts"] = [_verdict_entry(v) for v in verdicts]
    return verdicts, sorted(probes, key=lambda p: p.index)
