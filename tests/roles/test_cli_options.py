"""The shared options a command gets from ``rolebase.cli.with_settings``: each reaches its settings
field or daemon flag, and a command takes only the options it names."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from typer.testing import CliRunner

from core.config import Settings
from rolebase import cli as options

app = options.command_group("probe", "commands that record what they were given")
SEEN: list[tuple[Settings, options.DaemonFlags | None, int]] = []


@app.command()
@options.with_settings()
def run(settings: Settings, flags: options.DaemonFlags, count: int = 1) -> None:
    SEEN.append((settings, flags, count))


@app.command()
@options.with_settings(*options.CHAIN)
def show(settings: Settings, count: int = 1) -> None:
    SEEN.append((settings, None, count))


def test_every_shared_option_reaches_its_settings_field_or_daemon_flag(tmp_path: Path) -> None:
    SEEN.clear()
    args = ["run", "--rpc-url", "http://127.0.0.1:9", "--chain-id", "7", "--address-book-dir", str(tmp_path / "book"), "--data-dir", str(tmp_path / "data")]
    args += ["--key-env", "SOME_KEY", "--store-dir", str(tmp_path / "store"), "--poll", "0.5", "--log-json", "--log-level", "DEBUG", "--count", "3"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    [(settings, flags, count)] = SEEN
    assert (settings.rpc_url, settings.chain_id, settings.address_book_dir, settings.data_dir) == (
        "http://127.0.0.1:9",
        7,
        tmp_path / "book",
        tmp_path / "data",
    )
    assert settings.key_env == "SOME_KEY" and count == 3
    assert flags == options.DaemonFlags(store_dir=tmp_path / "store", ipfs_api=None, poll=0.5, log_json=True, log_level="DEBUG")
    assert flags.loop.poll_interval_s == 0.5


def test_a_command_takes_only_the_options_it_names(tmp_path: Path) -> None:
    SEEN.clear()
    assert CliRunner().invoke(app, ["show", "--rpc-url", "http://127.0.0.1:9", "--count", "2"]).exit_code == 0
    assert [(s.rpc_url, f, n) for s, f, n in SEEN] == [("http://127.0.0.1:9", None, 2)]
    for absent in (["--data-dir", str(tmp_path)], ["--key-env", "K"], ["--poll", "1"]):
        result = CliRunner().invoke(app, ["show", *absent])
        assert result.exit_code == 2 and "No such option" in result.output


def test_config_file_gives_the_options_and_flags_override_it(tmp_path: Path) -> None:
    SEEN.clear()
    config = tmp_path / "role.toml"
    config.write_text(f'rpc-url = "http://127.0.0.1:9"\ndata-dir = "{tmp_path / "data"}"\nkey-env = "SOME_KEY"\npoll = 0.5\nlog-json = true\ncount = 4\n')
    result = CliRunner().invoke(app, ["run", "--config", str(config), "--count", "5", "--poll", "3"])
    assert result.exit_code == 0, result.output
    [(settings, flags, count)] = SEEN
    assert (settings.rpc_url, settings.data_dir, settings.key_env) == ("http://127.0.0.1:9", tmp_path / "data", "SOME_KEY")
    assert flags is not None and (flags.poll, flags.log_json, count) == (3.0, True, 5)


def test_config_file_gives_a_repeatable_flag_an_array(tmp_path: Path) -> None:
    SEEN.clear()
    config = tmp_path / "role.toml"
    config.write_text('rpc-url = "http://127.0.0.1:9"\nkey-env = "K"\npeer = ["http://10.0.0.2:8088", "http://10.0.0.3:8088"]\nconfirmations = 3\n')
    result = CliRunner().invoke(app, ["run", "--config", str(config)])
    assert result.exit_code == 0, result.output
    [(_, flags, _)] = SEEN
    assert flags is not None and (flags.peer, flags.confirmations) == (["http://10.0.0.2:8088", "http://10.0.0.3:8088"], 3)
    SEEN.clear()
    assert CliRunner().invoke(app, ["run", "--config", str(config), "--peer", "http://10.0.0.9:1"]).exit_code == 0  # the flag wins
    assert SEEN[0][1] is not None and SEEN[0][1].peer == ["http://10.0.0.9:1"]


def test_config_file_refuses_unknown_keys_and_bad_values_in_one_line(tmp_path: Path) -> None:
    config = tmp_path / "role.toml"
    for text, says in (
        ('private-key = "0x01"\n', "unknown key 'private-key'"),
        ('poll = "soon"\n', "poll = 'soon': "),
        ("poll = 0.001\n", "poll = 0.001: "),
        ("count = [1, 2]\n", "count: a string, number or boolean, not an array"),
        ('peer = [["http://a:1"]]\n', "peer: an array of strings, numbers or booleans, not an array of arrays or tables"),
        ("[solver]\ncount = 1\n", "unknown key 'solver'"),
        ("poll = \n", "Invalid value"),
        ("a = " + "[" * 40 + "]" * 40 + "\n", "nested deeper than"),
    ):
        config.write_text(text)
        result = CliRunner().invoke(app, ["run", "--config", str(config)])
        assert result.exit_code == 2, text
        flat = "".join(result.output.replace("│", "").split())  # rich wraps a long path anywhere, inside its box
        assert f"{config}:" in flat and "".join(says.split()) in flat, result.output
    assert CliRunner().invoke(app, ["show", "--config", str(config)]).exit_code == 2  # only a daemon's run takes a file


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU: --device cuda is accepted")
@pytest.mark.parametrize("role", ["solver", "verifier", "whistleblower"])
def test_device_cuda_without_a_gpu_is_one_line_before_anything_runs(role: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "veritrain", role, "run", "--device", "cuda", "--rpc-url", "http://127.0.0.1:9", "--key-env", "NO_SUCH_KEY"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        "error: ConfigError: --device cuda: torch finds no CUDA device on this machine (torch.cuda.is_available() is false); use --device cpu"
    ]
    bad = subprocess.run([sys.executable, "-m", "veritrain", role, "run", "--device", "tpu"], capture_output=True, text=True, cwd=tmp_path)
    assert bad.returncode == 2 and "'tpu' is not one of cpu, cuda" in bad.stderr


@pytest.mark.parametrize("role", ["solver", "verifier", "whistleblower"])
def test_threads_reach_the_daemons_runtime_for_repro_jobs(role: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``--threads 3``: the runtime the daemon is built with gives repro-v1 kernels 3 threads and
    torch 1 (a torch-numerics job's exact replay needs it); without the flag, 1; ``--threads 0``
    is refused before anything runs."""
    cli, daemon = importlib.import_module(f"{role}.cli"), importlib.import_module(f"{role}.daemon")
    built: list[Any] = []
    monkeypatch.setattr(options.DaemonFlags, "run", lambda self, settings, build, status=None: build(settings, None, None))
    monkeypatch.setattr(daemon, "build", lambda *args, rt, **kwargs: built.append(rt))
    for args, threads in ((["--threads", "3"], 3), ([], 1)):
        result = CliRunner().invoke(cli.app, ["run", "--data-dir", str(tmp_path), *args])
        assert result.exit_code == 0, result.output
        assert (built[-1].threads, built[-1].repro_threads) == (1, threads)
    bad = CliRunner().invoke(cli.app, ["run", "--data-dir", str(tmp_path), "--threads", "0"])
    flat = " ".join(bad.output.replace("│", "").split())  # rich boxes and wraps the message
    assert bad.exit_code == 2 and "Invalid value for '--threads'" in flat and "greater than or equal to 1" in flat, bad.output
    assert len(built) == 2  # nothing was built for it
