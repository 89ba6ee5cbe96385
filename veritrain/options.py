"""Options every command shares, and turning them into settings, a client and a signer.

Role sub-apps import these so that ``--rpc``, ``--address-book-dir``,
``--keystore`` and ``--key-env`` mean the same everywhere::

    @app.command()
    def status(rpc: options.Rpc = None, book_dir: options.BookDir = None) -> None:
        settings = options.settings(rpc_url=rpc, address_book_dir=book_dir)
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from core.address_book import AddressBook
from core.chain import ChainClient, Signer
from core.config import Settings

__all__ = [
    "Rpc",
    "ChainId",
    "BookDir",
    "DataDir",
    "Keystore",
    "KeyEnv",
    "Json",
    "settings",
    "client",
    "signer",
    "address_book",
    "console",
    "err_console",
]

console = Console()
err_console = Console(stderr=True)

Rpc = Annotated[str | None, typer.Option("--rpc", help="JSON-RPC URL (env VERITRAIN_RPC_URL; default http://127.0.0.1:8545)", show_default=False)]
ChainId = Annotated[int | None, typer.Option("--chain-id", help="expected chain id, checked on connect (env VERITRAIN_CHAIN_ID)", show_default=False)]
BookDir = Annotated[Path | None, typer.Option("--address-book-dir", help="directory of <chainId>.json address books (env VERITRAIN_ADDRESS_BOOK_DIR; default ./deployments)", show_default=False)]
DataDir = Annotated[Path | None, typer.Option("--data-dir", help="client state directory (env VERITRAIN_DATA_DIR; default ~/.veritrain)", show_default=False)]
Keystore = Annotated[Path | None, typer.Option("--keystore", help="encrypted JSON keystore; password from VERITRAIN_KEYSTORE_PASSWORD (env VERITRAIN_KEYSTORE)", show_default=False)]
KeyEnv = Annotated[str | None, typer.Option("--key-env", help="name of the env var that holds the private key (env VERITRAIN_KEY_ENV)", show_default=False)]
Json = Annotated[bool, typer.Option("--json", help="print machine-readable JSON instead of tables")]


def settings(**flags: Any) -> Settings:
    """Settings from the given flags (None = not given) over env vars over defaults."""
    return Settings.load(**flags)


def client(s: Settings) -> ChainClient:
    return ChainClient(s.rpc_url, timeout=s.rpc_timeout, expected_chain_id=s.chain_id)


def signer(s: Settings) -> Signer:
    return Signer.from_settings(s.keystore, s.key_env)


def address_book(s: Settings, c: ChainClient) -> AddressBook:
    return AddressBook.for_chain(s.address_book_dir, c)
