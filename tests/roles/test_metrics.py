"""A daemon's ``--metrics`` endpoint: its ``status`` report as Prometheus text, scraped over HTTP
from a staked account on anvil (the values ``balance --json`` gives), and the text format itself."""

from __future__ import annotations

import re
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from core.config import Settings
from core.contracts import Protocol, Role
from deploy.devnet import Devnet
from rolebase.cli import status_report
from rolebase.metrics import CONTENT_TYPE, render, serve_metrics
from solver.cli import solver_status

#: One sample line of the text exposition format 0.0.4: name{label="value",...} number.
SAMPLE = re.compile(r'^[a-z_]+\{([a-z_]+="(?:[^"\\]|\\.)*",?)+\} -?[0-9.e+-]+$')


def samples(text: str) -> dict[str, float]:
    lines = [line for line in text.splitlines() if not line.startswith("#")]
    assert all(SAMPLE.match(line) for line in lines), [line for line in lines if not SAMPLE.match(line)]
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in lines}


def test_a_staked_daemon_s_status_is_scraped_as_prometheus_text(devnet: Devnet, tmp_path: Path) -> None:
    account = devnet.accounts[2]
    me = account.address
    proto = Protocol.connect(devnet.client, devnet.book, account)
    proto.token.approve(proto.stakes.address, 150 * 10**18)
    proto.stakes.stake(Role.SOLVER, 150 * 10**18)
    devnet.book.save(tmp_path / f"{devnet.client.chain_id}.json")
    settings = Settings.load(env={}, rpc_url=devnet.rpc_url, address_book_dir=tmp_path, data_dir=tmp_path / "data")
    server = serve_metrics("127.0.0.1:0", lambda: render("solver", status_report("solver", settings, me, True, solver_status)))
    try:
        with urllib.request.urlopen(server.url, timeout=60) as reply:
            assert reply.headers["Content-Type"] == CONTENT_TYPE
            got = samples(reply.read().decode())
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(server.url.replace("/metrics", "/"), timeout=60)
        assert missing.value.code == 404
    finally:
        server.stop()
    who = f'role="solver",address="{me}"'
    assert got[f'veritrain_stake_veri{{{who},kind="staked"}}'] == 150.0
    assert got[f'veritrain_stake_veri{{{who},kind="locked"}}'] == 0.0
    assert got[f"veritrain_balance_veri{{{who}}}"] == proto.token.balance_of(me) / 10**18
    assert got[f"veritrain_gas_eth{{{who}}}"] == devnet.client.balance(me) / 10**18
    assert got[f"veritrain_earnings_net_veri{{{who}}}"] == 0.0
    assert not any(k.startswith(("veritrain_jobs_in_hand", "veritrain_daemon_")) for k in got)  # no daemon ran with this data dir


def test_jobs_deadlines_and_the_last_error_are_labelled() -> None:
    report = {
        "address": "0xabc",
        "balance": str(5 * 10**18),
        "gas": str(10**17),
        "earnings_net": str(-2 * 10**18),
        "stake": {"staked": "0", "locked": "0", "unbonding": "0"},
        "daemon": {"running": True, "ticks": 12, "last_tick_s_ago": 0.4, "last_error": 'rpc "down"\nagain'},
        "assignments": [
            {"job_id": 3, "chain_state": "VERIFYING", "deadline": 1_795_747_506},
            {"job_id": 4, "chain_state": "VERIFYING", "deadline": 1_795_747_600},
        ],
    }
    got = samples(render("verifier", report))
    who = 'role="verifier",address="0xabc"'
    assert got[f'veritrain_jobs_in_hand{{{who},state="VERIFYING"}}'] == 2
    assert got[f'veritrain_job_deadline_timestamp_seconds{{{who},job="3",state="VERIFYING"}}'] == 1_795_747_506
    assert got[f'veritrain_daemon_last_error_info{{{who},error="rpc \\"down\\"\\nagain"}}'] == 1
    assert got[f"veritrain_earnings_net_veri{{{who}}}"] == -2.0 and got[f"veritrain_daemon_ticks{{{who}}}"] == 12


def test_a_bad_metrics_address_is_a_config_error() -> None:
    from core.errors import ConfigError

    with pytest.raises(ConfigError, match="HOST:PORT"):
        serve_metrics("9101", lambda: "")
