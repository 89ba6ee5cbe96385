"""The solver's local records (SQLite): what the chain cannot say about its own work.

* ``jobs``: each job this solver holds, how far it got (:class:`solver.policy.Phase`)
  and, once uploaded, what it will commit.
* ``checkpoints``: each checkpoint written to disk, with the keccak state hash and the CID
  computed when it was written (from the same bytes, in one pass), and the mean training loss
  and update norm of the segment that ends there (the manifest's ``losses`` and
  ``update_norms``; null for checkpoint 0, and in records older than their columns, whose
  checkpoints are then not resumed from). On restart a checkpoint is trusted only if its file
  still hashes to this value; training resumes from the latest one that does. Upload stores
  each file and checks that the store names it by the recorded CID. Under a disk budget
  (solver.retention) each also records whether it was ``dropped`` (its file deleted; its CID
  and norm stay) and whether it is ``held`` (regenerated for the verifier's draw).
* ``spec_verdicts``: the verdict on each spec CID seen (runnable with its estimated training
  time, checkpoint size and segment time, or why not), so a spec and its dataset are fetched, loaded and dry-run once, not every
  tick; content not in storage yet is looked for again at a backoff (``retry_at``). A sealed
  dataset's verdict with the job's data key is kept under ``<spec CID>#<key hash>``
  (:mod:`solver.judge`), the data key itself in ``data_keys`` (``rolebase.keyring``).
* ``refused_jobs``: each job refused for good (spec or dataset unusable, commit window too short
  for this solver), logged once: a refused job is never claimed, after a reopen or a restart either.
  Both are keyed by the deployment (chain id and market address) too, though the whole file is
  already one deployment's (below).
* ``final_jobs``: job ids known to be final on chain (final is forever: never re-read).
* ``claimed``: every job this solver ever claimed (kept after ``forget``): a solver with a
  lifetime claim limit (the test adversary cheats once) counts them.

Job ids are unique within one deployment only (a redeployed devnet numbers its jobs from 1 again):
the file lives in that deployment's records directory (:mod:`rolebase.deployment`), so another
deployment starts with a fresh one and this one is kept.

Everything here can be lost: the chain says which jobs are ours, and a lost
``checkpoints`` table only costs a re-training from step 0 (training is deterministic).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from core.contracts import JobId
from core.localdb import HEARTBEAT_MIGRATION
from core.probe import Bytes32
from proofs.merkle import hex32, to_bytes32
from rolebase.records import DATA_KEYS_MIGRATION, SENT_MIGRATION, RoleDb
from solver.policy import Phase, SpecCheck

MIGRATIONS: Sequence[str] = (
    """
    CREATE TABLE jobs (
        job_id INTEGER PRIMARY KEY,
        spec_cid TEXT NOT NULL,
        phase TEXT NOT NULL,
        trace_root TEXT,
        checkpoint_count INTEGER,
        final_model_cid TEXT,
        manifest_cid TEXT,
        updated_at REAL NOT NULL
    );
    CREATE TABLE checkpoints (
        job_id INTEGER NOT NULL REFERENCES jobs (job_id) ON DELETE CASCADE,
        idx INTEGER NOT NULL,
        state_hash TEXT NOT NULL,
        path TEXT NOT NULL,
        cid TEXT,
        PRIMARY KEY (job_id, idx)
    );
    CREATE TABLE specs (
        spec_cid TEXT PRIMARY KEY,
        runnable INTEGER NOT NULL,
        reason TEXT NOT NULL,
        steps INTEGER NOT NULL
    );
    CREATE TABLE final_jobs (job_id INTEGER PRIMARY KEY);
    """,
    HEARTBEAT_MIGRATION,
    "CREATE TABLE claimed (job_id INTEGER PRIMARY KEY);",
    # verdicts now load the dataset and dry-run the spec: the old ones are judged again
    """
    DROP TABLE specs;
    CREATE TABLE spec_verdicts (
        deployment TEXT NOT NULL,
        spec_cid TEXT NOT NULL,
        runnable INTEGER NOT NULL,
        final INTEGER NOT NULL,
        reason TEXT NOT NULL,
        steps INTEGER NOT NULL,
        train_s REAL NOT NULL,
        retry_s REAL NOT NULL,
        retry_at REAL NOT NULL,
        PRIMARY KEY (deployment, spec_cid)
    );
    CREATE TABLE refused_jobs (
        deployment TEXT NOT NULL,
        job_id INTEGER NOT NULL,
        spec_cid TEXT NOT NULL,
        reason TEXT NOT NULL,
        refused_at REAL NOT NULL,
        PRIMARY KEY (deployment, job_id, spec_cid)
    );
    """,
    # the manifest commits each segment's mean training loss (a float32: REAL holds it exactly)
    "ALTER TABLE checkpoints ADD COLUMN loss REAL;",
    SENT_MIGRATION,
    # the update norm of a checkpoint's segment, measured at training time (upload no longer decodes
    # the files); a disk budget (solver.retention): a dropped checkpoint keeps its CID and norm; a spec's verdict keeps what the budget check at claim time needs (the old
    # verdicts lack it: judged again)
    """
    DELETE FROM spec_verdicts;
    ALTER TABLE checkpoints ADD COLUMN norm REAL;
    ALTER TABLE checkpoints ADD COLUMN dropped INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE checkpoints ADD COLUMN held INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE spec_verdicts ADD COLUMN checkpoints INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE spec_verdicts ADD COLUMN checkpoint_bytes INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE spec_verdicts ADD COLUMN segment_s REAL NOT NULL DEFAULT 0;
    """,
    # a spec's verdict says whether it needs full replay (refused on a job posted without the market's
    # full-replay flag); the old verdicts lack it: judged again
    """
    DELETE FROM spec_verdicts;
    ALTER TABLE spec_verdicts ADD COLUMN full_replay INTEGER NOT NULL DEFAULT 0;
    """,
    # a spec's verdict keeps its training memory (a claim reserves memory for the duties of the jobs
    # held: solver.policy.peak_memory); the old verdicts lack it: judged again
    """
    DELETE FROM spec_verdicts;
    ALTER TABLE spec_verdicts ADD COLUMN memory_bytes INTEGER NOT NULL DEFAULT 0;
    """,
    DATA_KEYS_MIGRATION,
    # a spec's verdict says whether its dataset is sealed (docs/sealing.md); one judged with a job's data
    # key is kept under the spec CID and that key's hash. No earlier verdict judged a sealed dataset as
    # anything but unopenable: judged again
    """
    DELETE FROM spec_verdicts;
    ALTER TABLE spec_verdicts ADD COLUMN sealed INTEGER NOT NULL DEFAULT 0;
    """,
)


@dataclass(frozen=True)
class JobRecord:
    job_id: JobId
    spec_cid: str
    phase: Phase
    trace_root: Bytes32 | None
    checkpoint_count: int | None
    final_model_cid: str | None
    manifest_cid: str | None


@dataclass(frozen=True)
class SpecVerdict:
    """A spec's check and, when it is not final (content missing), when to look again."""

    check: SpecCheck
    retry_s: float = 0.0  # the backoff that set ``retry_at`` (doubles at each miss)
    retry_at: float = 0.0


