"""The whistleblower's audit on a real (tiny) trace, the chain and the verifier's replayer stood in for by stubs:
a true report has no fault; a wrong probe, a probe off its step and a bad segment are each found with what
their challenge needs; the probes come from the chain, so a missing or malformed report JSON still has
them audited; probes that do not build the sealed root defer; the budget and a stop are handled; a checkpoint nobody serves
is awaited, then challenged, and one published on chain is audited from there."""

from __future__ import annotations

import json
from dataclasses import replace
from types import SimpleNamespace
from typing import Any

import pytest

from core.agent import StopFlag, Stopped
from core.availability import AVAILABILITY_WAIT_S, ContentPending, ContentUnavailable
from core.chain import Address
from core.cid import Cid, digest_to_cid
from core.contracts import MANIFEST_ITEM, Bytes32, JobId, ReportSeal, TraceCommitment
from core.storage import LocalStore
from core.storage.unixfs import file_cid
from proofs.adversary import cheat
from proofs.checkpoint import state_hash
from proofs.data import load_dataset
from proofs.datasets import reference_job
from proofs.merkle import hex32
from proofs.probes import Probe, ProbeTree, probe_json, probe_positions, verify_probe
from proofs.steps import state_at
from proofs.train import Runtime, Trace, train_trace
from rolebase.dispute import JobMaterial
from whistleblower.audit import AuditDeferred, Auditor
from whistleblower.policy import FindingKind

JOB = JobId(3)
SEED = Bytes32(b"\x05" * 32)
PROBES = 4
NOW = 1_000_000
WINDOW_END = 2**40  # the job's challenge window: far off


class _Replayer:
    """``DisputeReplayer.material``: the job's spec, dataset and manifest, as checked against the chain,
    and its ``rt`` (the CPU)."""

    rt = Runtime()

    def __init__(self, material: JobMaterial) -> None:
        self._material = material

    def material(self, job_id: JobId) -> JobMaterial:
        return self._material


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Any:
    store = LocalStore(tmp_path_factory.mktemp("store"))
    ref = reference_job("mlp-spirals", steps=60, checkpoint_interval=10)
    spec = ref.spec(store.put(ref.dataset))
    dataset = load_dataset(spec, ref.dataset)
    return SimpleNamespace(store=store, spec=spec, dataset=dataset, honest=train_trace(spec, dataset, put=store.put), root=tmp_path_factory.mktemp("stores"))


def _probes(job: Any, trace: Trace) -> list[Probe]:
    k = job.spec.checkpoint_interval
    positions = probe_positions(SEED, PROBES, len(trace.state_hashes), k)
    return [Probe(i, s, m, state_hash(state_at(job.spec, job.dataset, trace.checkpoints[s], s * k + m))) for i, s, m in positions]


def _audit(
    job: Any,
    trace: Trace,
    probes: list[Probe],
    *,
    budget: int = 10_000,
    stop: StopFlag | None = None,
    body: bytes | None = None,
    stored: bool = True,
    root: Bytes32 | None = None,
    withheld: int | None = None,
    published: bytes | None = None,
    window_end: int = WINDOW_END,
    trace_root: Bytes32 | None = None,
    manifest_published: bool = False,
) -> Any:
    """Audit a report of ``probes`` (emitted on chain) on ``trace`` (its checkpoints stored); its JSON
    (``body``, by default one that says the verifier replayed segment 5) stored unless not ``stored``;
    ``root``: the sealed probe root when it is not the probes'; checkpoint ``withheld`` is not in the
    store the audit reads (a copy of the job's), ``published`` the copy on chain of that item;
    ``trace_root``: the committed root when it is not the manifest's, ``manifest_published``: whether
    the manifest is published on chain."""
    spec_cid = job.store.put(job.spec.canonical_bytes())
    manifest = trace.manifest(spec_cid, [job.store.put(c) for c in trace.checkpoints])
    store = job.store
    if withheld is not None:
        store = LocalStore(job.root / f"withheld-{withheld}-{published is not None}-{window_end}")
        for i, c in enumerate(trace.checkpoints):
            if i != withheld:
                store.put(c)
    tree = ProbeTree(probes)
    seal = ReportSeal(SEED, Bytes32(b"\x00" * 32), root or tree.root)
    emitted = [replace(p, index=i) for i, p in enumerate(probes)]  # as sealed_report gives them: slot i at i
    committed = TraceCommitment(
        Address("0x" + "11" * 20), manifest.root, len(trace.state_hashes), Cid(manifest.final_cid), job.store.put(manifest.canonical_bytes())
    )
    watcher = SimpleNamespace(commitment=lambda job_id, root: committed, sealed_report=lambda job_id: (seal, emitted))  # what the logs say
    market = SimpleNamespace(
        is_published=lambda job_id, item: item == MANIFEST_ITEM and manifest_published,
        published=lambda job_id, item, from_block=0: [published] if item == withheld and published is not None else [],
    )
    protocol = SimpleNamespace(market=market, book=SimpleNamespace(deploy_block=0), client=SimpleNamespace(timestamp=lambda: NOW))
    report = body or json.dumps({"passed": True, "probes": [probe_json(p) for p in probes], "probe_root": hex32(tree.root), "segments": [5]}).encode()
    cid = job.store.put(report) if stored else digest_to_cid(b"\x99" * 32)  # never published
    if withheld is not None:
        store.put(manifest.canonical_bytes())
    auditor = Auditor(protocol, store, watcher, _Replayer(JobMaterial(job.spec, job.dataset, manifest)), stop or StopFlag(), b"\x07" * 32, budget)  # type: ignore[arg-type]
    return auditor.audit(JOB, cid, window_end, trace_root or manifest.root)  # as the view read the job: the audit reads it no more


