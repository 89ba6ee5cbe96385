"""The whistleblower's view of a sealed Verified job, read from a real anvil: no view of the key game
for the job's own verifier; for an auditor, our wrap request found on chain at our key version, our
demand holding the job, the job back in the reports once a wrap that does not open answers it (and a
second demand at once), then the key revealed, found and kept, and the report audited."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from core.contracts import JobState, Role
from core.sealing import new_data_key
from deploy.devnet import Devnet
from rolebase.keygame import DemandKey, RequestWrap
from rolebase.watchers import MarketWatcher
from tests.chain.test_lifecycle import report_pass, stake
from tests.chain.test_sealed_jobs import _register, _verifying, _wrap_to
from whistleblower.loader import WhistleblowerLoader
from whistleblower.policy import Audit, OpenDemand, SealedReport, WhistleblowerConfig, WhistleblowerPolicy
from whistleblower.responder import WhistleblowerResponder
from whistleblower.state import WhistleblowerDb

if TYPE_CHECKING:
    from tests.conftest import Parties


def test_a_sealed_report_its_request_its_demands_and_the_key_found(devnet: Devnet, parties: Parties, tmp_path: Path) -> None:
    v = _verifying(devnet, parties)
    job_id, wb, sub = v.job_id, parties.verifier2, parties.submitter
    report_pass(v.proto, v.verifier, job_id)
    proto = v.proto.with_signer(wb)
    me = wb.address
    stake(proto, wb, Role.WHISTLEBLOWER)
    key = _register(proto, wb)
    db = WhistleblowerDb(tmp_path / "state.sqlite")
    watcher = MarketWatcher(proto.market, proto.book.deploy_block)
    loader = WhistleblowerLoader(proto, watcher, db, me, key)
    responder = WhistleblowerResponder(proto, db, None, None, loader, me)  # type: ignore[arg-type]  # only key-game actions here
    policy = WhistleblowerPolicy(WhistleblowerConfig(stake_target=proto.stakes.min_stake(Role.WHISTLEBLOWER), encryption_key=key, key_grace_s=600))

    own = WhistleblowerLoader(proto, watcher, WhistleblowerDb(tmp_path / "verifier.sqlite"), v.verifier.address, key).load()
    assert own.reports == (), "the job's verifier audits nothing of its own job, nor asks for its key"

    view = loader.load()
    (first,) = view.reports
    window = proto.market.params().challenge_window
    assert first.sealed == SealedReport(held=False, live=True, asked_at=None, window=window)
    assert view.registered_key is not None and view.registered_key.key == key.public_key
    assert [a for a in policy.next_actions(view) if isinstance(a, RequestWrap | DemandKey)] == [RequestWrap(job_id)]

    asked = proto.sealed_jobs.request_wrap(job_id)
    (waiting,) = loader.load().reports
    assert waiting.sealed is not None and waiting.sealed.asked_at == proto.client.timestamp(asked.block_number)
    assert [a for a in policy.next_actions(loader.load()) if isinstance(a, RequestWrap | DemandKey)] == [], "asked once, within the grace"

    responder.perform(DemandKey(job_id))
    held = loader.load()
    assert proto.market.get_job(job_id).state is JobState.DATA_VOTE
    assert held.reports == () and held.demands == (OpenDemand(job_id, proto.sealed_jobs.demand_of(job_id).deadline),)

    _wrap_to(proto, sub, job_id, new_data_key(), me)  # answers the demand, and opens to another key than the committed one
    answered = loader.load()
    (again,) = answered.reports
    assert again.sealed is not None and not again.sealed.held and again.sealed.demands == 1 and answered.demands == ()
    assert [a for a in policy.next_actions(answered) if isinstance(a, DemandKey)] == [DemandKey(job_id)], "the second at once"

    responder.perform(DemandKey(job_id))
    proto.with_signer(sub).sealed_jobs.reveal_key(job_id, v.data_key)
    opened = loader.load()
    (readable,) = opened.reports
    assert readable.sealed == SealedReport(held=True) and db.data_key(job_id) == v.data_key
    assert [a for a in policy.next_actions(opened) if isinstance(a, Audit)] == [Audit(job_id, readable.report_cid, readable.window_end, readable.trace_root)]
