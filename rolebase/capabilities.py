"""A job's compute and a solver's advertised capabilities, counted one way for the solver and the submitter.

A solver measures its speed on a reference job and advertises it on chain with its limits and its device
(``StakeManager.advertise``); a submitter reads the staked solvers' adverts before posting and warns when
none fits its job. Both count compute the same way: 6 FLOP per parameter per example (per token, for the
character transformer) per step, the forward and backward passes of a dense model. Speeds are that count
per second, so a job's FLOP divided by an advertised speed is its training time on that solver.

The fit mirrors the solver's own check before a claim (docs/roles.md, "A solver that cannot be drained"):
its limits and the training time doubled (``ESTIMATE_SAFETY``: the solver doubles its measured times)
against the job's commit window. The advertised device does not decide a fit: both numerics profiles
run on CPU and CUDA (proofs.numerics), with the same bits under repro-v1.
"""

from __future__ import annotations

from core.contracts import Capabilities
from proofs.spec import JobSpec

#: The solver multiplies its measured training time by this before comparing it with a commit window.
ESTIMATE_SAFETY = 2.0


def step_flop(spec: JobSpec) -> int:
    """FLOP of one training step of ``spec``: 6 x parameters x examples (tokens) per step."""
    return 6 * spec.param_count() * spec.batch_size * getattr(spec.model, "block_size", 1)


def train_flop(spec: JobSpec) -> int:
    """FLOP of the whole training of ``spec``."""
    return step_flop(spec) * spec.steps


def training_seconds(spec: JobSpec, flops: int) -> float:
    """The training time of ``spec`` at ``flops`` FLOP/s, with the solver's safety factor."""
    return ESTIMATE_SAFETY * train_flop(spec) / flops


def misfit(caps: Capabilities, spec: JobSpec, commit_window: int) -> str:
    """Why a solver with these capabilities would refuse the job ("" when it fits)."""
    if spec.param_count() > caps.max_params:
        return f"takes at most {caps.max_params:,} parameters (the job has {spec.param_count():,})"
    if spec.dataset.size_bytes > caps.max_dataset_bytes:
        return f"takes datasets of at most {caps.max_dataset_bytes:,} bytes (the job's has {spec.dataset.size_bytes:,})"
    if spec.steps > caps.max_steps:
        return f"takes at most {caps.max_steps:,} steps (the job has {spec.steps:,})"
    seconds = training_seconds(spec, caps.flops)
    if seconds > commit_window:
        return (
            f"would need about {seconds:,.0f} s at its {caps.flops / 1e9:,.2f} GFLOP/s (doubled, as solvers estimate), "
            f"more than the {commit_window:,} s commit window"
        )
    return ""
