"""`veritrain verifier`: run the verifier daemon, or show its status.

Registered in veritrain/cli.py with ``app.add_typer(verifier_app, name="verifier")``;
``python -m veritrain verifier`` runs it in its own process (the demo starts daemons so).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from core.chain import Address
from core.config import Settings
from core.contracts import JobId, Protocol, Role
from rolebase import cli as options
from rolebase.amounts import parse_tokens
from rolebase.cli import DaemonFlags
from rolebase.device import DeviceOption, ThreadsOption, runtime_on
from rolebase.status import status_base
from verifier.policy import VerifierConfig
from verifier.state import VerifierDb

app = options.command_group(
    "verifier",
    "The verifier daemon: stake, replay sampled segments when drawn, report with probes, open and play disputes, defend its probes, sit as referee; keep jobs moving.",
)


@app.command()
@options.with_settings()
def run(
    settings: Settings,
    flags: DaemonFlags,
    stake: Annotated[str, typer.Option(help="verifier stake to hold, in VERI (0: the chain's minimum)")] = "0",
    duties: Annotated[bool, typer.Option("--duties/--no-duties", help="also draw verifiers, finalize and time out silent parties")] = True,
    duty_grace: Annotated[int, typer.Option(help="seconds past due before a duty that does not pay this verifier", min=0)] = 30,
    device: DeviceOption = "cpu",
    threads: ThreadsOption = 1,
    encryption_key: options.EncryptionKeyName = None,
    key_grace: Annotated[
        int, typer.Option(help="seconds past a sealed job's draw before demanding its key when no wrap to us opens (sooner at half the report window)", min=0)
    ] = 20,
    lie: Annotated[bool, typer.Option("--lie", hidden=True, help="TEST ADVERSARY: fail honest traces and answer every midpoint wrong")] = False,
    lazy: Annotated[bool, typer.Option("--lazy", hidden=True, help="TEST ADVERSARY: pass every trace without replaying, guessing the probes")] = False,
) -> None:
    """Run the verifier until SIGTERM or Ctrl-C. Safe to kill -9 and restart.

    When its replay fails it opens the dispute game on the first failing segment and answers
    the solver's midpoints; when a whistleblower disputes one of its probes it concedes a forced
    error or defends the probe; drawn as a referee it re-executes the isolated step and votes.

    Examples:

      VERIFIER_KEY=0x... veritrain verifier run --key-env VERIFIER_KEY --stake 150

      veritrain verifier run --keystore verifier.json --no-duties --log-json

      veritrain verifier run --config verifier.toml --device cuda   # a TOML file of options

      veritrain verifier run --account bob --threads 8   # repro-v1 jobs' kernels on 8 cores (the same bits as on 1)

      veritrain verifier run --account bob --encryption-key bob   # read sealed jobs with key bob (veritrain keys new bob)
    """
    from verifier import daemon  # here, not above: the daemon's training stack loads in seconds, and only `run` needs it

    if lie and lazy:
        raise typer.BadParameter("--lie fails every trace, --lazy passes every one: pick one", param_hint="--lazy")
    config = VerifierConfig(
        stake_target=parse_tokens(stake, "--stake"),
        duties=duties,
        duty_grace_s=duty_grace,
        encryption_key=options.encryption_key(settings, encryption_key, "verifier"),
        key_grace_s=key_grace,
    )
    rt = runtime_on(device, threads)
    flags.run(
        settings,
        lambda s, signer, store: daemon.build(s, signer, store, config, loop=flags.loop, lie=lie, lazy=lazy, rt=rt),
        status=("verifier", verifier_status),
    )


def _assignments_table(report: dict[str, object]) -> Table | None:
    jobs = report["assignments"]
    assert isinstance(jobs, list)
    if not jobs:
        return None
    table = Table("job", "chain state", "local phase", "verdict", "report")
    for j in jobs:
        verdict = "-" if j["passed"] is None else ("pass" if j["passed"] else "FAIL")
        table.add_row(str(j["job_id"]), j["chain_state"], j["phase"], verdict, j["report_cid"] or "-")
    return table


def verifier_status(protocol: Protocol, home: Path, me: Address, tokens: Callable[[int], str]) -> dict[str, object]:
    """The status report; ``forced_seed_on_chain``: the chain holds the commitment of one of our forced
    secrets (draws can snapshot it), which the daemon keeps true."""
    db_path = home / "state.sqlite"
    if not db_path.exists():
        return {**status_base(protocol, me, Role.VERIFIER, None, tokens), "forced_seed_on_chain": False, "assignments": []}
    db = VerifierDb(db_path)
    try:
        out = status_base(protocol, me, Role.VERIFIER, db.db, tokens)
        out["forced_seed_on_chain"] = bytes(protocol.market.forced_seed_of(me).commitment) in db.forced_commitments()
        out["assignments"] = [
            {
                "job_id": r.job_id,
                "chain_state": protocol.market.get_job(JobId(r.job_id)).state.name,
                "phase": r.phase.value,
                "passed": r.passed,
                "report_cid": r.report_cid,
            }
            for r in db.assignments()
        ]
    finally:
        db.close()
    return out


app.command()(
    options.status_command(
        "verifier",
        verifier_status,
        _assignments_table,
        """Show a verifier's stake, its daemon's last heartbeat and its assignments.

    Examples:

      veritrain verifier status --address 0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC --json
    """,
    )
)
