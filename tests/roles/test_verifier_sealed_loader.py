"""The verifier's view of a sealed job drawn to it, read from a real anvil: no data key before a wrap
opens, its demand holding the job, the job back in its assignments once a wrap that does not open
answers the demand (the report clock resumed at a deadline no event names), then the key revealed
for its second demand, found and kept."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from core.contracts import Role
from core.sealing import new_data_key
from deploy.devnet import Devnet
from rolebase.keygame import DemandKey
from rolebase.watchers import MarketWatcher
from tests.chain.test_lifecycle import MANIFEST, MODEL, ROOT, stake
from tests.chain.test_sealed_jobs import _register, _seal, _wrap_to
from verifier.loader import VerifierLoader
from verifier.policy import OpenDemand, SealedDraw, VerifierConfig, VerifierPolicy
from verifier.responder import VerifierResponder
from verifier.state import VerifierDb

if TYPE_CHECKING:
    from tests.conftest import Parties


def test_a_sealed_draw_its_demands_and_the_key_found(devnet: Devnet, parties: Parties, tmp_path: Path) -> None:
    proto = devnet.protocol(parties.verifier)
    me, sub = parties.verifier.address, parties.submitter
    stake(proto, parties.solver, Role.SOLVER)
    stake(proto, parties.verifier, Role.VERIFIER)
    _register(proto, parties.solver)
    key = _register(proto, parties.verifier)
    job_id, data_key = _seal(proto, sub)
    _wrap_to(proto, sub, job_id, data_key, parties.solver.address)
    solver = proto.with_signer(parties.solver).market
    solver.claim(job_id)
    solver.commit(job_id, ROOT, 5, MODEL, MANIFEST)
    devnet.chain.mine(2)
    solver.assign_verifier(job_id)
    db = VerifierDb(tmp_path / "state.sqlite")
    loader = VerifierLoader(proto, MarketWatcher(proto.market, proto.book.deploy_block), db, me, key=key)
    responder = VerifierResponder(proto, db, None, None, me, None)  # type: ignore[arg-type]  # only key-game actions here
    policy = VerifierPolicy(VerifierConfig(stake_target=proto.stakes.min_stake(Role.VERIFIER), encryption_key=key))

    view = loader.load()
    (drawn,) = view.assignments
    assert drawn.sealed is not None and not drawn.sealed.held and drawn.sealed.demands == 0
    assert drawn.sealed.drawn_at + drawn.sealed.window == drawn.deadline and drawn.sealed.window > 0
    assert view.registered_key is not None and view.registered_key.key == key.public_key

    responder.perform(DemandKey(job_id))
    held = loader.load()
    assert held.assignments == () and held.demands == (OpenDemand(job_id, proto.sealed_jobs.demand_of(job_id).deadline),)

    _wrap_to(proto, sub, job_id, new_data_key(), me)  # answers the demand, and opens to another key than the committed one
    answered = loader.load()
    (again,) = answered.assignments
    assert again.sealed == SealedDraw(False, drawn.sealed.drawn_at, drawn.sealed.window, demands=1)
    assert again.deadline == proto.market.get_job(job_id).deadline and again.deadline >= drawn.deadline  # resumed, time held added
    assert [a for a in policy.next_actions(answered) if isinstance(a, DemandKey)] == [DemandKey(job_id)]  # the second at once

    responder.perform(DemandKey(job_id))
    proto.with_signer(sub).sealed_jobs.reveal_key(job_id, data_key)
    (opened,) = loader.load().assignments
    assert opened.sealed is not None and opened.sealed.held and db.data_key(job_id) == data_key