def test_a_true_report_on_an_honest_trace_has_no_fault(job: Any) -> None:
    probes = _probes(job, job.honest)
    record = _audit(job, job.honest, probes)
    assert record.findings == ()
    assert record.replayed_steps == sum(p.step for p in probes) + 6 * 10  # every probe and every segment


def test_a_trace_with_a_free_start_is_a_fault_on_segment_0(job: Any) -> None:
    """Every segment replays from the cheater's own start, every probe is true: only the bound start tells."""
    faked = cheat("free-start", job.spec, job.dataset).trace
    record = _audit(job, faked, _probes(job, faked), body=json.dumps({"passed": True, "segments": [0, 5]}).encode())
    assert [(f.kind, f.segment) for f in record.findings] == [(FindingKind.SEGMENT, 0)]
    assert "seeded initialization" in record.findings[0].detail


def test_a_wrong_probe_is_found_with_its_proof_under_the_sealed_root(job: Any) -> None:
    probes = _probes(job, job.honest)
    probes[2] = replace(probes[2], state_hash=job.honest.state_hashes[probes[2].segment + 1])  # a lazy guess
    record = _audit(job, job.honest, probes)
    (finding,) = record.findings
    assert (finding.kind, finding.index, finding.segment, finding.step) == (FindingKind.PROBE, 2, probes[2].segment, probes[2].step)
    assert verify_probe(ProbeTree(probes).root, probes[2], finding.proof)
    assert finding.seal is not None and finding.seal.probe_root == ProbeTree(probes).root  # the challenge opens against it


def test_a_probe_off_the_step_the_draw_fixed_is_a_fault_without_replay(job: Any) -> None:
    probes = _probes(job, job.honest)
    k = job.spec.checkpoint_interval
    off = probes[1].step % (k - 1) + 1  # another inner step of the same segment
    probes[1] = replace(
        probes[1],
        step=off,
        state_hash=state_hash(state_at(job.spec, job.dataset, job.honest.checkpoints[probes[1].segment], probes[1].segment * k + off)),
    )
    (finding,) = _audit(job, job.honest, probes).findings
    assert finding.kind is FindingKind.PROBE and finding.index == 1 and "the draw fixed" in finding.detail


def test_the_first_bad_segment_of_a_cheating_trace_is_found_and_ends_the_audit(job: Any) -> None:
    faked = cheat("tamper", job.spec, job.dataset)  # checkpoint 3 tampered: segments 2 and 3 fail
    probes = _probes(job, faked.trace)
    record = _audit(job, faked.trace, probes)
    assert [(f.kind, f.index) for f in record.findings] == [(FindingKind.SEGMENT, 2)]
    assert "stopped at the first fault" in record.summary and "3 segments replayed" in record.summary
    assert record.replayed_steps == sum(p.step for p in probes) + 3 * 10  # segments 0, 1 and 2; not 3 to 5


