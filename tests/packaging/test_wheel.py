"""A GPU owner's path (issue 13): the wheel, installed outside the repository, deploys the protocol
and runs a solver that stakes and advertises on a devnet, with no node_modules and no Node.js.

The fresh virtualenv gets the wheel (``--no-deps``) and, so as not to download torch, one ``.pth``
line naming the repository's virtualenv's site-packages for the dependencies; the repository's
editable install of veritrain is not importable there (a ``.pth`` file in a directory added by a
``.pth`` line is not run), which the test checks. Only anvil comes from the repository's
node_modules (a chain, not the role): the wheel's commands run with ``PATH`` holding the venv's
bin only, from a working directory outside the repository.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from core import artifacts
from core.address_book import AddressBook
from core.chain import ChainClient
from core.contracts import Device, Protocol, Role
from core.errors import ArtifactsMissing
from deploy.anvil import Anvil, dev_private_key, dev_signers
from deploy.build import build

ROOT = Path(__file__).resolve().parents[2]
CONTAINERFILE = ROOT / "deploy" / "Containerfile"


def test_artifacts_come_from_build_else_the_package_else_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build()
    assert artifacts.artifacts_dir() == artifacts.ARTIFACTS_DIR
    monkeypatch.setattr(artifacts, "ARTIFACTS_DIR", tmp_path / "no-build")
    monkeypatch.setattr(artifacts, "PACKAGED_DIR", ROOT / "build" / "contracts")  # stands for the wheel's copy
    assert artifacts.load("JobMarket").name == "JobMarket"
    monkeypatch.setattr(artifacts, "PACKAGED_DIR", tmp_path / "no-package")
    with pytest.raises(ArtifactsMissing, match="no compiled contracts in .*no-build nor in the installed package"):
        artifacts.load("JobMarket")


def test_containerfile_copies_files_that_exist_and_runs_a_command_that_exists() -> None:
    """The recipe cannot be built here (no container runtime): what it copies is in the repository or
    is the wheel `pip wheel -w dist .` writes, and its default command is a real one."""
    lines = CONTAINERFILE.read_text().splitlines()
    copied = [line.split()[1] for line in lines if line.startswith("COPY ")]
    assert "dist/veritrain-*.whl" in copied
    for source in copied:
        assert source == "dist/veritrain-*.whl" or (ROOT / source).is_file(), source
    [cmd] = [json.loads(line.removeprefix("CMD ")) for line in lines if line.startswith("CMD ")]
    [entry] = [json.loads(line.removeprefix("ENTRYPOINT ")) for line in lines if line.startswith("ENTRYPOINT ")]
    assert entry == ["veritrain"] and cmd[:2] == ["solver", "run"]
    shown = subprocess.run([sys.executable, "-m", "veritrain", *cmd[:2], "--help"], capture_output=True, text=True, check=True).stdout
    assert all(flag in shown for flag in cmd[2:] if flag.startswith("--"))


@pytest.fixture
def wheel_venv(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(the wheel, the bin/ of a fresh venv outside the repository with the wheel installed)."""
    build()
    dist = tmp_path / "dist"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dist), str(ROOT)], cwd=ROOT, check=True)
    [wheel] = dist.glob("veritrain-*.whl")
    venv = tmp_path / "venv"
    clean = _env(Path(sys.executable).parent)  # no PYTHONPATH: pip would take the checkout (its egg-info) for veritrain installed
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, cwd=tmp_path, env=clean)
    python = [str(venv / "bin" / "python")]
    purelib = Path(subprocess.check_output([*python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True, env=clean).strip())
    subprocess.run([*python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], check=True, cwd=tmp_path, env=clean)
    # written after installing: through it pip would see the repository's veritrain (its dist-info) as installed and skip the wheel
    (purelib / "repo-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    yield wheel, venv / "bin"


def _env(bin_dir: Path, **extra: str) -> dict[str, str]:
    """No PYTHONPATH (the repository's code), PATH the venv's bin only (no node, no npm, no solc)."""
    keep = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith("VERITRAIN_")}
    return {**keep, "PATH": str(bin_dir), **extra}


def test_the_wheel_deploys_and_runs_a_solver_that_stakes_with_no_node_modules(wheel_venv: tuple[Path, Path], tmp_path: Path) -> None:
    wheel, bin_dir = wheel_venv
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
    assert "core/compiled/manifest.json" in names and "core/compiled/JobMarket.json" in names and "deploy/params/devnet.json" in names
    assert "core/compiled/SealedJobs.json" in names  # every contract of the build, the newest included
    assert not any(n.startswith(("contracts/", "node_modules/", "build/", "tests/")) for n in names)
    print(f"wheel {wheel.name}: {wheel.stat().st_size:,} bytes")

    work = tmp_path / "gpu-owner"  # outside the repository: no build/, no node_modules
    work.mkdir()
    where = subprocess.run(
        [bin_dir / "python", "-c", "import core, core.artifacts as a, veritrain; print(core.__file__); print(a.artifacts_dir())"],
        cwd=work,
        env=_env(bin_dir),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    venv = bin_dir.parent
    assert all(Path(p).is_relative_to(venv) for p in where), where  # the wheel's code and ABIs, not the repository's
    assert Path(where[1]) == Path(where[0]).parent / "compiled"

    with Anvil(accounts=3) as anvil:
        deployer_key, solver_key = dev_private_key(0), dev_private_key(1)
        env = _env(bin_dir, DEPLOYER_KEY=deployer_key, SOLVER_KEY=solver_key)
        common = ["--rpc-url", anvil.rpc_url, "--address-book-dir", str(work / "deployments")]
        deployed = subprocess.run(
            [bin_dir / "veritrain", "deploy", *common, "--key-env", "DEPLOYER_KEY", "--json"], cwd=work, env=env, capture_output=True, text=True
        )
        assert deployed.returncode == 0, deployed.stderr
        book = AddressBook.load(Path(json.loads(deployed.stdout)["address_book_file"]))
        solver = dev_signers(2)[1].address
        sent = subprocess.run(
            [bin_dir / "veritrain", "transfer", solver, "500", *common, "--key-env", "DEPLOYER_KEY"], cwd=work, env=env, capture_output=True, text=True
        )
        assert sent.returncode == 0, sent.stderr

        config = work / "solver.toml"
        config.write_text(
            f'rpc-url = "{anvil.rpc_url}"\naddress-book-dir = "deployments"\ndata-dir = "data"\nkey-env = "SOLVER_KEY"\n'
            'stake = "200"\npoll = 0.3\ndevice = "cpu"\nlog-json = true\n'
        )
        log = (work / "solver.log").open("wb")
        run = subprocess.Popen([bin_dir / "veritrain", "solver", "run", "--config", str(config)], cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            chain = Protocol.connect(ChainClient(anvil.rpc_url), book)
            deadline = time.monotonic() + 240
            while time.monotonic() < deadline and run.poll() is None:
                if chain.stakes.stake_of(solver, Role.SOLVER).staked >= 200 * 10**18 and chain.stakes.capabilities_of(solver).advertised_at > 0:
                    break
                time.sleep(0.5)
            tail = (work / "solver.log").read_text()[-3000:]
            assert run.poll() is None, f"the solver exited {run.returncode}:\n{tail}"
            assert chain.stakes.stake_of(solver, Role.SOLVER).staked == 200 * 10**18, tail
            advert = chain.stakes.capabilities_of(solver)
            assert advert.advertised_at > 0 and advert.device == Device.CPU and advert.flops > 0, tail
        finally:
            run.terminate()
            run.wait(timeout=30)
            log.close()
