"""`veritrain solver`: run the solver daemon, or show its status.

Registered in veritrain/cli.py with ``app.add_typer(solver_app, name="solver")``;
``python -m veritrain solver`` runs it in its own process (the demo starts daemons so).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeRemainingColumn
from rich.table import Table

from core.chain import Address
from core.config import Settings
from core.contracts import JobId, Protocol, Role
from rolebase import cli as options
from rolebase.amounts import parse_tokens
from rolebase.cli import DaemonFlags, show_time
from rolebase.device import DeviceOption, ThreadsOption, runtime_on
from rolebase.status import status_base
from solver.policy import Limits, SolverConfig
from solver.state import SolverDb

app = options.command_group("solver", "The solver daemon: stake, claim jobs, train, commit, collect pay.")


@app.command()
@options.with_settings()
def run(
    settings: Settings,
    flags: DaemonFlags,
    stake: Annotated[str, typer.Option(help="solver stake to hold, in VERI (0: the chain's minimum)")] = "0",
    max_active: Annotated[int, typer.Option(help="jobs trained at once (claimed, not yet committed)", min=1, max=16)] = 1,
    min_reward: Annotated[str, typer.Option(help="ignore jobs paying less than this, in VERI")] = "0",
    max_steps: Annotated[
        int, typer.Option(help="refuse jobs with more training steps than this (default: the protocol's limit)", min=1, max=Limits().max_steps)
    ] = Limits().max_steps,
    max_params: Annotated[
        int, typer.Option(help="refuse models with more parameters than this (default: the protocol's limit)", min=1, max=Limits().max_params)
    ] = Limits().max_params,
    max_data_mib: Annotated[
        int, typer.Option(help="refuse datasets larger than this many MiB (default: the protocol's limit)", min=1, max=Limits().max_dataset_bytes >> 20)
    ] = Limits().max_dataset_bytes >> 20,
    max_memory_gib: Annotated[
        float | None,
        typer.Option(
            help="refuse jobs whose training needs more memory than this many GiB, estimated from the spec, and claim none that would make training and the duties of the jobs held need more at once (default: this machine's memory, at most the protocol's limit)",
            min=0.5,
        ),
    ] = None,
    disk_budget: Annotated[
        str | None,
        typer.Option(
            help="bytes of checkpoints kept per job, e.g. 50GB (default: all of them): the others are regenerated on demand, and a job whose"
            " worst-case regeneration does not fit the availability window is refused"
        ),
    ] = None,
    device: DeviceOption = "cpu",
    threads: ThreadsOption = 1,
    encryption_key: options.EncryptionKeyName = None,
    multiparty: Annotated[
        bool,
        typer.Option(
            "--multiparty/--no-multiparty",
            help="take vacant slots of multi-party jobs (DiLoCo-style, docs/multiparty.md), locking each job's slot bond; a slot held is played either way",
        ),
    ] = False,
    duty_grace: Annotated[
        int, typer.Option(help="seconds past due before a multi-party job's permissionless move that does not wait on this solver", min=0)
    ] = 30,
    progress: Annotated[bool | None, typer.Option("--progress/--no-progress", help="progress bar (default: when stderr is a terminal)")] = None,
    cheat: Annotated[
        str | None,
        typer.Option(
            hidden=True,
            help="TEST/DEMO ADVERSARY: commit a cheating trace (proofs.adversary strategy), withhold: delete the checkpoints once committed, or stale-model: commit checkpoint 0 as the model",
        ),
    ] = None,
) -> None:
    """Run the solver until SIGTERM or Ctrl-C. Safe to kill -9 and restart: it resumes from the chain and its records.

    Examples:

      SOLVER_KEY=0x... veritrain solver run --key-env SOLVER_KEY --stake 200

      VERITRAIN_KEYSTORE_PASSWORD=... veritrain solver run --keystore solver.json --ipfs-api http://127.0.0.1:5001 --log-json

      veritrain solver run --config solver.toml --device cuda   # a TOML file of options

      veritrain solver run --account alice --threads 8   # repro-v1 jobs' kernels on 8 cores (the same bits as on 1)

      veritrain solver run --account alice --disk-budget 50GB   # keep at most 50 GB of checkpoints per job

      veritrain solver run --account alice --encryption-key alice   # read sealed jobs with key alice (veritrain keys new alice)

      veritrain solver run --account alice --multiparty   # also train rounds of multi-party jobs
    """
    from solver import daemon  # here, not above: the daemon's training stack loads in seconds, and only `run` needs it
    from solver.retention import BudgetError, parse_size

    if cheat is not None and cheat not in daemon.CHEATS:
        raise typer.BadParameter(f"{cheat!r} is not one of {', '.join(daemon.CHEATS)}", param_hint="--cheat")
    try:
        budget = None if disk_budget is None else parse_size(disk_budget)
    except BudgetError as exc:
        raise typer.BadParameter(str(exc), param_hint="--disk-budget") from None
    machine = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")  # this machine's physical memory
    memory = min(Limits().max_memory_bytes, machine) if max_memory_gib is None else int(max_memory_gib * 2**30)
    config = SolverConfig(
        stake_target=parse_tokens(stake, "--stake"),
        max_active=max_active,
        min_reward=parse_tokens(min_reward, "--min-reward"),
        disk_budget=budget,
        memory_bytes=memory,  # also what training a job and the duties of the jobs held may hold at once
        encryption_key=options.encryption_key(settings, encryption_key, "solver"),
        multiparty=multiparty,
        duty_grace_s=duty_grace,
    )
    limits = Limits(max_steps=max_steps, max_params=max_params, max_dataset_bytes=max_data_mib << 20, max_memory_bytes=memory)
    rt = runtime_on(device, threads)
    bar = _bar if (sys.stderr.isatty() if progress is None else progress) else None
    try:
        flags.run(
            settings,
            lambda s, signer, store: daemon.build(s, signer, store, config, limits=limits, loop=flags.loop, progress=bar, cheat=cheat, rt=rt),
            status=("solver", solver_status),
        )
    finally:
        _BARS.stop()


_BARS = Progress(
    TextColumn("job {task.fields[job]}"),
    BarColumn(),
    MofNCompleteColumn(),
    TextColumn("steps"),
    TimeRemainingColumn(),
    console=Console(stderr=True),
    transient=False,
)
_TASKS: dict[int, TaskID] = {}


def _bar(job_id: JobId, done: int, total: int) -> None:
    """The training progress bar (interactive runs only; logs say the same at every checkpoint)."""
    if job_id not in _TASKS:
        _BARS.start()
        _TASKS[job_id] = _BARS.add_task("train", total=total, job=job_id)
    _BARS.update(_TASKS[job_id], completed=done)


def solver_status(protocol: Protocol, home: Path, me: Address, tokens: Callable[[int], str]) -> dict[str, object]:
    db_path = home / "state.sqlite"
    if not db_path.exists():
        return {**status_base(protocol, me, Role.SOLVER, None, tokens), "jobs": []}
    db = SolverDb(db_path)
    try:
        out = status_base(protocol, me, Role.SOLVER, db.db, tokens)
        jobs = []
        for record in db.jobs():
            chain_job = protocol.market.get_job(JobId(record.job_id))
            checkpoints = db.checkpoints(record.job_id)
            jobs.append(
                {
                    "job_id": record.job_id,
                    "chain_state": chain_job.state.name,
                    "phase": record.phase.value,
                    "checkpoints": len(checkpoints),
                    "deadline": chain_job.deadline,
                    "manifest_cid": record.manifest_cid,
                }
            )
        out["jobs"] = jobs
    finally:
        db.close()
    return out


def _jobs_table(report: dict[str, object]) -> Table | None:
    jobs = report["jobs"]
    assert isinstance(jobs, list)
    if not jobs:
        return None
    table = Table("job", "chain state", "local phase", "checkpoints", "deadline", "manifest")
    for j in jobs:
        table.add_row(str(j["job_id"]), j["chain_state"], j["phase"], str(j["checkpoints"]), show_time(j["deadline"]), j["manifest_cid"] or "-")
    return table


app.command()(
    options.status_command(
        "solver",
        solver_status,
        _jobs_table,
        """Show a solver's stake, its daemon's last heartbeat and its jobs (local progress and chain state).

    Examples:

      veritrain solver status --address 0x70997970C51812dc3A010C7d01b50e0d17dc79C8

      SOLVER_KEY=0x... veritrain solver status --key-env SOLVER_KEY --json
    """,
    )
)
