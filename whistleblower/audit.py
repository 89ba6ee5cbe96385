"""The whistleblower's audit of one passing report: replay its probes and segments, find faults.

The probes are read from the CHAIN (``JobMarket.sealed_report``: ``report()`` takes them as calldata,
checks their segments, computes the probe root and emits them), so every passing report can be
audited on its probes: a verifier cannot hide them by publishing no report, or a malformed one.
Their tree must build the probe root the chain sealed (it does by construction: seal and probes
come from one event; a mismatch would mean our tree and the chain's disagree: the audit waits). The report JSON, fetched by CID and size-bounded, is
only the source of the segments the verifier says it replayed; when it is missing, malformed or
too large the audit goes on without them (the bot's own picks then). Through the verifier's
dispute replayer the job's spec, dataset and manifest are checked (its root the committed one); each
checkpoint against the manifest's state hash. The manifest and each checkpoint are read through
``core.availability``: an item the store does not serve (or serves wrong) is taken from the chain if
the solver published it there (and kept in our store, where the replayer finds it), else retried for a
few seconds, then challenged (:class:`core.availability.ContentUnavailable` reaches the responder).

A manifest that gives no leaves (it does not parse, or its root is not the committed root) is the
audit's one finding: it is challenged until the solver publishes it on chain, and then disputed whole
in a manifest game (``DisputeGame.openOnManifest``), as the job's verifier does (``verifier.work``).

Leaf 0 of the trace is checked against the spec's initialization, seeded or pretrained (``proofs.check_start``):
a passing report on a trace with another start is a fault on segment 0 (a trace game there, which
the referees settle on the start alone: ``rolebase.dispute``).

A probe is replayed from checkpoint ``segment`` to its step and its hash compared with the
published one; a segment is replayed whole, probes first. The first fault ends the audit: one fault
opens a game, and the report's window runs while the rest would replay. Both go through ``proofs.TraceReplay``, the verifier's
replay (each checkpoint fetched once). The stop flag is checked between units, so SIGTERM stops an audit at
once; an audit stopped or killed is done again from the start (nothing is recorded before it
completes).
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable
from functools import partial

from core.agent import StopFlag, Stopped
from core.availability import Availability, ContentUnavailable
from core.bounded import InputRejected, load_json
from core.contracts import MANIFEST_ITEM, Bytes32, JobId, Protocol, ReportSeal
from core.errors import VeritrainError
from core.storage import CidMismatch, ContentNotFound, ContentStore, ContentTooLarge
from proofs.checkpoint import state_hash
from proofs.errors import ProofError
from proofs.manifest import MANIFEST_BLOCK, committed_manifest
from proofs.merkle import hex32
from proofs.probes import Probe, ProbeTree, probe_step
from proofs.replay import TraceReplay
from proofs.sampling import choose_segments
from proofs.spec import Limits
from rolebase.dispute import DisputeReplayer
from rolebase.events import SEGMENT_REPLAYED
from rolebase.watchers import MarketWatcher, NotInLogs
from whistleblower.policy import Finding, FindingKind, own_picks_seed, plan_audit
from whistleblower.state import AuditRecord

log = logging.getLogger(__name__)

#: A report is a small JSON document: 32 probes and a few thousand segment verdicts at most.
MAX_REPORT_BYTES = 1 << 20


class AuditDeferred(VeritrainError):
    """What the audit needs is not on chain yet (the trace commitment, the sealed report): next tick."""


class MalformedReport(VeritrainError):
    """The report JSON does not say which segments the verifier replayed: its probes are audited without them."""


def parse_segments(data: bytes, segments: int) -> tuple[int, ...]:
    """The segments a passing report says the verifier replayed (else :class:`MalformedReport`)."""
    try:
        raw = load_json(data, max_bytes=MAX_REPORT_BYTES, what="report")  # bounded: deep nesting would crash the parser
    except InputRejected as exc:
        raise MalformedReport(str(exc)) from None
    if not isinstance(raw, dict) or raw.get("passed") is not True:
        raise MalformedReport("not a passing report")
    reported = raw.get("segments", [])
    if not isinstance(reported, list) or not all(isinstance(s, int) and not isinstance(s, bool) and 0 <= s < segments for s in reported):
        raise MalformedReport(f"segments {reported!r} are not segments of a trace of {segments}")
    return tuple(reported)


class Auditor:
    def __init__(
        self, protocol: Protocol, store: ContentStore, watcher: MarketWatcher, replayer: DisputeReplayer, stop: StopFlag, secret: bytes, budget_steps: int
    ) -> None:
        self.protocol = protocol
        self.store = store
        self.watcher = watcher  # what a job was committed to
        self.replayer = replayer
        self.stop = stop
        self.secret = secret
        self.budget_steps = budget_steps
        self.availability = Availability(protocol, store)

    def audit(self, job_id: JobId, report_cid: str, deadline: int, trace_root: Bytes32) -> AuditRecord:
        """Audit ``report_cid`` of ``job_id``, whose challenge window ends at ``deadline``, on the trace
        committed under ``trace_root`` (both as the loader read the job)."""
        started = time.monotonic()
        seal, probes = self._sealed_probes(job_id)
        manifest_fault = self._manifest(job_id, deadline, trace_root)
        if manifest_fault is not None:
            log.info("audit done: the manifest gives no leaves", extra={"job": job_id, "report": report_cid, "fault": manifest_fault})
            return AuditRecord(job_id, report_cid, (Finding(FindingKind.MANIFEST, 0, 0, manifest_fault),), 0, manifest_fault)
        material = self.replayer.material(job_id)
        n, k = material.manifest.segments, material.spec.checkpoint_interval
        notes: list[str] = []
        try:
            claimed = parse_segments(self.store.get(report_cid, MAX_REPORT_BYTES), n)
        except (ContentNotFound, MalformedReport, ContentTooLarge, CidMismatch) as exc:  # the probes are on chain: audit them anyway
            log.warning("report unusable, probes audited without its segments", extra={"job": job_id, "report": report_cid, "error": str(exc)})
            claimed = ()
            notes.append(f"report unusable ({type(exc).__name__}: {exc}): no claimed segments")
        off_step = [q for q in probes.probes if q.step != probe_step(seal.assign_seed, q.index, k)]
        on_step = [q for q in probes.probes if q not in off_step]
        own = choose_segments([0.0] * n, own_picks_seed(self.secret, job_id, report_cid), q=0, r=n, include_last=False).random
        plan = plan_audit([(q.index, q.step) for q in on_step], claimed, own, k, self.budget_steps)
        log.info(
            "audit started",
            extra={
                "job": job_id,
                "report": report_cid,
                "probes": len(plan.probes),
                "segments": len(plan.segments),
                "steps": plan.steps,
                "left_out": plan.left_out,
            },
        )
        m = material.manifest
        replay = TraceReplay(
            material.spec,
            material.dataset,
            m,
            lambda i: self.availability.fetch(job_id, i, m.checkpoint_cids[i], Limits.CHECKPOINT_BYTES, deadline, f"checkpoint {i}", m.state_hashes[i]),
            rt=self.replayer.rt,  # --device: the replayer refused the job's material if its numerics cannot run there
        )
        findings = [_off_step(q, probe_step(seal.assign_seed, q.index, k), probes, seal) for q in off_step]
        start = replay.start()
        if not start.passed:  # no fetch, no replay: leaf 0 is not the spec's initialization
            findings.append(Finding(FindingKind.SEGMENT, 0, 0, start.detail))
        ran: list[tuple[str, int, Callable[[], Finding | None]]] = []
        if not findings:  # one fault opens a game: the first ends the audit, as the report's window runs
            probe_steps = {q.index: q.step for q in on_step}
            units = itertools.chain(
                (("probe", probe_steps[i], partial(self._probe, job_id, replay, probes, seal, i)) for i in plan.probes),
                (("segment", k, partial(self._segment, job_id, replay, s)) for s in plan.segments),
            )
            for unit in units:
                ran.append(unit)
                finding = unit[2]()
                if finding is not None:
                    findings.append(finding)
                    break
        steps = sum(unit_steps for _, unit_steps, _ in ran)
        kinds = [kind for kind, _, _ in ran]
        if findings:
            notes.append("stopped at the first fault")
        if plan.left_out:
            notes.append(f"{plan.left_out} units over budget")
        summary = "; ".join([f"{kinds.count('probe')} probes and {kinds.count('segment')} segments replayed ({steps} steps), {len(findings)} faults", *notes])
        log.info(
            "audit done",
            extra={"job": job_id, "report": report_cid, "faults": len(findings), "steps": steps, "seconds": round(time.monotonic() - started, 2)},
        )
        return AuditRecord(job_id, report_cid, tuple(findings), steps, summary)

    def _sealed_probes(self, job_id: JobId) -> tuple[ReportSeal, ProbeTree]:
        """The current report's seal and its probes, both from the one event the chain emitted; their
        tree builds the sealed probe root (the chain computed it from them). A mismatch would mean our
        ProbeTree and the chain disagree: no challenge could be proven, so the audit waits."""
        sealed = self.watcher.sealed_report(job_id)
        if sealed is None or not sealed[1]:
            raise AuditDeferred(f"job {job_id}: no passing report sealed on chain yet")
        seal, reported = sealed
        tree = ProbeTree(reported)
        if tree.root != seal.probe_root:
            raise AuditDeferred(f"job {job_id}: the emitted probes build {hex32(tree.root)}, the seal holds {hex32(seal.probe_root)}")
        return seal, tree

    def _manifest(self, job_id: JobId, deadline: int, trace_root: Bytes32) -> str | None:
        """The committed manifest in our store (where the replayer reads it), from the chain if published
        there. Returns what makes it give no leaves (``proofs.committed_manifest``), once it is
        published on chain (else ContentUnavailable: the referees need it there); None if it gives them."""
        try:
            cid = self.watcher.commitment(job_id, trace_root).manifest_cid
        except NotInLogs as exc:  # a node behind the one the job was read from
            raise AuditDeferred(str(exc)) from None
        data = self.availability.fetch(job_id, MANIFEST_ITEM, cid, MANIFEST_BLOCK, deadline, "manifest")  # its root block
        try:
            committed_manifest(data, trace_root, lambda page: self.availability.manifest_page(page, deadline))
        except ProofError as exc:
            if not self.protocol.market.is_published(job_id, MANIFEST_ITEM):
                raise ContentUnavailable(job_id, MANIFEST_ITEM, f"manifest {cid}: {exc}; the referees need it on chain", on_chain=True) from None
            return f"manifest {cid}: {exc}"
        return None

    def _check_stop(self, job_id: JobId) -> None:
        if self.stop.is_set():
            raise Stopped(f"job {job_id}: audit stopped; it is done again on restart")

    def _probe(self, job_id: JobId, replay: TraceReplay, tree: ProbeTree, seal: ReportSeal, index: int) -> Finding | None:
        self._check_stop(job_id)
        probe = tree.probe(index)
        truth = state_hash(replay.state(probe.segment, probe.step))
        ok = truth == probe.state_hash
        log.info("probe replayed", extra={"job": job_id, "probe": index, "segment": probe.segment, "step": probe.step, "ok": ok})
        if ok:
            return None
        detail = f"probe {index}: state after step {probe.step} of segment {probe.segment} is {hex32(truth)}, the report says {hex32(probe.state_hash)}"
        return Finding(FindingKind.PROBE, index, probe.segment, detail, probe.step, probe.state_hash, tuple(tree.proof(index)), seal)

    def _segment(self, job_id: JobId, replay: TraceReplay, segment: int) -> Finding | None:
        self._check_stop(job_id)
        verdict = replay.segment(segment)
        log.info(SEGMENT_REPLAYED, extra={"job": job_id, "segment": segment, "passed": verdict.passed, "reason": verdict.reason.value})
        return None if verdict.passed else Finding(FindingKind.SEGMENT, segment, segment, verdict.detail)


def _off_step(probe: Probe, fixed_step: int, tree: ProbeTree, seal: ReportSeal) -> Finding:
    """A probe at another step than the draw fixed is a fault without replay: the referees of its
    report game rule against the defender on the game's shape (``rolebase.dispute.vote_from_shape``);
    a verifier that did not replay could otherwise state a copyable checkpoint."""
    detail = f"probe {probe.index} is at step {probe.step} of segment {probe.segment}; the draw fixed step {fixed_step}"
    return Finding(FindingKind.PROBE, probe.index, probe.segment, detail, probe.step, probe.state_hash, tuple(tree.proof(probe.index)), seal)
