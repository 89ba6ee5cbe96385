"""The whistleblower's challenge is sent once: the responder re-reads the chain and skips a fault already
challenged (a kill after the mined open and before the local record), a stale report or a job no longer Verified."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from core.chain import Address
from core.cid import cid_to_digest
from core.contracts import Bytes32, GameId, JobId, JobState, ReportSeal
from core.storage import file_cid
from proofs.merkle import TraceTree
from proofs.probes import Probe, ProbeTree
from whistleblower.policy import Challenge, Finding, FindingKind
from whistleblower.responder import WhistleblowerResponder
from whistleblower.state import WhistleblowerDb

ME = Address("0x000000000000000000000000000000000000bEEF")
JOB = JobId(7)
CID = file_cid(b"a report")
HASHES = [Bytes32(bytes([i + 1]) * 32) for i in range(4)]
PROBES = [Probe(i, i % 3, 2, Bytes32(bytes([9 + i]) * 32)) for i in range(4)]
TREE = ProbeTree(PROBES)
SEAL = ReportSeal(Bytes32(b"\x05" * 32), Bytes32(b"\x00" * 32), TREE.root)
PROBE = Finding(FindingKind.PROBE, 1, PROBES[1].segment, "wrong", PROBES[1].step, PROBES[1].state_hash, tuple(TREE.proof(1)), SEAL)
#: The seal the chain would give now; a finding's own seal is the one its audit read the probe root from.
CHAIN_SEAL = ReportSeal(Bytes32(b"\x06" * 32), Bytes32(b"\x00" * 32), TREE.root)


class _Game:
    address = Address("0x0000000000000000000000000000000000000d15")

    def __init__(self) -> None:
        self.opened: list[tuple[Any, ...]] = []

    def params(self) -> Any:
        return SimpleNamespace(challenge_bond=20)

    def open_on_report(self, job_id: JobId, *args: Any) -> tuple[GameId, Any]:
        self.opened.append((job_id, *args))
        return GameId(len(self.opened)), SimpleNamespace(gas_used=1, tx_hash="0x00")


def _responder(
    tmp_path: Path, *, state: JobState = JobState.VERIFIED, challenged: frozenset[tuple[FindingKind, int]] = frozenset(), report_cid: str = CID
) -> tuple[WhistleblowerResponder, _Game, WhistleblowerDb]:
    game = _Game()
    market = SimpleNamespace(get_job=lambda job_id: SimpleNamespace(state=state))
    token = SimpleNamespace(allowance=lambda owner, spender: 10**30)
    protocol = SimpleNamespace(market=market, game=game, token=token, book=SimpleNamespace(deploy_block=0))
    report = SimpleNamespace(args={"reportCid": cid_to_digest(report_cid)}, block_number=5)
    loader = SimpleNamespace(current_report=lambda job_id, job: report, challenged=lambda job_id, since: challenged)
    manifest = SimpleNamespace(state_hashes=HASHES, tree=lambda: TraceTree(HASHES))
    replayer = SimpleNamespace(material=lambda job_id: SimpleNamespace(manifest=manifest))
    auditor = SimpleNamespace(watcher=SimpleNamespace(seal=lambda job_id: CHAIN_SEAL))  # what the logs say
    db = WhistleblowerDb(tmp_path / "state.sqlite")
    return WhistleblowerResponder(protocol, db, auditor, replayer, loader, ME), game, db  # type: ignore[arg-type]


@pytest.mark.parametrize(("finding", "sealed"), [(PROBE, SEAL), (replace(PROBE, seal=None), CHAIN_SEAL)])
def test_a_wrong_probe_opens_one_report_game_with_the_probe_and_its_start(tmp_path: Path, finding: Finding, sealed: ReportSeal) -> None:
    """The game opens against the seal the finding carries (the audit read it), and only a finding kept
    before findings carried one reads it from the chain."""
    responder, game, db = _responder(tmp_path)
    responder.perform(Challenge(JOB, CID, finding))
    ((job_id, seal, index, segment, step, state_hash, proof, start_hash, start_proof),) = game.opened
    assert (job_id, seal, index, segment, step) == (JOB, sealed, 1, PROBES[1].segment, PROBES[1].step)
    assert state_hash == PROBES[1].state_hash and proof == TREE.proof(1)
    assert start_hash == HASHES[segment] and start_proof == TraceTree(HASHES).proof(segment)
    assert [(c.game_id, c.kind, c.index) for c in db.challenges()] == [(1, FindingKind.PROBE, 1)]
    db.close()


@pytest.mark.parametrize(
    "over",
    [
        {"challenged": frozenset({(FindingKind.PROBE, 1)})},  # opened before a restart: read from the chain
        {"state": JobState.DISPUTED},  # someone else's game runs
        {"report_cid": file_cid(b"another report")},  # re-verified since the view: the next tick decides
    ],
)
def test_nothing_is_sent_twice_or_on_a_stale_view(tmp_path: Path, over: dict[str, Any]) -> None:
    responder, game, db = _responder(tmp_path, **over)
    responder.perform(Challenge(JOB, CID, PROBE))
    assert game.opened == [] and db.challenges() == []
    db.close()
