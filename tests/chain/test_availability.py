"""The data-availability game through the roles' own code on a real anvil (no daemon processes):
the verifier's :class:`core.availability.Availability` and ``challenge``, the solver's
``publication``, the typed wrappers. A checkpoint and the manifest the verifier's store does not
have are challenged, published by the solver from its records, checked again by the verifier and
kept in its store; the deposits move from the verifier to the solver; another job committing the same
trace reads those published copies (the chain keys a publication by content). (The withholding path, with
real daemons, is tests/e2e/test_data_availability.py; every contract path is
tests/forge/Availability.t.sol.)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from core.availability import Availability, ContentUnavailable, challenge
from core.cid import cid_to_digest
from core.contracts import MANIFEST_ITEM, JobState, Role
from core.storage import LocalStore
from deploy.devnet import Devnet
from proofs.checkpoint import state_hash
from proofs.merkle import TraceTree, hex32
from solver.availability import publication
from solver.policy import Phase
from solver.state import SolverDb
from submitter.timeline import job_timeline
from tests.chain.test_lifecycle import past, post, stake

if TYPE_CHECKING:
    from tests.conftest import Parties

CHECKPOINTS = [b"checkpoint %d " % i * 100 for i in range(5)]
MANIFEST_BYTES = b'{"synthetic": "manifest"}'


def test_challenged_items_are_published_by_the_solver_and_taken_by_the_verifier(devnet: Devnet, parties: Parties, tmp_path: Path) -> None:
    proto = devnet.protocol()
    sub, sol, ver = parties.submitter, parties.solver, parties.verifier
    assert proto.market.manifest_item() == MANIFEST_ITEM
    stake(proto, sol, Role.SOLVER)
    stake(proto, ver, Role.VERIFIER)
    job_id, _ = post(proto, sub)
    solver = proto.with_signer(sol)
    solver.market.claim(job_id)

    # the solver's records and store: five checkpoint files on disk, everything stored
    sstore, db = LocalStore(tmp_path / "solver-store"), SolverDb(tmp_path / "solver.sqlite")
    hashes = [state_hash(c) for c in CHECKPOINTS]
    db.start_job(job_id, "spec")
    cids = []
    for i, data in enumerate(CHECKPOINTS):
        path = tmp_path / f"checkpoint-{i}"
        path.write_bytes(data)
        cids.append(sstore.put(data))
        db.add_checkpoint(job_id, i, hashes[i], path, cids[-1], None if i == 0 else 1.0, None if i == 0 else 1.0)
    manifest_cid = sstore.put(MANIFEST_BYTES)
    root = TraceTree(hashes).root
    db.set_trained(job_id, root, len(hashes))
    db.set_uploaded(job_id, cids[-1], manifest_cid)
    db.set_phase(job_id, Phase.COMMITTED)
    solver.market.commit(job_id, root, len(hashes), cid_to_digest(cids[-1]), cid_to_digest(manifest_cid))
    assert proto.market.manifest_of(job_id) == cid_to_digest(manifest_cid)
    devnet.chain.mine(2)
    proto.market.with_signer(sub).assign_verifier(job_id)
    assert proto.market.get_job(job_id).verifier == ver.address

    verifier = proto.with_signer(ver)
    vstore = LocalStore(tmp_path / "verifier-store")  # has nothing of the trace
    availability = Availability(verifier, vstore)
    deposit = proto.market.params().availability_deposit
    before = {a: proto.token.balance_of(a) for a in (sol.address, ver.address)}
    # the solver's checkpoint file on disk is lost: it publishes from its store instead
    (tmp_path / "checkpoint-3").unlink()
    for item, cid, expect in ((3, cids[3], hashes[3]), (MANIFEST_ITEM, manifest_cid, None)):
        assert availability.published(job_id, item, cid, expect) is None, "nothing published yet"
        challenge(verifier, ver.address, ContentUnavailable(job_id, item, "not served", on_chain=True))
        job = proto.market.get_job(job_id)
        assert job.state is JobState.DATA_CHALLENGED and proto.market.availability_challenge(job_id).item == item
        content, proof = publication(db, sstore, job_id, item, CHECKPOINTS.__getitem__)  # nothing dropped: never regenerated
        solver.market.answer_availability(job_id, content, proof)
        assert proto.market.get_job(job_id).state is JobState.VERIFYING
        assert availability.published(job_id, item, cid, expect) == (MANIFEST_BYTES if expect is None else CHECKPOINTS[3])
        assert vstore.has(cid), "kept in the verifier's store under its CID"
    assert proto.token.balance_of(sol.address) == before[sol.address] + 2 * deposit
    assert proto.token.balance_of(ver.address) == before[ver.address] - 2 * deposit
    # a copy published for another trace is not taken for this one
    assert availability.published(job_id, 3, cids[2], hashes[2]) is None

    # the last challenge goes unanswered: the solver's bond goes to the verifier, the job reopens
    challenge(verifier, ver.address, ContentUnavailable(job_id, 1, "not served", on_chain=True))
    past(devnet, proto.market.get_job(job_id).deadline)
    bond = proto.market.solver_bond(proto.market.get_job(job_id).reward)
    staked = proto.stakes.stake_of(sol.address, Role.SOLVER).staked
    proto.market.with_signer(sub).timeout_availability(job_id)
    assert proto.market.get_job(job_id).state is JobState.OPEN
    assert proto.stakes.stake_of(sol.address, Role.SOLVER).staked == staked - bond
    assert proto.token.balance_of(ver.address) == before[ver.address] - 2 * deposit + bond
    # the submitter's timeline shows the game, a published item by its size and hash only
    shown = [(e.event, e.args) for e in job_timeline(proto, job_id) if e.event.startswith("Availability")]
    assert [name for name, _ in shown] == ["AvailabilityChallenged", "AvailabilityAnswered"] * 2 + ["AvailabilityChallenged", "AvailabilityTimedOut"]
    assert shown[1][1]["content"] == {"bytes": len(CHECKPOINTS[3]), "keccak256": hex32(hashes[3])}  # hex in the timeline JSON

    # another job committing the same trace: the chain keys a publication by its content (the
    # manifest CID, the trace root), so the first job's published copies serve this one's readers
    job2, _ = post(proto, sub)
    stake(proto, sol, Role.SOLVER)
    solver.market.claim(job2)
    solver.market.commit(job2, root, len(hashes), cid_to_digest(cids[-1]), cid_to_digest(manifest_cid))
    assert proto.market.is_published(job2, MANIFEST_ITEM) and proto.market.is_published(job2, 3)
    assert availability.published(job2, MANIFEST_ITEM, manifest_cid, None) == MANIFEST_BYTES
    assert availability.published(job2, 3, cids[3], hashes[3]) == CHECKPOINTS[3]
