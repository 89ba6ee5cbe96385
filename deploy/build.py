"""Compile contracts/**/*.sol with the pinned solc and write build/contracts/<Name>.json.

Run as ``python -m deploy.build [--force]`` (``make build`` does). The
compiler settings mirror foundry.toml, so forge and Python see the same
bytecode. Incremental: when neither the sources, the settings nor the npm
lock file changed since the last build, nothing is recompiled.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import solcx
from solcx.exceptions import SolcError

from core.artifacts import ARTIFACTS_DIR, MANIFEST_NAME

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parent.parent
SOURCES_DIR = ROOT / "contracts"
SOLC = ROOT / "deploy" / "solc"
LOCK_FILE = ROOT / "package-lock.json"
BUILD_FORMAT = 2  # 2: artifacts carry the NatSpec notice of each custom error

# Same as foundry.toml ([profile.default]): optimizer on, 200 runs, cancun, OZ remapping.
SETTINGS: Mapping[str, Any] = {
    "optimizer": {"enabled": True, "runs": 200},
    "evmVersion": "cancun",
    "remappings": ["@openzeppelin/contracts/=node_modules/@openzeppelin/contracts/"],
}
OUTPUTS = ["abi", "userdoc", "devdoc", "evm.bytecode.object", "evm.deployedBytecode.object"]


class BuildError(Exception):
    """Compilation failed; the message is the compiler's."""


def _sources(root: Path) -> dict[str, str]:
    files = sorted(p for p in (root / "contracts").rglob("*.sol") if p.is_file())
    return {p.relative_to(root).as_posix(): p.read_text() for p in files}


def _input_hash(sources: Mapping[str, str], root: Path) -> str:
    digest = hashlib.sha256()
    digest.update(json.dumps({"format": BUILD_FORMAT, "settings": SETTINGS}, sort_keys=True).encode())
    lock = root / "package-lock.json"
    digest.update(lock.read_bytes() if lock.exists() else b"")
    for name, text in sources.items():
        digest.update(name.encode() + b"\0" + hashlib.sha256(text.encode()).digest())
    return digest.hexdigest()


def _up_to_date(out: Path, input_hash: str) -> bool:
    try:
        manifest = json.loads((out / MANIFEST_NAME).read_text())
    except (OSError, json.JSONDecodeError):
        return False
    if manifest.get("inputHash") != input_hash:
        return False
    return all((out / f"{name}.json").exists() for name in manifest.get("contracts", []))


def _write_atomic(path: Path, payload: Mapping[str, Any]) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(payload, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def compile_sources(sources: Mapping[str, str], root: Path) -> dict[str, Any]:
    """Standard-JSON compile of ``sources`` (path -> text) with the repository's settings."""
    standard_input = {
        "language": "Solidity",
        "sources": {name: {"content": text} for name, text in sources.items()},
        "settings": {**SETTINGS, "outputSelection": {name: {"*": OUTPUTS} for name in sources}},
    }
    try:
        return solcx.compile_standard(standard_input, base_path=str(root), solc_binary=str(root / "deploy" / "solc"))
    except SolcError as exc:
        raise BuildError(exc.message) from None


def _error_notices(userdoc: Mapping[str, Any], devdoc: Mapping[str, Any]) -> dict[str, str]:
    """Each custom error's ``@notice`` (else its ``@dev``, as OpenZeppelin's have) by error name: what
    the CLI says when it is raised."""
    notices: dict[str, str] = {}
    for docs, key in ((devdoc, "details"), (userdoc, "notice")):  # a notice wins over a dev comment
        for signature, entries in docs.get("errors", {}).items():
            text = " ".join(e.get(key, "") for e in entries).strip()
            if text:
                notices[signature.split("(", 1)[0]] = " ".join(text.split())
    return notices


def build(root: Path = ROOT, out: Path = ARTIFACTS_DIR, force: bool = False) -> list[str]:
    """Compile when inputs changed; returns the names of the contracts in the build."""
    sources = _sources(root)
    if not sources:
        raise BuildError(f"no Solidity sources under {root / 'contracts'}")
    input_hash = _input_hash(sources, root)
    out.mkdir(parents=True, exist_ok=True)
    if not force and _up_to_date(out, input_hash):
        names = json.loads((out / MANIFEST_NAME).read_text())["contracts"]
        log.info("artifacts up to date", extra={"contracts": len(names)})
        return list(names)

    log.info("compiling %d source files", len(sources))
    output = compile_sources(sources, root)
    previous: list[str] = []
    if (out / MANIFEST_NAME).exists():
        previous = json.loads((out / MANIFEST_NAME).read_text()).get("contracts", [])

    written: dict[str, str] = {}
    for source_name, contracts in sorted(output.get("contracts", {}).items()):
        source_hash = hashlib.sha256(sources[source_name].encode()).hexdigest()
        for name, compiled in sorted(contracts.items()):
            if name in written:
                raise BuildError(f"contract name {name} defined in both {written[name]} and {source_name}")
            written[name] = source_name
            _write_atomic(
                out / f"{name}.json",
                {
                    "contractName": name,
                    "sourceName": source_name,
                    "abi": compiled["abi"],
                    "bytecode": "0x" + compiled["evm"]["bytecode"]["object"],
                    "deployedBytecode": "0x" + compiled["evm"]["deployedBytecode"]["object"],
                    "sourceHash": source_hash,
                    "errorNotices": _error_notices(compiled.get("userdoc", {}), compiled.get("devdoc", {})),
                },
            )
    for stale in set(previous) - set(written):
        (out / f"{stale}.json").unlink(missing_ok=True)
    _write_atomic(
        out / MANIFEST_NAME,
        {"inputHash": input_hash, "settings": SETTINGS, "contracts": sorted(written), "format": BUILD_FORMAT},
    )
    log.info("wrote %d artifacts to %s", len(written), out)
    return sorted(written)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m deploy.build", description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="recompile even when nothing changed")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        names = build(force=args.force)
    except BuildError as exc:
        print(f"build failed:\n{exc}", file=sys.stderr)
        return 1
    print(f"{len(names)} contract artifacts in {ARTIFACTS_DIR.relative_to(ROOT)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
