"""The jackpot, report seals and forced errors on a real anvil: the Python formulas of
``proofs.probes`` and ``core.contracts.ReportSeal`` against what JobMarket computes and accepts.

A report's seal is stored only as a hash; :meth:`JobMarket.seal_of` rebuilds it from the draw's
and the report's events, and that is what ``verifyProbe`` (and so ``openOnReport``) accepts.
``report()`` takes the probes themselves: the chain checks their segments, computes their root
(which must be ``proofs.ProbeTree``'s) and emits them (:meth:`JobMarket.sealed_report`).
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

import pytest
from eth_utils import keccak

from core.contracts import Bytes32, Event, JobId, JobState, ReportSeal, Role
from core.reverts import revert_class
from deploy.devnet import Devnet
from proofs.probes import Probe, ProbeTree, forced_commitment, is_forced, probe_positions, probe_segment
from submitter.timeline import job_timeline

from .test_lifecycle import FEE, MANIFEST, MODEL, REPORT, REWARD, ROOT, post, stake, wallets

if TYPE_CHECKING:
    from tests.conftest import Parties

E18 = 10**18
ZERO = Bytes32(b"\x00" * 32)
CHECKPOINTS, K = 9, 5  # a trace of 8 segments of 5 steps


def _drawn(devnet: Devnet, parties: Parties, secret: bytes | None = None, *, seed_after_anchor: bool = False) -> tuple[JobId, Event]:
    """A committed job with ``parties.verifier`` drawn (the only verifier staked); it commits the
    forced seed of ``secret`` before the job's commit, or after it (past the draw's anchor)."""
    proto = devnet.protocol()
    stake(proto, parties.solver, Role.SOLVER)
    stake(proto, parties.verifier, Role.VERIFIER)
    verifier = proto.with_signer(parties.verifier).market
    if secret is not None and not seed_after_anchor:
        verifier.commit_forced_seed(forced_commitment(secret, parties.verifier.address))
    job_id, _ = post(proto, parties.submitter)
    proto.with_signer(parties.solver).market.claim(job_id)
    proto.with_signer(parties.solver).market.commit(job_id, ROOT, CHECKPOINTS, MODEL, MANIFEST)
    if secret is not None and seed_after_anchor:
        verifier.commit_forced_seed(forced_commitment(secret, parties.verifier.address))
    devnet.chain.mine(2)
    receipt = proto.with_signer(parties.outsider).market.assign_verifier(job_id)
    (assigned,) = proto.market.decode_events(receipt, "VerifierAssigned")
    assert assigned.args["verifier"] == parties.verifier.address
    return job_id, assigned


def _probes(assign_seed: bytes, probe_count: int) -> ProbeTree:
    """A report's probe tree with made-up state hashes at the slots the seed fixes."""
    positions = probe_positions(assign_seed, probe_count, CHECKPOINTS, K)
    return ProbeTree([Probe(i, s, m, Bytes32(keccak(bytes([i, s, m])))) for i, s, m in positions])


def _entries(tree: ProbeTree) -> list[Probe]:
    """The probes of ``tree`` as ``report()`` takes them, slot i at position i."""
    return sorted(tree.probes, key=lambda p: p.index)


