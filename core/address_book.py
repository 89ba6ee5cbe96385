"""Address books: where the protocol is deployed on one chain (``deployments/<chainId>.json``).

Written by the deployer, read by every client. The ``params`` recorded here are
what the deployment was given, kept for people; clients read the live
parameters from the contracts.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from eth_utils import is_address, to_checksum_address
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from core.bounded import InputRejected, load_json, read_regular_file
from core.chain import Address, ChainClient
from core.errors import AddressBookError

__all__ = ["AddressBook", "DeployedContract", "book_path"]

_MAX_BOOK_BYTES = 1024 * 1024


def book_path(directory: Path, chain_id: int) -> Path:
    return directory / f"{chain_id}.json"


class DeployedContract(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    address: str
    tx_hash: str = Field(alias="txHash")
    block: int = Field(ge=0)

    @field_validator("address")
    @classmethod
    def _checksum(cls, value: str) -> str:
        if not is_address(value):
            raise ValueError(f"not an address: {value!r}")
        return to_checksum_address(value)


class AddressBook(BaseModel):
    """The protocol's contracts on one chain."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    chain_id: int = Field(alias="chainId", gt=0)
    deployer: str
    deploy_block: int = Field(alias="deployBlock", ge=0)
    contracts: dict[str, DeployedContract]
    params: dict[str, Any] = Field(default_factory=dict)

    def address(self, name: str) -> Address:
        try:
            return Address(self.contracts[name].address)
        except KeyError:
            raise AddressBookError(f"address book of chain {self.chain_id} has no {name}") from None

    @classmethod
    def load(cls, path: Path) -> AddressBook:
        if not path.exists():
            raise AddressBookError(f"no address book at {path}: deploy first (`veritrain deploy` or `veritrain devnet`)")
        try:
            return cls.model_validate(
                load_json(read_regular_file(path, max_bytes=_MAX_BOOK_BYTES, what="address book"), max_bytes=_MAX_BOOK_BYTES, what=f"address book {path}")
            )
        except InputRejected as exc:
            raise AddressBookError(f"unreadable address book: {exc}") from None
        except ValidationError as exc:
            first = exc.errors()[0]
            raise AddressBookError(f"malformed address book {path}: {'.'.join(map(str, first['loc']))}: {first['msg']}") from None

    @classmethod
    def for_chain(cls, directory: Path, client: ChainClient) -> AddressBook:
        """The book for the chain ``client`` is connected to, checked against the chain."""
        book = cls.load(book_path(directory, client.chain_id))
        book.check(client)
        return book

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(self.model_dump(by_alias=True, mode="json"), indent=2, sort_keys=True) + "\n")
        os.replace(tmp, path)

    def missing_code(self, client: ChainClient) -> list[str]:
        """Names of contracts in the book with no code at their address on ``client``'s chain."""
        return [name for name, c in sorted(self.contracts.items()) if not client.get_code(c.address)]

    def check(self, client: ChainClient) -> None:
        """Raise AddressBookError unless the book is for this chain and every address has code."""
        if client.chain_id != self.chain_id:
            raise AddressBookError(f"address book is for chain {self.chain_id}, the RPC serves chain {client.chain_id}")
        missing = self.missing_code(client)
        if missing:
            raise AddressBookError(f"address book for chain {self.chain_id} is stale: no code for {', '.join(missing)} (redeploy)")
