"""repro-v1's and repro-v2's CUDA kernels (proofs.repro_cuda) give the CPU kernels' bits: run in numba's CUDA
simulator, in a child process (``NUMBA_ENABLE_CUDASIM`` must be set before numba loads), on tiny
shapes. On a GPU, ``python -m bench.device_check`` runs the same comparison on the device."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from proofs import repro_cuda
from proofs.numerics import profile
from tests.proofs.conftest import CHILD_LIVENESS_S

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).with_name("cuda_sim_child.py")


def _sim(*args: str) -> dict[str, Any]:
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, str(CHILD), *args], capture_output=True, text=True, cwd=ROOT, env=env, timeout=CHILD_LIVENESS_S)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_cuda_kernel_gives_the_cpu_kernels_bits_forward_and_backward() -> None:
    """Each op's forward and gradients (the contractions under both numerics), every matmul tile
    shape (transposed operands read in place), the simulator's fused multiply-add against the exact
    one, exp/log/tanh on edge values, and the optimizer, accumulation and clipping kernels."""
    result = _sim("kernels")
    assert result["mismatches"] == [] and result["checked"] >= 90


@pytest.mark.parametrize("numerics", ["repro-v1", "repro-v2"])
@pytest.mark.parametrize("kind", ["mlp", "cnn", "char-transformer", "gpt", "resnet"])
def test_two_training_steps_through_the_cuda_kernels_give_the_cpu_state(kind: str, numerics: str) -> None:
    """Every operation, gradient and update of two steps with SGD (momentum, nesterov, weight decay)
    and with Adam (weight decay) through the simulated CUDA kernels (repro-v2: Adam, its optimizers
    being repro-v1's): the CPU kernels' state hash and losses. (The gpt, left out for a while, mismatched in some runs and not
    others: numba's simulated shared memory, which the child makes atomic, docs/numerics.md.)"""
    result = _sim("train", kind, numerics)
    assert result["mismatches"] == [] and result["checked"] == (4 if numerics == "repro-v1" else 2)


def test_the_numerics_profile_says_which_kernels_and_devices() -> None:
    """One profile per spec: repro-v1 and repro-v2 run the fixed-sequence kernels on CPU and CUDA with
    portable bits (CUDA where numba's CUDA target finds the GPU; v2's contractions fused), torch's
    kernels anywhere torch runs; other device types are refused by name."""
    repro, fused, plain = profile("repro-v1"), profile("repro-v2"), profile("torch")
    assert (repro.repro, repro.portable, repro.devices, repro.fused) == (True, True, ("cpu", "cuda"), False)
    assert (fused.repro, fused.portable, fused.devices, fused.fused) == (True, True, ("cpu", "cuda"), True)
    assert (plain.repro, plain.portable, plain.devices, plain.fused) == (False, False, ("cpu", "cuda"), False)
    assert repro.fault("cpu") is None and plain.fault("cuda") is None
    assert repro.fault("mps") == "numerics repro-v1 runs on cpu or cuda, not mps"
    why = repro_cuda.unavailable()
    assert repro.fault("cuda") == (None if why is None else f"numerics repro-v1 cannot run on cuda here: {why}")