def test_the_seal_rebuilt_from_events_is_what_verify_probe_accepts(devnet: Devnet, parties: Parties) -> None:
    job_id, assigned = _drawn(devnet, parties)
    market = devnet.protocol().market
    seed = Bytes32(bytes(assigned.args["assignSeed"]))
    assert assigned.args["forcedCommitment"] == ZERO  # no forced seed committed: cannot be forced
    assert market.seal_of(job_id) is None and market.sealed_report(job_id) is None  # drawn, not reported
    tree = _probes(seed, market.params().probe_count)
    assert len(tree) == market.params().probe_count >= 1

    receipt = devnet.protocol(parties.verifier).market.report(job_id, True, REPORT, seed, ZERO, _entries(tree))
    (reported,) = market.decode_events(receipt, "ReportSubmitted")
    assert reported.args["probeRoot"] == tree.root  # the chain computed ProbeTree's root
    sealed = market.sealed_report(job_id)
    assert sealed is not None and sealed[1] == _entries(tree)  # the probes are on chain: no report JSON needed
    (shown,) = [e for e in job_timeline(devnet.protocol(), job_id) if e.event == "ReportSubmitted"]
    assert shown.args["probes"] == [  # the submitter's timeline shows them as JSON
        {"segment": p.segment, "step": p.step, "stateHash": "0x" + p.state_hash.hex()} for p in sorted(tree.probes, key=lambda p: p.index)
    ]
    seal = market.seal_of(job_id)
    assert seal == ReportSeal(seed, ZERO, tree.root)
    assert seal.digest() == market.report_seal(job_id)

    for probe in tree.probes:
        proof = tree.proof(probe.index)
        assert market.verify_probe(job_id, seal, probe.index, probe.segment, probe.step, probe.state_hash, proof)
    probe = tree.probes[0]
    proof = tree.proof(0)
    other = Bytes32(keccak(b"another seed"))
    rejected = [
        (dataclasses.replace(seal, assign_seed=other), probe.segment, probe.step, probe.state_hash),  # not the stored seal
        (seal, (probe.segment + 1) % (CHECKPOINTS - 1), probe.step, probe.state_hash),  # not the slot's segment
        (seal, probe.segment, probe.step + 1, probe.state_hash),  # not the committed step
        (seal, probe.segment, probe.step, Bytes32(b"\x77" * 32)),  # not the committed state
    ]
    for wrong_seal, segment, step, state in rejected:
        assert not market.verify_probe(job_id, wrong_seal, 0, segment, step, state, proof)


def test_probe_segments_match_the_contract(devnet: Devnet) -> None:
    market = devnet.protocol().market
    for n in (2, 3, 9, 1000):
        for i in range(4):
            seed = keccak(bytes([n % 256, i]))
            assert market.probe_segment(seed, i, n) == probe_segment(seed, i, n)


def test_report_checks_the_seal_and_the_probes(devnet: Devnet, parties: Parties) -> None:
    job_id, assigned = _drawn(devnet, parties)
    verifier = devnet.protocol(parties.verifier).market
    seed = Bytes32(bytes(assigned.args["assignSeed"]))
    probes = _entries(_probes(seed, verifier.params().probe_count))
    with pytest.raises(revert_class("InvalidSeal")):  # not the draw's seed
        verifier.report(job_id, True, REPORT, Bytes32(keccak(b"another seed")), ZERO, probes)
    with pytest.raises(revert_class("InvalidSeal")):  # not the draw's forced commitment
        verifier.report(job_id, True, REPORT, seed, Bytes32(keccak(b"fc")), probes)
    wrong = [
        [],  # a pass without probes
        probes[:-1],  # one slot short
        [*probes[:1], dataclasses.replace(probes[1], segment=(probes[1].segment + 1) % (CHECKPOINTS - 1)), *probes[2:]],  # off its segment
        [*probes[:-1], dataclasses.replace(probes[-1], state_hash=ZERO)],  # no state
    ]
    for entries in wrong:
        with pytest.raises(revert_class("InvalidProbe")):
            verifier.report(job_id, True, REPORT, seed, ZERO, entries)
    with pytest.raises(revert_class("InvalidProbe")):  # a failing report publishes no probes
        verifier.report(job_id, False, REPORT, seed, ZERO, probes)
    receipt = verifier.report(job_id, False, REPORT, seed, ZERO, [])  # a failing report opens a dispute
    (reported,) = verifier.decode_events(receipt, "ReportSubmitted")
    sealed = verifier.sealed_report(job_id)
    assert reported.args["probeRoot"] == ZERO and sealed is not None and sealed[1] == []
    assert verifier.get_job(job_id).state is JobState.DISPUTED


