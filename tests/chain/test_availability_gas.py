"""The gas model of an availability answer (``core.gas.answer_availability_gas``) against real
answers on anvil, and the checkpoint size it allows a chain: a property of the chain's block gas limit.

On anvil started with a large block gas limit (``Anvil(gas_limit=...)``, as the gpt-mini demo's), a
solver publishes checkpoints of 4 KiB to 16 MiB through ``answerAvailability``: each is accepted
(the job resumes, the item is published) and its gas is within 1 % above the model's (an upper
bound: the model sets the answer's gas). Below ~8 MiB the EIP-7623 calldata floor (40 gas a byte)
prices it, above it memory expansion's quadratic term.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.availability import ContentUnavailable, challenge
from core.contracts import JobState, Role
from core.gas import answer_availability_gas, answer_standard_gas, max_published_checkpoint_bytes
from deploy.devnet import Devnet, start_devnet
from proofs.checkpoint import state_hash
from proofs.merkle import TraceTree
from tests.chain.test_lifecycle import post, stake

ROOT = Path(__file__).resolve().parents[2]
#: Enough for a 16 MiB answer (~0.95G gas) in 2/3 of a block.
BIG_BLOCK_GAS = 1_500_000_000
SIZES = (4096, 65_536, 4 << 20, 16 << 20)


@pytest.fixture(scope="module")
def big_block_devnet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Devnet]:
    with start_devnet(book_dir=tmp_path_factory.mktemp("deployments"), accounts=3, gas_limit=BIG_BLOCK_GAS) as net:
        yield net


def test_the_model_bounds_forges_measured_answers_within_half_a_percent() -> None:
    """snapshots/AvailabilityGas.json (forge: the standard cost, no calldata floor): a 4 KiB checkpoint
    with a proof of 3 hashes, a 64 KiB one with 4 (an 11-leaf tree)."""
    measured = json.loads((ROOT / "snapshots" / "AvailabilityGas.json").read_text())
    for key, size, hashes in (("answerAvailability_checkpoint4KiB", 4096, 3), ("answerAvailability_checkpoint64KiB", 65_536, 4)):
        gas = int(measured[key])
        assert gas <= answer_standard_gas(size, hashes) <= gas * 1.005, key


def test_the_publishable_checkpoint_is_a_function_of_the_block_gas_limit() -> None:
    on_30m = max_published_checkpoint_bytes(30_000_000)
    assert 480 * 1024 < on_30m < 490 * 1024  # the floor's 40 gas a byte in 20M gas
    assert answer_availability_gas(on_30m) <= 20_000_000 < answer_availability_gas(on_30m + 1)
    assert max_published_checkpoint_bytes(60_000_000) > 2 * on_30m - 1024  # linear while the floor prices it
    assert max_published_checkpoint_bytes(60_000_000_000) > 130 << 20  # quadratic beyond ~8 MiB: 60G gas, not 2000x
    assert max_published_checkpoint_bytes(21_000) == 0


def test_multi_mib_checkpoints_are_published_through_answer_availability_on_a_big_block_anvil(big_block_devnet: Devnet) -> None:
    net = big_block_devnet
    proto = net.protocol()
    sub, sol, ver = net.accounts[:3]
    assert net.client.block_gas_limit() == BIG_BLOCK_GAS
    assert max_published_checkpoint_bytes(BIG_BLOCK_GAS) > SIZES[-1]
    stake(proto, ver, Role.VERIFIER)
    solver, verifier = proto.with_signer(sol), proto.with_signer(ver)
    for size in SIZES:
        checkpoints = [bytes([0x41 + i]) * size for i in range(3)]
        tree = TraceTree([state_hash(c) for c in checkpoints])
        stake(proto, sol, Role.SOLVER)
        job_id, _ = post(proto, sub)
        solver.market.claim(job_id)
        solver.market.commit(job_id, tree.root, 3, b"\x01" * 32, b"\x02" * 32)
        net.chain.mine(2)
        proto.market.with_signer(sub).assign_verifier(job_id)
        challenge(verifier, ver.address, ContentUnavailable(job_id, 1, "not served", on_chain=True))
        proof = tree.proof(1)
        receipt = solver.market.answer_availability(job_id, checkpoints[1], proof)
        assert proto.market.get_job(job_id).state is JobState.VERIFYING and proto.market.is_published(job_id, 1)
        model = answer_availability_gas(size, len(proof))
        assert receipt.gas_used <= model <= receipt.gas_used * 1.01, (size, receipt.gas_used, model)
