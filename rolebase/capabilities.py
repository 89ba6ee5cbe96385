"""A job's compute and a solver's advertised capabilities, counted one way for the solver and the submitter.

A solver measures its speed on a reference job and advertises it on chain with its limits and its device
(``StakeManager.advertise``); a submitter reads the staked solvers' adverts before posting and warns when
none fits its job. Both count compute the same way: 6 FLOP per parameter per example (per token, for the
character transformer) per step, the forward and backward passes of a dense model. Speeds are that count
per second, so a job's FLOP divided by an advertised speed is its training time on that solver.

"Fits" means a solver will claim it: :func:`claim_misfit` is the one check of a spec against a solver's
limits, run by the solver before any claim (``solver.work.SpecJudge``, with its own limits) and by the
submitter against each advert (:func:`misfit`, ``submit post --dry-run``), so the two cannot disagree:
the solver's limits (parameters, dataset, steps, and the training memory, which only the solver knows:
an advert has no field for it), the device the spec's numerics need, what the chain lets a solver
publish when a verifier challenges availability (its largest checkpoint against
``core.contracts.max_published_checkpoint_bytes`` of the block gas limit, docs/protocol.md, "Data
availability"), and, for an advert, the training time doubled (``ESTIMATE_SAFETY``: the solver doubles
its measured times) against the job's commit window. What only a dry run shows (inputs that do not load,
training that does no work, the measured time) the solver checks after.
"""

from __future__ import annotations

import functools

from core.contracts import Capabilities, Device
from proofs.spec import JobSpec, training_memory_bytes
from proofs.train import checkpoint_size

#: The solver multiplies its measured training time by this before comparing it with a commit window.
ESTIMATE_SAFETY = 2.0


def step_flop(spec: JobSpec) -> int:
    """FLOP of one training step of ``spec``: 6 x parameters x examples (tokens) per step."""
    return 6 * spec.param_count() * spec.batch_size * getattr(spec.model, "block_size", 1)


def train_flop(spec: JobSpec) -> int:
    """FLOP of the whole training of ``spec``."""
    return step_flop(spec) * spec.steps


def device_needed(spec: JobSpec) -> Device | None:
    """The device the spec's numerics run on: ``repro-v1`` kernels run on the CPU; ``torch`` on any."""
    return Device.CPU if spec.numerics == "repro-v1" else None


def device_of(name: str) -> Device:
    """The :class:`Device` a solver trains on with ``--device name`` (a torch device: "cpu", "cuda", "cuda:1")."""
    return Device.CPU if name.split(":", 1)[0] == "cpu" else Device.CUDA


def training_seconds(spec: JobSpec, flops: int) -> float:
    """The training time of ``spec`` at ``flops`` FLOP/s, with the solver's safety factor."""
    return ESTIMATE_SAFETY * train_flop(spec) / flops


@functools.lru_cache(maxsize=256)
def _largest_checkpoint(spec: JobSpec) -> int:
    """``proofs.train.checkpoint_size``, once per spec: a fit check reads it for every advert."""
    return checkpoint_size(spec)


def claim_misfit(
    spec: JobSpec,
    *,
    max_params: int,
    max_dataset_bytes: int,
    max_steps: int,
    device: Device,
    publishable_bytes: int,
    max_memory_bytes: int | None = None,
) -> str:
    """Why a solver with these limits, training on ``device``, on a chain that lets it publish
    checkpoints of at most ``publishable_bytes``, would refuse ``spec`` before any claim ("" when it
    would not). ``max_memory_bytes``: the training memory it gives a job (None: not known, an advert's)."""
    if spec.param_count() > max_params:
        return f"takes at most {max_params:,} parameters (the job has {spec.param_count():,})"
    if spec.dataset.size_bytes > max_dataset_bytes:
        return f"takes datasets of at most {max_dataset_bytes:,} bytes (the job's has {spec.dataset.size_bytes:,})"
    if spec.steps > max_steps:
        return f"takes at most {max_steps:,} steps (the job has {spec.steps:,})"
    memory = training_memory_bytes(spec)
    if max_memory_bytes is not None and memory > max_memory_bytes:
        return f"gives a job at most {max_memory_bytes / 2**30:,.1f} GiB of memory (training needs about {memory / 2**30:,.1f} GiB)"
    need = device_needed(spec)
    if need is not None and device is not need:
        return f"trains on {device.name}, and numerics {spec.numerics} run on the {need.name}"
    checkpoint = _largest_checkpoint(spec)
    if checkpoint > publishable_bytes:
        return (
            f"could not publish its checkpoints of {checkpoint:,} bytes on chain (at most {publishable_bytes:,} fit this chain's blocks) "
            "if a verifier challenged their availability"
        )
    return ""


def misfit(caps: Capabilities, spec: JobSpec, commit_window: int, publishable_bytes: int) -> str:
    """Why a solver with these advertised capabilities would refuse the job ("" when it fits): its
    :func:`claim_misfit`, then the training time at its advertised speed against the commit window."""
    why = claim_misfit(
        spec,
        max_params=caps.max_params,
        max_dataset_bytes=caps.max_dataset_bytes,
        max_steps=caps.max_steps,
        device=caps.device,
        publishable_bytes=publishable_bytes,
    )
    if why:
        return why
    seconds = training_seconds(spec, caps.flops)
    if seconds > commit_window:
        return (
            f"would need about {seconds:,.0f} s at its {caps.flops / 1e9:,.2f} GFLOP/s (doubled, as solvers estimate), "
            f"more than the {commit_window:,} s commit window"
        )
    return ""
