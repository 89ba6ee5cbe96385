"""The verifier's report on a real (tiny) trace, the chain stood in for by a stub: the sample is
seeded by the assign seed, the probes are the true states at the steps the seed fixes, a forced
job publishes probe 0 as ``forced_hash`` of the truth with the verdict unchanged, and the lazy
test adversary passes with guessed probes that a replay tells apart."""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import pytest
from safetensors.torch import save

from core.agent import StopFlag
from core.availability import ContentUnavailable
from core.cid import cid_to_digest
from core.contracts import MANIFEST_ITEM, Bytes32, JobId
from core.dispute import ZERO32
from core.errors import VeritrainError
from core.storage import LocalStore
from proofs.adversary import cheat
from proofs.checkpoint import decode_checkpoint, encode_checkpoint, state_hash
from proofs.data import load_dataset
from proofs.datasets import reference_job
from proofs.merkle import TraceTree, hex32
from proofs.numerics import profile
from proofs.probes import Probe, ProbeTree, forced_hash, parse_probe, probe_positions
from proofs.spec import JobSpec, load_spec
from proofs.steps import state_at
from proofs.train import Runtime, Trace, train_trace
from rolebase.inputs import fetch_dataset
from rolebase.watchers import MarketWatcher
from verifier.adversary import strategies
from verifier.policy import Draw
from verifier.work import published_probes

JOB = JobId(3)
FAR = 2**32 - 1
SEED = Bytes32(b"\x05" * 32)  # probes on segments 1, 4, 3, 0 of 6: four replays beside the sample
PROBES = 4


@dataclass(frozen=True)
class _Event:
    args: dict[str, Any]


class _Market:
    """The little of ``JobMarket`` the trace verifier reads: the job's root, its events (``TraceCommitted``
    under the job's root, as the chain emits it), ``probeCount``, whether the manifest is published on chain."""

    def __init__(self, root: bytes, events: dict[str, dict[str, Any]]) -> None:
        self.root = root
        self._events = events
        self.manifest_published = False
        self.full_replay = False
        self.client = SimpleNamespace(block_number=lambda: 1, block_hash=lambda number: "0x01")

    def is_full_replay(self, job_id: JobId) -> bool:
        return self.full_replay

    def is_published(self, job_id: JobId, item: int) -> bool:
        return item == MANIFEST_ITEM and self.manifest_published

    def published(self, job_id: JobId, item: int, from_block: int = 0) -> list[bytes]:
        return []  # the copy on chain is the store's (the availability tests run it on anvil)

    def get_job(self, job_id: JobId) -> Any:
        return SimpleNamespace(trace_root=self.root)

    def events(self, name: str, from_block: int, to_block: int | None = None, **filters: Any) -> list[_Event]:
        if name not in self._events:
            return []
        return [_Event({"jobId": JOB, "solver": "0x" + "11" * 20, "traceRoot": self.root, "fullReplay": False, **self._events[name]})]

    def params(self) -> Any:
        return SimpleNamespace(probe_count=PROBES)


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory) -> Any:
    store = LocalStore(tmp_path_factory.mktemp("store"))
    ref = reference_job("mlp-spirals", steps=60, checkpoint_interval=10)
    spec = ref.spec(store.put(ref.dataset))
    dataset = load_dataset(spec, ref.dataset)
    truth = train_trace(spec, dataset, put=store.put)
    probes = [
        Probe(i, s, m, state_hash(state_at(spec, dataset, truth.checkpoints[s], s * spec.checkpoint_interval + m)))
        for i, s, m in probe_positions(SEED, PROBES, len(truth.state_hashes), spec.checkpoint_interval)
    ]
    return SimpleNamespace(store=store, spec=spec, dataset=dataset, trace=truth, truth=probes, protocol=_chain(store, spec, truth))


def _chain(store: LocalStore, spec: JobSpec, trace: Trace) -> Any:
    """A stub of the protocol on which ``trace`` (its checkpoints stored) was committed for ``spec``."""
    spec_cid = store.put(spec.canonical_bytes())
    manifest = trace.manifest(spec_cid, [store.put(c) for c in trace.checkpoints])
    manifest_cid = store.put(manifest.canonical_bytes())
    market = _Market(trace.root, {
        "JobPosted": {"specCid": cid_to_digest(spec_cid)},
        "TraceCommitted": {"manifestCid": cid_to_digest(manifest_cid), "checkpointCount": len(trace.state_hashes),
                           "finalModelCid": cid_to_digest(manifest.final_cid)},
    })  # fmt: skip
    return SimpleNamespace(market=market, book=SimpleNamespace(deploy_block=0), client=SimpleNamespace(timestamp=lambda: 0))


