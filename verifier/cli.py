"""`veritrain verifier`: run the verifier daemon, or show its status.

Registered in veritrain/cli.py with ``app.add_typer(verifier_app, name="verifier")``;
``python -m veritrain verifier`` runs it in its own process (the demo starts daemons so).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from core.agent import LoopSettings, configure_logging, open_store
from core.chain import Address
from core.contracts import JobId, Protocol, Role
from core.localdb import read_heartbeat
from solver.cli import IpfsApi, LogJson, StoreDir, who
from submitter.amounts import parse_tokens, show_tokens
from verifier import daemon
from verifier.policy import VerifierConfig
from verifier.state import VerifierDb
from veritrain import options
from veritrain.options import console

app = typer.Typer(name="verifier", help="The verifier daemon: stake, replay sampled segments when drawn, report; keep jobs moving.", no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)


@app.command()
def run(
    rpc: options.Rpc = None,
    chain_id: options.ChainId = None,
    book_dir: options.BookDir = None,
    data_dir: options.DataDir = None,
    keystore: options.Keystore = None,
    key_env: options.KeyEnv = None,
    store_dir: StoreDir = None,
    ipfs_api: IpfsApi = None,
    stake: Annotated[str, typer.Option(help="verifier stake to hold, in VERI (0: the chain's minimum)")] = "0",
    duties: Annotated[bool, typer.Option("--duties/--no-duties", help="also draw verifiers, finalize and time out silent parties")] = True,
    duty_grace: Annotated[int, typer.Option(help="seconds past due before a duty that does not pay this verifier", min=0)] = 30,
    poll: Annotated[float, typer.Option(help="seconds between polls of the chain", min=0.05, max=600)] = 2.0,
    log_json: LogJson = False,
    log_level: Annotated[str, typer.Option(help="DEBUG, INFO, WARNING")] = "INFO",
) -> None:
    """Run the verifier until SIGTERM or Ctrl-C. Safe to kill -9 and restart.

    Examples:

      VERIFIER_KEY=0x... veritrain verifier run --key-env VERIFIER_KEY --stake 150

      veritrain verifier run --keystore verifier.json --no-duties --log-json
    """
    configure_logging(level=log_level, json_lines=log_json)
    settings = options.settings(rpc_url=rpc, chain_id=chain_id, address_book_dir=book_dir, data_dir=data_dir, keystore=keystore, key_env=key_env)
    signer = options.signer(settings)
    store = open_store(store_dir=store_dir, ipfs_api=ipfs_api, data_dir=settings.data_dir)
    config = VerifierConfig(stake_target=parse_tokens(stake, "--stake"), duties=duties, duty_grace_s=duty_grace)
    daemon.build(settings, signer, store, config, loop=LoopSettings(poll_interval_s=poll)).run()


@app.command()
def status(
    rpc: options.Rpc = None,
    chain_id: options.ChainId = None,
    book_dir: options.BookDir = None,
    data_dir: options.DataDir = None,
    keystore: options.Keystore = None,
    key_env: options.KeyEnv = None,
    address: Annotated[str | None, typer.Option(help="verifier address (instead of a key: status needs no secret)")] = None,
    json_out: options.Json = False,
) -> None:
    """Show a verifier's stake, its daemon's last heartbeat and its assignments.

    Examples:

      veritrain verifier status --address 0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC --json
    """
    settings = options.settings(rpc_url=rpc, chain_id=chain_id, address_book_dir=book_dir, data_dir=data_dir, keystore=keystore, key_env=key_env)
    me = who(address, settings.keystore, settings.key_env)
    client = options.client(settings)
    protocol = Protocol.connect(client, options.address_book(settings, client))
    report = verifier_status(protocol, daemon.state_dir(settings.data_dir, me), me)
    if json_out:
        print(json.dumps(report, indent=2))
        return
    stake = report["stake"]
    assert isinstance(stake, dict)
    console.print(f"verifier [bold]{report['address']}[/]  balance {report['balance']} VERI  staked {stake['staked']} (locked {stake['locked']})")
    beat = report["daemon"]
    if isinstance(beat, dict):
        state = "[green]running[/]" if beat["running"] else "[red]not running[/]"
        console.print(f"daemon pid {beat['pid']} {state}, last tick {beat['last_tick_s_ago']} s ago, {beat['ticks']} ticks, last error: {beat['last_error'] or '-'}")
    else:
        console.print("daemon: no records (never ran with this data dir)")
    jobs = report["assignments"]
    assert isinstance(jobs, list)
    if jobs:
        table = Table("job", "chain state", "local phase", "verdict", "report")
        for j in jobs:
            verdict = "-" if j["passed"] is None else ("pass" if j["passed"] else "FAIL")
            table.add_row(str(j["job_id"]), j["chain_state"], j["phase"], verdict, j["report_cid"] or "-")
        console.print(table)


def verifier_status(protocol: Protocol, home: Path, me: Address) -> dict[str, object]:
    stake = protocol.stakes.stake_of(me, Role.VERIFIER)
    out: dict[str, object] = {
        "address": me,
        "balance": show_tokens(protocol.token.balance_of(me)),
        "stake": {"staked": show_tokens(stake.staked), "locked": show_tokens(stake.locked), "unbonding": show_tokens(stake.unbonding)},
        "daemon": None,
        "assignments": [],
    }
    db_path = home / "state.sqlite"
    if not db_path.exists():
        return out
    db = VerifierDb(db_path)
    try:
        beat = read_heartbeat(db.db)
        if beat is not None:
            out["daemon"] = beat.summary(time.time())
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

