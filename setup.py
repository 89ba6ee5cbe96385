"""One build step beyond pyproject.toml: a wheel carries the compiled contracts.

Building a wheel (``pip wheel --no-deps --no-build-isolation .``) copies the artifacts that
``python -m deploy.build`` wrote to build/contracts (the manifest and the contracts it lists) into
the package as ``core/compiled/``, where :func:`core.artifacts.artifacts_dir` finds them when there
is no build/: a role installed from the wheel needs no Node.js, npm or solc. The repository keeps
one copy of every ABI (build/, ignored); an editable install reads build/ directly and copies nothing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ARTIFACTS = Path(__file__).resolve().parent / "build" / "contracts"
MANIFEST = "manifest.json"


class BuildWithArtifacts(build_py):
    """build_py, then the compiled contracts into ``<build_lib>/core/compiled``."""

    def run(self) -> None:
        super().run()
        if self.editable_mode:
            return
        manifest = ARTIFACTS / MANIFEST
        if not manifest.is_file():
            raise SystemExit(f"no compiled contracts in {ARTIFACTS}: run `make build` (or `python -m deploy.build`) before building the wheel")
        out = Path(self.build_lib) / "core" / "compiled"
        out.mkdir(parents=True, exist_ok=True)
        for name in json.loads(manifest.read_text())["contracts"]:
            shutil.copyfile(ARTIFACTS / f"{name}.json", out / f"{name}.json")
        shutil.copyfile(manifest, out / MANIFEST)


# setuptools' own build tree under build/ too (ignored), beside forge's and deploy.build's outputs
setup(cmdclass={"build_py": BuildWithArtifacts}, options={"build": {"build_base": "build/setuptools"}})
