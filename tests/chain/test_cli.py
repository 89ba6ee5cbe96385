"""`veritrain devnet` and `veritrain deploy` as real subprocesses."""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from eth_utils import to_checksum_address

from core.address_book import AddressBook
from core.chain import ChainClient
from core.contracts import Protocol
from deploy.anvil import dev_private_key, free_port
from deploy.devnet import Devnet

SCRIPT = Path(sys.executable).parent / "veritrain"
CLI = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-c", "from veritrain.cli import app; app()"]


def run(*args: str, env: dict[str, str] | None = None, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, env={**os.environ, **(env or {})})


def read_line(process: subprocess.Popen[str], timeout: float) -> str:
    assert process.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(process.stdout, selectors.EVENT_READ)
    if not sel.select(timeout):
        raise TimeoutError("devnet printed nothing")
    return process.stdout.readline()


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_devnet_runs_until_sigint_and_leaves_no_anvil(tmp_path: Path) -> None:
    process = subprocess.Popen(
        [*CLI, "devnet", "--json", "--accounts", "2", "--port", "0", "--address-book-dir", str(tmp_path)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        info = json.loads(read_line(process, timeout=600))
        anvils = children(process.pid)
        assert len(anvils) == 1 and alive(anvils[0])
        client = ChainClient(info["rpc_url"])
        assert info["rpc_url"].startswith("http://127.0.0.1:")
        book = AddressBook.for_chain(tmp_path, client)
        assert {n: c.address for n, c in book.contracts.items()} == info["address_book"]
        proto = Protocol.connect(client, book)
        for account in info["accounts"][1:]:
            assert proto.token.balance_of(account["address"]) == account["tokens"] > 0
        assert info["accounts"][1]["private_key"] == dev_private_key(1)
        assert "PUBLIC test keys" in info["dev_key_warning"]
        assert info["block_time_s"] == 1  # blocks keep time without transactions (deadlines pass)
        first = client.block_number()
        deadline = time.monotonic() + 30
        while client.block_number() == first and time.monotonic() < deadline:
            time.sleep(0.2)
        assert client.block_number() > first

        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 0
        assert not alive(anvils[0])
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_deploy_command_is_idempotent(devnet: Devnet, tmp_path: Path) -> None:
    env = {"DEPLOYER_KEY": dev_private_key(0)}
    args = ["deploy", "--rpc", devnet.rpc_url, "--key-env", "DEPLOYER_KEY", "--address-book-dir", str(tmp_path), "--json"]
    first = run(*args, env=env)
    assert first.returncode == 0, first.stderr
    assert dev_private_key(0)[2:] not in first.stdout + first.stderr
    nonce = devnet.client.w3.eth.get_transaction_count(to_checksum_address(devnet.deployer.address))
    second = run(*args, env=env)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["contracts"] == json.loads(first.stdout)["contracts"]
    assert devnet.client.w3.eth.get_transaction_count(to_checksum_address(devnet.deployer.address)) == nonce
    assert AddressBook.for_chain(tmp_path, devnet.client).chain_id == devnet.client.chain_id


def test_deploy_reads_the_shipped_public_parameters(devnet: Devnet, tmp_path: Path) -> None:
    result = run("deploy", "--rpc-url", devnet.rpc_url, "--key-env", "DEPLOYER_KEY", "--params", "public", "--address-book-dir", str(tmp_path), "--json",
                 env={"DEPLOYER_KEY": dev_private_key(0)})  # fmt: skip
    assert result.returncode == 0, result.stderr
    protocol = Protocol.connect(devnet.client, AddressBook.for_chain(tmp_path, devnet.client))
    assert (
        protocol.stakes.unbonding_delay()
        == json.loads((Path(__file__).resolve().parents[2] / "deploy" / "params" / "public.json").read_text())["unbondingDelay"]
        == 7 * 86400
    )


def test_version_and_one_line_usage_errors() -> None:
    version = run("--version")
    assert version.returncode == 0 and version.stdout.startswith("veritrain ")
    for args in (["solver", "run", "--no-such-flag"], ["submit", "show"], ["stake", "solver"]):
        result = run(*args)
        assert result.returncode == 2
        assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("error: ") and "--help" in result.stderr, result.stderr


@pytest.mark.parametrize(
    ("args", "env", "code", "message"),
    [
        (["deploy", "--rpc", "ftp://nowhere", "--key-env", "K"], {}, 2, "ConfigError"),
        (["deploy", "--rpc", "http://127.0.0.1:9", "--key-env", "VERITRAIN_TEST_UNSET_KEY"], {}, 2, "SignerError"),
        (["deploy", "--key-env", "K", "--params", "/nonexistent/params.json"], {"K": "0x" + "11" * 32}, 2, "does not exist"),
    ],
    ids=["bad-url", "unset-key", "missing-params"],
)
def test_errors_are_one_line_with_an_exit_code(args: list[str], env: dict[str, str], code: int, message: str) -> None:
    result = run(*args, env=env)
    assert result.returncode == code
    assert message in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_unreachable_rpc_is_a_clear_error() -> None:
    result = run("deploy", "--rpc", f"http://127.0.0.1:{free_port()}", "--key-env", "K", env={"K": "0x" + "11" * 32})
    assert result.returncode == 4
    assert "TransientRPCError" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.parametrize("command", ["devnet", "deploy"])
def test_help_has_examples(command: str) -> None:
    result = run(command, "--help")
    assert result.returncode == 0 and "Examples" in result.stdout


def test_devnet_defaults_to_the_port_every_other_command_reads() -> None:
    from core.config import Settings
    from veritrain.devnet_cmd import DEFAULT_PORT

    assert Settings.load(env={}).rpc_url == f"http://127.0.0.1:{DEFAULT_PORT}"
    assert f"[default: {DEFAULT_PORT}]" in run("devnet", "--help").stdout


def test_devnet_on_a_busy_port_is_one_line_and_exit_2(tmp_path: Path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run("devnet", "--port", str(port), "--address-book-dir", str(tmp_path))
    assert result.returncode == 2 and f"port {port}" in result.stderr and "--port" in result.stderr
    assert "Traceback" not in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_deploy_help_names_every_contract_it_deploys() -> None:
    from deploy.deployer import DeployParams, _plan

    help_text = " ".join(run("deploy", "--help").stdout.split())
    deployed = [name for name, _ in _plan(DeployParams.devnet())]
    assert len(deployed) == 8 and all(name in help_text for name in deployed)


def test_every_user_command_has_examples() -> None:
    from typer.testing import CliRunner

    from veritrain.cli import app

    commands = ["init", "balance", "stake", "unstake", "withdraw", "claim", "transfer", "fund", "earnings", "wallet new", "wallet import",
                "wallet list", "wallet address", "model export", "model eval", "spec new", "data pack text", "data pack images", "submit post", "submit fetch", "warm"]  # fmt: skip
    for command in commands:
        result = CliRunner().invoke(app, [*command.split(), "--help"])
        assert result.exit_code == 0 and "Examples" in result.output, command


@pytest.mark.parametrize(
    "args",
    [
        ["solver", "status", "--keystore", "{dir}", "--password-file", "{pw}"],
        ["solver", "run", "--config", "{dir}"],
        ["verifier", "run", "--config", "{dir}"],
        ["submit", "post", "{dir}", "--dry-run"],
        ["model", "eval", "{model}", "--data", "{dir}"],
        ["data", "pack", "text", "{pw}", "--out", "{dir}"],
    ],
)
def test_a_directory_where_a_file_goes_is_one_line_and_exit_2(
    args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from veritrain.cli import app

    (tmp_path / "dir").mkdir()
    (tmp_path / "model").mkdir()
    for name in ("model.pt2", "spec.json"):
        (tmp_path / "model" / name).write_text("{}")
    (tmp_path / "pw").write_text("password\n")
    paths = {"dir": tmp_path / "dir", "pw": tmp_path / "pw", "model": tmp_path / "model"}
    monkeypatch.setenv("VERITRAIN_RPC_URL", f"http://127.0.0.1:{free_port()}")  # no chain: the path is refused before any call
    with pytest.raises(SystemExit) as exited:
        app([a.format(**paths) for a in args], prog_name="veritrain")
    err = capsys.readouterr().err
    assert exited.value.code == 2, err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert f"{tmp_path / 'dir'}" in err and "directory" in err
