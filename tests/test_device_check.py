"""``bench.device_check`` on a machine without a GPU: it runs no cell, says why and exits 2; and the
names its profile gives the GPU's kernels (numba's mangled and torch's demangled forms of one
kernel read the same)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.device_check import kernel_name, main

_MANGLED = (
    "_ZN6cudapy6proofs10repro_cuda9_make_bmm12_3clocals_3e6kernelB2v1B96cw51cXTLSUwv1sCUt9Ww1FEw0NRRQPKiLTj0gIGIFp_2b2oLQFEYYkHSQB1OQAk0Bynm21Oi"
    "zQ1K0UoIGvDpQE8oxrNQE_3dE5ArrayIfLi3E1A7mutable7alignedE5ArrayIfLi3E1A7mutable7alignedE5ArrayIfLi3E1A7mutable7alignedEbb"
)


@pytest.mark.parametrize(
    ("raw", "name"),
    [
        (_MANGLED, "_make_bmm.<locals>.kernel"),
        ("_ZN6cudapy6proofs10repro_cuda7_adam_kB2v1B96cw51cXTLSUwv1sCUt9Ww1FEw0NRRQ", "_adam_k"),
        (
            "proofs::repro_cuda::_make_bmm::_3clocals_3e::kernel[abi:v26][abi:cw51cXTLSUwv1sDUaKthqa](Array<float, 3, A, mutable, aligned>)",
            "_make_bmm.<locals>.kernel",
        ),
        ("proofs::repro_cuda::_colsum_k[abi:v27][abi:cw51cXTLSUwv1sDUaKthqaNgoKmjgOR3W3Cw6", "_colsum_k"),  # cut by the profiler
        (
            "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>(int, float*)",
            "void at::native::vectorized_elementwise_kernel",
        ),
        ("Memcpy DtoD (Device -> Device)", "Memcpy DtoD "),
    ],
)
def test_a_profiled_kernel_is_named_after_its_function(raw: str, name: str) -> None:
    assert kernel_name(raw) == name


def test_without_a_gpu_no_cell_runs_and_the_report_says_why(tmp_path: Path) -> None:
    assert main(["--out", str(tmp_path), "--quick"]) == 2
    report = json.loads((tmp_path / "device_check.json").read_text())
    assert report["results"] == []
    assert "torch sees no CUDA GPU" in report["no_gpu"]
    assert "No cell ran (exit 2)" in (tmp_path / "device_check.txt").read_text()


def test_the_summary_counts_cells_the_time_budget_left_out_apart_from_mismatches() -> None:
    from bench.device_check import _table

    rows = [
        {"section": "kernels", "name": "linear", "status": "ok"},
        {"section": "replay", "name": "10M gpt adam", "status": "MISMATCH"},
        {"section": "replay", "name": "repro-v2 10M gpt adam", "status": "skipped"},
        {"section": "speed", "name": "gpt-10M", "status": "error"},  # speed cells measure only
    ]
    summary = _table({}, rows).strip().splitlines()[-1]
    assert summary == "bit-identity cells: 1 of 3 ok (repro-v1 1 of 2, repro-v2 0 of 1); not ok: 10M gpt adam; 1 not run (--budget-s spent)"
