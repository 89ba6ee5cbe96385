"""`veritrain devnet`: a local chain with the protocol deployed, until Ctrl-C."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer
from rich.table import Table

from core.errors import ConfigError
from deploy.anvil import dev_private_key, port_free
from deploy.devnet import DEFAULT_FUND, Devnet, start_devnet
from rolebase import cli as options
from rolebase.cli import console
from veritrain.deploy_cmd import Params, load_params

#: The port of the RPC URL every other command defaults to (http://127.0.0.1:8545, like anvil's).
DEFAULT_PORT = 8545

DEV_KEY_WARNING = "anvil's PUBLIC test keys (mnemonic 'test test ... junk'): known to everyone, never use them on a real network"


def _summary(net: Devnet, block_time: int) -> dict[str, object]:
    return {
        "rpc_url": net.rpc_url,
        "block_time_s": block_time,
        "chain_id": net.client.chain_id,
        "address_book": {name: c.address for name, c in net.book.contracts.items()},
        "dispute_game": net.book.address("DisputeGame"),
        "deployer": net.deployer.address,
        "accounts": [
            {"index": i, "address": s.address, "private_key": dev_private_key(i), "tokens": net.fund if i else None}
            for i, s in enumerate([net.deployer, *net.accounts])
        ],
        "dev_key_warning": DEV_KEY_WARNING,
    }


def _print(net: Devnet, book_file: Path, block_time: int) -> None:
    console.print(
        f"[bold green]devnet ready[/]  RPC [bold]{net.rpc_url}[/]  chain id {net.client.chain_id}  block time {block_time or 'per transaction'}{' s' if block_time else ''}"
    )
    console.print(f"address book: {book_file}")
    contracts = Table("contract", "address", title="protocol")
    for name, c in net.book.contracts.items():
        contracts.add_row(name, c.address)
    console.print(contracts)
    console.print(f"dispute game: [bold]{net.book.address('DisputeGame')}[/] (wired to the JobMarket and the StakeManager)")
    console.print("[bold]dev accounts[/] (#, address, private key, VERI):")
    for i, s in enumerate([net.deployer, *net.accounts]):
        tokens = "deployer, rest of the supply" if i == 0 else f"{net.fund / 10**18:,.0f}"
        console.print(f"  {i}  {s.address}  {dev_private_key(i)}  {tokens}", soft_wrap=True, highlight=False)
    console.print(f"[yellow]these are {DEV_KEY_WARNING}[/]")
    console.print(f"export VERITRAIN_RPC_URL={net.rpc_url}   # then use other veritrain commands; Ctrl-C stops the devnet")


def devnet(
    port: Annotated[int, typer.Option(help="port on 127.0.0.1, the other commands' default RPC URL (0: a free random port)", min=0, max=65535)] = DEFAULT_PORT,
    accounts: Annotated[int, typer.Option(help="dev accounts to fund with tokens (besides the deployer)", min=1, max=50)] = 4,
    fund: Annotated[int, typer.Option(help="whole VERI tokens given to each funded account", min=0)] = DEFAULT_FUND // 10**18,
    block_time: Annotated[
        int,
        typer.Option(
            help="seconds between blocks, mined with or without transactions, so that deadlines pass (0: a block per transaction only)", min=0, max=3600
        ),
    ] = 1,
    params: Params = None,
    book_dir: options.BookDir = None,
    json_out: options.Json = False,
) -> None:
    """Start a local chain (anvil), deploy the protocol, fund dev accounts, and run until Ctrl-C.

    Prints the RPC URL, the contract addresses and the dev accounts' keys
    (anvil's public test keys: never use them on a real network).

    Examples:

      veritrain devnet

      veritrain devnet --accounts 6 --fund 50000

      veritrain devnet --port 0      # a free port, beside another devnet

      veritrain devnet --params my-params.json --block-time 2 --json
    """
    settings = options.settings(address_book_dir=book_dir)
    if port and not port_free(port):
        raise ConfigError(f"port {port} on 127.0.0.1 is in use (another devnet?): stop it, or pick another with --port (0: a free one)")
    deploy_params = load_params(params)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        with start_devnet(book_dir=settings.address_book_dir, port=port, accounts=accounts, fund=fund * 10**18, params=deploy_params) as net:
            if block_time:  # deployed at a block per transaction (fast), then blocks keep time
                net.client.rpc("evm_setIntervalMining", [block_time])
            book_file = settings.address_book_path(net.client.chain_id)
            if json_out:
                print(json.dumps({**_summary(net, block_time), "address_book_file": str(book_file)}), flush=True)
            else:
                _print(net, book_file, block_time)
            while not stop.wait(0.5):
                if not net.anvil.running:
                    raise typer.Exit(1)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if not json_out:
        console.print("devnet stopped")
