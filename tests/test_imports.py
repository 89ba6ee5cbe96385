"""The import rules of the tree, read from the source (docs/roles.md, "Layers"):

core  <  proofs  <  rolebase  <  solver | verifier | submitter | whistleblower  <  veritrain

A package imports only packages to its left (``deploy`` builds and deploys the contracts and
imports only ``core``); no role imports another role; the engine loads no chain library; and
``core`` is no command line: it imports no CLI or terminal library (options, their errors and
status text live in ``rolebase.cli`` and above).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ROLES = {"solver", "verifier", "submitter", "whistleblower"}
ALLOWED = {
    "core": set(),
    "proofs": {"core"},
    "deploy": {"core"},
    "rolebase": {"core", "proofs"},
    **{role: {"core", "proofs", "rolebase"} for role in ROLES},
    "veritrain": {"core", "proofs", "rolebase", "deploy", *ROLES},
}


def _imports(package: str, among: set[str] | frozenset[str] = frozenset(ALLOWED)) -> dict[str, set[str]]:
    """Top-level packages of ``among`` (the project's by default) each module of ``package`` imports, by module path."""
    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(ROOT))] = {n for n in names if n in among and n != package}
    return found


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_package_imports_only_the_layers_below_it(package: str) -> None:
    wrong = {module: sorted(names - ALLOWED[package]) for module, names in _imports(package).items() if names - ALLOWED[package]}
    assert wrong == {}, f"{package} may import only {sorted(ALLOWED[package])}"


def test_the_engine_loads_no_chain_or_network_library() -> None:
    code = (
        "import sys, proofs, proofs.replay, proofs.train, proofs.probes, proofs.repro, proofs.manifest, proofs.diloco;"
        "print(sorted({m.split('.')[0] for m in sys.modules if m.startswith(('web3', 'eth_', 'eth.', 'eth_account', 'requests', 'urllib3'))}))"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True, timeout=600)
    assert out.stdout.strip() == "[]"


def test_core_is_no_command_line() -> None:
    cli = {module: sorted(names) for module, names in _imports("core", {"typer", "rich", "click"}).items() if names}
    assert cli == {}


def _modules(path: Path) -> set[str]:
    """The full module names ``path`` imports absolutely (``from a.b import c``: ``a.b``)."""
    tree = ast.parse(path.read_text(), str(path))
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    return names | {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module}


def test_only_the_command_line_mounts_a_roles_commands_or_daemon() -> None:
    """The dashboard and the demo take from a role only its library (its service, timeline, curve), never
    its command module or its daemon; and the dashboard does not reach into the demo (issue 24)."""
    entries = {"veritrain/cli.py"}  # mounts each role's commands
    wrong = {
        str(path.relative_to(ROOT)): sorted(m for m in _modules(path) if m.split(".")[0] in ROLES and m.split(".")[-1] in ("cli", "daemon"))
        for path in sorted((ROOT / "veritrain").rglob("*.py"))
        if str(path.relative_to(ROOT)) not in entries
    }
    wrong = {module: names for module, names in wrong.items() if names}
    demo = {str(p.relative_to(ROOT)) for p in (ROOT / "veritrain" / "dashboard").rglob("*.py") if "veritrain.demo" in _modules(p)}
    assert wrong == {} and demo == set()


def test_the_command_line_starts_without_the_training_stack() -> None:
    """Every ``veritrain`` command imports the command line; torch and numba take seconds to load, so only
    what trains or replays loads them (a role's ``run``, the demo, the model commands, ``submit post --data``):
    ``--help`` and the chain, money, status, spec and data commands start without them."""
    code = "import sys, veritrain.cli; print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'numba', 'matplotlib'}))"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True, timeout=600)
    assert out.stdout.strip() == "[]"
