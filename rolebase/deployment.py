"""Which deployment a role works for, and following it when the chain under a daemon is redeployed.

A role's local records (claimed jobs, final jobs, verdicts, secrets) hold job and game ids, and ids
are only unique within one deployment: a restarted devnet deploys the same contracts at the same
addresses and numbers its jobs from 1 again. So records live in one directory per deployment,
named by the chain id, the market's address and the hash of the deployment block
(``<data-dir>/deployments/<key>/``): a redeploy or another chain starts clean, and the old
records stay where they were.

A running daemon checks its deployment before each view it loads (one block read); when the
block it was deployed in is gone or has another hash, it stops and builds itself again over the
new deployment's records (:func:`run_following`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from core.address_book import AddressBook
from core.agent import Loader
from core.chain import ChainClient
from core.config import Settings
from core.contracts import Protocol
from core.errors import AddressBookError, TransientRPCError
from rolebase.daemon import RoleDaemon
from rolebase.events import DEPLOYMENT_CHANGED

log = logging.getLogger(__name__)

V = TypeVar("V")
A = TypeVar("A")


class DeploymentChanged(Exception):
    """The chain no longer holds the deployment a daemon was built for (not a VeritrainError: the
    agent loop does not drop it, it stops, and :func:`run_following` builds the daemon again)."""


@dataclass(frozen=True)
class Deployment:
    """One deployment of the protocol: its chain, its market, and the block it was deployed in."""

    chain_id: int
    market: str
    block: int
    block_hash: str | None

    @classmethod
    def of(cls, protocol: Protocol) -> Deployment:
        block = protocol.book.deploy_block
        return cls(protocol.client.chain_id, protocol.market.address, block, block_hash(protocol.client, block))

    @property
    def key(self) -> str:
        """``<chainId>-<market address, 8 hex>-<deployment block hash, 8 hex>``: a directory name."""
        return f"{self.chain_id}-{self.market[2:10].lower()}-{(self.block_hash or '0x-')[2:10]}"

    def data_dir(self, root: Path) -> Path:
        """Where a role keeps its records of this deployment, under the data directory ``root``."""
        return root / "deployments" / self.key

    def gone(self, client: ChainClient) -> bool:
        """Whether ``client``'s chain no longer holds this deployment (its block replaced or missing)."""
        return client.chain_id != self.chain_id or block_hash(client, self.block) != self.block_hash


def block_hash(client: ChainClient, block: int) -> str | None:
    """The hash of block ``block``, or None where the chain has no such block."""
    found = client.rpc("eth_getBlockByNumber", [hex(block), False])
    return None if found is None else str(found["hash"])


def connect(settings: Settings) -> Protocol:
    """The deployment the address book names for ``settings``'s chain, read-only."""
    client = ChainClient(settings.rpc_url, timeout=settings.rpc_timeout, expected_chain_id=settings.chain_id)
    return Protocol.connect(client, AddressBook.for_chain(settings.address_book_dir, client))


def current(settings: Settings) -> Deployment:
    """The deployment ``settings`` point at now."""
    return Deployment.of(connect(settings))


class DeploymentGuard(Generic[V]):
    """A loader that first checks its deployment is still on chain (raises :class:`DeploymentChanged`)."""

    def __init__(self, loader: Loader[V], deployment: Deployment, client: ChainClient) -> None:
        self.loader = loader
        self.deployment = deployment
        self.client = client

    def load(self) -> V:
        if self.deployment.gone(self.client):
            raise DeploymentChanged(f"deployment {self.deployment.key} is no longer on chain {self.deployment.chain_id}")
        return self.loader.load()


def _wait_live(settings: Settings, backoff_max_s: float) -> Deployment:
    """The current deployment; while there is none (no book, no code yet, the node down), waits with
    backoff and says why once."""
    delay, said = 1.0, ""
    while True:
        try:
            return current(settings)
        except (AddressBookError, TransientRPCError) as exc:
            if str(exc) != said:
                log.warning("waiting for a deployment", extra={"reason": str(exc)})
                said = str(exc)
        time.sleep(delay)
        delay = min(delay * 2, backoff_max_s)


def run_following(settings: Settings, build: Callable[[Settings], RoleDaemon[V, A]], *, backoff_max_s: float = 30.0) -> None:
    """Build a daemon over the current deployment's records (``data_dir`` of ``settings`` replaced by the
    deployment's) and run it until stopped; when its deployment leaves the chain, build it again over
    the new one. ``build`` takes the settings and returns the daemon."""
    while True:
        deployment = _wait_live(settings, backoff_max_s)
        daemon = build(settings.model_copy(update={"data_dir": deployment.data_dir(settings.data_dir)}))
        client = ChainClient(settings.rpc_url, timeout=settings.rpc_timeout)
        daemon.agent.loader = DeploymentGuard(daemon.agent.loader, deployment, client)
        log.info("working for deployment", extra={"deployment": deployment.key, "records": str(deployment.data_dir(settings.data_dir))})
        try:
            daemon.run()
            return
        except DeploymentChanged as exc:
            log.warning(DEPLOYMENT_CHANGED, extra={"reason": str(exc)})
        except Exception as exc:  # the chain changed while a load or an action was reading it: the same event
            if not _gone(deployment, client):
                raise
            log.warning(DEPLOYMENT_CHANGED, extra={"reason": f"deployment {deployment.key} left the chain under a load or an action ({type(exc).__name__})"})


def _gone(deployment: Deployment, client: ChainClient) -> bool:
    try:
        return deployment.gone(client)
    except TransientRPCError:
        return True  # the node is down: wait for the deployment again rather than crash