def _watcher(protocol: Any) -> MarketWatcher:
    return MarketWatcher(protocol.market, protocol.book.deploy_block)


def _report(job: Any, draw: Draw, protocol: Any = None, *, q: int = 1, r: int = 1, **adversary: bool) -> tuple[Any, dict[str, Any]]:
    inspector_class, _ = strategies(lie=adversary.get("lie", False), lazy=adversary.get("lazy", False))
    inspector = inspector_class(protocol or job.protocol, job.store, _watcher(protocol or job.protocol), StopFlag(), q=q, r=r)
    verdict = inspector.inspect(JOB, FAR, draw)
    return verdict, json.loads(job.store.get(verdict.report_cid, 1 << 20))


def test_an_honest_report_commits_to_the_true_probes_of_the_assign_seed(job: Any) -> None:
    verdict, report = _report(job, Draw(SEED))
    assert verdict.passed and report["passed"] and report["assign_seed"] == "0x" + SEED.hex()
    assert [parse_probe(p) for p in report["probes"]] == job.truth
    assert report["probe_root"] == hex32(ProbeTree(job.truth).root) == "0x" + verdict.probe_root.hex()  # hex in the JSON
    assert {p.segment for p in job.truth} <= set(report["segments"])  # every probe segment is replayed too
    assert "forced" not in json.dumps(report)


def test_a_forced_report_publishes_probe_0_wrong_and_keeps_its_verdict(job: Any) -> None:
    honest, _ = _report(job, Draw(SEED))
    verdict, report = _report(job, Draw(SEED, Bytes32(b"\x01" * 32), forced=True))
    shown = [parse_probe(p) for p in report["probes"]]
    assert verdict.passed and shown[0].state_hash == forced_hash(job.truth[0].state_hash) and shown[1:] == job.truth[1:]
    assert verdict.probe_root == ProbeTree(shown).root != honest.probe_root
    assert set(report) == set(_report(job, Draw(SEED))[1])  # no field tells a forced report from another


def test_published_probes_replace_only_probe_0_and_only_when_forced() -> None:
    probes = [Probe(i, i, 1, Bytes32(bytes([i + 1]) * 32)) for i in range(3)]
    assert published_probes(probes, forced=False) == probes
    forced = published_probes(probes, forced=True)
    assert forced[0] == Probe(0, 0, 1, forced_hash(probes[0].state_hash)) and forced[1:] == probes[1:]


def test_a_lazy_verifier_passes_with_guessed_probes_that_a_replay_refutes(job: Any) -> None:
    verdict, report = _report(job, Draw(SEED), lazy=True)
    shown = [parse_probe(p) for p in report["probes"]]
    assert verdict.passed and verdict.probe_root != ZERO32
    assert [p.state_hash for p in shown] == [job.trace.state_hashes[p.segment + 1] for p in job.truth]
    assert all(guess.state_hash != true.state_hash for guess, true in zip(shown, job.truth, strict=True))


def test_a_trace_wrong_in_a_probe_segment_fails_there_without_a_probe_tree(job: Any) -> None:
    bad = job.truth[0].segment
    faked = cheat("wrong-lr", job.spec, job.dataset, segments=(bad,))
    verdict, report = _report(job, Draw(SEED), _chain(job.store, job.spec, faked.trace), q=0, r=0)
    assert report["segments"] == sorted({p.segment for p in job.truth} | {5})  # the last segment and the probes' only
    assert not verdict.passed and verdict.failed_segment == bad  # a probe segment is replayed: the cheat is caught there
    assert verdict.probe_root == ZERO32 and report["probes"] == []  # no true state inside a segment that does not replay


