"""`veritrain whistleblower`: run the whistleblower daemon, or show its status and earnings.

Registered in veritrain/cli.py with ``app.add_typer(whistleblower_app, name="whistleblower")``;
``python -m veritrain whistleblower`` runs it in its own process (the demo starts daemons so).
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
from rolebase.earnings import jackpot_economics
from rolebase.status import status_base
from whistleblower.policy import DEFAULT_BUDGET_STEPS, WhistleblowerConfig
from whistleblower.state import WhistleblowerDb

app = options.command_group(
    "whistleblower",
    "The whistleblower daemon: stake, audit passing reports by replaying their probes and segments, challenge wrong reports and bad traces in the window, collect the rewards.",
)


@app.command()
@options.with_settings()
def run(
    settings: Settings,
    flags: DaemonFlags,
    stake: Annotated[str, typer.Option(help="whistleblower stake to hold, in VERI (0: the chain's minimum)")] = "0",
    audit_rate: Annotated[
        float, typer.Option(help="probability of auditing each passing report (drawn from a secret in the state dir)", min=0.0, max=1.0)
    ] = 1.0,
    budget: Annotated[
        int, typer.Option(help="training steps replayed per report at most: a probe at step m of its segment costs m, a segment its k steps", min=1)
    ] = DEFAULT_BUDGET_STEPS,
    audit_cost: Annotated[
        str, typer.Option(help="what one audit costs you, in VERI: audit only while the jackpot income it expects (p_f s J, from the chain) covers it")
    ] = "0",
    device: DeviceOption = "cpu",
    threads: ThreadsOption = 1,
    encryption_key: options.EncryptionKeyName = None,
    key_grace: Annotated[
        int, typer.Option(help="seconds past our wrap request before demanding a sealed job's key when no wrap to us opens (sooner at half the window)", min=0)
    ] = 20,
) -> None:
    """Run the whistleblower until SIGTERM or Ctrl-C. Safe to kill -9 and restart: an audit cut short is done again, a fault is never challenged twice.

    Each passing report whose challenge window is open is audited (with probability
    --audit-rate): its probes are replayed, then the segments its verifier replayed, then
    segments of the bot's own choosing, up to --budget training steps. A wrong probe opens a
    report game (the verifier defends), a bad segment a trace game (the solver defends); the
    bot then answers midpoints, times out a silent defender, draws the committee and settles.
    A sealed job's report is audited once a wrap of its key to us opens: the bot asks for one,
    and demands the key --key-grace seconds later if none opened.

    Examples:

      WB_KEY=0x... veritrain whistleblower run --key-env WB_KEY --stake 50

      veritrain whistleblower run --keystore wb.json --audit-rate 0.5 --budget 500 --audit-cost 1.5 --log-json

      veritrain whistleblower run --account carol --encryption-key carol   # read sealed jobs with key carol (veritrain keys new carol)
    """
    from whistleblower import daemon  # here, not above: the daemon's training stack loads in seconds, and only `run` needs it

    config = WhistleblowerConfig(
        stake_target=parse_tokens(stake, "--stake"),
        audit_rate=audit_rate,
        budget_steps=budget,
        audit_cost=parse_tokens(audit_cost, "--audit-cost"),
        encryption_key=options.encryption_key(settings, encryption_key, "whistleblower"),
        key_grace_s=key_grace,
    )
    rt = runtime_on(device, threads)
    flags.run(
        settings,
        lambda s, signer, store: daemon.build(s, signer, store, config, loop=flags.loop, rt=rt),
        status=("whistleblower", whistleblower_status),
    )


def _tables(report: dict[str, object]) -> Table | None:
    econ, earned = report["economics"], report["earnings"]
    assert isinstance(econ, dict) and isinstance(earned, dict)
    table = Table("what", "value", title="jackpot and earnings")
    table.add_row(
        "jackpot", f"{econ['jackpot']} VERI (share {econ['jackpot_share_bps']} bps per caught forced error, forced rate {econ['forced_error_rate_bps']} bps)"
    )
    table.add_row("expected jackpot income per audit (if first)", f"{econ['expected_per_audit']} VERI")
    table.add_row("games opened / won", f"{earned['games_opened']} / {earned['games_won']}")
    table.add_row("paid by won games (bonds back included)", f"{earned['paid']} VERI, of which jackpot {earned['jackpot_paid']} VERI")
    table.add_row("bonds posted", f"{earned['bonds_posted']} VERI")
    table.add_row("[bold]net[/]", f"[bold]{earned['net']} VERI[/]")
    audits = report["audits"]
    assert isinstance(audits, list)
    for a in audits:
        table.add_row(f"job {a['job_id']} ({a['chain_state']})", f"{a['summary']}; report {a['report_cid']}")
    return table


def whistleblower_status(protocol: Protocol, home: Path, me: Address, tokens: Callable[[int], str]) -> dict[str, object]:
    db_path = home / "state.sqlite"
    db = WhistleblowerDb(db_path) if db_path.exists() else None
    try:
        out = status_base(protocol, me, Role.WHISTLEBLOWER, db.db if db else None, tokens)
        out["economics"] = {k: v if k.endswith("_bps") else tokens(v) for k, v in jackpot_economics(protocol).items()}
        out["earnings"] = earnings(protocol, me, tokens)
        out["audits"] = [
            {
                "job_id": a.job_id,
                "chain_state": protocol.market.get_job(JobId(a.job_id)).state.name,
                "report_cid": a.report_cid,
                "faults": [f.to_json() for f in a.findings],
                "replayed_steps": a.replayed_steps,
                "summary": a.summary,
            }
            for a in (db.audits() if db else [])
        ]
    finally:
        if db is not None:
            db.close()
    return out


def earnings(protocol: Protocol, me: Address, tokens: Callable[[int], str]) -> dict[str, object]:
    """From chain events, not local records: what the games this account opened paid it.

    A won game's ``DisputeSettled.payout`` includes the challenge bond back and, for a conceded
    forced error, the jackpot share (also in ``ForcedErrorCaught``); net = paid - bonds posted.
    """
    start = protocol.book.deploy_block
    opened = protocol.game.events("DisputeOpened", start, challenger=me)
    ours = {int(e.args["gameId"]) for e in opened}
    won = [e for e in protocol.game.events("DisputeSettled", start) if int(e.args["gameId"]) in ours and e.args["winner"] == me]
    paid = sum(int(e.args["payout"]) for e in won)
    jackpot = sum(int(e.args["payout"]) for e in protocol.market.events("ForcedErrorCaught", start, whistleblower=me))
    bonds = len(opened) * protocol.game.params().challenge_bond
    return {
        "games_opened": len(opened),
        "games_won": len(won),
        "paid": tokens(paid),
        "jackpot_paid": tokens(jackpot),
        "bonds_posted": tokens(bonds),
        "net": ("-" if paid < bonds else "") + tokens(abs(paid - bonds)),
    }


app.command()(
    options.status_command(
        "whistleblower",
        whistleblower_status,
        _tables,
        """Show a whistleblower's stake, its daemon's last heartbeat, the jackpot's expected value per audit, its earnings and its audits.

    Examples:

      veritrain whistleblower status --address 0x90F79bf6EB2c4f870365E785982E1f101E93b906

      veritrain whistleblower status --key-env WB_KEY --json
    """,
    )
)
