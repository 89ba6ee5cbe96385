"""Wires the verifier agent: chain, storage, local records, policy, responder, loop."""

from __future__ import annotations

from core.agent import LoopSettings
from core.chain import Signer
from core.config import Settings
from core.storage import ContentStore
from proofs.train import Runtime
from rolebase.daemon import RoleDaemon, Wiring
from rolebase.daemon import build as build_daemon
from rolebase.keyring import key_finder
from rolebase.multiparty_duty import MultipartyDuty
from verifier.adversary import strategies
from verifier.loader import VerifierLoader
from verifier.policy import (
    LANES,
    VerifierAction,
    VerifierConfig,
    VerifierPolicy,
    VerifierView,
    work,
)
from verifier.responder import VerifierResponder
from verifier.state import VerifierDb

VerifierDaemon = RoleDaemon[VerifierView, VerifierAction]


def build(
    settings: Settings,
    signer: Signer,
    store: ContentStore,
    config: VerifierConfig,
    *,
    loop: LoopSettings = LoopSettings(),
    lie: bool = False,
    lazy: bool = False,
    rt: Runtime = Runtime(),
) -> VerifierDaemon:
    """``lie`` and ``lazy`` pick TEST adversaries (``verifier.adversary``); ``rt``: where replays run (``--device``)."""
    trace_verifier_class, replayer_class = strategies(lie=lie, lazy=lazy)

    def parts(w: Wiring, db: VerifierDb) -> tuple[VerifierLoader, VerifierPolicy, VerifierResponder]:
        db.salt_secret()  # made on first start, kept for good
        key = config.encryption_key
        key_of = key_finder(w.protocol, db, w.me, key)  # a sealed job's data key, as a wrap to us opens it
        replayer = replayer_class(w.protocol, store, w.watcher, rt=rt, key_of=key_of)
        trace_verifier = trace_verifier_class(w.protocol, store, w.watcher, w.stop, rt=rt, key_of=key_of)
        multiparty = MultipartyDuty(w.protocol, store, w.watcher, w.me, salt_secret=db.salt_secret)
        responder = VerifierResponder(w.protocol, db, trace_verifier, replayer, w.me, multiparty)
        loader = VerifierLoader(w.protocol, w.watcher, db, w.me, trace_verifier.availability.fetching, key, multiparty.forget)
        return loader, VerifierPolicy(config), responder

    return build_daemon("verifier", settings, signer, VerifierDb, parts, loop=loop, work=work, lanes=LANES)
