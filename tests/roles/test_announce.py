"""``--serve`` behind NAT and in a container: ``--announce URL`` apart from the bind address, and a bind
that no other party can reach refused with one line (exit 2) instead of a warning and a gateway nobody
finds (issue 26 item 7). Loopback and private addresses are fine on a devnet (``LOCAL_CHAIN_IDS``):
the tests, the demo and ``veritrain up`` run every party on one host or one private network."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from core.chain import LOCAL_CHAIN_IDS
from core.errors import ConfigError
from rolebase.gateways import gateway_url

ROOT = Path(__file__).resolve().parents[2]
PUBLIC = 1  # any chain id not in LOCAL_CHAIN_IDS
DEVNET = min(LOCAL_CHAIN_IDS)


@pytest.mark.parametrize("chain_id", [None, DEVNET, PUBLIC])
def test_a_wildcard_bind_needs_an_announced_url_on_every_chain(chain_id: int | None) -> None:
    for bind in ("0.0.0.0:8088", "[::]:8088"):
        with pytest.raises(ConfigError, match=r"listens on every address and names none to announce: give --announce http://ADDRESS:PORT"):
            gateway_url(bind, None, chain_id)
        assert gateway_url(bind, "http://203.0.113.7:8088", chain_id) == "http://203.0.113.7:8088"
    with pytest.raises(ConfigError, match="--announce http://0.0.0.0:1 listens on every address"):
        gateway_url("0.0.0.0:8088", "http://0.0.0.0:1", chain_id)
    with pytest.raises(ConfigError, match="must be http"):
        gateway_url("0.0.0.0:8088", "gateway.example.org:8088", chain_id)


def test_loopback_and_private_binds_are_announced_on_a_devnet_only() -> None:
    for bind in ("127.0.0.1:8080", "localhost:8080", "10.0.0.3:8080", "192.168.1.4:8080"):
        assert gateway_url(bind, None, DEVNET) == f"http://{bind}"
        assert gateway_url(bind, None, None) == f"http://{bind}"  # the chain not known yet: checked again when announcing
    for bind in ("127.0.0.1:8080", "localhost:8080", "[::1]:8080"):
        with pytest.raises(ConfigError, match=f"loopback, which no other party of chain {PUBLIC} reaches"):
            gateway_url(bind, None, PUBLIC)
    with pytest.raises(ConfigError, match="loopback"):
        gateway_url("0.0.0.0:8080", "http://127.0.0.1:8080", PUBLIC)  # announced or not: nobody else reaches it
    with pytest.raises(
        ConfigError, match=r"10.0.0.3 is a private address; if every party of chain 1 reaches it there, say so with --announce http://10.0.0.3:8080"
    ):
        gateway_url("10.0.0.3:8080", None, PUBLIC)
    assert gateway_url("10.0.0.3:8080", "http://10.0.0.3:8080", PUBLIC) == "http://10.0.0.3:8080"  # one private network, said so
    assert gateway_url("93.184.216.34:8080", None, PUBLIC) == "http://93.184.216.34:8080"
    assert gateway_url("0.0.0.0:8080", "https://gw.example.org:443", PUBLIC) == "https://gw.example.org:443"


def test_the_readmes_old_serve_line_is_refused_with_one_line_and_exit_2(tmp_path: Path) -> None:
    env = {**os.environ, "SOLVER_KEY": "0x" + "11" * 32}
    args = ["--serve", "0.0.0.0:8088", "--key-env", "SOLVER_KEY", "--rpc-url", "http://127.0.0.1:9", "--data-dir", str(tmp_path)]
    done = subprocess.run([sys.executable, "-m", "veritrain", "solver", "run", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "--serve 0.0.0.0:8088 listens on every address" in lines[0] and "--announce" in lines[0], done.stderr
