"""Anchored draws on a real anvil, through the typed client (issue 11).

Once the entropy block exists, an accomplice verifier may top up, ask to unstake, or wait before
anyone calls ``assignVerifier``: each move is played from the same chain snapshot and must leave
the drawn verifier and the sampling seed exactly as calling at once does. A draw left past the
256-block blockhash horizon expires: the solver loses its whole bond to the submitter and the job
reopens. The statistics over 200 draws per strategy are in tests/forge/DrawFairness.t.sol.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from core.contracts import JobId, JobState, Protocol, Role
from deploy.devnet import Devnet
from tests.chain.test_lifecycle import MANIFEST, MODEL, ROOT, post, stake

if TYPE_CHECKING:
    from tests.conftest import Parties

E18 = 10**18


def _committed(proto: Protocol, parties: Parties) -> JobId:
    """Solver and two verifiers staked (the accomplice with room to unstake), a job committed."""
    stake(proto, parties.solver, Role.SOLVER)
    stake(proto, parties.verifier, Role.VERIFIER)
    stake(proto, parties.verifier2, Role.VERIFIER, 3 * proto.stakes.min_stake(Role.VERIFIER))
    job_id, _ = post(proto, parties.submitter)
    proto.with_signer(parties.solver).market.claim(job_id)
    proto.with_signer(parties.solver).market.commit(job_id, ROOT, 5, MODEL, MANIFEST)
    return job_id


def test_moves_after_the_entropy_change_neither_the_verifier_nor_the_seed(devnet: Devnet, parties: Parties) -> None:
    proto = devnet.protocol()
    job_id = _committed(proto, parties)
    anchor = proto.market.get_job(job_id).anchor_block
    devnet.chain.mine(2)  # blockhash(anchor + 1) exists: everyone can compute the draw now
    accomplice = proto.with_signer(parties.verifier2)
    minimum = proto.stakes.min_stake(Role.VERIFIER)

    def top_up() -> None:
        accomplice.token.approve(accomplice.stakes.address, 50 * minimum)
        accomplice.stakes.stake(Role.VERIFIER, 50 * minimum)

    moves: dict[str, Callable[[], object]] = {
        "none": lambda: None,
        "top up 50x": top_up,
        "unstake all": lambda: accomplice.stakes.request_unstake(Role.VERIFIER, 3 * minimum),
        "wait 100 blocks": lambda: devnet.chain.mine(100),
    }
    outcomes = {}
    for name, move in moves.items():
        snapshot = devnet.chain.snapshot()
        move()
        # eth_estimateGas runs in the latest block, where a checkpoint the move wrote is updated in
        # place; the draw runs in the next one, where it is appended (~17k more each): give the
        # estimate the draw's own situation.
        devnet.chain.mine(1)
        receipt = proto.with_signer(parties.outsider).market.assign_verifier(job_id)
        (assigned,) = proto.market.decode_events(receipt, "VerifierAssigned")
        outcomes[name] = (assigned.args["verifier"], bytes(assigned.args["assignSeed"]))
        devnet.chain.revert(snapshot)
    assert len(set(outcomes.values())) == 1, outcomes
    assert proto.stakes.total_verifier_weight_at(anchor) == 4 * minimum  # what every draw above read


def test_a_draw_left_past_the_horizon_costs_the_solver_its_bond(devnet: Devnet, parties: Parties) -> None:
    proto = devnet.protocol()
    job_id = _committed(proto, parties)
    bond = proto.market.solver_bond(proto.market.get_job(job_id).reward)
    submitter_before = proto.token.balance_of(parties.submitter.address)
    devnet.chain.mine(300)
    receipt = proto.with_signer(parties.outsider).market.assign_verifier(job_id)
    (expired,) = proto.market.decode_events(receipt, "DrawExpired")
    assert (expired.args["solver"], expired.args["slashed"]) == (parties.solver.address, bond)
    job = proto.market.get_job(job_id)
    assert job.state is JobState.OPEN and job.solver != parties.solver.address
    assert proto.token.balance_of(parties.submitter.address) == submitter_before + bond
    assert proto.stakes.stake_of(parties.solver.address, Role.SOLVER).locked == 0
