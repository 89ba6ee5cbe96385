"""The verifier's local records (SQLite).

* ``assignments``: each job this verifier was drawn for, how far it got
  (:class:`verifier.policy.Phase`), and once replayed, its verdict and the CID of
  its report, so that a restart between replay and report sends the same report
  without replaying again.
* ``final_jobs``: job ids known to be final on chain.

All of it can be lost: the chain says which jobs are assigned to us, and a lost
verdict only costs a second replay.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from core.contracts import JobId
from core.localdb import HEARTBEAT_MIGRATION, LocalDb
from verifier.policy import Phase

MIGRATIONS: Sequence[str] = (
    """
    CREATE TABLE assignments (
        job_id INTEGER PRIMARY KEY,
        phase TEXT NOT NULL,
        passed INTEGER,
        report_cid TEXT,
        summary TEXT,
        updated_at REAL NOT NULL
    );
    CREATE TABLE final_jobs (job_id INTEGER PRIMARY KEY);
    """,
    HEARTBEAT_MIGRATION,
)


@dataclass(frozen=True)
class AssignmentRecord:
    job_id: JobId
    phase: Phase
    passed: bool | None
    report_cid: str | None
    summary: str | None


class VerifierDb:
    def __init__(self, path: Path) -> None:
        self.db = LocalDb(path, MIGRATIONS)

    def close(self) -> None:
        self.db.close()

    def assignment(self, job_id: JobId) -> AssignmentRecord | None:
        row = self.db.query_one("SELECT * FROM assignments WHERE job_id = ?", (job_id,))
        return None if row is None else _record(row)

    def assignments(self) -> list[AssignmentRecord]:
        return [_record(r) for r in self.db.query("SELECT * FROM assignments ORDER BY job_id")]

    def set_verdict(self, job_id: JobId, passed: bool, report_cid: str, summary: str) -> None:
        self.db.execute(
            "INSERT INTO assignments (job_id, phase, passed, report_cid, summary, updated_at) VALUES (?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (job_id) DO UPDATE SET phase = excluded.phase, passed = excluded.passed,"
            " report_cid = excluded.report_cid, summary = excluded.summary, updated_at = excluded.updated_at",
            (job_id, Phase.REPLAYED.value, int(passed), report_cid, summary, time.time()),
        )

    def set_reported(self, job_id: JobId) -> None:
        self.db.execute("UPDATE assignments SET phase = ?, updated_at = ? WHERE job_id = ?", (Phase.REPORTED.value, time.time(), job_id))

    def forget(self, job_id: JobId) -> None:
        self.db.execute("DELETE FROM assignments WHERE job_id = ?", (job_id,))

    def final_jobs(self) -> set[int]:
        return {r[0] for r in self.db.query("SELECT job_id FROM final_jobs")}

    def mark_final(self, job_ids: Sequence[int]) -> None:
        with self.db.transaction() as conn:
            conn.executemany("INSERT OR IGNORE INTO final_jobs (job_id) VALUES (?)", [(j,) for j in job_ids])


def _record(r: sqlite3.Row) -> AssignmentRecord:
    return AssignmentRecord(
        JobId(r["job_id"]),
        Phase(r["phase"]),
        None if r["passed"] is None else bool(r["passed"]),
        r["report_cid"],
        r["summary"],
    )
