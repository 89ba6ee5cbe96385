"""SealedJobs on anvil with real keys and real wraps (core.sealing): a submitter seals a job and wraps
its data key to the solver, which alone opens it; the verifier's demands for the key, answered by a
wrap and then only by the key itself; unanswered demands of a verifier and of a whistleblower, whose
key bond goes to the party withheld from (the verifier fee) and to the jackpot (the rest); the bond
back to the submitter at settlement.

Every contract path is tests/forge/SealedJobs.t.sol; these check the client, the deployment's wiring
and the crypto end to end.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from core.chain import Receipt, Signer
from core.contracts import ZERO_ADDRESS, JobId, JobState, KeyDemand, Protocol, Role, SealingStatus
from core.errors import SealingError
from core.reverts import revert_class
from core.sealing import EncryptionKey, key_hash, new_data_key, unwrap, wrap
from deploy.devnet import Devnet
from rolebase import keyring
from rolebase.records import DATA_KEYS_MIGRATION, RoleDb
from tests.chain.test_lifecycle import FEE, MANIFEST, MODEL, REWARD, ROOT, past, post, report_pass, stake

if TYPE_CHECKING:
    from tests.conftest import Parties

BOND = REWARD + FEE  # the key bond: what the job pays its solver and its verifier


def _register(proto: Protocol, who: Signer) -> EncryptionKey:
    """A fresh encryption key for ``who`` (staked), registered."""
    key = EncryptionKey.generate()
    proto.with_signer(who).keys.register_key(key.public_key)
    return key


def _seal(proto: Protocol, submitter: Signer) -> tuple[JobId, bytes]:
    """A job posted and sealed under a fresh data key (the key bond approved exactly); returns both."""
    job_id, _ = post(proto, submitter)
    data_key = new_data_key()
    me = proto.with_signer(submitter)
    me.token.approve(me.sealed_jobs.address, BOND)
    me.sealed_jobs.seal(job_id, key_hash(data_key))
    return job_id, data_key


def _wrap_to(proto: Protocol, publisher: Signer, job_id: JobId, data_key: bytes, recipient: str) -> Receipt:
    """``publisher`` (the submitter or the solver: it holds the key) wraps it to ``recipient``'s registered key."""
    registered = proto.keys.key_of(recipient)
    return proto.with_signer(publisher).sealed_jobs.publish_wraps(job_id, [recipient], [wrap(data_key, registered.key)])


def _records(folder: Path) -> RoleDb:
    """A role's records with only the data keys' table (what rolebase.keyring keeps)."""
    return RoleDb(folder / "records.db", [DATA_KEYS_MIGRATION])


def _unwrapped(proto: Protocol, job_id: JobId, me: str, key: EncryptionKey) -> bytes:
    """What ``me`` reads from the chain: its newest wrap, opened with its encryption key."""
    *_, newest = proto.sealed_jobs.wraps_to(job_id, me, proto.book.deploy_block)
    return unwrap(newest.wrap, key)


@dataclass(frozen=True)
class Verifying:
    """A sealed job in Verifying: the solver got the data key from its wrap, claimed and committed;
    the verifier, with a registered key, was drawn."""

    proto: Protocol
    job_id: JobId
    data_key: bytes
    solver: Signer
    verifier: Signer


def _verifying(devnet: Devnet, parties: Parties) -> Verifying:
    proto = devnet.protocol()
    sol, ver = parties.solver, parties.verifier
    stake(proto, sol, Role.SOLVER)
    stake(proto, ver, Role.VERIFIER)
    solver_key = _register(proto, sol)
    _register(proto, ver)
    job_id, data_key = _seal(proto, parties.submitter)
    proto.with_signer(sol).sealed_jobs.request_wrap(job_id)
    _wrap_to(proto, parties.submitter, job_id, data_key, sol.address)
    assert _unwrapped(proto, job_id, sol.address, solver_key) == data_key
    solver = proto.with_signer(sol).market
    solver.claim(job_id)
    solver.commit(job_id, ROOT, 5, MODEL, MANIFEST)
    devnet.chain.mine(2)
    proto.with_signer(parties.outsider).market.assign_verifier(job_id)
    assert proto.market.get_job(job_id).verifier == ver.address and proto.market.get_job(job_id).state is JobState.VERIFYING
    return Verifying(proto, job_id, data_key, sol, ver)


