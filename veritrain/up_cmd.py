"""`veritrain up`: a local network (a chain, solvers, verifiers, whistleblowers) until Ctrl-C."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from core.errors import VeritrainError
from deploy.anvil import dev_private_key
from rolebase.cli import console, err_console
from veritrain.devnet_cmd import DEV_KEY_WARNING
from veritrain.localnet import LocalNet, RoleProcess, interrupts_as_keyboard, start_local_net

#: Flags every daemon of a role gets: a verifier takes up a duty that pays another verifier 5 s past due
#: (not 30 s), so that a job's report or a game's move never waits long on a local chain.
ROLE_FLAGS = {"solver": ("--no-progress",), "verifier": ("--duty-grace", "5"), "whistleblower": ()}
#: How long the daemons have to start and stake (importing torch on two busy cores included).
STAKE_TIMEOUT_S = 300.0


def _daemon_summary(process: RoleProcess) -> dict[str, Any]:
    return {
        "name": process.name,
        "role": process.role,
        "address": process.address,
        "pid": process.pid,
        "state_dir": str(process.data_dir),
        "log_file": str(process.log_path),
    }


def summary(local: LocalNet, block_time: int, users: int, dashboard_port: int | None = None) -> dict[str, Any]:
    """What ``--json`` prints: where the chain is, the contracts, the store, each daemon, the free accounts."""
    net = local.net
    return {
        "rpc_url": net.rpc_url,
        "port": net.anvil.port,
        "chain_id": net.client.chain_id,
        "block_time_s": block_time,
        "anvil_pid": net.anvil.process.pid if net.anvil.process else None,
        "workdir": str(local.root),
        "store_dir": str(local.store_dir),
        "address_book_dir": str(local.book_dir),
        "contracts": {name: c.address for name, c in net.book.contracts.items()},
        "daemons": [_daemon_summary(p) for p in local.processes],
        "accounts": [
            {"index": i + 1, "address": net.accounts[i].address, "private_key": dev_private_key(i + 1), "tokens": str(net.fund)} for i in range(users)
        ],
        "dashboard_url": f"http://127.0.0.1:{dashboard_port}" if dashboard_port else None,
        "dev_key_warning": DEV_KEY_WARNING,
    }


def _print(info: dict[str, Any]) -> None:
    console.print(
        f"[bold green]local network up[/]  RPC [bold]{info['rpc_url']}[/]  chain id {info['chain_id']}  block time {info['block_time_s']} s", highlight=False
    )
    console.print(f"workdir {info['workdir']}  (store {info['store_dir']}, address books {info['address_book_dir']})", highlight=False, soft_wrap=True)
    contracts = Table("contract", "address", title="protocol")
    for name, address in info["contracts"].items():
        contracts.add_row(name, address)
    console.print(contracts)
    daemons = Table("daemon", "role", "address", "pid", "log", title="daemons (staked)")
    for d in info["daemons"]:
        daemons.add_row(d["name"], d["role"], d["address"], str(d["pid"]), d["log_file"])
    console.print(daemons)
    if info["dashboard_url"]:
        console.print(f"dashboard at {info['dashboard_url']}", highlight=False)
    console.print("[bold]accounts for you[/] (#, address, private key, VERI), funded and not used by any daemon:")
    for a in info["accounts"]:
        console.print(f"  {a['index']}  {a['address']}  {a['private_key']}  {int(a['tokens']) / 10**18:,.0f}", soft_wrap=True, highlight=False)
    console.print(f"[yellow]these are {DEV_KEY_WARNING}[/]")
    first = info["accounts"][0]
    console.print(
        f"export VERITRAIN_RPC_URL={info['rpc_url']} VERITRAIN_ADDRESS_BOOK_DIR={info['address_book_dir']} VERITRAIN_STORE_DIR={info['store_dir']}"
        f" ME={first['private_key']}\nveritrain submit post spec.json --data data.safetensors --key-env ME   # then: veritrain submit show 1"
        "\nCtrl-C stops every daemon and the chain",
        soft_wrap=True,
        highlight=False,
    )


def up(
    solvers: Annotated[int, typer.Option(help="solver daemons", min=0, max=20)] = 1,
    verifiers: Annotated[int, typer.Option(help="verifier daemons (a dispute needs the job's verifier and a committee of 3 others: 4)", min=0, max=20)] = 4,
    whistleblowers: Annotated[int, typer.Option(help="whistleblower daemons", min=0, max=20)] = 1,
    accounts: Annotated[int, typer.Option(help="funded dev accounts for you (a submitter's, say), besides the daemons'", min=1, max=20)] = 1,
    block_time: Annotated[int, typer.Option(help="seconds between blocks, mined with or without transactions, so that deadlines pass", min=1, max=60)] = 1,
    workdir: Annotated[
        Path | None, typer.Option(help="where the store, the address books and each daemon's state and log go (default: a new temporary directory)")
    ] = None,
    dashboard: Annotated[
        int | None, typer.Option(help="also serve `veritrain dashboard` on 127.0.0.1:PORT (live jobs, games, earnings)", min=1, max=65535, show_default=False)
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print one JSON object (chain, contracts, store, each daemon) once every daemon is staked")] = False,
) -> None:
    """Start a local network: a chain with the protocol deployed, solver, verifier and whistleblower daemons, until Ctrl-C.

    The chain is anvil on a free loopback port with the demo's short windows (challenge window 8 s).

    The daemons share an embedded store; each has its own dev key (in its environment), state directory and log file, and stakes on start.

    The network is reported (RPC URL, contracts, store, each daemon's pid and log, keys for you) once every daemon is staked; post jobs with `veritrain submit`.

    Ctrl-C (or SIGTERM) stops every daemon and the chain; the workdir, with every log, stays.

    Examples:

      veritrain up

      veritrain up --solvers 2 --verifiers 4 --whistleblowers 0 --workdir /tmp/vt-net

      veritrain up --verifiers 1 --json > net.json      # then jq -r .rpc_url net.json

      veritrain up --dashboard 8080                      # and watch it at http://127.0.0.1:8080
    """
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
        root = workdir.resolve()
    else:
        root = Path(tempfile.mkdtemp(prefix="veritrain-up-"))
    cast = [("solver", solvers), ("verifier", verifiers), ("whistleblower", whistleblowers)]
    say = err_console if json_out else console  # with --json, stdout holds the JSON object alone
    say.print(f"starting a local network in {root}", highlight=False, soft_wrap=True)
    try:
        with interrupts_as_keyboard(), start_local_net(root, accounts=accounts + solvers + verifiers + whistleblowers, block_time=block_time) as local:
            account = accounts  # the first `accounts` funded accounts are the user's
            for role, count in cast:
                for i in range(count):
                    local.daemon(role, account, f"{role}{i + 1}", *ROLE_FLAGS[role])
                    account += 1
            local.wait_staked(STAKE_TIMEOUT_S)
            if dashboard is not None:
                local.dashboard(dashboard)
            info = summary(local, block_time, accounts, dashboard)
            if json_out:
                print(json.dumps(info), flush=True)
            else:
                _print(info)
            while True:
                time.sleep(0.5)
                local.check_running()
    except KeyboardInterrupt:
        pass  # Ctrl-C or SIGTERM: the context above stopped every daemon, then the chain
    except VeritrainError:
        err_console.print(f"every process stopped; the workdir, with every log, is kept: {root}", highlight=False, soft_wrap=True)
        raise
    say.print(f"stopped every daemon and the chain; the workdir, with every log, is kept: {root}", highlight=False, soft_wrap=True)