def test_a_trace_with_a_free_start_fails_on_segment_0_before_any_replay(job: Any) -> None:
    faked = cheat("free-start", job.spec, job.dataset)
    verdict, report = _report(job, Draw(SEED), _chain(job.store, job.spec, faked.trace), q=0, r=0)
    assert not verdict.passed and verdict.failed_segment == 0  # the game opens on segment 0, which the referees settle on the start
    assert [v["reason"] for v in report["verdicts"]] == ["wrong-start"] and "seeded initialization" in verdict.summary


def _committed(job: Any, **changes: Any) -> Any:
    """The honest job's chain, with the ``TraceCommitted`` fields in ``changes`` committed instead."""
    events = {name: dict(args) for name, args in job.protocol.market._events.items()}
    events["TraceCommitted"].update(changes)
    return SimpleNamespace(market=_Market(job.protocol.market.root, events), book=job.protocol.book, client=job.protocol.client)


@pytest.mark.parametrize(
    ("changes", "detail"),
    [
        ({"finalModelCid": "first"}, "is not the committed model"),  # the submitter would get checkpoint 0, not the trained model
        ({"checkpointCount": 3}, "7 checkpoints, 3 were committed"),
    ],
)
def test_a_manifest_that_is_not_the_committed_trace_fails_segment_0_before_any_replay(job: Any, changes: dict[str, Any], detail: str) -> None:
    if changes.get("finalModelCid") == "first":
        changes = {"finalModelCid": cid_to_digest(job.store.put(job.trace.checkpoints[0]))}
    verdict, report = _report(job, Draw(SEED), _committed(job, **changes))
    assert not verdict.passed and verdict.failed_segment == 0  # the game opens on segment 0 from the manifest's own leaves
    assert [v["reason"] for v in report["verdicts"]] == ["malformed-manifest"] and detail in verdict.summary
    assert "segments" not in report, "nothing replayed"


def test_a_manifest_whose_root_is_not_the_committed_one_is_challenged_then_fails_on_the_manifest_itself(job: Any) -> None:
    protocol = _committed(job)
    protocol.market.root = b"\x09" * 32
    with pytest.raises(ContentUnavailable) as unavailable:  # the referees of a manifest game need it on chain
        _report(job, Draw(SEED), protocol)
    assert unavailable.value.item == MANIFEST_ITEM
    protocol.market.manifest_published = True
    verdict, report = _report(job, Draw(SEED), protocol)
    assert not verdict.passed and verdict.failed_segment == MANIFEST_ITEM and "is not the committed root" in verdict.summary
    assert [v["reason"] for v in report["verdicts"]] == ["malformed-manifest"] and "segments" not in report


@pytest.mark.skipif(profile("repro-v1").fault("cuda") is None, reason="this machine runs repro-v1 on cuda")
def test_a_verifier_whose_device_cannot_run_the_jobs_numerics_reports_nothing(job: Any) -> None:
    """``--device cuda`` drawn for a repro-v1 job where numba's CUDA target finds no GPU: one line naming
    the job and its numerics, and no report (an honest trace must not fail for the verifier's device). No GPU needed: refused before any replay."""
    inspector = strategies(lie=False, lazy=False)[0](job.protocol, job.store, _watcher(job.protocol), StopFlag(), q=1, r=1, rt=Runtime(device="cuda"))
    with pytest.raises(VeritrainError, match=r"^job 3: numerics repro-v1 cannot run on cuda here: .*; this role runs with --device cuda$"):
        inspector.inspect(JOB, FAR, Draw(SEED))


def test_a_fine_tuning_job_passes_from_the_named_model_and_fails_from_any_other_start(job: Any) -> None:
    weights = save(decode_checkpoint(job.trace.checkpoints[-1]).params())  # fine-tune the job's trained model
    init = {"cid": job.store.put(weights), "size_bytes": len(weights)}
    spec = load_spec({**job.spec.to_json_dict(), "init": init})
    dataset = fetch_dataset(job.store, spec)  # the weights come from the store, checked against their CID
    honest = train_trace(spec, dataset, put=job.store.put)
    tuned = SimpleNamespace(store=job.store, spec=spec, protocol=_chain(job.store, spec, honest))
    verdict, _ = _report(tuned, Draw(SEED), q=0, r=0)
    assert verdict.passed, verdict.summary
    for faked in (job.trace, cheat("free-start", spec, dataset).trace):  # the seeded start, another seed's start
        verdict, report = _report(tuned, Draw(SEED), _chain(job.store, spec, _restamped(faked, spec)), q=0, r=0)
        assert not verdict.passed and verdict.failed_segment == 0
        assert [v["reason"] for v in report["verdicts"]] == ["wrong-start"] and f"pretrained model {init['cid']}" in verdict.summary


