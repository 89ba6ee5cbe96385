"""Wires the verifier agent: chain, storage, local records, policy, responder, loop."""

from __future__ import annotations

from pathlib import Path

from core.agent import Agent, LoopSettings, MarketWatcher, RoleDaemon, StopFlag, connect, heartbeat_to
from core.agent import state_dir as role_state_dir
from core.chain import Signer
from core.config import Settings
from core.storage import ContentStore
from verifier.dispute import DisputeDesk
from verifier.loader import VerifierLoader
from verifier.policy import VerifierAction, VerifierConfig, VerifierPolicy, VerifierView
from verifier.responder import VerifierResponder
from verifier.state import VerifierDb
from verifier.work import Inspector

VerifierDaemon = RoleDaemon[VerifierView, VerifierAction]


def state_dir(data_dir: Path, address: str) -> Path:
    return role_state_dir(data_dir, "verifier", address)


def build(
    settings: Settings,
    signer: Signer,
    store: ContentStore,
    config: VerifierConfig,
    *,
    loop: LoopSettings = LoopSettings(),
    lie: bool = False,
    lazy: bool = False,
) -> VerifierDaemon:
    """TEST adversaries: ``lie`` fails honest traces and answers every midpoint wrong; ``lazy``
    passes every trace without replaying, its probes guessed (a whistleblower catches them)."""
    protocol = connect(settings, signer)
    db = VerifierDb(state_dir(settings.data_dir, signer.address) / "state.sqlite")
    db.salt_secret()  # made on first start, kept for good
    stop = StopFlag()
    watcher = MarketWatcher(protocol.market, protocol.book.deploy_block)
    desk = DisputeDesk(protocol, store, watcher, lie=lie)
    agent: Agent[VerifierView, VerifierAction] = Agent(
        "verifier",
        VerifierLoader(protocol, watcher, db, signer.address),
        VerifierPolicy(config),
        VerifierResponder(protocol, db, Inspector(protocol, store, stop, lie=lie, lazy=lazy), desk, signer.address),
        settings=loop,
        stop=stop,
        heartbeat=heartbeat_to(db.db, signer.address),
    )
    return RoleDaemon(agent, db)
