"""Compiled contract artifacts: the only place Python reads ABIs and bytecode from.

``python -m deploy.build`` (run by ``make build``) writes one JSON file per
contract to ``build/contracts/<Name>.json``; this module only reads them. A
checkout reads them there; an installed wheel reads the copy that building the
wheel put into the package (``core/compiled/``, setup.py's build step), so a
role runs with no Node.js, npm or solc. build/ wins when both exist.
"""

from __future__ import annotations

import copy
import hashlib
import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eth_typing import ABIElement

from core.bounded import InputRejected, load_json, read_regular_file
from core.errors import ArtifactsMissing

__all__ = ["Artifact", "ARTIFACTS_DIR", "PACKAGED_DIR", "MANIFEST_NAME", "artifacts_dir", "load", "load_all", "fingerprint"]

#: Where ``python -m deploy.build`` writes, in a checkout.
ARTIFACTS_DIR = Path(__file__).resolve().parent.parent / "build" / "contracts"
#: Where a wheel carries them (package data copied from build/contracts when the wheel is built).
PACKAGED_DIR = Path(__file__).resolve().parent / "compiled"
MANIFEST_NAME = "manifest.json"

_MAX_ARTIFACT_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Artifact:
    """One compiled contract (interfaces and libraries included; their bytecode may be empty)."""

    name: str
    source: str
    abi: tuple[ABIElement, ...]
    bytecode: bytes
    deployed_bytecode: bytes
    source_hash: str
    error_notices: Mapping[str, str]  # custom error name -> its NatSpec @notice

    @property
    def deployable(self) -> bool:
        return len(self.bytecode) > 0

    def abi_list(self) -> list[ABIElement]:
        """A fresh mutable copy of the ABI, in the shape web3 expects."""
        return copy.deepcopy(list(self.abi))


def _missing(why: str) -> ArtifactsMissing:
    return ArtifactsMissing(f"{why}: run `make build` (or `python -m deploy.build`)")


def artifacts_dir() -> Path:
    """build/contracts in a checkout that has built them, else the wheel's packaged copy."""
    for directory in (ARTIFACTS_DIR, PACKAGED_DIR):
        if (directory / MANIFEST_NAME).is_file():
            return directory
    raise _missing(f"no compiled contracts in {ARTIFACTS_DIR} nor in the installed package ({PACKAGED_DIR})")


def _read_json(path: Path) -> Any:
    if not path.exists():
        raise _missing(f"no compiled artifact at {path}")
    try:
        return load_json(read_regular_file(path, max_bytes=_MAX_ARTIFACT_BYTES, what="artifact"), max_bytes=_MAX_ARTIFACT_BYTES, what=f"artifact {path}")
    except InputRejected as exc:
        raise _missing(f"unreadable artifact ({exc})") from None


def _parse(path: Path) -> Artifact:
    raw = _read_json(path)
    try:
        return Artifact(
            name=str(raw["contractName"]),
            source=str(raw["sourceName"]),
            abi=tuple(raw["abi"]),
            bytecode=bytes.fromhex(raw["bytecode"].removeprefix("0x")),
            deployed_bytecode=bytes.fromhex(raw["deployedBytecode"].removeprefix("0x")),
            source_hash=str(raw["sourceHash"]),
            error_notices={str(k): str(v) for k, v in raw.get("errorNotices", {}).items()},
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _missing(f"malformed artifact {path} ({exc!r})") from None


_cache_lock = threading.Lock()
_cache: dict[Path, tuple[int, Artifact]] = {}


def load(name: str, directory: Path | None = None) -> Artifact:
    """The artifact of contract ``name``; raises :class:`ArtifactsMissing` when absent."""
    if not name.isidentifier():
        raise ArtifactsMissing(f"not a contract name: {name!r}")
    path = (directory or artifacts_dir()) / f"{name}.json"
    try:
        mtime = path.stat().st_mtime_ns
    except FileNotFoundError:
        raise _missing(f"no compiled artifact for contract {name} in {path.parent}") from None
    with _cache_lock:
        hit = _cache.get(path)
        if hit is not None and hit[0] == mtime:
            return hit[1]
    artifact = _parse(path)
    with _cache_lock:
        _cache[path] = (mtime, artifact)
    return artifact


def _manifest(directory: Path) -> Mapping[str, Any]:
    manifest = _read_json(directory / MANIFEST_NAME)
    if not isinstance(manifest, dict) or not isinstance(manifest.get("contracts"), list):
        raise _missing(f"malformed build manifest in {directory}")
    return manifest


def load_all(directory: Path | None = None) -> dict[str, Artifact]:
    """Every artifact the last build wrote, by contract name."""
    root = directory or artifacts_dir()
    return {name: load(name, root) for name in _manifest(root)["contracts"]}


def fingerprint(directory: Path | None = None) -> str:
    """A digest that changes whenever the build's inputs change (cheap: reads the manifest)."""
    root = directory or artifacts_dir()
    manifest = _manifest(root)
    return hashlib.sha256(json.dumps(manifest, sort_keys=True).encode()).hexdigest()
