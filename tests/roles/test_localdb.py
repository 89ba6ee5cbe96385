"""The SQLite state store: migrations in order, WAL, transactions that roll back."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from core.localdb import LocalDb, LocalDbError

V1 = """
CREATE TABLE jobs (job_id INTEGER PRIMARY KEY, phase TEXT NOT NULL);
CREATE INDEX jobs_phase ON jobs (phase);
"""
V2 = "ALTER TABLE jobs ADD COLUMN step INTEGER NOT NULL DEFAULT 0;"


def test_migrations_apply_once_and_in_order(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    with LocalDb(path, [V1]) as db:
        db.execute("INSERT INTO jobs (job_id, phase) VALUES (1, 'training')")
    with LocalDb(path, [V1, V2]) as db:
        row = db.query_one("SELECT phase, step FROM jobs WHERE job_id = 1")
        assert row is not None and (row["phase"], row["step"]) == ("training", 0)
        mode, version = db.query_one("PRAGMA journal_mode"), db.query_one("PRAGMA user_version")
        assert mode is not None and mode[0] == "wal"
        assert version is not None and version[0] == 2


def test_only_a_real_migration_is_logged_and_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "state.sqlite"
    caplog.set_level(logging.INFO, logger="core.localdb")
    LocalDb(path, [V1, V2]).close()  # a daemon's first start: a new file, built by both scripts
    LocalDb(path, [V1, V2]).close()  # a restart: nothing to do
    assert [r.getMessage() for r in caplog.records] == []
    other = tmp_path / "old.sqlite"
    LocalDb(other, [V1]).close()
    LocalDb(other, [V1, V2]).close()  # an upgrade: one line, from 1 to 2
    assert [(r.getMessage(), r.__dict__["from_version"], r.__dict__["version"]) for r in caplog.records] == [("state schema migrated", 1, 2)]


def test_newer_file_than_program_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    LocalDb(path, [V1, V2]).close()
    with pytest.raises(LocalDbError, match="schema version 2"):
        LocalDb(path, [V1])


def test_transaction_rolls_back_on_error(tmp_path: Path) -> None:
    with LocalDb(tmp_path / "s.sqlite", [V1]) as db:
        with pytest.raises(RuntimeError):
            with db.transaction() as conn:
                conn.execute("INSERT INTO jobs (job_id, phase) VALUES (2, 'x')")
                raise RuntimeError("crash mid-write")
        assert db.query("SELECT * FROM jobs") == []


def test_incomplete_migration_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LocalDbError, match="incomplete SQL"):
        LocalDb(tmp_path / "s.sqlite", ["CREATE TABLE t (a INTEGER"])


def test_two_connections_see_each_others_commits(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    with LocalDb(path, [V1]) as writer, LocalDb(path, [V1]) as reader:
        writer.execute("INSERT INTO jobs (job_id, phase) VALUES (3, 'committed')")
        assert [r["job_id"] for r in reader.query("SELECT job_id FROM jobs")] == [3]
