"""The base of every role's local records: one SQLite file per role and account, the owner's only."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path

from core.localdb import LocalDb

#: The journal of calls sent (``rolebase.sent.Journal``): each journaled action's latest transaction,
#: recorded before broadcast, so that a restarted daemon finds it on chain instead of sending it twice.
SENT_MIGRATION = """
CREATE TABLE sent_txs (
    call TEXT PRIMARY KEY,
    job_id INTEGER NOT NULL,
    tx_hash TEXT NOT NULL,
    nonce INTEGER NOT NULL,
    sent_at REAL NOT NULL
);
"""


#: Sealed jobs' data keys (``rolebase.keyring``): found once in a wrap or a revealed key, kept with
#: the job's other records (in this 0600 file) and forgotten with them.
DATA_KEYS_MIGRATION = """
CREATE TABLE data_keys (
    job_id INTEGER PRIMARY KEY,
    data_key BLOB NOT NULL
);
"""


class RoleDb:
    """A role's SQLite records (its ``migrations`` must create ``final_jobs``, ``sent_txs``, ``data_keys`` and the heartbeat).

    The state directory is the owner's only (0700) and the database file 0600, created so before
    SQLite opens it (its WAL and shared-memory files take the database file's mode): a role's
    records hold secrets (salts, forced-error secrets, the auditor's secret, sealed jobs' data keys) and its work.
    """

    def __init__(self, path: Path, migrations: Sequence[str]) -> None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(path.parent, 0o700)
        os.close(os.open(path, os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW, 0o600))
        for made in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            if made.exists():  # left by an older version, or loosened by hand
                os.chmod(made, 0o600)
        self.db = LocalDb(path, migrations)

    def close(self) -> None:
        self.db.close()

    def final_jobs(self) -> set[int]:
        return {r[0] for r in self.db.query("SELECT job_id FROM final_jobs")}

    def mark_final(self, job_ids: Sequence[int]) -> None:
        with self.db.transaction() as conn:
            conn.executemany("INSERT OR IGNORE INTO final_jobs (job_id) VALUES (?)", [(j,) for j in job_ids])

    def record_sent(self, call: str, job_id: int, tx_hash: str, nonce: int) -> None:
        """``call`` (``rolebase.sent.action_key``) is being sent in ``tx_hash``: recorded before broadcast."""
        self.db.execute(
            "INSERT OR REPLACE INTO sent_txs (call, job_id, tx_hash, nonce, sent_at) VALUES (?, ?, ?, ?, ?)", (call, job_id, tx_hash, nonce, time.time())
        )

    def sent_tx(self, call: str) -> str | None:
        """The hash of the transaction ``call`` was last sent in, or None."""
        row = self.db.query_one("SELECT tx_hash FROM sent_txs WHERE call = ?", (call,))
        return None if row is None else str(row["tx_hash"])

    def forget_sent(self, job_id: int) -> None:
        self.db.execute("DELETE FROM sent_txs WHERE job_id = ?", (job_id,))

    def data_key(self, job_id: int) -> bytes | None:
        """The sealed job's data key, once found (``rolebase.keyring``); None before."""
        row = self.db.query_one("SELECT data_key FROM data_keys WHERE job_id = ?", (job_id,))
        return None if row is None else bytes(row["data_key"])

    def keep_data_key(self, job_id: int, data_key: bytes) -> None:
        self.db.execute("INSERT OR REPLACE INTO data_keys (job_id, data_key) VALUES (?, ?)", (job_id, data_key))

    def forget_data_key(self, job_id: int) -> None:
        self.db.execute("DELETE FROM data_keys WHERE job_id = ?", (job_id,))

    def keyed_final(self) -> set[int]:
        """The final jobs whose data key we still keep: each role forgets them whatever else it holds of
        them (a referee's key, a solver's that asked and did not claim, a whistleblower's unaudited)."""
        return {r[0] for r in self.db.query("SELECT d.job_id FROM data_keys d JOIN final_jobs f ON f.job_id = d.job_id")}

    def once_secret(self, table: str, column: str) -> bytes:
        """A secret of 32 random bytes made on first use in the one-row ``table`` (``id = 1``), the same
        after every restart. ``table`` and ``column`` are the role's own schema names, never input."""
        self.db.execute(f"INSERT OR IGNORE INTO {table} (id, {column}) VALUES (1, ?)", (os.urandom(32),))
        row = self.db.query_one(f"SELECT {column} FROM {table} WHERE id = 1")
        assert row is not None
        return bytes(row[column])
