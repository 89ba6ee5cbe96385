"""A small SQLite state store for the role clients.

Each role keeps what the chain cannot tell it (where its training stands, which
checkpoints it wrote, which CIDs it pinned) in one SQLite file in WAL mode, so a
``kill -9`` at any point loses at most the write in flight. Everything here can be
re-derived: the chain says which jobs a role holds, and the files on disk are
checked by hash before they are trusted. The tables themselves belong to the role
package (``solver/state.py``, ``verifier/state.py``); this module only opens the
file, applies the role's schema migrations in order, and hands out transactions.
Job and game ids are unique within one deployment only, so each deployment has its own file
(the CLI puts it under ``<data-dir>/deployments/<key>/``, ``rolebase/deployment.py``).
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from core.errors import VeritrainError

log = logging.getLogger(__name__)

#: How long a writer waits for another process's lock before failing, in milliseconds.
BUSY_TIMEOUT_MS = 10_000


class LocalDbError(VeritrainError):
    """The local state file cannot be opened or is newer than this program."""


class LocalDb:
    """One role's SQLite file: schema migrations applied, WAL mode, foreign keys on.

    ``migrations[i]`` is the SQL script that takes the schema from version ``i`` to
    ``i + 1``; ``PRAGMA user_version`` records how many have run. Scripts are
    append-only: a released script is never edited, a change is a new script.
    """

    def __init__(self, path: Path, migrations: Sequence[str]) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            # one connection shared by the daemon's loop and its workers (core.agent.Workers), one statement or transaction at a time
            self._conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
        except sqlite3.Error as exc:
            raise LocalDbError(f"cannot open state file {path}: {exc}") from exc
        self._lock = threading.RLock()
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("PRAGMA synchronous=NORMAL")
        self._conn.execute("PRAGMA foreign_keys=ON")
        self._conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        self._migrate(migrations)

    def _migrate(self, migrations: Sequence[str]) -> None:
        have = int(self._conn.execute("PRAGMA user_version").fetchone()[0])
        if have > len(migrations):
            raise LocalDbError(f"state file {self.path} has schema version {have}, this program knows {len(migrations)}")
        for version in range(have, len(migrations)):
            with self.transaction() as conn:
                for statement in _split_statements(migrations[version]):
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version={version + 1}")
        if have == len(migrations):
            return
        # A new file is built by the same scripts: that is no news; an older file brought up to date is, once.
        level = logging.DEBUG if have == 0 else logging.INFO
        what = "state file created" if have == 0 else "state schema migrated"
        log.log(level, what, extra={"path": str(self.path), "from_version": have, "version": len(migrations)})

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT``; rolled back if the body raises. Other threads wait for it."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    def query(self, sql: str, params: Sequence[object] = ()) -> list[sqlite3.Row]:
        """Run a read and return every row."""
        with self._lock:
            return self._conn.execute(sql, params).fetchall()

    def query_one(self, sql: str, params: Sequence[object] = ()) -> sqlite3.Row | None:
        """Run a read and return its first row, or None."""
        with self._lock:
            return self._conn.execute(sql, params).fetchone()

    def execute(self, sql: str, params: Sequence[object] = ()) -> None:
        """Run one write in its own transaction (autocommit)."""
        with self._lock:
            self._conn.execute(sql, params)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> LocalDb:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _split_statements(script: str) -> list[str]:
    """Split a migration script into complete statements (sqlite3.complete_statement)."""
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            if buffer.strip():
                statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        raise LocalDbError(f"incomplete SQL statement in migration: {buffer.strip()[:80]!r}")
    return statements


# ------------------------------------------------------------------ the daemons' heartbeat

#: Append to a role's migrations (as its own step) to get the ``heartbeat`` table.
HEARTBEAT_MIGRATION = """
CREATE TABLE heartbeat (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    pid INTEGER NOT NULL,
    address TEXT NOT NULL,
    started_at REAL NOT NULL,
    last_tick_at REAL NOT NULL,
    ticks INTEGER NOT NULL,
    last_error TEXT
);
"""


@dataclass(frozen=True)
class Heartbeat:
    """The last tick a daemon recorded: what ``status`` shows about the process."""

    pid: int
    address: str
    started_at: float
    last_tick_at: float
    ticks: int
    last_error: str | None

    def process_alive(self) -> bool:
        """Whether a process with the recorded pid exists now (the daemon, unless the pid was reused)."""
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True

    def summary(self, now: float) -> dict[str, object]:
        return {
            "pid": self.pid,
            "running": self.process_alive(),
            "last_tick_s_ago": round(now - self.last_tick_at, 1),
            "ticks": self.ticks,
            "last_error": self.last_error,
        }


def write_heartbeat(db: LocalDb, beat: Heartbeat) -> None:
    db.execute(
        "INSERT INTO heartbeat (id, pid, address, started_at, last_tick_at, ticks, last_error)"
        " VALUES (1, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET pid = excluded.pid,"
        " address = excluded.address, started_at = excluded.started_at, last_tick_at = excluded.last_tick_at,"
        " ticks = excluded.ticks, last_error = excluded.last_error",
        (beat.pid, beat.address, beat.started_at, beat.last_tick_at, beat.ticks, beat.last_error),
    )


def read_heartbeat(db: LocalDb) -> Heartbeat | None:
    row = db.query_one("SELECT pid, address, started_at, last_tick_at, ticks, last_error FROM heartbeat WHERE id = 1")
    return None if row is None else Heartbeat(*tuple(row))
