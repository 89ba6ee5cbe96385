"""Small hardenings: credentials never echoed, private state files, a FIFO keystore, throttled warnings."""

from __future__ import annotations

import logging
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.agent import Agent, CredentialFilter, DropLog, LoopSettings
from core.chain import ChainClient, RetryPolicy, Signer
from core.config import redact_url
from core.errors import SignerError, TransientRPCError, VeritrainError
from core.storage import IpfsStore, StorageError, file_cid
from solver.state import SolverDb
from whistleblower.state import WhistleblowerDb

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://user:s3cret@rpc.example:8545", "http://***@rpc.example:8545"),
        ("https://mainnet.example/v3/s3cret", "https://mainnet.example/..."),
        ("https://rpc.example/?key=s3cret", "https://rpc.example/..."),
        ("http://127.0.0.1:8545", "http://127.0.0.1:8545"),
        ("http://:s3cret@[::1]:1/", "http://***@::1:1"),
        ("not a url s3cret", "<malformed URL>"),
    ],
)
def test_urls_are_shown_without_credentials(url: str, shown: str) -> None:
    assert redact_url(url) == shown


def test_an_rpc_secret_is_not_echoed_by_errors_logs_or_the_cli(caplog: pytest.LogCaptureFixture) -> None:
    client = ChainClient("http://user:s3cret@127.0.0.1:9/v3/s3cret", timeout=0.5, retry=RetryPolicy(attempts=2, base_delay=0.01))
    with caplog.at_level(logging.DEBUG, logger="core"), pytest.raises(TransientRPCError) as raised:
        client.block_number()
    assert "s3cret" not in str(raised.value) and "127.0.0.1:9" in str(raised.value)
    assert "s3cret" not in repr(client) and "s3cret" not in caplog.text
    with pytest.raises(StorageError) as store_error:
        IpfsStore("http://user:s3cret@127.0.0.1:9", timeout=0.5).get(file_cid(b"x"), 10)
    assert "s3cret" not in str(store_error.value)
    done = subprocess.run(
        [sys.executable, "-m", "veritrain", "-vv", "solver", "status", "--rpc", "http://user:s3cret@127.0.0.1:9", "--address", "0x" + "11" * 20],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode != 0 and "127.0.0.1:9" in done.stderr and "DEBUG" in done.stderr  # web3 logs its endpoint at DEBUG
    assert "s3cret" not in done.stdout + done.stderr


def test_log_lines_lose_the_credentials_of_any_url() -> None:
    record = logging.LogRecord("web3", logging.DEBUG, "x", 1, "Making request. URI: %s", ("http://user:s3cret@host:1/x",), None)
    CredentialFilter().filter(record)
    assert record.getMessage() == "Making request. URI: http://***@host:1/x"


@pytest.mark.parametrize("make_db", [SolverDb, WhistleblowerDb])
def test_solver_and_whistleblower_state_is_private(tmp_path: Path, make_db: type) -> None:
    home = tmp_path / "role-0xbeef"
    db = make_db(home / "state.sqlite")
    db.mark_final([1, 2])  # a write: the WAL and shared-memory files exist now
    for path in [home / "state.sqlite", home / "state.sqlite-wal", home / "state.sqlite-shm"]:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    db.close()
    os.chmod(home, 0o755)  # loosened by hand (or made by an older version): tightened again on open
    os.chmod(home / "state.sqlite", 0o644)
    make_db(home / "state.sqlite").close()
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "state.sqlite").stat().st_mode) == 0o600


def test_a_fifo_keystore_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "key.json"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []
    reader = threading.Thread(target=lambda: _capture(outcome, lambda: Signer.from_keystore(fifo, "pw")), daemon=True)
    reader.start()
    reader.join(5)
    assert not reader.is_alive(), "reading a FIFO keystore blocked"
    assert isinstance(outcome[0], SignerError) and "not a regular file" in str(outcome[0])
    done = subprocess.run(
        [sys.executable, "-m", "veritrain", "solver", "status", "--keystore", str(fifo)],
        cwd=ROOT, capture_output=True, text=True, timeout=600, env={**os.environ, "VERITRAIN_KEYSTORE_PASSWORD": "pw"},
    )  # fmt: skip
    assert done.returncode == 2 and "not a regular file" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    big = tmp_path / "big.json"
    big.write_bytes(b" " * (1 << 20))
    with pytest.raises(SignerError, match="over the limit"):
        Signer.from_keystore(big, "pw")


def _capture(into: list[BaseException], fn: Callable[[], object]) -> None:
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001 - handed to the test thread
        into.append(exc)


class ContentMissing(VeritrainError):
    pass


@dataclass(frozen=True)
class Inspect:
    job_id: int


class Missing:
    """A world where the content a job needs never shows up: every perform is dropped."""

    def load(self) -> int:
        return 0

    def next_actions(self, view: int) -> list[Inspect]:
        return [Inspect(7), Inspect(8)]

    def perform(self, action: Inspect) -> None:
        raise ContentMissing(f"content for job {action.job_id} not found")


def test_a_dropped_action_is_warned_once_then_at_a_backoff(caplog: pytest.LogCaptureFixture) -> None:
    now = [0.0]
    agent = Agent("test", Missing(), Missing(), Missing(), settings=LoopSettings(poll_interval_s=0.0))
    agent._drops = DropLog(first_s=10.0, max_s=40.0, clock=lambda: now[0])
    with caplog.at_level(logging.DEBUG, logger="core.agent"):
        for _ in range(200):  # 0.5 s ticks for 100 s: once per tick was 400 warnings
            agent.tick()
            now[0] += 0.5
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    per_job = {j: [r for r in warnings if r.__dict__["job_id"] == j] for j in (7, 8)}
    # each job: the first drop, then at 10 s, 30 s and 70 s (the wait doubles from 10 s, at most 40 s)
    assert [len(v) for v in per_job.values()] == [4, 4]
    assert per_job[7][0].getMessage() == "action dropped" and per_job[7][-1].__dict__["repeats"] > 100
    assert sum(1 for r in caplog.records if r.levelno == logging.DEBUG and r.getMessage() == "action dropped again") == 400 - 8
