"""Wires the verifier agent: chain, storage, local records, policy, responder, loop."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from core.address_book import AddressBook
from core.agent import Agent, LoopSettings, StopFlag, heartbeat_to
from core.chain import ChainClient, Signer
from core.config import Settings
from core.contracts import Protocol
from core.storage import ContentStore
from verifier.loader import VerifierLoader
from verifier.policy import VerifierAction, VerifierConfig, VerifierPolicy, VerifierView
from verifier.responder import VerifierResponder
from verifier.state import VerifierDb
from verifier.work import Inspector


def state_dir(data_dir: Path, address: str) -> Path:
    return data_dir / f"verifier-{address.lower()}"


@dataclass(frozen=True)
class VerifierDaemon:
    agent: Agent[VerifierView, VerifierAction]
    db: VerifierDb

    def run(self) -> None:
        try:
            self.agent.run()
        finally:
            self.db.close()


def build(
    settings: Settings,
    signer: Signer,
    store: ContentStore,
    config: VerifierConfig,
    *,
    loop: LoopSettings = LoopSettings(),
) -> VerifierDaemon:
    client = ChainClient(settings.rpc_url, timeout=settings.rpc_timeout, expected_chain_id=settings.chain_id)
    book = AddressBook.for_chain(settings.address_book_dir, client)
    protocol = Protocol.connect(client, book, signer)
    home = state_dir(settings.data_dir, signer.address)
    db = VerifierDb(home / "state.sqlite")
    stop = StopFlag()
    inspector = Inspector(protocol, store, stop)
    agent: Agent[VerifierView, VerifierAction] = Agent(
        "verifier",
        VerifierLoader(protocol, db, signer.address),
        VerifierPolicy(config),
        VerifierResponder(protocol, db, inspector, signer.address),
        settings=loop,
        stop=stop,
        heartbeat=heartbeat_to(db.db, signer.address),
    )
    return VerifierDaemon(agent, db)
