"""The whistleblower's local records (SQLite).

* ``audits``: one row per passing report audited (a job is reported again after a re-draw, so
  the key is the job *and* the report's CID): what was replayed and every fault found, each with
  the arguments its challenge needs, so that a restart between the audit and the challenge
  challenges without replaying again. A row is written only once the audit is complete: an audit
  cut short by ``kill -9`` leaves no row and is simply done again on restart.
* ``challenges``: the games this bot opened (for ``status``). Whether a fault was already
  challenged is read from the chain (``DisputeOpened`` by us), not from here: a kill between
  the mined ``open`` and this row cannot lead to a second challenge.
* ``final_jobs``: job ids known to be final on chain.
* ``auditor``: one random 32-byte secret, made once; the audit-rate draw and the bot's own
  segment picks are derived from it and the report (:func:`whistleblower.policy.audit_draw`),
  so a restart makes the same choices and nobody else can predict them.

Everything but the secret can be lost: it costs one more replay.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from core.contracts import GameId, JobId
from core.localdb import HEARTBEAT_MIGRATION
from rolebase.records import DATA_KEYS_MIGRATION, SENT_MIGRATION, RoleDb
from whistleblower.policy import Finding, FindingKind

MIGRATIONS: Sequence[str] = (
    """
    CREATE TABLE audits (
        job_id INTEGER NOT NULL,
        report_cid TEXT NOT NULL,
        findings TEXT NOT NULL,
        replayed_steps INTEGER NOT NULL,
        summary TEXT NOT NULL,
        audited_at REAL NOT NULL,
        PRIMARY KEY (job_id, report_cid)
    );
    CREATE TABLE challenges (
        game_id INTEGER PRIMARY KEY,
        job_id INTEGER NOT NULL,
        report_cid TEXT NOT NULL,
        kind TEXT NOT NULL,
        idx INTEGER NOT NULL,
        opened_at REAL NOT NULL
    );
    CREATE TABLE final_jobs (job_id INTEGER PRIMARY KEY);
    CREATE TABLE auditor (id INTEGER PRIMARY KEY CHECK (id = 1), secret BLOB NOT NULL);
    """,
    HEARTBEAT_MIGRATION,
    SENT_MIGRATION,
    DATA_KEYS_MIGRATION,
)


@dataclass(frozen=True)
class AuditRecord:
    job_id: JobId
    report_cid: str
    findings: tuple[Finding, ...]
    replayed_steps: int
    summary: str


@dataclass(frozen=True)
class ChallengeRecord:
    game_id: GameId
    job_id: JobId
    report_cid: str
    kind: FindingKind
    index: int


class WhistleblowerDb(RoleDb):
    def __init__(self, path: Path) -> None:
        super().__init__(path, MIGRATIONS)

    def audit(self, job_id: JobId, report_cid: str) -> AuditRecord | None:
        row = self.db.query_one("SELECT * FROM audits WHERE job_id = ? AND report_cid = ?", (job_id, report_cid))
        return None if row is None else _audit(row)

    def audits(self) -> list[AuditRecord]:
        return [_audit(r) for r in self.db.query("SELECT * FROM audits ORDER BY job_id, audited_at")]

    def set_audit(self, record: AuditRecord) -> None:
        """Record a complete audit (idempotent: the same report audited twice keeps the latest row)."""
        self.db.execute(
            "INSERT OR REPLACE INTO audits (job_id, report_cid, findings, replayed_steps, summary, audited_at) VALUES (?, ?, ?, ?, ?, ?)",
            (record.job_id, record.report_cid, json.dumps([f.to_json() for f in record.findings]), record.replayed_steps, record.summary, time.time()),
        )

    def add_challenge(self, record: ChallengeRecord) -> None:
        self.db.execute(
            "INSERT OR IGNORE INTO challenges (game_id, job_id, report_cid, kind, idx, opened_at) VALUES (?, ?, ?, ?, ?, ?)",
            (record.game_id, record.job_id, record.report_cid, record.kind.value, record.index, time.time()),
        )

    def challenges(self) -> list[ChallengeRecord]:
        return [
            ChallengeRecord(GameId(r["game_id"]), JobId(r["job_id"]), r["report_cid"], FindingKind(r["kind"]), r["idx"])
            for r in self.db.query("SELECT * FROM challenges ORDER BY game_id")
        ]

    def audited_jobs(self) -> set[int]:
        return {r[0] for r in self.db.query("SELECT DISTINCT job_id FROM audits")}

    def forget(self, job_id: JobId) -> None:
        """Drop a final job's audits (its challenges stay: ``status`` sums them)."""
        self.db.execute("DELETE FROM audits WHERE job_id = ?", (job_id,))

    def secret(self) -> bytes:
        """The auditor's secret: made once (32 random bytes), the same after every restart."""
        return self.once_secret("auditor", "secret")


def _audit(r: sqlite3.Row) -> AuditRecord:
    findings = tuple(Finding.from_json(f) for f in json.loads(r["findings"]))
    return AuditRecord(JobId(r["job_id"]), r["report_cid"], findings, r["replayed_steps"], r["summary"])