def test_a_sealed_jobs_key_reaches_the_solver_in_a_wrap_that_only_it_opens(devnet: Devnet, parties: Parties, tmp_path: Path) -> None:
    proto = devnet.protocol()
    sealed = proto.sealed_jobs
    assert (sealed.market(), sealed.keys(), sealed.token(), sealed.stake_manager()) == (
        proto.market.address,
        proto.keys.address,
        proto.token.address,
        proto.stakes.address,
    )
    sub, sol, other = parties.submitter, parties.solver, parties.solver2
    before = {a: proto.token.balance_of(a) for a in (sub.address, sealed.address)}
    job_id, data_key = _seal(proto, sub)
    tax = proto.market.jackpot_tax(REWARD, FEE)
    assert proto.token.balance_of(sub.address) == before[sub.address] - REWARD - FEE - tax - BOND
    assert proto.token.balance_of(sealed.address) == before[sealed.address] + BOND
    sealing = sealed.sealing_of(job_id)
    assert (sealing.key_hash, sealing.submitter, sealing.bond, sealing.status) == (key_hash(data_key), sub.address, BOND, SealingStatus.ACTIVE)
    with pytest.raises(revert_class("AlreadySealed")):
        proto.with_signer(sub).sealed_jobs.seal(job_id, key_hash(new_data_key()))

    stake(proto, sol, Role.SOLVER)
    stake(proto, other, Role.SOLVER)
    with pytest.raises(revert_class("NoEncryptionKey")) as keyless:
        proto.with_signer(sol).sealed_jobs.request_wrap(job_id)
    assert keyless.value.values == {"account": sol.address}
    solver_key, other_key = _register(proto, sol), _register(proto, other)
    (requested,) = sealed.decode_events(proto.with_signer(sol).sealed_jobs.request_wrap(job_id), "WrapRequested")
    assert requested.args == {"jobId": job_id, "party": sol.address, "keyVersion": 1}

    with pytest.raises(revert_class("NotAuthorized")):  # only a holder of the key wraps it
        _wrap_to(proto, other, job_id, data_key, sol.address)
    with pytest.raises(revert_class("InvalidWrap")) as short:
        proto.with_signer(sub).sealed_jobs.publish_wraps(job_id, [sol.address], [bytes(79)])
    assert short.value.values == {"length": 79}
    _wrap_to(proto, sub, job_id, data_key, sol.address)
    (published,) = sealed.wraps_to(job_id, sol.address, proto.book.deploy_block)
    assert (published.key_version, published.publisher) == (1, sub.address)
    assert data_key not in published.wrap
    received = unwrap(published.wrap, solver_key)
    assert received == data_key and key_hash(received) == sealed.sealing_of(job_id).key_hash
    assert sealed.wraps_to(job_id, other.address, proto.book.deploy_block) == []
    with pytest.raises(SealingError, match="does not open"):
        unwrap(published.wrap, other_key)  # a staked party with a key, but no wrap of its own

    # what a role reads (rolebase.keyring): the key found once, then kept in its records; nothing for the other
    solver_records, other_records = _records(tmp_path / "solver"), _records(tmp_path / "other")
    assert keyring.data_key(sealed, solver_records, job_id, sol.address, solver_key, proto.book.deploy_block) == data_key
    assert solver_records.data_key(job_id) == data_key
    assert keyring.data_key(sealed, other_records, job_id, other.address, other_key, proto.book.deploy_block) is None
    assert other_records.data_key(job_id) is None