def _restamped(trace: Trace, spec: JobSpec) -> Trace:
    """``trace``'s states stamped with ``spec``'s hash, as a cheater who trained another start would commit them."""
    stamped = [decode_checkpoint(c) for c in trace.checkpoints]
    checkpoints = tuple(encode_checkpoint(c.step, c.tensors, spec.spec_hash()) for c in stamped)
    hashes = tuple(state_hash(c) for c in checkpoints)
    return Trace(spec, hashes, trace.update_norms, trace.losses, TraceTree(hashes), checkpoints)


def _full(protocol: Any) -> Any:
    protocol.market.full_replay = True
    return protocol


class _NoCheckpoints(LocalStore):
    """The solver's store without its checkpoints: a full replay in exact mode needs none."""

    def __init__(self, base: LocalStore, checkpoints: set[str]) -> None:
        super().__init__(base.root)
        self.checkpoints = checkpoints

    def get(self, cid: str, limit: int) -> bytes:
        if cid in self.checkpoints:
            raise AssertionError(f"a full replay fetched checkpoint {cid}")
        return super().get(cid, limit)


def test_a_full_replay_replays_every_segment_from_the_seed_and_fetches_no_checkpoint(job: Any) -> None:
    protocol = _full(_chain(job.store, job.spec, job.trace))
    cids = {job.store.put(c) for c in job.trace.checkpoints}
    inspector = strategies(lie=False, lazy=False)[0](protocol, _NoCheckpoints(job.store, cids), _watcher(protocol), StopFlag(), q=0, r=0)
    verdict = inspector.inspect(JOB, FAR, Draw(SEED))
    report = json.loads(job.store.get(verdict.report_cid, 1 << 20))
    assert verdict.passed and report["full_replay"] is True
    assert report["segments"] == list(range(job.spec.segments)) == [v["segment"] for v in report["verdicts"]]
    assert [parse_probe(p) for p in report["probes"]] == job.truth  # the probes the sampled replay states


@pytest.mark.parametrize("bad", [2, 5])
def test_a_full_replay_catches_one_bad_segment_the_sample_misses(job: Any, bad: int) -> None:
    faked = cheat("wrong-lr", job.spec, job.dataset, segments=(bad,))
    sampled, report = _report(job, Draw(SEED), _chain(job.store, job.spec, faked.trace), q=0, r=0)
    if bad == 2:  # neither sampled nor probed: the sample passes it
        assert sampled.passed and bad not in report["segments"]
    verdict, report = _report(job, Draw(SEED), _full(_chain(job.store, job.spec, faked.trace)), q=0, r=0)
    assert not verdict.passed and verdict.failed_segment == bad  # the trace game opens at the first mismatch
    assert [v["segment"] for v in report["verdicts"]] == list(range(bad + 1))  # the replay stops there
    assert report["verdicts"][-1]["reason"] == "state-mismatch" and report["probes"] == []


class _Recording(LocalStore):
    """The solver's store, noting every content id read from it."""

    def __init__(self, base: LocalStore) -> None:
        super().__init__(base.root)
        self.read: set[str] = set()

    def get(self, cid: str, limit: int) -> bytes:
        self.read.add(cid)
        return super().get(cid, limit)


def test_a_sample_that_covers_every_segment_still_fetches_every_checkpoint(job: Any) -> None:
    """Only a drawn full replay chains from the seed: a sample that happens to cover every segment of a
    short job fetches its checkpoints like any other, so a solver that withholds them is challenged."""
    store = _Recording(job.store)
    inspector = strategies(lie=False, lazy=False)[0](job.protocol, store, _watcher(job.protocol), StopFlag(), q=job.spec.segments, r=job.spec.segments)
    verdict = inspector.inspect(JOB, FAR, Draw(SEED))
    report = json.loads(job.store.get(verdict.report_cid, 1 << 20))
    assert verdict.passed and "full_replay" not in report
    assert report["segments"] == list(range(job.spec.segments))
    assert {job.store.put(c) for c in job.trace.checkpoints} <= store.read
