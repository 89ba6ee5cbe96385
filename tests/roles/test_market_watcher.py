"""The market watcher on a real anvil: what a job was posted with, committed to and reported on is
read from the logs once for every reader of a role, looked up by the committed root (a report: the
latest draw's), and read again when the chain went back under it (a reverted snapshot here; a reorg
or a restart from a dump alike)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from core.cid import digest_to_cid
from core.contracts import Bytes32, JobMarket, Role, TraceCommitment
from core.probe import Probe
from deploy.devnet import Devnet
from rolebase.watchers import MarketWatcher, NotInLogs
from tests.chain.test_lifecycle import MANIFEST, MODEL, REPORT, ROOT, SPEC, post, stake
from tests.chain.test_probes_onchain import ZERO, _drawn, _entries, _probes

if TYPE_CHECKING:
    from tests.conftest import Parties

OTHER_ROOT = Bytes32(b"\x55" * 32)


def _counting_logs(market: JobMarket, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the logs ``market`` is asked for from now on, in order."""
    reads: list[str] = []
    logs = market.events

    def counted(name: str, *args: Any, **filters: Any) -> Any:
        reads.append(name)
        return logs(name, *args, **filters)

    monkeypatch.setattr(market, "events", counted)
    return reads


def test_a_jobs_commitment_is_read_once_by_root_and_again_after_the_chain_went_back(devnet: Devnet, parties: Parties, monkeypatch: pytest.MonkeyPatch) -> None:
    proto = devnet.protocol(parties.submitter)
    stake(proto, parties.solver, Role.SOLVER)
    job_id, _ = post(proto, parties.submitter)
    solver = proto.with_signer(parties.solver).market
    solver.claim(job_id)
    before_commit = devnet.chain.snapshot()
    solver.commit(job_id, ROOT, 9, MODEL, MANIFEST)

    watcher = MarketWatcher(proto.market, proto.book.deploy_block)
    reads = _counting_logs(proto.market, monkeypatch)
    assert watcher.commitment(job_id, Bytes32(ROOT)) == TraceCommitment(parties.solver.address, Bytes32(ROOT), 9, digest_to_cid(MODEL), digest_to_cid(MANIFEST))
    assert watcher.spec_cid(job_id) == SPEC and not watcher.posted_full_replay(job_id)
    assert reads == ["JobPosted", "TraceCommitted", "VerifierAssigned", "ReportSubmitted"]  # each log once, for the posting and the commitment
    for _ in range(3):  # the loader's tick, a worker's replay, a referee's vote: no log read again
        watcher.commitment(job_id, Bytes32(ROOT))
        watcher.spec_cid(job_id)
    assert len(reads) == 4
    with pytest.raises(NotInLogs, match="no TraceCommitted event under root 0x5555"):
        watcher.commitment(job_id, OTHER_ROOT)  # not committed: the blocks since are read, nothing found

    devnet.chain.revert(before_commit)  # the commit undone; another root committed in its place, and the chain grows past where it was
    solver.commit(job_id, OTHER_ROOT, 5, MODEL, MANIFEST)
    devnet.chain.mine(5)
    again = watcher.commitment(job_id, OTHER_ROOT)
    assert again.trace_root == OTHER_ROOT and again.checkpoint_count == 5
    with pytest.raises(NotInLogs, match="no TraceCommitted event under root"):
        watcher.commitment(job_id, Bytes32(ROOT))  # the undone commitment is handed out no more
    assert watcher.spec_cid(job_id) == SPEC


def test_the_current_report_is_the_latest_draws_and_read_again_after_the_chain_went_back(
    devnet: Devnet, parties: Parties, monkeypatch: pytest.MonkeyPatch
) -> None:
    job_id, assigned = _drawn(devnet, parties)
    proto = devnet.protocol()
    watcher = MarketWatcher(proto.market, proto.book.deploy_block)
    assert watcher.draw(job_id) == assigned and watcher.report(job_id) is None and watcher.sealed_report(job_id) is None  # drawn, not reported

    seed = Bytes32(bytes(assigned.args["assignSeed"]))
    tree = _probes(seed, proto.market.params().probe_count)
    before_report = devnet.chain.snapshot()
    verifier = devnet.protocol(parties.verifier).market
    verifier.report(job_id, True, REPORT, seed, ZERO, _entries(tree))
    reads = _counting_logs(proto.market, monkeypatch)
    sealed = watcher.sealed_report(job_id)
    assert sealed == proto.market.sealed_report(job_id, proto.book.deploy_block) and sealed is not None  # the index and a scan agree
    assert sealed[0].probe_root == tree.root and sealed[1] == _entries(tree)
    assert watcher.seal(job_id) == sealed[0] and watcher.seal(job_id) == sealed[0]
    assert reads.count("ReportSubmitted") == 2  # the index read the new block once; the scan once; the two seals nothing

    devnet.chain.revert(before_report)  # the report undone; another made in its place, and the chain grows past where it was
    other = [Probe(p.index, p.segment, p.step, Bytes32(b"\x66" * 32)) for p in _entries(tree)]
    verifier.report(job_id, True, REPORT, seed, ZERO, other)
    devnet.chain.mine(3)
    again = watcher.sealed_report(job_id)
    assert again is not None and again[1] == other and again[0].probe_root != tree.root
