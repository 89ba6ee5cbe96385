"""Wires the solver agent: chain, storage, local records, policy, responder, loop."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from core.address_book import AddressBook
from core.agent import Agent, LoopSettings, MarketWatcher, StopFlag, heartbeat_to
from core.chain import ChainClient, Signer
from core.config import Settings
from core.contracts import Protocol
from core.storage import ContentStore
from solver.loader import SolverLoader
from solver.policy import SolverAction, SolverConfig, SolverPolicy, SolverView
from solver.responder import SolverResponder
from solver.state import SolverDb
from solver.work import Limits, ProgressHook, SpecJudge, Workshop


def state_dir(data_dir: Path, address: str) -> Path:
    """One directory per solver account: its records and its checkpoints."""
    return data_dir / f"solver-{address.lower()}"


@dataclass(frozen=True)
class SolverDaemon:
    agent: Agent[SolverView, SolverAction]
    db: SolverDb

    def run(self) -> None:
        try:
            self.agent.run()
        finally:
            self.db.close()


def build(
    settings: Settings,
    signer: Signer,
    store: ContentStore,
    config: SolverConfig,
    *,
    limits: Limits = Limits(),
    loop: LoopSettings = LoopSettings(),
    progress: ProgressHook | None = None,
) -> SolverDaemon:
    client = ChainClient(settings.rpc_url, timeout=settings.rpc_timeout, expected_chain_id=settings.chain_id)
    book = AddressBook.for_chain(settings.address_book_dir, client)
    protocol = Protocol.connect(client, book, signer)
    home = state_dir(settings.data_dir, signer.address)
    db = SolverDb(home / "state.sqlite")
    stop = StopFlag()
    watcher = MarketWatcher(protocol.market, book.deploy_block)
    judge = SpecJudge(store, db, limits)
    workshop = Workshop(protocol, store, db, watcher, home / "jobs", stop, progress=progress)
    agent: Agent[SolverView, SolverAction] = Agent(
        "solver",
        SolverLoader(protocol, watcher, db, judge, signer.address),
        SolverPolicy(config),
        SolverResponder(protocol, db, workshop, watcher, signer.address),
        settings=loop,
        stop=stop,
        heartbeat=heartbeat_to(db.db, signer.address),
    )
    return SolverDaemon(agent, db)
