"""Wires the verifier agent: chain, storage, local records, policy, responder, loop."""

from __future__ import annotations

from pathlib import Path

from core.agent import Agent, LoopSettings, StopFlag
from core.chain import Signer
from core.config import Settings
from core.storage import ContentStore
from rolebase.daemon import RoleDaemon, connect, heartbeat_to
from rolebase.daemon import state_dir as role_state_dir
from rolebase.watchers import MarketWatcher
from verifier.adversary import strategies
from verifier.loader import VerifierLoader
from verifier.policy import VerifierAction, VerifierConfig, VerifierPolicy, VerifierView
from verifier.responder import VerifierResponder
from verifier.state import VerifierDb

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
    """``lie`` and ``lazy`` pick TEST adversaries (``verifier.adversary``)."""
    protocol = connect(settings, signer)
    db = VerifierDb(state_dir(settings.data_dir, signer.address) / "state.sqlite")
    db.salt_secret()  # made on first start, kept for good
    stop = StopFlag()
    watcher = MarketWatcher(protocol.market, protocol.book.deploy_block)
    inspector_class, replayer_class = strategies(lie=lie, lazy=lazy)
    replayer = replayer_class(protocol, store, watcher)
    agent: Agent[VerifierView, VerifierAction] = Agent(
        "verifier",
        VerifierLoader(protocol, watcher, db, signer.address),
        VerifierPolicy(config),
        VerifierResponder(protocol, db, inspector_class(protocol, store, stop), replayer, signer.address),
        settings=loop,
        stop=stop,
        heartbeat=heartbeat_to(db.db, signer.address),
    )
    return RoleDaemon(agent, db)
