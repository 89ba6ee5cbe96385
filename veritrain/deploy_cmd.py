"""`veritrain deploy`: deploy the protocol to any JSON-RPC endpoint and write its address book."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from core.config import Settings
from deploy.deployer import DEVNET_PARAMS, DeployParams, deploy_protocol
from rolebase import cli as options
from rolebase.cli import console

#: The parameter files shipped in deploy/params/, by name: ``--params public``.
SHIPPED_PARAMS = {p.stem: p for p in sorted(DEVNET_PARAMS.parent.glob("*.json"))}

Params = Annotated[
    str | None,
    typer.Option(
        help=f"deployment parameters: a JSON file, or a shipped one by name ({', '.join(SHIPPED_PARAMS)}; docs/cli.md) [default: devnet]", show_default=False
    ),
]


def load_params(given: str | None) -> DeployParams:
    """``--params``: a shipped file by name, else a path; the devnet's when not given."""
    if given is None:
        return DeployParams.devnet()
    return DeployParams.load(SHIPPED_PARAMS.get(given, Path(given)))


def deploy(
    rpc: options.Rpc = None,
    chain_id: options.ChainId = None,
    key_env: options.KeyEnv = None,
    keystore: options.Keystore = None,
    account: options.Account = None,
    password_file: options.PasswordFile = None,
    params: Params = None,
    book_dir: options.BookDir = None,
    force: Annotated[bool, typer.Option("--force", help="deploy again even if the address book points at live contracts")] = False,
    json_out: options.Json = False,
) -> None:
    """Deploy VeriToken, StakeManager, JobMarket, DisputeGame, AvailabilityCourt, KeyRegistry, SealedJobs and DilocoJobs, wire them, write deployments/<chainId>.json.

    Idempotent: if this chain's address book exists and its addresses have
    code, nothing is sent and the existing book is printed.

    Examples:

      DEPLOYER_KEY=0x... veritrain deploy --rpc http://127.0.0.1:8545 --key-env DEPLOYER_KEY

      VERITRAIN_KEYSTORE_PASSWORD=... veritrain deploy --rpc-url https://rpc.example --keystore key.json --params public --chain-id 11155111
    """
    settings: Settings = options.settings(
        rpc_url=rpc, chain_id=chain_id, key_env=key_env, keystore=keystore, account=account, password_file=password_file, address_book_dir=book_dir
    )
    deploy_params = load_params(params)
    client = options.client(settings)
    signer = options.signer(settings)
    book = deploy_protocol(client, signer, deploy_params, settings.address_book_dir, force=force)
    path = settings.address_book_path(book.chain_id)
    if json_out:
        print(json.dumps({"address_book_file": str(path), **book.model_dump(by_alias=True, mode="json")}))
        return
    table = Table("contract", "address", "block", title=f"chain {book.chain_id}")
    for name, c in book.contracts.items():
        table.add_row(name, c.address, str(c.block))
    console.print(table)
    console.print(f"address book: {path}")
