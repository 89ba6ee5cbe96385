"""The proofs engine's trace tree, committed through JobMarket and checked by OpenZeppelin's
MerkleProof on a real anvil (``DisputeGame.verifyCheckpoint``, what a game's opening proves).

The state hashes come from a real (tiny) training run, so this ties the three together: what the
solver trains, what it commits, and what a contract accepts as a leaf of that commitment.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

from core.contracts import JobId, JobState, Role
from core.probe import Bytes32
from deploy.devnet import Devnet
from proofs.data import load_dataset
from proofs.datasets import reference_job
from proofs.train import Trace, train_trace

if TYPE_CHECKING:
    from tests.conftest import Parties

E18 = 10**18
ZERO_CID = bytes.fromhex("00" * 31 + "01")


@pytest.fixture(scope="module")
def trace() -> Trace:
    job = reference_job("mlp-spirals", steps=40, checkpoint_interval=5)
    spec = job.spec("QmTestDataset")
    return train_trace(spec, load_dataset(spec, job.dataset))


def _commit_trace(devnet: Devnet, parties: Parties, root: Bytes32, leaves: int) -> JobId:
    proto = devnet.protocol()
    proto.with_signer(parties.solver).token.approve(proto.stakes.address, 1_000 * E18)
    proto.with_signer(parties.solver).stakes.stake(Role.SOLVER, 1_000 * E18)
    proto.with_signer(parties.submitter).token.approve(proto.market.address, 110 * E18 + proto.market.jackpot_tax(100 * E18, 10 * E18))
    job_id, _ = proto.with_signer(parties.submitter).market.post_job(ZERO_CID, 100 * E18, 10 * E18, 3_600)
    proto.with_signer(parties.solver).market.claim(job_id)
    proto.with_signer(parties.solver).market.commit(job_id, root, leaves, ZERO_CID, ZERO_CID)
    assert proto.market.get_job(job_id).state is JobState.COMMITTED
    return job_id


def test_every_checkpoint_of_a_real_trace_verifies_on_chain(devnet: Devnet, parties: Parties, trace: Trace) -> None:
    tree = trace.tree
    leaves = len(trace.state_hashes)
    assert leaves == 9  # 40 steps, k = 5: checkpoints 0..8
    job_id = _commit_trace(devnet, parties, tree.root, leaves)
    game = devnet.protocol().game
    for index, state_hash in enumerate(trace.state_hashes):
        assert game.verify_checkpoint(job_id, index, state_hash, tree.proof(index)), index


def test_wrong_hash_wrong_index_and_wrong_proof_are_rejected_on_chain(devnet: Devnet, parties: Parties, trace: Trace) -> None:
    tree = trace.tree
    job_id = _commit_trace(devnet, parties, tree.root, len(trace.state_hashes))
    game = devnet.protocol().game
    hashes = trace.state_hashes
    proof3 = tree.proof(3)
    assert game.verify_checkpoint(job_id, 3, hashes[3], proof3)
    assert not game.verify_checkpoint(job_id, 3, hashes[4], proof3)  # another checkpoint's hash
    assert not game.verify_checkpoint(job_id, 4, hashes[3], proof3)  # the hash at another index
    assert not game.verify_checkpoint(job_id, 3, hashes[3], proof3[:-1])  # a truncated proof
    tampered = bytearray(hashes[3])
    tampered[0] ^= 1
    assert not game.verify_checkpoint(job_id, 3, bytes(tampered), proof3)
