"""A local devnet: anvil on loopback, the protocol deployed, dev accounts funded with tokens.

Used by ``veritrain devnet``, by the demo and by the test fixtures::

    with start_devnet(book_dir=tmp) as net:
        proto = net.protocol(net.accounts[0])

The dev accounts come from anvil's public test mnemonic: everyone knows
their keys, so they are fine on a devnet and nowhere else.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from core.address_book import AddressBook
from core.chain import ChainClient, Signer
from core.contracts import Protocol, TokenAmount
from deploy.anvil import Anvil, DevChain, dev_signers
from deploy.deployer import DeployParams, deploy_protocol

__all__ = ["Devnet", "start_devnet", "DEFAULT_FUND"]

log = logging.getLogger(__name__)

DEFAULT_FUND = TokenAmount(10_000 * 10**18)


@dataclass
class Devnet:
    """A running devnet. ``deployer`` is dev account 0; ``accounts`` are the funded accounts 1..n."""

    anvil: Anvil
    client: ChainClient
    book: AddressBook
    deployer: Signer
    accounts: list[Signer]
    fund: TokenAmount
    chain: DevChain = field(init=False)
    _protocols: dict[str | None, Protocol] = field(init=False, default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.chain = DevChain(self.client)

    @property
    def rpc_url(self) -> str:
        return self.anvil.rpc_url

    def protocol(self, signer: Signer | None = None) -> Protocol:
        """The deployed protocol as ``signer`` (None: read-only), built once per signer: the wrappers
        hold no chain state, and a test that polls through this every 0.3 s spent 67 ms of CPU on each
        rebuild (web3 contract objects from the ABIs)."""
        key = signer.address if signer is not None else None
        if key not in self._protocols:
            self._protocols[key] = Protocol.connect(self.client, self.book, signer)
        return self._protocols[key]

    def stop(self) -> None:
        self.anvil.stop()

    def __enter__(self) -> Devnet:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


def start_devnet(
    *,
    book_dir: Path,
    port: int = 0,
    accounts: int = 4,
    fund: int = DEFAULT_FUND,
    params: DeployParams | None = None,
    host: str = "127.0.0.1",
    launcher: tuple[str, ...] = (),
    gas_limit: int | None = None,
) -> Devnet:
    """Start anvil (on ``host``, through ``launcher``: see :class:`deploy.anvil.Anvil`), deploy with ``params``
    (devnet defaults), give ``fund`` tokens to dev accounts 1..accounts; ``gas_limit``: the block gas limit (anvil's 30M by default)."""
    anvil = Anvil(port=port, accounts=max(10, accounts + 1), host=host, launcher=launcher, gas_limit=gas_limit).start()
    try:
        client = ChainClient(anvil.rpc_url)
        signers = dev_signers(accounts + 1)
        deployer, funded = signers[0], signers[1:]
        book = deploy_protocol(client, deployer, params or DeployParams.devnet(), book_dir)
        token = Protocol.connect(client, book, deployer).token
        for account in funded:
            token.transfer(account.address, fund)
        log.info("devnet ready at %s, %d accounts funded", anvil.rpc_url, len(funded))
        return Devnet(anvil, client, book, deployer, funded, TokenAmount(fund))
    except BaseException:
        anvil.stop()
        raise
