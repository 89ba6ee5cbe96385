"""`veritrain warm` (:mod:`proofs.warm`): the kernels it compiles are every kernel the jobs run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from proofs import repro_kernels as K
from proofs.warm import kernels, warm
from tests.proofs.conftest import CHILD_LIVENESS_S

ROOT = Path(__file__).resolve().parents[2]


def test_warm_compiles_every_kernel_build_the_small_jobs_and_larger_ops_run() -> None:
    """In a fresh process: after the warm-up, every registry kind with SGD, Adam and AdamW, micro-batches,
    clipping, a schedule and a held-out split, under both numerics and both builds, and a linear,
    convolution and attention past the reference jobs' sizes compile no kernel build the warm-up had not
    (a build it skipped shows up: leaving out the ResNet misses ``rowsum``, the transposed matmul ``_contiguous``)."""
    proc = subprocess.run([sys.executable, "-m", "tests.proofs.warm_child"], cwd=ROOT, capture_output=True, text=True, timeout=CHILD_LIVENESS_S)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout)
    assert got["missed"] == {} and got["warmed"] >= 60, got


def test_warm_restores_the_threshold_between_builds_and_reports_every_step(monkeypatch) -> None:
    monkeypatch.setattr(K, "PARALLEL_MIN", 12_345.0)
    steps: list[str] = []
    warm(progress=steps.append)
    assert K.PARALLEL_MIN == 12_345.0
    assert len(steps) == len(set(steps)) == 20 and steps[0] == "repro-v1, serial builds: mlp-spirals", steps
    builds = kernels()
    # both numerics' builds, serial and parallel, of the matmul and the optimizers
    family = "_bmm_wide" if K.WIDE_TILES else "_bmm_narrow"
    wanted = {family, f"{family}_fma", *(f"{name}_serial" for name in (family, f"{family}_fma", "adam_update", "sgd_update")), "adam_update", "sgd_update"}
    assert wanted <= {name for name, d in builds.items() if d.signatures}


def test_the_warm_command_ends_in_one_line_with_the_builds_ready() -> None:
    result = subprocess.run([sys.executable, "-m", "veritrain", "warm"], cwd=ROOT, capture_output=True, text=True, timeout=CHILD_LIVENESS_S)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("repro-v1 and repro-v2 kernels ready for this CPU in ") and lines[0].endswith(" s"), result.stderr
