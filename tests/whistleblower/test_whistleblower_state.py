"""The whistleblower's SQLite records: audits keyed by report, challenges, the secret, across reopenings."""

from __future__ import annotations

from pathlib import Path

from core.contracts import GameId, JobId, ReportSeal
from core.probe import Bytes32
from whistleblower.policy import Finding, FindingKind
from whistleblower.state import AuditRecord, ChallengeRecord, WhistleblowerDb

SEAL = ReportSeal(Bytes32(b"\x01" * 32), Bytes32(b"\x02" * 32), Bytes32(b"\x03" * 32))
PROBE = Finding(FindingKind.PROBE, 1, 4, "probe 1 wrong", 7, Bytes32(b"\xab" * 32), (Bytes32(b"\xcd" * 32), Bytes32(b"\xef" * 32)), SEAL)


def test_audits_survive_a_reopen_and_are_keyed_by_report(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    db = WhistleblowerDb(path)
    secret = db.secret()
    db.set_audit(AuditRecord(JobId(7), "QmA", (PROBE,), 120, "1 fault"))
    db.set_audit(AuditRecord(JobId(7), "QmB", (), 200, "clean"))  # the job re-verified: another report
    db.add_challenge(ChallengeRecord(GameId(3), JobId(7), "QmA", FindingKind.PROBE, 1))
    db.add_challenge(ChallengeRecord(GameId(3), JobId(7), "QmA", FindingKind.PROBE, 1))  # idempotent
    db.close()

    again = WhistleblowerDb(path)
    assert again.secret() == secret and len(secret) == 32
    first = again.audit(JobId(7), "QmA")
    assert first is not None and first.findings == (PROBE,) and first.replayed_steps == 120
    assert again.audit(JobId(7), "QmB") == AuditRecord(JobId(7), "QmB", (), 200, "clean")
    assert again.audit(JobId(8), "QmA") is None
    assert again.challenges() == [ChallengeRecord(GameId(3), JobId(7), "QmA", FindingKind.PROBE, 1)]
    assert again.audited_jobs() == {7}
    again.mark_final([JobId(7)])
    again.forget(JobId(7))
    assert again.audits() == [] and again.final_jobs() == {7}
    assert len(again.challenges()) == 1  # kept for status
    again.close()


def test_a_finding_round_trips_through_json() -> None:
    assert Finding.from_json(PROBE.to_json()) == PROBE and PROBE.to_json()["seal"] == ["0x" + "01" * 32, "0x" + "02" * 32, "0x" + "03" * 32]
    kept_before = {k: v for k, v in PROBE.to_json().items() if k != "seal"}  # a record from before findings carried the seal
    assert Finding.from_json(kept_before).seal is None
    assert (PROBE.to_json()["state_hash"], PROBE.to_json()["proof"]) == ("0x" + "ab" * 32, ["0x" + "cd" * 32, "0x" + "ef" * 32])  # hex in the JSON
    segment = Finding(FindingKind.SEGMENT, 2, 2, "segment 2 fails")
    assert Finding.from_json(segment.to_json()) == segment and segment.to_json()["state_hash"] == ""
