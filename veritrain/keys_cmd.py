"""`veritrain keys new|register|show`: encryption keys for sealed job data (issue 30; docs/sealing.md).

An encryption key is an X25519 key pair, apart from the account's signing key: ``keys new NAME``
writes its 32 private bytes to ``<data-dir>/encryption-keys/NAME`` (0600, directory 0700, never
overwritten, never printed) and prints the public key; ``keys register NAME`` publishes that public
key in the KeyRegistry for the signing account (which must have stake in some role), and registering
another key later rotates it; ``keys show ADDRESS`` reads an account's key and version from the chain.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from eth_utils import is_address, to_checksum_address

from core.config import Settings
from core.sealing import EncryptionKey
from rolebase import cli as options
from rolebase.cli import console

app = options.command_group("keys", "Encryption keys for sealed job data: make one, register it on chain, read one (docs/sealing.md).")

Name = Annotated[str, typer.Argument(help="the encryption key's name (letters, digits, - and _), e.g. the account's", show_default=False)]


@app.command()
def new(
    name: Name,
    data_dir: options.DataDir = None,
    json_out: options.Json = False,
) -> None:
    """Make a new random encryption key as NAME in <data-dir>/encryption-keys (0600); prints its public key.

    Examples:

      veritrain keys new solver1

      veritrain keys new solver1 --data-dir /srv/veritrain --json
    """
    settings = options.settings(data_dir=data_dir)
    path = options.encryption_key_path(settings, name)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    key = EncryptionKey.generate()
    key.save(path)
    public = "0x" + key.public_key.hex()
    if json_out:
        print(json.dumps({"name": name, "file": str(path), "public_key": public}))
    else:
        console.print(f"encryption key [bold]{name}[/]: {public}  ({path}; register it: veritrain keys register {name} --account ACCOUNT)", highlight=False)


@options.with_settings(*options.CHAIN, *options.KEY, "data_dir")
def register(
    settings: Settings,
    name: Name,
    json_out: options.Json = False,
) -> None:
    """Register encryption key NAME's public key in the KeyRegistry for the signing (staked) account.

    A different key registered later replaces it (its version goes up); nothing is sent when NAME is
    already the account's current key. The account must have stake in some role.

    Examples:

      veritrain keys register solver1 --account solver1

      veritrain keys register gpu1 --key-env SOLVER_KEY --json
    """
    key = EncryptionKey.load(options.encryption_key_path(settings, name))
    protocol, signing = options.signing_protocol(settings)
    me = signing.address
    public = "0x" + key.public_key.hex()
    current = protocol.keys.key_of(me)
    if current.registered and current.key == key.public_key:
        if json_out:
            print(json.dumps({"address": me, "public_key": public, "version": current.version, "tx": None}))
        else:
            console.print(f"{me} has {public} registered already (version {current.version}): nothing sent", highlight=False)
        return
    receipt = protocol.keys.register_key(key.public_key)
    (registered,) = protocol.keys.decode_events(receipt, "KeyRegistered")
    version = int(registered.args["version"])
    if json_out:
        print(json.dumps({"address": me, "public_key": public, "version": version, "tx": receipt.tx_hash, "gas": receipt.gas_used}))
    else:
        console.print(f"registered {public} for {me}, version {version}  (tx {receipt.tx_hash}, gas {receipt.gas_used:,})", highlight=False)


@options.with_settings(*options.CHAIN)
def show(
    settings: Settings,
    address: Annotated[str, typer.Argument(help="the account", show_default=False)],
    json_out: options.Json = False,
) -> None:
    """Print the encryption key ADDRESS registered last and its version (none: version 0).

    Examples:

      veritrain keys show 0x70997970C51812dc3A010C7d01b50e0d17dc79C8

      veritrain keys show 0x70997970C51812dc3A010C7d01b50e0d17dc79C8 --json
    """
    if not is_address(address):
        raise typer.BadParameter(f"{address!r} is not an address", param_hint="ADDRESS")
    account = to_checksum_address(address)
    registered = options.protocol(settings, signing=False).keys.key_of(account)
    public = "0x" + registered.key.hex() if registered.registered else None
    if json_out:
        print(json.dumps({"address": account, "public_key": public, "version": registered.version}))
    elif public is None:
        console.print(f"{account} has no encryption key registered", highlight=False)
    else:
        console.print(f"{account}: {public}  version {registered.version}", highlight=False)


app.command()(register)
app.command()(show)
