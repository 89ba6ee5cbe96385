"""One daemon builder for every role, below the roles: the built daemon (its loop and records), the
connection, the per-account state directory and the heartbeat.

:func:`build` wires a role the same way each time: chain, records, stop flag, market watcher, then
the role's loader, policy and responder around the agent loop.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from core.address_book import AddressBook
from core.agent import Agent, Bell, Loader, LoopSettings, Policy, Responder, StopFlag, TickReport, Work
from core.chain import Address, ChainClient, Signer
from core.config import Settings
from core.contracts import Protocol
from core.localdb import Heartbeat, LocalDb, write_heartbeat
from rolebase.records import RoleDb
from rolebase.sent import Confirmed, Journal, ReadHead
from rolebase.watchers import MarketWatcher

V = TypeVar("V")
A = TypeVar("A")
R = TypeVar("R", bound=RoleDb)


@dataclass(frozen=True)
class RoleDaemon(Generic[V, A]):
    """A built daemon: its agent loop and the records it closes on the way out."""

    agent: Agent[V, A]
    db: RoleDb

    def run(self) -> None:
        try:
            self.agent.run()
        finally:
            self.db.close()


def connect(settings: Settings, signer: Signer) -> Protocol:
    """The deployed protocol at ``settings.rpc_url`` (address book by chain id), signing as ``signer``."""
    client = ChainClient(settings.rpc_url, timeout=settings.rpc_timeout, expected_chain_id=settings.chain_id)
    return Protocol.connect(client, AddressBook.for_chain(settings.address_book_dir, client), signer)


def state_dir(data_dir: Path, role: str, address: str) -> Path:
    """One directory per role and account: its records (and a solver's checkpoints)."""
    return data_dir / f"{role}-{address.lower()}"


def heartbeat_to(db: LocalDb, address: str) -> Callable[[TickReport], None]:
    """An observer that records each tick in the role's ``heartbeat`` table (for ``status``)."""
    started = time.time()
    ticks = 0

    def record(report: TickReport) -> None:
        nonlocal ticks
        ticks += 1
        write_heartbeat(db, Heartbeat(os.getpid(), address, started, time.time(), ticks, report.transient_error))

    return record


@dataclass(frozen=True)
class Wiring:
    """What a role's parts are built from besides its records: the chain, the loop's stop flag and bell
    (rung by a part whose thread changes the view off the chain), the market watcher, its address."""

    protocol: Protocol
    stop: StopFlag
    bell: Bell
    watcher: MarketWatcher
    me: Address


def build(
    role: str,
    settings: Settings,
    signer: Signer,
    records: Callable[[Path], R],
    parts: Callable[[Wiring, R], tuple[Loader[V], Policy[V, A], Responder[A]]],
    *,
    loop: LoopSettings = LoopSettings(),
    work: Callable[[V, A], Work | None] | None = None,
    lanes: Mapping[str, int] | None = None,
) -> RoleDaemon[V, A]:
    """The daemon of ``role`` for ``signer``: its records (``records`` opens them at the account's state
    directory), then its loader, policy and responder (``parts``) around the agent loop, which records a
    heartbeat each tick. The loader reads at ``loop.confirmations`` blocks deep, and the actions whose
    type is :class:`rolebase.actions.Journaled` (one contract call each) are never sent twice; a poll with no
    new block, no finished worker and nothing done at the last tick loads nothing. ``work`` names the long
    actions, which run on workers of ``lanes`` while the loop goes on (:class:`core.agent.Workers`)."""
    protocol = connect(settings, signer)
    db = records(state_dir(settings.data_dir, role, signer.address) / "state.sqlite")
    wiring = Wiring(protocol, StopFlag(), Bell(), MarketWatcher(protocol.market, protocol.book.deploy_block), signer.address)
    loader, policy, responder = parts(wiring, db)
    client, head = protocol.client, ReadHead()
    confirmed = Confirmed(loader, client, loop.confirmations, head)
    agent = Agent(
        role,
        confirmed,
        policy,
        Journal(responder, client, db, head),
        settings=loop,
        stop=wiring.stop,
        heartbeat=heartbeat_to(db.db, signer.address),
        work=work,
        lanes=lanes,
        pulse=lambda: (client.head_id(), wiring.bell.rings),  # one load per block (or ring) however fast the daemon polls
    )
    return RoleDaemon(agent, db)
