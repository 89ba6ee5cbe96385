"""Wires the whistleblower agent: chain, storage, local records, policy, responder, loop."""

from __future__ import annotations

import logging

from core.agent import LoopSettings
from core.chain import Signer
from core.config import Settings
from core.storage import ContentStore
from proofs.train import Runtime
from rolebase.daemon import RoleDaemon, Wiring
from rolebase.daemon import build as build_daemon
from rolebase.dispute import DisputeReplayer
from rolebase.earnings import jackpot_economics
from rolebase.events import JACKPOT_INCOME
from rolebase.keyring import key_finder
from whistleblower.audit import Auditor
from whistleblower.loader import WhistleblowerLoader
from whistleblower.policy import LANES, WhistleblowerAction, WhistleblowerConfig, WhistleblowerPolicy, WhistleblowerView, work
from whistleblower.responder import WhistleblowerResponder
from whistleblower.state import WhistleblowerDb

log = logging.getLogger(__name__)

WhistleblowerDaemon = RoleDaemon[WhistleblowerView, WhistleblowerAction]


def build(
    settings: Settings, signer: Signer, store: ContentStore, config: WhistleblowerConfig, *, loop: LoopSettings = LoopSettings(), rt: Runtime = Runtime()
) -> WhistleblowerDaemon:
    """``rt``: where audits and game moves replay (``--device``)."""

    def parts(w: Wiring, db: WhistleblowerDb) -> tuple[WhistleblowerLoader, WhistleblowerPolicy, WhistleblowerResponder]:
        key = config.encryption_key
        key_of = key_finder(w.protocol, db, w.me, key)  # a sealed job's data key, as a wrap to us opens it
        replayer = DisputeReplayer(w.protocol, store, w.watcher, rt=rt, key_of=key_of)
        loader = WhistleblowerLoader(w.protocol, w.watcher, db, w.me, key)
        log.info(
            JACKPOT_INCOME,
            extra={**jackpot_economics(w.protocol), "audit_rate": config.audit_rate, "budget_steps": config.budget_steps, "audit_cost": config.audit_cost},
        )
        auditor = Auditor(w.protocol, store, w.watcher, replayer, w.stop, db.secret(), config.budget_steps)
        return loader, WhistleblowerPolicy(config), WhistleblowerResponder(w.protocol, db, auditor, replayer, loader, w.me)

    return build_daemon("whistleblower", settings, signer, WhistleblowerDb, parts, loop=loop, work=work, lanes=LANES)