def test_forced_seed_is_snapshotted_only_if_committed_by_the_anchor(devnet: Devnet, parties: Parties) -> None:
    secret = keccak(b"verifier secret")
    commitment = forced_commitment(secret, parties.verifier.address)
    snapshot = devnet.chain.snapshot()
    job_id, assigned = _drawn(devnet, parties, secret)
    assert assigned.args["forcedCommitment"] == commitment
    seed = devnet.protocol().market.forced_seed_of(parties.verifier.address)
    assert seed.commitment == commitment and 0 < seed.set_at_block < assigned.block_number
    devnet.chain.revert(snapshot)

    job_id, assigned = _drawn(devnet, parties, secret, seed_after_anchor=True)
    assert assigned.args["forcedCommitment"] == ZERO  # set after the commit block: too late for this draw
    assert devnet.protocol().market.forced_seed_of(parties.verifier.address).commitment == commitment


def test_commit_forced_seed_emits_and_refuses_zero(devnet: Devnet, parties: Parties) -> None:
    market = devnet.protocol(parties.verifier).market
    commitment = forced_commitment(keccak(b"s"), parties.verifier.address)
    receipt = market.commit_forced_seed(commitment)
    (event,) = market.decode_events(receipt, "ForcedSeedCommitted")
    assert (event.args["verifier"], event.args["commitment"], event.args["blockNumber"]) == (parties.verifier.address, commitment, receipt.block_number)
    with pytest.raises(revert_class("ZeroCommitment")):
        market.commit_forced_seed(ZERO)


def test_is_forced_agrees_with_the_contract(devnet: Devnet, parties: Parties) -> None:
    market = devnet.protocol().market
    rate = market.params().forced_error_rate_bps
    assert 0 < rate < 10_000
    verifier, seed, root = parties.verifier.address, Bytes32(keccak(b"assign")), Bytes32(keccak(b"probes"))
    secrets = [keccak(i.to_bytes(4, "big")) for i in range(5_000)]
    forced = next(s for s in secrets if is_forced(s, seed, rate))
    unforced = next(s for s in secrets if not is_forced(s, seed, rate))
    seal = ReportSeal(seed, Bytes32(forced_commitment(forced, verifier)), root)
    assert market.is_forced(forced, verifier, seal)
    assert not market.is_forced(forced, parties.outsider.address, seal)  # the commitment binds the verifier
    assert not market.is_forced(forced, verifier, dataclasses.replace(seal, forced_commitment=ZERO))  # not seeded
    assert not market.is_forced(unforced, verifier, ReportSeal(seed, Bytes32(forced_commitment(unforced, verifier)), root))
    for secret in secrets[:20]:
        own = ReportSeal(seed, Bytes32(forced_commitment(secret, verifier)), root)
        assert market.is_forced(secret, verifier, own) == is_forced(secret, seed, rate)


def test_anyone_funds_the_jackpot(devnet: Devnet, parties: Parties) -> None:
    proto = devnet.protocol(parties.outsider)
    jackpot = proto.market.jackpot()
    before = wallets(proto, [parties.outsider.address])
    proto.token.approve(proto.market.address, 5 * E18)
    receipt = proto.market.fund_jackpot(5 * E18)
    (funded,) = proto.market.decode_events(receipt, "JackpotFunded")
    assert (funded.args["from"], funded.args["amount"], funded.args["jackpot"]) == (parties.outsider.address, 5 * E18, jackpot + 5 * E18)
    after = wallets(proto, [parties.outsider.address])
    assert proto.market.jackpot() == jackpot + 5 * E18
    assert after[parties.outsider.address] == before[parties.outsider.address] - 5 * E18
    assert after[proto.market.address] == before[proto.market.address] + 5 * E18


def test_a_cancelled_job_refunds_the_tax_and_leaves_the_jackpot(devnet: Devnet, parties: Parties) -> None:
    proto = devnet.protocol()
    jackpot = proto.market.jackpot()
    before = wallets(proto, [parties.submitter.address])
    job_id, _ = post(proto, parties.submitter)
    tax = proto.market.jackpot_tax(REWARD, FEE)
    assert wallets(proto, [parties.submitter.address])[parties.submitter.address] == before[parties.submitter.address] - REWARD - FEE - tax
    proto.with_signer(parties.submitter).market.cancel(job_id)
    assert wallets(proto, [parties.submitter.address]) == before
    assert proto.market.jackpot() == jackpot