def test_the_verifiers_demands_are_answered_by_a_wrap_then_only_by_the_key_and_the_bond_returns_at_settlement(
    devnet: Devnet, parties: Parties, tmp_path: Path
) -> None:
    v = _verifying(devnet, parties)
    proto, job_id, ver = v.proto, v.job_id, v.verifier
    sealed, as_verifier = proto.sealed_jobs, proto.with_signer(ver).sealed_jobs
    window = sealed.key_window()
    assert window == 60  # deploy/params/devnet.json

    deadline = proto.market.get_job(job_id).deadline
    held = as_verifier.demand_key(job_id)
    held_at = devnet.client.timestamp(held.block_number)
    job = proto.market.get_job(job_id)
    assert job.state is JobState.DATA_VOTE and job.challenge_left == deadline - held_at, "the report clock is paused"
    assert sealed.demand_of(job_id) == KeyDemand(ver.address, held_at + window, False, True)
    devnet.chain.increase_time(20)
    answer = _wrap_to(proto, v.solver, job_id, v.data_key, ver.address)  # the solver holds the key too
    (answered,) = sealed.decode_events(answer, "DemandAnswered")
    assert answered.args == {"jobId": job_id, "party": ver.address, "by": v.solver.address, "withKey": False}
    job = proto.market.get_job(job_id)
    paused = devnet.client.timestamp(answer.block_number) - held_at
    assert job.state is JobState.VERIFYING and job.deadline == deadline + paused, "the report deadline moved by the time paused"
    assert not sealed.demand_of(job_id).open

    # the wrap "did not open": a second demand is key-only, and a wrap no longer answers it
    again = as_verifier.demand_key(job_id)
    (demanded,) = sealed.decode_events(again, "KeyDemanded")
    assert demanded.args["keyOnly"] and sealed.demand_of(job_id).key_only and sealed.demands_by(job_id, ver.address) == 2
    _wrap_to(proto, v.solver, job_id, v.data_key, ver.address)
    assert sealed.demand_of(job_id).open and proto.market.get_job(job_id).state is JobState.DATA_VOTE
    with pytest.raises(revert_class("WrongKey")) as wrong:
        proto.with_signer(v.solver).sealed_jobs.reveal_key(job_id, new_data_key())
    assert wrong.value.values == {"jobId": job_id}
    revealed = proto.with_signer(v.solver).sealed_jobs.reveal_key(job_id, v.data_key)
    (public,) = sealed.decode_events(revealed, "KeyRevealed")
    assert public.args["dataKey"] == v.data_key, "the key is public now"
    assert sealed.sealing_of(job_id).status is SealingStatus.REVEALED and not sealed.demand_of(job_id).open
    assert sealed.revealed_key(job_id, proto.book.deploy_block) == v.data_key
    anyone_key = EncryptionKey.generate()  # no wrap to it: the revealed key is anyone's now
    assert keyring.data_key(sealed, _records(tmp_path), job_id, parties.outsider.address, anyone_key, proto.book.deploy_block) == v.data_key
    assert proto.market.get_job(job_id).state is JobState.VERIFYING
    with pytest.raises(revert_class("KeyPublic")):
        as_verifier.demand_key(job_id)

    # settlement: the bond goes back to the submitter, by credit
    report_pass(proto, ver, job_id)
    anyone = proto.with_signer(parties.outsider)
    with pytest.raises(revert_class("NotSettled")) as early:
        anyone.sealed_jobs.return_bond(job_id)
    assert early.value.values == {"jobId": job_id, "state": int(JobState.VERIFIED)}
    past(devnet, proto.market.get_job(job_id).deadline)
    anyone.market.finalize(job_id)
    anyone.sealed_jobs.return_bond(job_id)
    sub = parties.submitter.address
    assert sealed.sealing_of(job_id).status is SealingStatus.RETURNED and sealed.credit(sub) == BOND
    before = proto.token.balance_of(sub)
    anyone.sealed_jobs.claim_credit(sub)
    assert proto.token.balance_of(sub) == before + BOND
    assert proto.token.balance_of(sealed.address) == sealed.total_credit() == 0
    with pytest.raises(revert_class("NotSealed")):
        anyone.sealed_jobs.return_bond(job_id)  # a bond leaves once


