"""The verifier's local records (SQLite).

* ``assignments``: each job this verifier was drawn for, how far it got
  (:class:`verifier.policy.Phase`), and once replayed, its verdict, the CID of its report, the
  draw's seal parts (assign seed, forced commitment) and the probes the report publishes (with
  their root), so that a restart between replay and report sends the same report without
  replaying again: ``report()`` takes the probes themselves, the chain computes their root.
  A failing verdict keeps the first failing segment: the one the dispute game is opened on.
* ``final_jobs``: job ids known to be final on chain.
* ``referee``: one random 32-byte secret, made once; every vote salt is derived from it and
  the game id (:func:`core.dispute.derive_salt`), so a referee that restarts between its
  commit and its reveal can still reveal.
* ``forced_secrets``: the forced-error secrets (32 random bytes each) by their on-chain
  commitment ``proofs.forced_commitment(secret, me)``; the newest is the current one. A job
  snapshots the commitment at its draw, so an older secret is kept until every job that
  snapshotted it is final (docs/roles.md, "Forced errors").

All of it but the secrets can be lost: the chain says which jobs are assigned to us, and a
lost verdict only costs a second replay. A lost salt secret costs the referee bonds of the votes
committed and not yet revealed; a lost forced secret costs the verifier bond of each of its
forced jobs that a whistleblower then catches (it can no longer concede). So the state
directory is private to its owner (0700, the file 0600), and no secret is ever logged.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from core.contracts import Bytes32, JobId
from core.localdb import HEARTBEAT_MIGRATION
from core.probe import Probe
from proofs.merkle import hex32, to_bytes32
from proofs.probes import forced_commitment
from rolebase.records import DATA_KEYS_MIGRATION, SENT_MIGRATION, RoleDb
from verifier.policy import Draw, Phase

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
    """
    ALTER TABLE assignments ADD COLUMN probe_root BLOB;
    CREATE TABLE forced_secrets (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        commitment BLOB NOT NULL UNIQUE,
        secret BLOB NOT NULL,
        created_at REAL NOT NULL
    );
    """,
    # report() takes the probes and the draw's seal parts: a verdict recorded before this
    # migration has neither, so it is replayed again (the records are a cache of the replay).
    """
    ALTER TABLE assignments ADD COLUMN assign_seed BLOB;
    ALTER TABLE assignments ADD COLUMN forced_commitment BLOB;
    ALTER TABLE assignments ADD COLUMN probes TEXT;
    UPDATE assignments SET phase = 'assigned' WHERE phase = 'replayed';
    """,
    SENT_MIGRATION,
    DATA_KEYS_MIGRATION,
)


@dataclass(frozen=True)
class AssignmentRecord:
    job_id: JobId
    phase: Phase
    passed: bool | None
    report_cid: str | None
    summary: str | None
    failed_segment: int | None
    probe_root: bytes | None  # zero when no probe tree could be built (a failing report only)
    draw: Draw | None = None  # the seal parts the verdict was computed for (forced: not stored)
    probes: tuple[Probe, ...] | None = None  # published, slot i at i; () on a fail


class VerifierDb(RoleDb):
    def __init__(self, path: Path) -> None:
        super().__init__(path, MIGRATIONS)  # RoleDb: the directory 0700, the file 0600

    def assignment(self, job_id: JobId) -> AssignmentRecord | None:
        row = self.db.query_one("SELECT * FROM assignments WHERE job_id = ?", (job_id,))
        return None if row is None else _record(row)

    def assignments(self) -> list[AssignmentRecord]:
        return [_record(r) for r in self.db.query("SELECT * FROM assignments ORDER BY job_id")]

    def set_verdict(
        self,
        job_id: JobId,
        passed: bool,
        report_cid: str,
        summary: str,
        probe_root: bytes,
        failed_segment: int | None = None,
        *,
        draw: Draw,
        probes: Sequence[Probe] = (),
    ) -> None:
        """Record the verdict of the replay made for ``draw`` and the ``probes`` its report publishes
        (slot i at position i, stored as ``[segment, step, state_hash]``; none on a fail)."""
        entries = json.dumps([[p.segment, p.step, hex32(p.state_hash)] for p in probes])
        self.db.execute(
            "INSERT INTO assignments (job_id, phase, passed, report_cid, summary, failed_segment, probe_root,"
            " assign_seed, forced_commitment, probes, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (job_id) DO UPDATE SET phase = excluded.phase, passed = excluded.passed,"
            " report_cid = excluded.report_cid, summary = excluded.summary, failed_segment = excluded.failed_segment,"
            " probe_root = excluded.probe_root, assign_seed = excluded.assign_seed,"
            " forced_commitment = excluded.forced_commitment, probes = excluded.probes, updated_at = excluded.updated_at",
            (
                job_id,
                Phase.REPLAYED.value,
                int(passed),
                report_cid,
                summary,
                failed_segment,
                bytes(probe_root),
                bytes(draw.assign_seed),
                bytes(draw.forced_commitment),
                entries,
                time.time(),
            ),
        )

    def set_reported(self, job_id: JobId) -> None:
        self.db.execute("UPDATE assignments SET phase = ?, updated_at = ? WHERE job_id = ?", (Phase.REPORTED.value, time.time(), job_id))

    def forget(self, job_id: JobId) -> None:
        self.db.execute("DELETE FROM assignments WHERE job_id = ?", (job_id,))

    def salt_secret(self) -> bytes:
        """The referee's vote-salt secret: made once (32 random bytes), the same after every restart."""
        return self.once_secret("referee", "salt_secret")

    # -- forced errors -------------------------------------------------------------------------

    def new_forced_secret(self, me: str) -> bytes:
        """Make a new current forced secret (32 random bytes) for account ``me``; returns its commitment.
        The secret itself only leaves this file in a ``concedeForced`` transaction."""
        secret = os.urandom(32)
        commitment = forced_commitment(secret, me)
        self.db.execute("INSERT INTO forced_secrets (commitment, secret, created_at) VALUES (?, ?, ?)", (commitment, secret, time.time()))
        return commitment

    def forced_commitments(self) -> list[bytes]:
        """The commitments of the secrets kept, oldest first: the last is the current one."""
        return [bytes(r["commitment"]) for r in self.db.query("SELECT commitment FROM forced_secrets ORDER BY id")]

    def forced_secret(self, commitment: bytes) -> bytes | None:
        """Our secret behind ``commitment``; None if it is not ours (a zero commitment: no seed snapshotted)."""
        row = self.db.query_one("SELECT secret FROM forced_secrets WHERE commitment = ?", (bytes(commitment),))
        return None if row is None else bytes(row["secret"])

    def forget_forced_secret(self, commitment: bytes) -> None:
        self.db.execute("DELETE FROM forced_secrets WHERE commitment = ?", (bytes(commitment),))


def _record(r: sqlite3.Row) -> AssignmentRecord:
    return AssignmentRecord(
        JobId(r["job_id"]),
        Phase(r["phase"]),
        None if r["passed"] is None else bool(r["passed"]),
        r["report_cid"],
        r["summary"],
        r["failed_segment"],
        None if r["probe_root"] is None else bytes(r["probe_root"]),
        None if r["assign_seed"] is None else Draw(Bytes32(bytes(r["assign_seed"])), Bytes32(bytes(r["forced_commitment"]))),
        None if r["probes"] is None else tuple(Probe(i, s, m, to_bytes32(h)) for i, (s, m, h) in enumerate(json.loads(r["probes"]))),
    )
