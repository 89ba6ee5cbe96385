"""`veritrain submit` on bad input: one clear line, a non-zero exit, nothing on chain.

Each command runs as a real process (``python -m veritrain submit``, the same typer app
``veritrain submit`` mounts). "Nothing on chain" is checked as: the submitter's nonce
(no transaction sent), its balance and allowance, and the market's job count are unchanged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from eth_utils import to_checksum_address

from core.contracts import TokenAmount
from core.storage import file_cid
from deploy.anvil import dev_private_key
from submitter import service
from submitter.demo_job import build_demo_job
from tests.e2e.conftest import Market

ROOT = Path(__file__).resolve().parents[2]
KEY_ENV = "VT_E2E_SUBMITTER_KEY"
BROKE_ACCOUNT = 9  # anvil funds it with ether, the devnet gives it no tokens


def run(market: Market, *args: str, account: int = 1) -> subprocess.CompletedProcess[str]:
    common = ["--rpc", market.net.rpc_url, "--address-book-dir", str(market.book_dir)]
    command, rest = args[0], list(args[1:])
    if command in ("post", "fetch", "show"):
        common += ["--store-dir", str(market.store_dir)]
    if command in ("post", "cancel"):
        common += ["--key-env", KEY_ENV]
    env = {**os.environ, KEY_ENV: dev_private_key(account)}
    return subprocess.run(
        [sys.executable, "-m", "veritrain", "submit", command, *rest, *common],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def chain_facts(market: Market, account: int) -> tuple[int, ...]:
    p = market.protocol()
    from deploy.anvil import dev_signers

    address = dev_signers(account + 1)[account].address
    nonce = p.client.w3.eth.get_transaction_count(to_checksum_address(address))
    return (nonce, p.token.balance_of(address), p.token.allowance(address, p.market.address), p.market.job_count())


def assert_refused(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode != 0, result.stdout
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ")
    for needle in needles:
        assert needle in lines[0], lines[0]


def refuse_all(market: Market, cases: Sequence[tuple[Sequence[str], int, tuple[str, ...]]]) -> None:
    """Run every case (concurrently: each is a process that imports torch), check each is refused
    with its message, and that no case changed anything on chain for any account involved."""
    accounts = sorted({account for _, account, _ in cases})
    before = [chain_facts(market, a) for a in accounts]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda case: run(market, *case[0], account=case[1]), cases))
    for (args, _, needles), result in zip(cases, results):
        try:
            assert_refused(result, *needles)
        except AssertionError as exc:
            raise AssertionError(f"{' '.join(args)}: {exc}") from None
    assert [chain_facts(market, a) for a in accounts] == before


@pytest.fixture
def job_files(tmp_path: Path) -> tuple[Path, Path]:
    job = build_demo_job("tiny", tmp_path / "job")
    return job.spec_path, job.data_path


def write_spec(tmp_path: Path, spec_path: Path, **changes: object) -> Path:
    raw = json.loads(spec_path.read_text())
    for dotted, value in changes.items():
        node = raw
        *parents, leaf = dotted.split("__")
        for key in parents:
            node = node[key]
        node[leaf] = value
    out = tmp_path / f"bad-spec-{len(list(tmp_path.glob('bad-spec-*')))}.json"
    out.write_text(json.dumps(raw))
    return out


def test_post_refuses_bad_input_and_sends_nothing(market: Market, job_files: tuple[Path, Path], tmp_path: Path) -> None:
    spec, data = job_files
    not_json = tmp_path / "not-json.json"
    not_json.write_text("{ this is not json")
    nested = tmp_path / "nested.json"
    nested.write_text("[" * (64 * 1024 - 1))  # killed `submit post` with SIGSEGV (web3 raises the recursion limit)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)  # would block forever
    cases: list[tuple[Sequence[str], int, tuple[str, ...]]] = [
        (["post", str(tmp_path / "missing.json"), "--data", str(data)], 1, ("does not exist",)),
        (["post", str(spec), "--data", str(tmp_path / "missing.bin")], 1, ("dataset file", "does not exist")),
        (["post", str(not_json), "--data", str(data)], 1, ("not valid JSON",)),
        (["post", str(nested), "--data", str(data)], 1, ("nests 65535 levels deep",)),
        (["post", str(fifo), "--data", str(data)], 1, ("not a regular file",)),
        (["post", str(write_spec(tmp_path, spec, steps=201)), "--data", str(data)], 1, ("multiple of checkpoint_interval",)),
        (["post", str(write_spec(tmp_path, spec, model__kind="pickle")), "--data", str(data)], 1, ("invalid job spec",)),
        (["post", str(spec), "--data", str(spec)], 1, ("does not fit the spec",)),  # a JSON file is no dataset
        (["post", str(spec), "--data", str(data), "--reward", "-3"], 1, ("--reward",)),
        (["post", str(spec), "--data", str(data), "--commit-window", "999999"], 1, ("--commit-window",)),
        (["post", str(spec), "--data", str(data)], BROKE_ACCOUNT, ("insufficient balance",)),
        (["post", str(write_spec(tmp_path, spec, numerics="torch")), "--data", str(data)], 1, ("weaker guarantee", "--allow-tolerance")),
    ]
    refuse_all(market, cases)


def test_post_refuses_a_wrong_dataset_cid(market: Market, job_files: tuple[Path, Path], tmp_path: Path) -> None:
    spec, data = job_files
    absent = file_cid(b"bytes nobody stored")
    size = data.stat().st_size
    named_absent = write_spec(tmp_path, spec, dataset__cid=absent, dataset__size_bytes=size)
    malformed = write_spec(tmp_path, spec, dataset__cid="QmNotACid", dataset__size_bytes=size)
    refuse_all(market, [
        (["post", str(named_absent)], 1, (absent, "not in the store")),
        (["post", str(malformed)], 1, ("invalid CID",)),
    ])  # fmt: skip


def test_job_commands_refuse_unknown_and_wrong_jobs(market: Market, job_files: tuple[Path, Path], tmp_path: Path) -> None:
    spec, data = job_files
    posted = service.post_job(market.protocol(market.account(0)), market.store, spec, data, TokenAmount(10**18), TokenAmount(10**18), 600)
    unknown, mine = str(posted.job_id + 100), str(posted.job_id)
    refuse_all(market, [
        (["show", unknown], 1, (f"unknown job {unknown}",)),
        (["fetch", unknown, "--out", str(tmp_path / "m")], 1, (f"unknown job {unknown}",)),
        (["cancel", unknown], 1, (f"unknown job {unknown}",)),
        (["cancel", mine], 2, ("only its submitter",)),  # posted by account 1
        (["fetch", mine, "--out", str(tmp_path / "m")], 1, ("OPEN", "FINALIZED")),
    ])  # fmt: skip


def test_read_commands_work_and_speak_json(market: Market, job_files: tuple[Path, Path]) -> None:
    spec, data = job_files
    posted = service.post_job(market.protocol(market.account(0)), market.store, spec, data, TokenAmount(10**18), TokenAmount(10**18), 600)
    assert posted.tax == market.protocol().market.jackpot_tax(10**18, 10**18) > 0  # escrowed on top of reward + fee
    by_cli = run(market, "post", str(spec), "--data", str(data), "--reward", "10", "--fee", "2", "--json")
    assert by_cli.returncode == 0, by_cli.stderr
    assert int(json.loads(by_cli.stdout)["jackpot_tax"]) == market.protocol().market.jackpot_tax(10 * 10**18, 2 * 10**18)
    listed = run(market, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert any(j["job_id"] == posted.job_id and j["state"] == "OPEN" for j in json.loads(listed.stdout))
    shown = run(market, "show", str(posted.job_id), "--json")
    assert shown.returncode == 0, shown.stderr
    body = json.loads(shown.stdout)
    assert [e["event"] for e in body["timeline"]] == ["JobPosted"]
    assert body["timeline"][0]["args"]["specCid"] == posted.spec_cid
    assert body["guarantee"].startswith("exact")
    torch_spec = write_spec(spec.parent, spec, numerics="torch")  # a weaker guarantee, posted knowingly and shown as such
    weaker = run(market, "post", str(torch_spec), "--data", str(data), "--allow-tolerance", "--json")
    assert weaker.returncode == 0, weaker.stderr
    assert json.loads(weaker.stdout)["guarantee"].startswith('weaker guarantee: "numerics": "torch"') and "weaker guarantee" in weaker.stderr
    assert json.loads(weaker.stdout)["full_replay"] and market.protocol().market.is_full_replay(json.loads(weaker.stdout)["job_id"])  # every draw
    assert json.loads(by_cli.stdout)["full_replay"] is False
    shown = run(market, "show", str(json.loads(weaker.stdout)["job_id"]), "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["guarantee"].endswith("always fully replayed"), shown.stderr
    cancelled = run(market, "cancel", str(posted.job_id))
    assert cancelled.returncode == 0, cancelled.stderr
    assert market.protocol().market.get_job(posted.job_id).state.name == "CANCELLED"