def test_an_unanswered_verifier_demand_pays_the_verifier_its_fee_releases_both_bonds_and_reopens_the_job(devnet: Devnet, parties: Parties) -> None:
    v = _verifying(devnet, parties)
    proto, job_id, sol, ver = v.proto, v.job_id, v.solver, v.verifier
    sealed, anyone = proto.sealed_jobs, proto.with_signer(parties.outsider)
    stakes = {a: proto.stakes.stake_of(a.address, r) for a, r in ((sol, Role.SOLVER), (ver, Role.VERIFIER))}
    assert all(s.locked > 0 for s in stakes.values())  # the claim's and the draw's bonds

    proto.with_signer(ver).sealed_jobs.demand_key(job_id)
    demand = sealed.demand_of(job_id)
    with pytest.raises(revert_class("DeadlineNotReached")):
        anyone.sealed_jobs.timeout_demand(job_id)
    past(devnet, demand.deadline)
    with pytest.raises(revert_class("DeadlinePassed")):
        _wrap_to(proto, sol, job_id, v.data_key, ver.address)  # too late to answer
    jackpot = proto.market.jackpot()
    (forfeited,) = sealed.decode_events(anyone.sealed_jobs.timeout_demand(job_id), "DemandForfeited")
    assert forfeited.args == {"jobId": job_id, "party": ver.address, "toParty": FEE, "toJackpot": REWARD}
    assert proto.market.jackpot() == jackpot + REWARD

    for account, role in ((sol, Role.SOLVER), (ver, Role.VERIFIER)):
        now = proto.stakes.stake_of(account.address, role)
        assert (now.staked, now.locked) == (stakes[account].staked, 0), "no stake lost, both bonds released"
    assert sealed.credit(sol.address) == 0, "a solver is not paid for training nobody could check"
    assert sealed.credit(ver.address) == FEE
    before = proto.token.balance_of(ver.address)
    anyone.sealed_jobs.claim_credit(ver.address)
    assert proto.token.balance_of(ver.address) == before + FEE
    assert proto.token.balance_of(sealed.address) == sealed.total_credit() == 0

    job = proto.market.get_job(job_id)
    assert job.state is JobState.OPEN and job.solver == job.verifier == ZERO_ADDRESS
    assert sealed.sealing_of(job_id).status is SealingStatus.FORFEITED
    with pytest.raises(revert_class("NotSealed")) as refused:
        anyone.sealed_jobs.return_bond(job_id)
    assert refused.value.values == {"jobId": job_id, "status": int(SealingStatus.FORFEITED)}


def test_an_unanswered_whistleblower_demand_pays_it_the_fee_and_resumes_the_challenge_window(devnet: Devnet, parties: Parties) -> None:
    v = _verifying(devnet, parties)
    proto, job_id = v.proto, v.job_id
    sealed, anyone, wb = proto.sealed_jobs, proto.with_signer(parties.outsider), parties.verifier2
    report_pass(proto, v.verifier, job_id)
    stake(proto, wb, Role.WHISTLEBLOWER)
    _register(proto, wb)
    with pytest.raises(revert_class("NotAuthorized")):
        proto.with_signer(v.verifier).sealed_jobs.demand_key(job_id)  # the verifier holds the key already
    proto.with_signer(wb).sealed_jobs.request_wrap(job_id)  # nobody answers the request

    held = proto.with_signer(wb).sealed_jobs.demand_key(job_id)
    left = proto.market.get_job(job_id).deadline - devnet.client.timestamp(held.block_number)
    job = proto.market.get_job(job_id)
    assert job.state is JobState.DATA_VOTE and job.challenger == wb.address and job.challenge_left == left
    past(devnet, sealed.demand_of(job_id).deadline)
    jackpot = proto.market.jackpot()
    timed_out = anyone.sealed_jobs.timeout_demand(job_id)
    (forfeited,) = sealed.decode_events(timed_out, "DemandForfeited")
    assert forfeited.args == {"jobId": job_id, "party": wb.address, "toParty": FEE, "toJackpot": REWARD}
    assert sealed.credit(wb.address) == FEE and proto.market.jackpot() == jackpot + REWARD

    job = proto.market.get_job(job_id)
    assert job.state is JobState.VERIFIED and job.deadline == devnet.client.timestamp(timed_out.block_number) + left, "the window resumed"
    assert proto.stakes.stake_of(v.solver.address, Role.SOLVER).locked > 0, "the job's bonds stay for its settlement"
    before = proto.token.balance_of(wb.address)
    anyone.sealed_jobs.claim_credit(wb.address)
    assert proto.token.balance_of(wb.address) == before + FEE
    assert sealed.sealing_of(job_id).status is SealingStatus.FORFEITED
