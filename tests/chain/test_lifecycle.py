"""Job lifecycle end to end on a real anvil, through the typed Python client.

Every test reads the protocol parameters from the chain, moves the clock across
the deadlines with evm_increaseTime, and checks the token balance of every
party (wallets, stakes, contracts) before and after.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import pytest
from eth_utils import keccak, to_checksum_address
from web3.types import Nonce

from core.chain import Receipt, Signer
from core.contracts import Bytes32, JobId, JobState, Protocol, Role, TokenAmount
from core.probe import Probe
from core.reverts import revert_class
from deploy.devnet import Devnet

if TYPE_CHECKING:
    from tests.conftest import Parties

E18 = 10**18
REWARD = 100 * E18
FEE = 10 * E18
COMMIT_WINDOW = 3_600
SPEC = bytes.fromhex("11" * 32)
ROOT = bytes.fromhex("22" * 32)
MODEL = bytes.fromhex("33" * 32)
MANIFEST = bytes.fromhex("44" * 32)
REPORT = bytes.fromhex("55" * 32)


def wallets(proto: Protocol, accounts: Iterable[str]) -> dict[str, int]:
    """Token balances of the given accounts and of both protocol contracts."""
    names = [*accounts, proto.market.address, proto.stakes.address]
    return {a: proto.token.balance_of(a) for a in names}


def stake(proto: Protocol, who: Signer, role: Role, amount: int | None = None) -> TokenAmount:
    amount = amount if amount is not None else proto.stakes.min_stake(role)
    p = proto.with_signer(who)
    p.token.approve(p.stakes.address, amount)
    p.stakes.stake(role, amount)
    return TokenAmount(amount)


def post(proto: Protocol, submitter: Signer, reward: int = REWARD, fee: int = FEE) -> tuple[JobId, Receipt]:
    """Post a job, approving exactly its escrow: reward + fee + the jackpot tax."""
    p = proto.with_signer(submitter)
    p.token.approve(p.market.address, reward + fee + p.market.jackpot_tax(reward, fee))
    return p.market.post_job(SPEC, reward, fee, COMMIT_WINDOW)


def report_pass(proto: Protocol, verifier: Signer, job_id: JobId) -> Receipt:
    """``verifier`` passes the job under its last draw's seal parts (``VerifierAssigned``), with
    made-up probe states on the segments the draw fixed (the chain checks those, not the states)."""
    market = proto.market
    drawn = max(market.events("VerifierAssigned", 0, jobId=job_id), key=lambda e: (e.block_number, e.log_index))
    seed, checkpoints = bytes(drawn.args["assignSeed"]), market.get_job(job_id).checkpoint_count
    probes = [Probe(i, market.probe_segment(seed, i, checkpoints), i + 1, Bytes32(keccak(b"probe %d" % i))) for i in range(market.params().probe_count)]
    return proto.with_signer(verifier).market.report(job_id, True, REPORT, seed, bytes(drawn.args["forcedCommitment"]), probes)


def past(devnet: Devnet, deadline: int) -> None:
    """Move the chain clock to just after ``deadline``."""
    now = devnet.client.timestamp()
    devnet.chain.increase_time(max(0, deadline - now) + 1)


def test_honest_lifecycle_pays_solver_and_verifier_and_releases_bonds(devnet: Devnet, parties: Parties) -> None:
    proto = devnet.protocol()
    sub, sol, ver, anyone = parties.submitter, parties.solver, parties.verifier, parties.outsider
    stake(proto, sol, Role.SOLVER)
    stake(proto, ver, Role.VERIFIER)
    people = [sub.address, sol.address, ver.address, anyone.address]
    before = wallets(proto, people)
    stakes_before = {r: proto.stakes.stake_of(a.address, r) for a, r in ((sol, Role.SOLVER), (ver, Role.VERIFIER))}
    params = proto.market.params()
    tax = proto.market.jackpot_tax(REWARD, FEE)
    assert tax == (REWARD + FEE) * params.jackpot_tax_bps // 10_000 > 0
    jackpot = proto.market.jackpot()
    gas: dict[str, int] = {}

    job_id, receipt = post(proto, sub)
    gas["postJob"] = receipt.gas_used
    job = proto.market.get_job(job_id)
    assert (job.state, job.submitter, job.reward, job.verifier_fee) == (JobState.OPEN, sub.address, REWARD, FEE)
    assert proto.token.balance_of(proto.market.address) == before[proto.market.address] + REWARD + FEE + tax

    solver_bond = proto.market.solver_bond(REWARD)
    gas["claim"] = proto.with_signer(sol).market.claim(job_id).gas_used
    assert proto.stakes.stake_of(sol.address, Role.SOLVER).locked == solver_bond
    assert proto.market.get_job(job_id).state is JobState.CLAIMED

    receipt = proto.with_signer(sol).market.commit(job_id, ROOT, 5, MODEL, MANIFEST)
    gas["commit"] = receipt.gas_used
    (committed,) = proto.market.decode_events(receipt, "TraceCommitted")
    assert committed.args["finalModelCid"] == MODEL and committed.args["manifestCid"] == MANIFEST
    with pytest.raises(revert_class("RandomnessNotReady")):
        proto.with_signer(anyone).market.assign_verifier(job_id)  # the seed block does not exist yet
    devnet.chain.mine(2)
    receipt = proto.with_signer(anyone).market.assign_verifier(job_id)
    gas["assignVerifier"] = receipt.gas_used
    (assigned,) = proto.market.decode_events(receipt, "VerifierAssigned")
    assert assigned.args["verifier"] == ver.address
    verifier_bond = proto.market.verifier_bond(REWARD)
    assert proto.stakes.stake_of(ver.address, Role.VERIFIER).locked == verifier_bond

    gas["report"] = report_pass(proto, ver, job_id).gas_used
    job = proto.market.get_job(job_id)
    assert job.state is JobState.VERIFIED
    with pytest.raises(revert_class("DeadlineNotReached")):
        proto.with_signer(anyone).market.finalize(job_id)  # the challenge window is still open
    assert job.deadline - devnet.client.timestamp() <= params.challenge_window
    past(devnet, job.deadline)
    receipt = proto.with_signer(anyone).market.finalize(job_id)
    gas["finalize"] = receipt.gas_used
    (taxed,) = proto.market.decode_events(receipt, "JackpotTaxed")
    assert (taxed.args["amount"], taxed.args["jackpot"]) == (tax, jackpot + tax)

    assert proto.market.get_job(job_id).state is JobState.FINALIZED
    after = wallets(proto, people)
    assert after[sub.address] == before[sub.address] - REWARD - FEE - tax
    assert after[sol.address] == before[sol.address] + REWARD
    assert after[ver.address] == before[ver.address] + FEE
    assert after[anyone.address] == before[anyone.address]
    assert after[proto.market.address] == before[proto.market.address] + tax  # the tax stays, in the jackpot
    assert proto.market.jackpot() == jackpot + tax
    assert after[proto.stakes.address] == before[proto.stakes.address]
    for (account, role), info in zip(((sol, Role.SOLVER), (ver, Role.VERIFIER)), stakes_before.values()):
        now = proto.stakes.stake_of(account.address, role)
        assert now.staked == info.staked and now.locked == 0
    print("gas per call:", gas, "total:", sum(gas.values()))


def test_silent_solver_is_slashed_and_the_job_reopens_for_another_solver(devnet: Devnet, parties: Parties) -> None:
    proto = devnet.protocol()
    sub, lazy, sol2, anyone = parties.submitter, parties.solver, parties.solver2, parties.outsider
    stake(proto, lazy, Role.SOLVER)
    stake(proto, sol2, Role.SOLVER)
    job_id, _ = post(proto, sub)
    proto.with_signer(lazy).market.claim(job_id)
    people = [sub.address, lazy.address, sol2.address, anyone.address]
    before = wallets(proto, people)
    lazy_stake = proto.stakes.stake_of(lazy.address, Role.SOLVER)
    bond = proto.market.solver_bond(REWARD)
    slashed = bond * proto.market.params().timeout_slash_bps // 10_000
    assert slashed > 0

    deadline = proto.market.get_job(job_id).deadline
    with pytest.raises(revert_class("DeadlineNotReached")):
        proto.with_signer(anyone).market.timeout_solver(job_id)
    past(devnet, deadline)
    with pytest.raises(revert_class("DeadlinePassed")):
        proto.with_signer(lazy).market.commit(job_id, ROOT, 5, MODEL, MANIFEST)
    receipt = proto.with_signer(anyone).market.timeout_solver(job_id)
    (timed_out,) = proto.market.decode_events(receipt, "SolverTimedOut")
    assert timed_out.args["slashed"] == slashed

    job = proto.market.get_job(job_id)
    assert job.state is JobState.OPEN and job.solver == "0x0000000000000000000000000000000000000000"
    after = wallets(proto, people)
    assert after[sub.address] == before[sub.address] + slashed  # the submitter gets the slashed share
    assert after[lazy.address] == before[lazy.address]
    assert after[proto.stakes.address] == before[proto.stakes.address] - slashed
    assert after[proto.market.address] == before[proto.market.address]  # escrow kept for the next solver
    lazy_now = proto.stakes.stake_of(lazy.address, Role.SOLVER)
    assert (lazy_now.staked, lazy_now.locked) == (lazy_stake.staked - slashed, 0)

    # the job moves on: another solver claims it
    proto.with_signer(sol2).market.claim(job_id)
    assert proto.market.get_job(job_id).solver == sol2.address


def test_silent_verifier_is_slashed_and_a_new_verifier_finishes_the_job(devnet: Devnet, parties: Parties) -> None:
    proto = devnet.protocol()
    sub, sol, anyone = parties.submitter, parties.solver, parties.outsider
    stake(proto, sol, Role.SOLVER)
    stake(proto, parties.verifier, Role.VERIFIER)
    job_id, _ = post(proto, sub)
    proto.with_signer(sol).market.claim(job_id)
    proto.with_signer(sol).market.commit(job_id, ROOT, 5, MODEL, MANIFEST)
    devnet.chain.mine(2)
    receipt = proto.with_signer(anyone).market.assign_verifier(job_id)
    (assigned,) = proto.market.decode_events(receipt, "VerifierAssigned")
    silent = parties.verifier
    assert assigned.args["verifier"] == silent.address
    stake(proto, parties.verifier2, Role.VERIFIER)  # a second verifier stakes while the first stays silent

    people = [sub.address, sol.address, silent.address, parties.verifier2.address]
    before = wallets(proto, people)
    silent_stake = proto.stakes.stake_of(silent.address, Role.VERIFIER)
    bond = proto.market.verifier_bond(REWARD)
    slashed = bond * proto.market.params().timeout_slash_bps // 10_000

    past(devnet, proto.market.get_job(job_id).deadline)
    with pytest.raises(revert_class("DeadlinePassed")):
        report_pass(proto, silent, job_id)
    receipt = proto.with_signer(anyone).market.timeout_verifier(job_id)
    (timed_out,) = proto.market.decode_events(receipt, "VerifierTimedOut")
    assert timed_out.args["slashed"] == slashed
    assert proto.market.get_job(job_id).state is JobState.COMMITTED

    mid = wallets(proto, people)
    assert mid[sol.address] == before[sol.address] + slashed  # the solver gets the slashed share
    assert mid[proto.stakes.address] == before[proto.stakes.address] - slashed
    silent_now = proto.stakes.stake_of(silent.address, Role.VERIFIER)
    assert (silent_now.staked, silent_now.locked) == (silent_stake.staked - slashed, 0)

    # the job moves on: a new draw excludes the silent verifier
    devnet.chain.mine(2)
    receipt = proto.with_signer(anyone).market.assign_verifier(job_id)
    (assigned,) = proto.market.decode_events(receipt, "VerifierAssigned")
    assert assigned.args["verifier"] == parties.verifier2.address
    report_pass(proto, parties.verifier2, job_id)
    past(devnet, proto.market.get_job(job_id).deadline)
    proto.with_signer(anyone).market.finalize(job_id)

    after = wallets(proto, people)
    assert proto.market.get_job(job_id).state is JobState.FINALIZED
    assert after[sol.address] == before[sol.address] + slashed + REWARD
    assert after[parties.verifier2.address] == before[parties.verifier2.address] + FEE
    assert after[silent.address] == before[silent.address]
    assert after[sub.address] == before[sub.address]
    assert after[proto.market.address] == before[proto.market.address] - REWARD - FEE  # the tax stays, in the jackpot


# ------------------------------------------------------------------ bad inputs


class Unchanged:
    """Asserts that no token balance and no nonce of the given accounts changed."""

    def __init__(self, devnet: Devnet, proto: Protocol, parties: Parties) -> None:
        self.devnet, self.proto = devnet, proto
        self.accounts = [s.address for s in (parties.submitter, parties.solver, parties.verifier, parties.outsider)]

    def snapshot(self) -> tuple[dict[str, int], list[Nonce]]:
        nonces = [self.devnet.client.w3.eth.get_transaction_count(to_checksum_address(a)) for a in self.accounts]
        return wallets(self.proto, self.accounts), nonces

    def __enter__(self) -> Unchanged:
        self.before = self.snapshot()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.snapshot() == self.before, "a failed call changed balances or sent a transaction"


def test_post_job_with_zero_reward_reverts_zero_reward(devnet: Devnet, parties: Parties) -> None:
    proto = devnet.protocol(parties.submitter)
    proto.token.approve(proto.market.address, FEE)
    with Unchanged(devnet, proto, parties), pytest.raises(revert_class("ZeroReward")) as caught:
        proto.market.post_job(SPEC, 0, FEE, COMMIT_WINDOW)
    assert str(caught.value) == "ZeroReward()"


def test_unknown_job_id_reverts_unknown_job_with_the_id(devnet: Devnet, parties: Parties) -> None:
    proto = devnet.protocol(parties.solver)
    stake(proto, parties.solver, Role.SOLVER)
    UnknownJob = revert_class("UnknownJob")
    with Unchanged(devnet, proto, parties):
        with pytest.raises(UnknownJob) as caught:
            proto.market.claim(JobId(999))
        assert caught.value.jobId == 999 and caught.value.args == (999,)
        with pytest.raises(UnknownJob):
            proto.market.get_job(JobId(999))


def test_wrong_caller_reverts_not_authorized(devnet: Devnet, parties: Parties) -> None:
    proto = devnet.protocol()
    stake(proto, parties.solver, Role.SOLVER)
    job_id, _ = post(proto, parties.submitter)
    proto.with_signer(parties.solver).market.claim(job_id)
    NotAuthorized = revert_class("NotAuthorized")
    with Unchanged(devnet, proto, parties):
        with pytest.raises(NotAuthorized) as caught:
            proto.with_signer(parties.outsider).market.commit(job_id, ROOT, 5, MODEL, MANIFEST)
        assert caught.value.caller == parties.outsider.address
        with pytest.raises(NotAuthorized):
            proto.with_signer(parties.outsider).stakes.slash(parties.solver.address, Role.SOLVER, 1, parties.outsider.address)


def test_claim_without_stake_reverts_insufficient_stake(devnet: Devnet, parties: Parties) -> None:
    proto = devnet.protocol()
    job_id, _ = post(proto, parties.submitter)
    minimum = proto.stakes.min_stake(Role.SOLVER)
    with Unchanged(devnet, proto, parties), pytest.raises(revert_class("InsufficientStake")) as caught:
        proto.with_signer(parties.solver).market.claim(job_id)
    e = caught.value
    assert (e.account, Role(e.role), e.have, e.need) == (parties.solver.address, Role.SOLVER, 0, minimum)
    assert proto.market.get_job(job_id).state is JobState.OPEN


def test_double_finalize_reverts_wrong_state(devnet: Devnet, parties: Parties) -> None:
    proto = devnet.protocol()
    stake(proto, parties.solver, Role.SOLVER)
    stake(proto, parties.verifier, Role.VERIFIER)
    job_id, _ = post(proto, parties.submitter)
    proto.with_signer(parties.solver).market.claim(job_id)
    proto.with_signer(parties.solver).market.commit(job_id, ROOT, 5, MODEL, MANIFEST)
    devnet.chain.mine(2)
    proto.with_signer(parties.outsider).market.assign_verifier(job_id)
    report_pass(proto, parties.verifier, job_id)
    past(devnet, proto.market.get_job(job_id).deadline)
    proto.with_signer(parties.outsider).market.finalize(job_id)
    with Unchanged(devnet, proto, parties), pytest.raises(revert_class("WrongState")) as caught:
        proto.with_signer(parties.outsider).market.finalize(job_id)
    assert (JobState(caught.value.have), JobState(caught.value.want)) == (JobState.FINALIZED, JobState.VERIFIED)