@dataclass(frozen=True)
class CheckpointRecord:
    index: int
    state_hash: Bytes32  # keccak256 of the checkpoint file (0x hex in the database)
    path: Path
    cid: str | None
    loss: float | None  # mean training loss of segment ``index - 1`` (None for checkpoint 0)
    norm: float | None  # update norm of segment ``index - 1`` (None for checkpoint 0)
    dropped: bool = False  # not on disk: the disk budget dropped it (``cid`` recorded when written); regenerated on demand
    held: bool = False  # regenerated for the verifier's draw: kept until the job is final


class SolverDb(RoleDb):
    """Typed access to the solver's tables."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, MIGRATIONS)

    # jobs ----------------------------------------------------------------------------------

    def job(self, job_id: JobId) -> JobRecord | None:
        row = self.db.query_one("SELECT * FROM jobs WHERE job_id = ?", (job_id,))
        return None if row is None else _job(row)

    def jobs(self) -> list[JobRecord]:
        return [_job(r) for r in self.db.query("SELECT * FROM jobs ORDER BY job_id")]

    def start_job(self, job_id: JobId, spec_cid: str) -> None:
        """Record a claimed job (idempotent: an existing record keeps its progress)."""
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO jobs (job_id, spec_cid, phase, updated_at) VALUES (?, ?, ?, ?) ON CONFLICT (job_id) DO NOTHING",
                (job_id, spec_cid, Phase.CLAIMED.value, time.time()),
            )
            conn.execute("INSERT OR IGNORE INTO claimed (job_id) VALUES (?)", (job_id,))

    def claimed(self) -> set[int]:
        """Every job this solver ever claimed."""
        return {r[0] for r in self.db.query("SELECT job_id FROM claimed")}

    def set_phase(self, job_id: JobId, phase: Phase) -> None:
        self.db.execute("UPDATE jobs SET phase = ?, updated_at = ? WHERE job_id = ?", (phase.value, time.time(), job_id))

    def set_trained(self, job_id: JobId, trace_root: Bytes32, checkpoint_count: int) -> None:
        self.db.execute(
            "UPDATE jobs SET phase = ?, trace_root = ?, checkpoint_count = ?, updated_at = ? WHERE job_id = ?",
            (Phase.TRAINED.value, hex32(trace_root), checkpoint_count, time.time(), job_id),
        )

    def set_uploaded(self, job_id: JobId, final_model_cid: str, manifest_cid: str) -> None:
        self.db.execute(
            "UPDATE jobs SET phase = ?, final_model_cid = ?, manifest_cid = ?, updated_at = ? WHERE job_id = ?",
            (Phase.UPLOADED.value, final_model_cid, manifest_cid, time.time(), job_id),
        )

    def forget(self, job_id: JobId) -> None:
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM checkpoints WHERE job_id = ?", (job_id,))
            conn.execute("DELETE FROM jobs WHERE job_id = ?", (job_id,))

    # checkpoints ---------------------------------------------------------------------------

    def checkpoints(self, job_id: JobId) -> list[CheckpointRecord]:
        rows = self.db.query("SELECT * FROM checkpoints WHERE job_id = ? ORDER BY idx", (job_id,))
        return [
            CheckpointRecord(r["idx"], to_bytes32(r["state_hash"]), Path(r["path"]), r["cid"], r["loss"], r["norm"], bool(r["dropped"]), bool(r["held"]))
            for r in rows
        ]

    def add_checkpoint(self, job_id: JobId, index: int, state_hash: Bytes32, path: Path, cid: str, loss: float | None, norm: float | None) -> None:
        """Record a checkpoint file (after it is fully written and fsynced), its CID, and the mean
        training loss and update norm of the segment it ends (None for checkpoint 0), and mark the
        job training."""
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO checkpoints (job_id, idx, state_hash, path, cid, loss, norm) VALUES (?, ?, ?, ?, ?, ?, ?)"
                " ON CONFLICT (job_id, idx) DO UPDATE SET state_hash = excluded.state_hash, path = excluded.path, cid = excluded.cid,"
                " loss = excluded.loss, norm = excluded.norm, dropped = 0, held = 0",
                (job_id, index, hex32(state_hash), str(path), cid, loss, norm),
            )
            conn.execute(
                "UPDATE jobs SET phase = ?, updated_at = ? WHERE job_id = ? AND phase = ?",
                (Phase.TRAINING.value, time.time(), job_id, Phase.CLAIMED.value),
            )

    def drop_checkpoints_from(self, job_id: JobId, index: int) -> None:
        """Forget checkpoints ``index`` and later (their files failed the hash check)."""
        self.db.execute("DELETE FROM checkpoints WHERE job_id = ? AND idx >= ?", (job_id, index))

    def set_dropped(self, job_id: JobId, index: int) -> None:
        """Checkpoint ``index`` leaves the disk (its CID was recorded when it was written)."""
        self.db.execute("UPDATE checkpoints SET dropped = 1, held = 0 WHERE job_id = ? AND idx = ?", (job_id, index))

    def set_restored(self, job_id: JobId, index: int, held: bool) -> None:
        """Checkpoint ``index`` is on disk again (regenerated); ``held``: kept until the job is final."""
        self.db.execute("UPDATE checkpoints SET dropped = 0, held = held OR ? WHERE job_id = ? AND idx = ?", (int(held), job_id, index))

    # specs and refused jobs -------------------------------------------------

    def spec_verdict(self, deployment: str, spec_cid: str) -> SpecVerdict | None:
        row = self.db.query_one("SELECT * FROM spec_verdicts WHERE deployment = ? AND spec_cid = ?", (deployment, spec_cid))
        if row is None:
            return None
        check = SpecCheck(
            bool(row["runnable"]),
            row["reason"],
            row["steps"],
            row["train_s"],
            bool(row["final"]),
            row["checkpoints"],
            row["checkpoint_bytes"],
            row["segment_s"],
            bool(row["full_replay"]),
            row["memory_bytes"],
            bool(row["sealed"]),
        )
        return SpecVerdict(check, row["retry_s"], row["retry_at"])

    def set_spec_verdict(self, deployment: str, spec_cid: str, verdict: SpecVerdict) -> None:
        c = verdict.check
        self.db.execute(
            "INSERT OR REPLACE INTO spec_verdicts (deployment, spec_cid, runnable, final, reason, steps, train_s, retry_s, retry_at,"
            " checkpoints, checkpoint_bytes, segment_s, full_replay, memory_bytes, sealed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                deployment,
                spec_cid,
                int(c.runnable),
                int(c.final),
                c.reason,
                c.steps,
                c.train_s,
                verdict.retry_s,
                verdict.retry_at,
                c.checkpoints,
                c.checkpoint_bytes,
                c.segment_s,
                int(c.full_replay),
                c.memory_bytes,
                int(c.sealed),
            ),
        )

    def refusal(self, deployment: str, job_id: JobId, spec_cid: str) -> str | None:
        """Why the job was refused for good, or None."""
        row = self.db.query_one("SELECT reason FROM refused_jobs WHERE deployment = ? AND job_id = ? AND spec_cid = ?", (deployment, job_id, spec_cid))
        return None if row is None else str(row["reason"])

    def refuse(self, deployment: str, job_id: JobId, spec_cid: str, reason: str) -> None:
        self.db.execute(
            "INSERT OR IGNORE INTO refused_jobs (deployment, job_id, spec_cid, reason, refused_at) VALUES (?, ?, ?, ?, ?)",
            (deployment, job_id, spec_cid, reason, time.time()),
        )


def _job(r: sqlite3.Row) -> JobRecord:
    return JobRecord(
        JobId(r["job_id"]),
        r["spec_cid"],
        Phase(r["phase"]),
        None if r["trace_root"] is None else to_bytes32(r["trace_root"]),
        r["checkpoint_count"],
        r["final_model_cid"],
        r["manifest_cid"],
    )