def test_the_budget_bounds_the_replay_and_says_what_it_left_out(job: Any) -> None:
    probes = _probes(job, job.honest)
    budget = sum(p.step for p in probes) + 10  # the probes and one segment: the verifier's
    record = _audit(job, job.honest, probes, budget=budget)
    assert record.replayed_steps == budget and "5 units over budget" in record.summary


@pytest.mark.parametrize("body", [b'{"passed": true, "segments": [99]}', b"{not json"])
def test_a_malformed_report_json_still_has_its_probes_audited(job: Any, body: bytes) -> None:
    probes = _probes(job, job.honest)
    probes[0] = replace(probes[0], state_hash=job.honest.state_hashes[probes[0].segment + 1])
    record = _audit(job, job.honest, probes, body=body)
    assert [(f.kind, f.index) for f in record.findings] == [(FindingKind.PROBE, 0)]
    assert "no claimed segments" in record.summary


def test_a_missing_report_json_still_has_its_probes_audited(job: Any) -> None:
    probes = _probes(job, job.honest)
    probes[3] = replace(probes[3], state_hash=job.honest.state_hashes[probes[3].segment + 1])
    record = _audit(job, job.honest, probes, stored=False)
    (finding,) = record.findings
    assert (finding.kind, finding.index) == (FindingKind.PROBE, 3) and verify_probe(ProbeTree(probes).root, probes[3], finding.proof)
    assert record.replayed_steps == sum(p.step for p in probes)  # the probes: the fault in the last ends the audit before its own picks
    assert "ContentNotFound" in record.summary


def test_probes_that_do_not_build_the_sealed_root_mean_a_node_behind(job: Any) -> None:
    with pytest.raises(AuditDeferred, match="seal holds"):
        _audit(job, job.honest, _probes(job, job.honest), root=Bytes32(b"\xee" * 32))


def test_a_stop_ends_the_audit_before_the_next_replay(job: Any) -> None:
    stop = StopFlag()
    stop.set()
    with pytest.raises(Stopped):
        _audit(job, job.honest, _probes(job, job.honest), stop=stop)


def test_an_unserved_checkpoint_waits_its_grace_then_is_challenged(job: Any) -> None:
    """Checkpoint 2 is in no store and not on chain: the audit defers while it may be on its way, and
    challenges it at once when the window is too near its end to wait."""
    probes = _probes(job, job.honest)
    with pytest.raises(ContentPending, match="checkpoint 2 .* is not served yet"):
        _audit(job, job.honest, probes, withheld=2)
    with pytest.raises(ContentUnavailable, match="checkpoint 2 .* is not served: challenging its availability") as raised:
        _audit(job, job.honest, probes, withheld=2, window_end=NOW + int(AVAILABILITY_WAIT_S))
    assert (raised.value.job_id, raised.value.item) == (JOB, 2)


def test_a_checkpoint_published_on_chain_is_audited_from_there_and_kept(job: Any) -> None:
    record = _audit(job, job.honest, _probes(job, job.honest), withheld=2, published=job.honest.checkpoints[2])
    assert record.findings == () and record.replayed_steps > 0  # every unit replayed, segment 2 from the chain's copy
    assert LocalStore(job.root / f"withheld-2-True-{WINDOW_END}").has(file_cid(job.honest.checkpoints[2])), "kept for the replayer and later readers"


def test_a_checkpoint_published_for_another_trace_is_not_taken(job: Any) -> None:
    with pytest.raises(ContentUnavailable, match="checkpoint 2"):
        _audit(job, job.honest, _probes(job, job.honest), withheld=2, published=job.honest.checkpoints[3], window_end=NOW)


def test_a_manifest_with_another_root_is_challenged_then_is_the_audits_one_finding(job: Any) -> None:
    """No leaves to audit from: the manifest must be on chain for the referees, then it is disputed whole."""
    probes = _probes(job, job.honest)
    with pytest.raises(ContentUnavailable, match="is not the committed root") as raised:
        _audit(job, job.honest, probes, trace_root=Bytes32(b"\x09" * 32))
    assert raised.value.item == MANIFEST_ITEM
    record = _audit(job, job.honest, probes, trace_root=Bytes32(b"\x09" * 32), manifest_published=True)
    assert [(f.kind, f.index) for f in record.findings] == [(FindingKind.MANIFEST, 0)] and record.replayed_steps == 0
    assert "is not the committed root" in record.findings[0].detail
