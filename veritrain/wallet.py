"""`veritrain wallet new|import|list|address` over a keystore directory, and `veritrain init ROLE`.

Keys live encrypted (v3 JSON keystores, scrypt) in ``<data-dir>/keystores/NAME`` (0600, directory
0700), as foundry's ``cast wallet`` keeps them in ``~/.foundry/keystores``; every signing command
takes ``--account NAME``. The password comes from ``--password-file`` (first line), else
``VERITRAIN_KEYSTORE_PASSWORD``, else a prompt. A private key is never an argument (it would sit in
the shell history): ``wallet import`` reads it from an environment variable or a hidden prompt.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated

import typer
from eth_utils import to_checksum_address
from rich.table import Table

from core.bounded import load_json, read_regular_file
from core.chain import DEVNET_CHAIN_ID, Signer
from core.config import Settings
from core.contracts import Protocol, Role
from core.errors import ConfigError
from deploy.anvil import dev_signers
from rolebase import cli as options
from rolebase.actions import stake as approve_and_stake
from rolebase.amounts import parse_tokens, show_tokens
from rolebase.cli import console

app = typer.Typer(
    name="wallet",
    help="Keys in an encrypted keystore directory, used with --account NAME.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

_MAX_KEYSTORE_BYTES = 64 * 1024

Name = Annotated[str, typer.Argument(help="the key's name (letters, digits, - and _)", show_default=False)]


def _path(settings: Settings, name: str, *, new: bool) -> Path:
    if not name.replace("-", "_").isidentifier():
        raise typer.BadParameter(f"{name!r}: use letters, digits, - and _", param_hint="NAME")
    path = options.keystore_dir(settings) / name
    if new and path.exists():
        raise ConfigError(f"account {name!r} exists already ({path})")
    if not new and not path.is_file():
        raise ConfigError(f"no account {name!r} in {options.keystore_dir(settings)} (veritrain wallet list)")
    return path


def _save(settings: Settings, name: str, signer: Signer) -> None:
    path = options.keystore_dir(settings) / name
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    keyfile = signer.encrypt(options.password(settings, confirm=True))
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as out:
        json.dump(keyfile, out)


@app.command()
def new(
    name: Name,
    data_dir: options.DataDir = None,
    password_file: options.PasswordFile = None,
    json_out: options.Json = False,
) -> None:
    """Make a new random key, encrypted in the keystore directory as NAME; prints its address.

    Examples:

      veritrain wallet new solver1

      veritrain wallet new solver1 --password-file ~/.solver1-password --json
    """
    settings = options.settings(data_dir=data_dir, password_file=password_file)
    _path(settings, name, new=True)
    signer = Signer.from_private_key(os.urandom(32))
    _save(settings, name, signer)
    _print(json_out, name, signer.address, "created")


@app.command("import")
def import_(
    name: Name,
    key_env: Annotated[str | None, typer.Option("--key-env", help="env var that holds the private key (default: a hidden prompt)", show_default=False)] = None,
    data_dir: options.DataDir = None,
    password_file: options.PasswordFile = None,
    json_out: options.Json = False,
) -> None:
    """Encrypt an existing private key into the keystore directory as NAME.

    Examples:

      MY_KEY=0x... veritrain wallet import solver1 --key-env MY_KEY

      veritrain wallet import solver1          # asks for the key, hidden
    """
    settings = options.settings(data_dir=data_dir, password_file=password_file)
    _path(settings, name, new=True)
    signer = Signer.from_env(key_env) if key_env else Signer.from_private_key(str(typer.prompt("private key", hide_input=True)).strip())
    _save(settings, name, signer)
    _print(json_out, name, signer.address, "imported")


@app.command("list")
def list_(data_dir: options.DataDir = None, json_out: options.Json = False) -> None:
    """List the keystore directory's keys and their addresses (no password needed).

    Examples:

      veritrain wallet list --json
    """
    settings = options.settings(data_dir=data_dir)
    folder = options.keystore_dir(settings)
    rows = [(p.name, _address_of(p)) for p in sorted(folder.iterdir()) if p.is_file()] if folder.is_dir() else []
    if json_out:
        print(json.dumps([{"name": n, "address": a} for n, a in rows]))
        return
    table = Table("name", "address", title=str(folder))
    for n, a in rows:
        table.add_row(n, a)
    console.print(table)


@app.command()
def address(name: Name, data_dir: options.DataDir = None) -> None:
    """Print NAME's address (read from its keystore, no password needed).

    Examples:

      veritrain wallet address solver1
    """
    settings = options.settings(data_dir=data_dir)
    print(_address_of(_path(settings, name, new=False)))


def _address_of(path: Path) -> str:
    """The address a v3 keystore records in the clear (``address``), without decrypting it."""
    keyfile = load_json(read_regular_file(path, max_bytes=_MAX_KEYSTORE_BYTES, what="keystore"), max_bytes=_MAX_KEYSTORE_BYTES, what=f"keystore {path}")
    raw = keyfile.get("address") if isinstance(keyfile, dict) else None
    return to_checksum_address("0x" + str(raw).removeprefix("0x")) if raw else "?"


def _print(json_out: bool, name: str, addr: str, what: str) -> None:
    if json_out:
        print(json.dumps({"name": name, "address": addr}))
    else:
        console.print(f"{what} account [bold]{name}[/]: {addr}  (use it with --account {name})", highlight=False)


def init(
    role: Annotated[str, typer.Argument(help="solver, verifier or whistleblower", show_default=False)],
    account: Annotated[str, typer.Option("--account", "-a", help="the key's name; made if it does not exist yet")],
    stake: Annotated[str | None, typer.Option(help="VERI to stake (default: the role's minimum)", show_default=False)] = None,
    rpc: options.Rpc = None,
    chain_id: options.ChainId = None,
    book_dir: options.BookDir = None,
    data_dir: options.DataDir = None,
    password_file: options.PasswordFile = None,
) -> None:
    """Walk a new participant to a funded, staked key: make the key if needed, fund it on a devnet
    (elsewhere say what to send where), stake, and print the command that runs the daemon.

    Examples:

      veritrain init solver --account solver1

      veritrain init verifier --account v1 --stake 150 --password-file pw.txt
    """
    try:
        r = Role[role.upper()]
    except KeyError:
        raise typer.BadParameter(f"{role!r} is not one of solver, verifier, whistleblower", param_hint="ROLE") from None
    base = options.settings(rpc_url=rpc, chain_id=chain_id, address_book_dir=book_dir, data_dir=data_dir, password_file=password_file)
    if not (options.keystore_dir(base) / account).exists():
        new(account, data_dir=data_dir, password_file=password_file, json_out=False)
    settings = options.settings(rpc_url=rpc, chain_id=chain_id, address_book_dir=book_dir, data_dir=data_dir, password_file=password_file, account=account)
    protocol, signer = options.signing_protocol(settings)
    client = protocol.client
    me = signer.address
    already = protocol.stakes.stake_of(me, r).staked
    amount = parse_tokens(stake, "--stake") if stake is not None else protocol.stakes.min_stake(r)
    missing = max(0, amount - already)
    gas_floor = 10**17  # 0.1 ETH: a stake, an approval and the daemon's first transactions
    if missing and (protocol.token.balance_of(me) < missing or client.balance(me) < gas_floor):
        if client.chain_id != DEVNET_CHAIN_ID:
            console.print(f"send {show_tokens(missing)} VERI and some gas (ETH) to [bold]{me}[/], then run this again", highlight=False)
            sys.exit(1)
        client.rpc("anvil_setBalance", [me, hex(10 * 10**18)])
        deployer = Protocol.connect(client, protocol.book, dev_signers(1)[0])
        deployer.token.transfer(me, missing)
        console.print(f"funded {me} with {show_tokens(missing)} VERI and 10 ETH from the devnet's deployer", highlight=False)
    if missing:
        approve_and_stake(protocol, me, r, missing)
    staked = protocol.stakes.stake_of(me, r).staked
    console.print(f"[bold green]ready[/]: {me} has {show_tokens(staked)} VERI staked as {r.name.lower()}", highlight=False)
    console.print(f"run it:  veritrain {r.name.lower()} run --account {account}", highlight=False)
