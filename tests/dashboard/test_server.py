"""`veritrain dashboard` as a real process on anvil: its pages, assets, API, event stream and errors."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.address_book import book_path
from deploy.anvil import free_port
from deploy.devnet import Devnet

ROOT = Path(__file__).resolve().parents[2]


def _dashboard(devnet: Devnet, tmp_path: Path, *flags: str) -> list[str]:
    book_dir = tmp_path / "book"
    devnet.book.save(book_path(book_dir, devnet.client.chain_id))
    return [sys.executable, "-m", "veritrain", "dashboard", "--rpc-url", devnet.rpc_url, "--address-book-dir", str(book_dir),
            "--store-dir", str(tmp_path / "store"), *flags]  # fmt: skip


@pytest.fixture
def served(devnet: Devnet, tmp_path: Path) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(_dashboard(devnet, tmp_path, "--port", str(port), "--poll", "0.2"), cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(url + "/api/network", timeout=2).close()
                break
            except OSError:
                assert process.poll() is None and time.monotonic() < deadline, process.stderr.read().decode() if process.stderr else ""
                time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:  # roomy: beside the daemons' worker this test runs at niceness 10, and a Python process takes seconds to end
            process.wait(60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise AssertionError("the dashboard did not stop within 60 s of SIGTERM") from None


def _get(url: str) -> tuple[int, str, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as reply:
            return reply.status, reply.headers.get("Content-Type", ""), reply.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers.get("Content-Type", ""), exc.read()


def test_pages_assets_and_api_come_from_the_dashboard_alone(served: str, devnet: Devnet) -> None:
    for page in ("/", "/job/1", "/multiparty/1", f"/address/{devnet.accounts[0].address}"):
        status, kind, body = _get(served + page)
        assert status == 200 and kind.startswith("text/html"), page
        assert b"http" not in body, f"{page} links outside the dashboard"
    for asset in ("app.js", "style.css", "uPlot.iife.min.js", "uPlot.min.css"):
        status, _, body = _get(f"{served}/static/{asset}")
        assert status == 200 and body, asset
    assert b"https://" not in _get(served + "/static/app.js")[2]
    status, kind, body = _get(served + "/api/network")
    assert status == 200 and kind.startswith("application/json")
    network = json.loads(body)
    assert network["head"] >= devnet.book.deploy_block and network["jackpot"]
    assert _get(served + "/api/job/999999")[0] == 404
    assert _get(served + "/api/multiparty/999999")[0] == 404
    assert _get(served + "/address/0x1234")[0] == 404
    assert _get(served + "/static/../../pyproject.toml")[0] in (403, 404)


def test_the_event_stream_says_each_new_head(served: str, devnet: Devnet) -> None:
    with urllib.request.urlopen(served + "/api/stream", timeout=20) as stream:
        assert stream.headers["Content-Type"] == "text/event-stream"
        first = json.loads(stream.readline().decode().removeprefix("data: "))
        assert stream.readline() == b"\n"
        devnet.chain.mine()
        second = json.loads(stream.readline().decode().removeprefix("data: "))
    assert second["head"] > first["head"]


def test_bad_flags_end_in_one_line(devnet: Devnet, tmp_path: Path) -> None:
    result = subprocess.run(_dashboard(devnet, tmp_path, "--port", "70000"), cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert result.returncode == 2 and "--port 70000 is not a TCP port" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
