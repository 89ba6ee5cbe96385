"""The verifier's local records (SQLite).

* ``assignments``: each job this verifier was drawn for, how far it got
  (:class:`verifier.policy.Phase`), and once replayed, its verdict and the CID of
  its report, so that a restart between replay and report sends the same report
  without replaying again.
  A failing verdict keeps the first failing segment: the one the dispute game is opened on.
* ``final_jobs``: job ids known to be final on chain.
* ``referee``: one random 32-byte secret, made once; every vote salt is derived from it and
  the game id (:func:`core.dispute.derive_salt`), so a referee that restarts between its
  commit and its reveal can still reveal.

All of it but the secret can be lost: the chain says which jobs are assigned to us, and a
lost verdict only costs a second replay. A lost secret costs the referee bonds of the votes
committed and not yet revealed.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from core.agent import RoleDb
from core.contracts import JobId
from core.localdb import HEARTBEAT_MIGRATION
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
    """
    ALTER TABLE assignments ADD COLUMN failed_segment INTEGER;
    CREATE TABLE referee (id INTEGER PRIMARY KEY CHECK (id = 1), salt_secret BLOB NOT NULL);
    """,
)


@dataclass(frozen=True)
class AssignmentRecord:
    job_id: JobId
    phase: Phase
    passed: bool | None
    report_cid: str | None
    summary: str | None
    failed_segment: int | None


class VerifierDb(RoleDb):
    def __init__(self, path: Path) -> None:
        super().__init__(path, MIGRATIONS)

    def assignment(self, job_id: JobId) -> AssignmentRecord | None:
        row = self.db.query_one("SELECT * FROM assignments WHERE job_id = ?", (job_id,))
        return None if row is None else _record(row)

    def assignments(self) -> list[AssignmentRecord]:
        return [_record(r) for r in self.db.query("SELECT * FROM assignments ORDER BY job_id")]

    def set_verdict(self, job_id: JobId, passed: bool, report_cid: str, summary: str, failed_segment: int | None = None) -> None:
        self.db.execute(
            "INSERT INTO assignments (job_id, phase, passed, report_cid, summary, failed_segment, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (job_id) DO UPDATE SET phase = excluded.phase, passed = excluded.passed,"
            " report_cid = excluded.report_cid, summary = excluded.summary, failed_segment = excluded.failed_segment,"
            " updated_at = excluded.updated_at",
            (job_id, Phase.REPLAYED.value, int(passed), report_cid, summary, failed_segment, time.time()),
        )

    def set_reported(self, job_id: JobId) -> None:
        self.db.execute("UPDATE assignments SET phase = ?, updated_at = ? WHERE job_id = ?", (Phase.REPORTED.value, time.time(), job_id))

    def forget(self, job_id: JobId) -> None:
        self.db.execute("DELETE FROM assignments WHERE job_id = ?", (job_id,))

    def salt_secret(self) -> bytes:
        """The referee's vote-salt secret: made once (32 random bytes), the same after every restart."""
        self.db.execute("INSERT OR IGNORE INTO referee (id, salt_secret) VALUES (1, ?)", (os.urandom(32),))
        row = self.db.query_one("SELECT salt_secret FROM referee WHERE id = 1")
        assert row is not None
        return bytes(row["salt_secret"])


def _record(r: sqlite3.Row) -> AssignmentRecord:
    return AssignmentRecord(
        JobId(r["job_id"]),
        Phase(r["phase"]),
        None if r["passed"] is None else bool(r["passed"]),
        r["report_cid"],
        r["summary"],
        r["failed_segment"],
    )
