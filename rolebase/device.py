"""``--device cpu|cuda``: where a solver trains, a verifier replays and referees, a whistleblower audits, as the proofs
engine's :class:`proofs.train.Runtime` ``device``; ``--threads``: the CPU threads of its repro kernels (``repro-v1``, ``repro-v2``)
(``Runtime.repro_threads``).

``cuda`` is accepted only where torch sees a GPU. A job whose numerics cannot compute on the chosen
device (its profile's ``fault``: repro numerics on cuda need numba's CUDA target, docs/numerics.md) is never worked on there: a solver
does not claim it, a verifier drawn for it reports nothing and logs one line naming the job and
the numerics (an honest trace must never fail for the verifier's choice of device).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from core.errors import ConfigError
from proofs.numerics import profile
from proofs.spec import JobSpec

if TYPE_CHECKING:
    from proofs.train import Runtime

__all__ = ["DEVICES", "DeviceOption", "ThreadsOption", "runtime_on", "job_fault"]

DEVICES = ("cpu", "cuda")

DeviceOption = Annotated[
    str,
    typer.Option(
        "--device",
        help="cpu, or cuda where torch sees a GPU: where jobs are trained and replayed; jobs whose numerics cannot run there are refused",
    ),
]

ThreadsOption = Annotated[
    int,
    typer.Option(
        "--threads",
        help="CPU threads for repro-v1 and repro-v2 jobs' kernels (any count gives the same bits; give no more than the cores this role has to"
        " itself: a thread that waits for a core stalls every kernel); torch-numerics jobs always run one thread, as their exact replay needs",
        min=1,
        max=1024,
    ),
]


def runtime_on(device: str, threads: int = 1) -> Runtime:
    """The runtime of ``--device`` and ``--threads``; a device this machine lacks is a one-line error."""
    if device not in DEVICES:
        raise typer.BadParameter(f"{device!r} is not one of {', '.join(DEVICES)}", param_hint="--device")
    import torch  # here, not above: the commands that never train (--help, the chain and money commands) start without torch

    from proofs.train import Runtime

    if device == "cuda" and not torch.cuda.is_available():
        raise ConfigError("--device cuda: torch finds no CUDA device on this machine (torch.cuda.is_available() is false); use --device cpu")
    return Runtime(device=device, repro_threads=threads)


def job_fault(job_id: int, spec: JobSpec, rt: Runtime) -> str | None:
    """Why job ``job_id`` cannot be worked on with ``rt`` (None: it can), naming the job and its numerics."""
    fault = profile(spec.numerics).fault(rt.device)
    return None if fault is None else f"job {job_id}: {fault}; this role runs with --device {rt.device}"
