"""The availability court through the roles' own code on a real anvil, with real gateways (no daemon
processes): the verifier's :meth:`core.availability.Availability.gather` and ``challenge`` (one case
naming every lacking item, one approve), the committee's :mod:`rolebase.court` duty (fetch by CID from
the solver's gateway, check against the committed trace, commit, reveal, settle), and the payouts.

- A checkpoint of 1 MiB (twice what a 30M-gas block lets a solver publish) is made available through
  the committee; the solver serves the committee only, so the verifier then fetches from the
  custodians: the solver gains nothing by withholding from the verifier, and the verifier's report
  window is whole again.
- A solver that serves nothing loses its whole bond to the verifier and gets nothing from the deposit.

Every contract path is tests/forge/AvailabilityCourt.t.sol.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

import core.availability
from core.availability import Availability, ContentUnavailable, Wanted, challenge
from core.chain import Signer
from core.cid import cid_to_digest
from core.contracts import Bytes32, CaseStatus, JobId, JobState, Protocol, Role
from core.storage import LocalStore
from core.storage.gateway import GatewayServer
from core.storage.peers import FetchingStore
from deploy.devnet import Devnet
from proofs.checkpoint import state_hash
from proofs.manifest import parse_manifest
from proofs.merkle import TraceTree, hex32
from proofs.spec import Limits
from rolebase.court import CourtDuty, CourtWatcher, court_moves
from rolebase.watchers import MarketWatcher
from tests.chain.test_lifecycle import post, stake

if TYPE_CHECKING:
    from tests.conftest import Parties

#: checkpoint 1 is 1 MiB: above the 487 KiB a solver can publish on a 30M-gas chain
CHECKPOINTS = [b"checkpoint 0 " * 100, os.urandom(1 << 20), b"checkpoint 2 " * 100]


@pytest.fixture(autouse=True)
def _no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """An item missing now is missing: the verifier challenges at once (the wait is for daemons)."""
    monkeypatch.setattr(core.availability, "AVAILABILITY_WAIT_S", 0.0)


def _manifest(cids: Sequence[str], hashes: Sequence[Bytes32]) -> bytes:
    doc = {
        "version": 2,
        "spec_cid": cids[0],
        "spec_hash": hex32(b"\x11" * 32),
        "steps": 2,
        "checkpoint_interval": 1,
        "root": hex32(TraceTree(hashes).root),
        "checkpoints": [{"index": i, "cid": c, "state_hash": hex32(h)} for i, (c, h) in enumerate(zip(cids, hashes))],
        "update_norms": [1.0, 1.0],
        "losses": [1.0, 0.5],
    }
    data = json.dumps(doc).encode()
    parse_manifest(data)  # a manifest the members can read
    return data


def _kept(secret: bytes) -> Callable[[], bytes]:
    """A member's salt secret, as its records keep it."""
    return lambda: secret


class Court:
    """A job committed with a real trace, its verifier drawn, three other staked verifiers (the only
    ones eligible: the whole committee), each with its own store and gateway."""

    def __init__(self, devnet: Devnet, parties: Parties, tmp: Path, stack: ExitStack, *, serve: bool) -> None:
        self.devnet = devnet
        self.proto = proto = devnet.protocol()
        sub, sol, ver = parties.submitter, parties.solver, parties.verifier
        self.solver, self.verifier = sol, ver
        stake(proto, sol, Role.SOLVER)
        stake(proto, ver, Role.VERIFIER)
        self.members: list[Signer] = [parties.verifier2, parties.outsider, parties.solver2]
        self.job_id, _ = post(proto, sub)
        proto.with_signer(sol).market.claim(self.job_id)
        solver_store = LocalStore(tmp / "solver")
        self.cids = [solver_store.put(c) if serve else LocalStore(tmp / "unserved").put(c) for c in CHECKPOINTS]
        self.hashes = [state_hash(c) for c in CHECKPOINTS]
        self.manifest_cid = solver_store.put(_manifest(self.cids, self.hashes))
        root = TraceTree(self.hashes).root
        proto.with_signer(sol).market.commit(self.job_id, root, len(CHECKPOINTS), cid_to_digest(self.cids[-1]), cid_to_digest(self.manifest_cid))
        devnet.chain.mine(2)
        proto.with_signer(sub).market.assign_verifier(self.job_id)
        assert proto.market.get_job(self.job_id).verifier == ver.address
        for m in self.members:  # staked after the verifier's draw (it drew from one), before the court's
            stake(proto, m, Role.VERIFIER)
        solver_gateway = stack.enter_context(GatewayServer(solver_store))
        self.duties: list[CourtDuty] = []
        self.gateways: list[str] = []
        for i, m in enumerate(self.members):
            own = LocalStore(tmp / f"member-{i}")
            self.gateways.append(stack.enter_context(GatewayServer(own)).url)
            watcher = MarketWatcher(proto.market, proto.book.deploy_block)
            self.duties.append(
                CourtDuty(
                    proto.with_signer(m).court, proto.book.deploy_block, FetchingStore(own, [solver_gateway.url]), m.address, _kept(os.urandom(32)), watcher
                )
            )

    def wanted(self) -> list[Wanted]:
        return [Wanted(i, self.cids[i], Limits.CHECKPOINT_BYTES, f"checkpoint {i}", self.hashes[i]) for i in (1, 2)]

    def run(self, pause_s: int = 0) -> int:
        """Every member does its court moves until the case settles (``pause_s`` more seconds pass once
        the committee sits); returns the case id."""
        watcher = CourtWatcher(self.proto, self.members[0].address)
        for tick in range(8):
            if tick == 1:
                self.devnet.chain.increase_time(pause_s)
            self.devnet.chain.mine(2)  # the draw's entropy block
            for duty in self.duties:
                view = CourtWatcher(self.proto, duty.me).live()
                now, block = self.devnet.client.timestamp(), self.devnet.client.block_number()
                for move in court_moves(now, block, duty.me, view, watcher.params, grace_s=0):
                    duty.perform(move)
            if not CourtWatcher(self.proto, self.members[0].address).live():
                return self.proto.court.case_count()
        raise AssertionError("the case did not settle")


