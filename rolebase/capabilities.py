"""A job's compute and a solver's advertised capabilities, counted one way for the solver and the submitter.

A solver measures its speed on a reference job and advertises it on chain with its limits and its device
(``StakeManager.advertise``); a submitter reads the staked solvers' adverts before posting and warns when
none fits its job. Both count compute the same way: 6 FLOP per parameter per example (per token, for the
character transformer) per step, the forward and backward passes of a dense model. Speeds are that count
per second, so a job's FLOP divided by an advertised speed is its training time on that solver.

"Fits" means a solver will claim it: :func:`claim_misfit` is the one check of a spec against a solver's
limits, run by the solver before any claim (``solver.judge.SpecJudge``, with its own limits) and by the
submitter against each advert (:func:`misfit`, ``submit post --dry-run``), so the two cannot disagree:
the solver's limits (parameters, dataset, steps, and the training memory, which only the solver knows:
an advert has no field for it) and, for an advert, the training time doubled (``ESTIMATE_SAFETY``: the
solver doubles its measured times) against the job's commit window. The advertised device does not
decide a fit: every numerics profile runs on CPU and CUDA (proofs.numerics), with the same bits under
repro-v1 and repro-v2. Nor does a checkpoint's size: a challenged checkpoint of any size is answered through the
availability court, and a manifest of any length is a root of about 2 KB and pages (proofs.manifest,
docs/protocol.md). What only a dry run shows (inputs that do not load, training that does no work, the
measured time) the solver checks after.
"""

from __future__ import annotations

from core.contracts import Capabilities, Device
from proofs.spec import JobSpec, training_memory_bytes

#: The solver multiplies its measured training time by this before comparing it with a commit window.
ESTIMATE_SAFETY = 2.0


def step_flop(spec: JobSpec) -> int:
    """FLOP of one training step of ``spec``: 6 x parameters x examples (tokens) per step."""
    return 6 * spec.param_count() * spec.batch_size * getattr(spec.model, "block_size", 1)


def train_flop(spec: JobSpec) -> int:
    """FLOP of the whole training of ``spec``."""
    return step_flop(spec) * spec.steps


def device_of(name: str) -> Device:
    """The :class:`Device` a solver trains on with ``--device name`` (a torch device: "cpu", "cuda", "cuda:1")."""
    return Device.CPU if name.split(":", 1)[0] == "cpu" else Device.CUDA


def training_seconds(spec: JobSpec, flops: int) -> float:
    """The training time of ``spec`` at ``flops`` FLOP/s, with the solver's safety factor."""
    return ESTIMATE_SAFETY * train_flop(spec) / flops


def claim_misfit(
    spec: JobSpec,
    *,
    max_params: int,
    max_dataset_bytes: int,
    max_steps: int,
    max_memory_bytes: int | None = None,
) -> str:
    """Why a solver with these limits would refuse ``spec`` before any claim ("" when it would not).
    ``max_memory_bytes``: the training memory it gives a job (None: not known, an advert's)."""
    if spec.param_count() > max_params:
        return f"takes at most {max_params:,} parameters (the job has {spec.param_count():,})"
    if spec.dataset.size_bytes > max_dataset_bytes:
        return f"takes datasets of at most {max_dataset_bytes:,} bytes (the job's has {spec.dataset.size_bytes:,})"
    if spec.steps > max_steps:
        return f"takes at most {max_steps:,} steps (the job has {spec.steps:,})"
    memory = training_memory_bytes(spec)
    if max_memory_bytes is not None and memory > max_memory_bytes:
        return f"gives a job at most {max_memory_bytes / 2**30:,.1f} GiB of memory (training needs about {memory / 2**30:,.1f} GiB)"
    return ""


def misfit(caps: Capabilities, spec: JobSpec, commit_window: int, max_memory_bytes: int | None = None, window: str = "commit window") -> str:
    """Why a solver with these advertised capabilities would refuse the job ("" when it fits): its
    :func:`claim_misfit`, then the training time at its advertised speed against the commit window.
    ``max_memory_bytes``: the solver's own (a solver checking itself; an advert has no such field);
    ``window``: what the window is called (a multi-party round's: "work window")."""
    why = claim_misfit(spec, max_params=caps.max_params, max_dataset_bytes=caps.max_dataset_bytes, max_steps=caps.max_steps, max_memory_bytes=max_memory_bytes)
    if why:
        return why
    seconds = training_seconds(spec, caps.flops)
    if seconds > commit_window:
        return (
            f"would need about {seconds:,.0f} s at its {caps.flops / 1e9:,.2f} GFLOP/s (doubled, as solvers estimate), "
            f"more than the {commit_window:,} s {window}"
        )
    return ""


def round_spec(spec: JobSpec, inner_steps: int) -> JobSpec:
    """What one round of a multi-party job (docs/multiparty.md) asks of a party, for a fit: the base
    ``spec``'s model and batch for ``inner_steps`` steps, and its whole dataset (every party fetches it
    all: its shard is derived from it). A slot fits a solver when :func:`misfit` of this spec against
    the job's work window is "": the one check the solver runs before it joins and the submitter runs
    against each advert before it posts."""
    return spec.model_copy(update={"steps": inner_steps})


def job_size(spec: JobSpec) -> dict[str, int]:
    """What a job asks for, for ``--dry-run``: its parameters, steps and segments, the training's
    compute estimated as 6 FLOP per parameter per example (token, for the transformer) per step,
    and its peak memory estimated from the spec (what solvers compare with their memory)."""
    return {
        "parameters": spec.param_count(),
        "steps": spec.steps,
        "segments": spec.segments,
        "examples_per_step": spec.batch_size * getattr(spec.model, "block_size", 1),
        "train_flop": train_flop(spec),
        "memory_bytes": training_memory_bytes(spec),
    }
