"""The verifier's work: fetch what the solver committed, sample segments, replay them, write the report.

Every byte comes from the content store by CID (verified there) and every checkpoint is
also checked against the state hash in the manifest, whose root must be the one on
chain. The segments come from the proofs engine's sampling, seeded by
``keccak256(blockhash(B) || jobId)`` where B is the block of this verifier's
``VerifierAssigned`` event: a hash that did not exist when the solver committed.

A trace the solver does not serve (manifest or checkpoint missing from the store) is
retried on later ticks while the report deadline is comfortably ahead, then judged a
failure: a solver that does not keep its checkpoints available is not paid.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass

from eth_utils import keccak

from core.agent import StopFlag, Stopped
from core.cid import Cid, digest_to_cid
from core.contracts import JobId, Protocol
from core.errors import VeritrainError
from core.storage import ContentNotFound, ContentStore, StorageError
from proofs import (
    DEFAULT_Q,
    DEFAULT_R,
    Dataset,
    Limits,
    ProofError,
    SegmentVerdict,
    choose_segments,
    load_dataset,
    load_spec,
    parse_manifest,
    replay_segment,
)
from proofs.checkpoint import MAX_CHECKPOINT_BYTES
from proofs.manifest import MAX_MANIFEST_BYTES
from proofs.spec import JobSpec

log = logging.getLogger(__name__)

#: While the report deadline is further than this, missing content is retried rather than failed.
UNAVAILABLE_GRACE_S = 30


class InspectionDeferred(VeritrainError):
    """Content the verdict needs is not available yet; the next tick tries again."""


@dataclass(frozen=True)
class Verdict:
    passed: bool
    report_cid: Cid
    summary: str  # e.g. "4/4 segments ok" or the first failure
    failed_segment: int | None = None  # the first failing segment replayed: where the dispute opens


class _Failed(Exception):
    """Internal: the trace is bad before any replay (unserved, inconsistent with the chain)."""


class Inspector:
    def __init__(
        self, protocol: Protocol, store: ContentStore, stop: StopFlag, *, q: int = DEFAULT_Q, r: int = DEFAULT_R, lie: bool = False
    ) -> None:
        self.lie = lie  # TEST adversary: fail every trace, accusing its first replayed segment
        self.protocol = protocol
        self.store = store
        self.stop = stop
        self.q = q
        self.r = r

    def _event(self, name: str, job_id: JobId) -> dict[str, object] | None:
        events = self.protocol.market.events(name, self.protocol.book.deploy_block, jobId=job_id)
        if not events:
            return None
        last = events[-1]
        return {**last.args, "_block": last.block_number}

    def _get(self, cid: str, limit: int, deadline: int, what: str) -> bytes:
        try:
            return self.store.get(cid, limit)
        except ContentNotFound:
            if self.protocol.client.timestamp() < deadline - UNAVAILABLE_GRACE_S:
                raise InspectionDeferred(f"{what} {cid} not available yet") from None
            raise _Failed(f"{what} {cid} was not served before the report deadline") from None
        except StorageError as exc:  # too large, forged: the solver's fault
            raise _Failed(f"{what} {cid}: {exc}") from None

    def inspect(self, job_id: JobId, deadline: int) -> Verdict:
        started = time.monotonic()
        job = self.protocol.market.get_job(job_id)
        committed = self._event("TraceCommitted", job_id)
        posted = self._event("JobPosted", job_id)
        assigned = self._event("VerifierAssigned", job_id)
        if committed is None or posted is None or assigned is None:
            raise VeritrainError(f"job {job_id}: missing JobPosted/TraceCommitted/VerifierAssigned events")
        block_hash = bytes(self.protocol.client.w3.eth.get_block(int(assigned["_block"]))["hash"])  # type: ignore[call-overload]
        seed = keccak(block_hash + int(job_id).to_bytes(32, "big"))
        manifest_cid = digest_to_cid(committed["manifestCid"])  # type: ignore[arg-type]
        report: dict[str, object] = {"job": int(job_id), "manifest": manifest_cid, "seed": "0x" + seed.hex(), "q": self.q, "r": self.r}
        try:
            spec = load_spec(self.store.get(digest_to_cid(posted["specCid"]), Limits.SPEC_BYTES))  # type: ignore[arg-type]
            dataset = load_dataset(spec, self.store.get(spec.dataset.cid, spec.dataset.size_bytes))
        except (ProofError, StorageError) as exc:  # the submitter's spec or data: not the solver's fault
            raise VeritrainError(f"job {job_id}: cannot load spec or dataset: {exc}") from exc
        failed_segment: int | None = None
        try:
            verdicts = self._judge(job_id, spec, dataset, manifest_cid, committed, job.trace_root, deadline, seed, report)
            passed = all(v.passed for v in verdicts)
            failures = [v for v in verdicts if not v.passed]
            summary = f"{len(verdicts) - len(failures)}/{len(verdicts)} segments ok" + (f"; {failures[0].detail}" if failures else "")
            if failures:
                failed_segment = min(v.segment for v in failures)
            elif self.lie and verdicts:
                passed, failed_segment = False, min(v.segment for v in verdicts)
                summary = f"segment {failed_segment} accused by a lying verifier (test adversary)"
        except _Failed as exc:
            passed, summary = False, str(exc)
        except ProofError as exc:  # anything else the engine refuses in what the solver served
            passed, summary = False, f"{type(exc).__name__}: {exc}"
        report.update({"passed": passed, "summary": summary})
        report_cid = self.store.put(json.dumps(report, sort_keys=True).encode())
        log.info("replay done", extra={"job": job_id, "passed": passed, "summary": summary, "seconds": round(time.monotonic() - started, 2)})
        return Verdict(passed, report_cid, summary, failed_segment)

    def _judge(
        self,
        job_id: JobId,
        spec: JobSpec,
        dataset: Dataset,
        manifest_cid: Cid,
        committed: dict[str, object],
        trace_root: bytes,
        deadline: int,
        seed: bytes,
        report: dict[str, object],
    ) -> list[SegmentVerdict]:
        try:
            manifest = parse_manifest(self._get(manifest_cid, MAX_MANIFEST_BYTES, deadline, "manifest"), spec)
        except ProofError as exc:
            raise _Failed(f"manifest {manifest_cid}: {exc}") from None
        if manifest.root != "0x" + bytes(trace_root).hex():
            raise _Failed(f"manifest root {manifest.root} is not the committed root 0x{bytes(trace_root).hex()}")
        if len(manifest.checkpoints) != committed["checkpointCount"]:
            raise _Failed(f"manifest lists {len(manifest.checkpoints)} checkpoints, {committed['checkpointCount']} were committed")
        if manifest.final_cid != digest_to_cid(committed["finalModelCid"]):  # type: ignore[arg-type]
            raise _Failed(f"manifest's final checkpoint {manifest.final_cid} is not the committed model")
        selection = choose_segments(manifest.update_norms, seed, self.q, self.r)
        report["segments"] = list(selection.segments)
        verdicts: list[SegmentVerdict] = []
        cache: dict[int, bytes] = {}
        for segment in selection.segments:
            if self.stop.is_set():
                raise Stopped(f"job {job_id}: replay stopped; it starts again on restart")
            for index in (segment, segment + 1):
                if index not in cache:
                    cache[index] = self._get(manifest.checkpoint_cids[index], MAX_CHECKPOINT_BYTES, deadline, f"checkpoint {index}")
            verdict = replay_segment(
                spec,
                dataset,
                segment,
                cache[segment],
                cache[segment + 1],
                start_hash=manifest.state_hashes[segment],
                end_hash=manifest.state_hashes[segment + 1],
                claimed_norm=manifest.update_norms[segment],
            )
            cache.pop(segment, None)
            verdicts.append(verdict)
            log.info("segment replayed", extra={"job": job_id, "segment": segment, "passed": verdict.passed, "reason": verdict.reason.value})
        report["verdicts"] = [{"segment": v.segment, "passed": v.passed, "reason": v.reason.value, "detail": v.detail} for v in verdicts]
        return verdicts