@pytest.fixture
def stack() -> Iterator[ExitStack]:
    with ExitStack() as s:
        yield s


def _challenge(c: Court, verifier: Protocol, store: LocalStore) -> tuple[int, int]:
    """The verifier fetches checkpoints 1 and 2 and challenges both in one case; returns (deposit, report time left)."""
    availability = Availability(verifier, store)
    with pytest.raises(ContentUnavailable) as lacking:
        availability.gather(c.job_id, c.wanted(), c.proto.market.get_job(c.job_id).deadline)
    assert set(lacking.value.items) == {1, 2}, "one challenge names every lacking item"
    before = c.proto.token.balance_of(c.verifier.address)
    challenge(verifier, c.verifier.address, lacking.value)
    job = c.proto.market.get_job(c.job_id)
    assert job.state is JobState.DATA_VOTE
    assert job.challenger == c.verifier.address
    deposit = before - c.proto.token.balance_of(c.verifier.address)
    assert deposit == c.proto.court.deposit_for(2), "one deposit, priced by the items named"
    return deposit, job.challenge_left


def test_a_large_checkpoint_served_to_the_committee_only_reaches_the_verifier_through_the_custodians(
    devnet: Devnet, parties: Parties, tmp_path: Path, stack: ExitStack
) -> None:
    c = Court(devnet, parties, tmp_path, stack, serve=True)
    verifier = c.proto.with_signer(c.verifier)
    vown = LocalStore(tmp_path / "verifier")  # the solver does not serve the verifier
    deposit, left = _challenge(c, verifier, vown)
    solver_before = c.proto.token.balance_of(c.solver.address)
    case_id = c.run(pause_s=40)  # the court takes its time: none of it comes off the report window
    case = c.proto.court.get_case(case_id)
    assert case.status is CaseStatus.SERVED
    job = c.proto.market.get_job(JobId(c.job_id))
    assert job.state is JobState.VERIFYING
    assert job.deadline - devnet.client.timestamp() >= left - 2, "the verifier's report window is whole"
    params = c.proto.court.params()
    assert c.proto.court.credit(c.solver.address) == 2 * params.item_fee, "the solver: its uploads only, credited"
    assert c.proto.token.balance_of(c.proto.court.address) == c.proto.court.total_credit(), "the court holds only its credits"
    c.proto.with_signer(c.solver).court.claim_credit(c.solver.address)
    assert c.proto.token.balance_of(c.solver.address) - solver_before == 2 * params.item_fee, "claimed: the solver paid"
    assert c.proto.court.credit(c.solver.address) == 0
    assert deposit == 3 * params.referee_fee + 2 * params.item_fee
    (settled,) = c.proto.court.events("CaseSettled", c.proto.book.deploy_block, caseId=case_id)
    assert sorted(settled.args["custodians"]) == sorted(m.address for m in c.members)
    # the custodians serve the verifier what the solver would not: withholding gained the solver nothing
    from_custodians = FetchingStore(vown, c.gateways)
    Availability(verifier, from_custodians).gather(c.job_id, c.wanted(), job.deadline)
    assert vown.get(c.cids[1], Limits.CHECKPOINT_BYTES) == CHECKPOINTS[1]


def test_a_solver_that_serves_nothing_loses_its_bond_and_gains_no_deposit(devnet: Devnet, parties: Parties, tmp_path: Path, stack: ExitStack) -> None:
    c = Court(devnet, parties, tmp_path, stack, serve=False)
    verifier = c.proto.with_signer(c.verifier)
    before = {a: c.proto.token.balance_of(a) for a in (c.solver.address, c.verifier.address)}
    staked = c.proto.stakes.stake_of(c.solver.address, Role.SOLVER).staked
    _challenge(c, verifier, LocalStore(tmp_path / "verifier"))
    case_id = c.run()
    assert c.proto.court.get_case(case_id).status is CaseStatus.WITHHELD
    job = c.proto.market.get_job(JobId(c.job_id))
    assert job.state is JobState.OPEN, "reopened for another solver"
    bond = c.proto.market.solver_bond(job.reward)
    assert c.proto.stakes.stake_of(c.solver.address, Role.SOLVER).staked == staked - bond
    assert c.proto.token.balance_of(c.solver.address) == before[c.solver.address], "no deposit reached the solver"
    fees = 3 * c.proto.court.params().referee_fee
    wallet = c.proto.token.balance_of(c.verifier.address) + c.proto.court.credit(c.verifier.address)
    assert wallet == before[c.verifier.address] - fees + bond, "the bond, less the committee's fees"
    assert c.proto.stakes.stake_of(c.verifier.address, Role.VERIFIER).locked == 0, "the verifier's bond released"
