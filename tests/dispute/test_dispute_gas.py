"""Gas of each move and of a whole dispute for k = 50 and k = 1000, measured from Python on anvil
(receipts' gasUsed), the number of moves and transactions per side, and the wall time of a
dispute on the devnet (printed, not asserted). The trace hashes are synthetic: gas does not
depend on what the states are. Run with ``-s`` to see the table (docs/dispute.md quotes it).

The same scenario as the forge gas test: a whistleblower's dispute on segment 1 whose first
wrong state is at 2k/3, a committee of 3 voting for the challenger.
"""

from __future__ import annotations

import time
from collections import defaultdict

import pytest
from eth_utils import keccak

from core.contracts import Bytes32, GameStatus
from core.dispute import max_moves, midpoint, opening, vote_commitment
from proofs.merkle import TraceTree
from proofs.probes import Probe

from .arena import FEE, REWARD, Arena

GOAL_PER_MOVE = 150_000


def _hash(tag: str, i: int) -> Bytes32:
    return Bytes32(keccak(f"{tag}/{i}".encode()))


@pytest.mark.parametrize("k", [50, 1000])
def test_gas_of_a_whole_dispute(arena: Arena, k: int) -> None:
    started = time.perf_counter()
    hashes = [_hash("ckpt", i) for i in range(4)]
    tree = TraceTree(hashes)
    submitter, solver, wb = (arena.proto(s) for s in (arena.submitter, arena.solver, arena.whistleblower))
    job_id, _ = submitter.market.post_job(b"\x01" * 32, REWARD, FEE, 600)
    solver.market.claim(job_id)
    solver.market.commit(job_id, tree.root, 4, b"\x02" * 32, b"\x03" * 32)
    arena.net.chain.mine(2)
    receipt = arena.proto(arena.outsider).market.assign_verifier(job_id)
    (assigned,) = arena.base.market.decode_events(receipt, "VerifierAssigned")
    verifier = arena.by_address[assigned.args["verifier"]]
    seed = assigned.args["assignSeed"]
    probes = [Probe(i, arena.base.market.probe_segment(seed, i, 4), 1, _hash("probe", i)) for i in range(arena.market_params.probe_count)]
    arena.proto(verifier).market.report(job_id, True, b"\x04" * 32, seed, assigned.args["forcedCommitment"], probes)

    gas: dict[str, list[int]] = defaultdict(list)
    sent = {"challenger": 0, "solver": 0}
    game_id, receipt = wb.game.open(job_id, *opening(hashes, tree, 1, k).call_args())
    gas["open"].append(receipt.gas_used)
    sent["challenger"] += 1
    lo, hi, first_wrong = 0, k, 2 * k // 3
    while hi - lo > 1:
        mid = midpoint(lo, hi)
        gas["postMidpoint"].append(solver.game.post_midpoint(game_id, _hash("mid", mid), _hash("cid", mid)).gas_used)
        agree = mid < first_wrong
        gas["answerMidpoint"].append(wb.game.answer_midpoint(game_id, agree).gas_used)
        sent["solver"] += 1
        sent["challenger"] += 1
        lo, hi = (mid, hi) if agree else (lo, mid)
    arena.net.chain.mine(2)
    gas["drawCommittee"].append(wb.game.draw_committee(game_id).gas_used)
    sent["challenger"] += 1
    salt = b"\x33" * 32
    for referee in arena.base.game.committee(game_id):
        g = arena.proto(arena.by_address[referee]).game
        gas["commitVote"].append(g.commit_vote(game_id, vote_commitment(game_id, False, salt, referee)).gas_used)
    for referee in arena.base.game.committee(game_id):
        gas["revealVote"].append(arena.proto(arena.by_address[referee]).game.reveal_vote(game_id, False, salt).gas_used)
    gas["settle"].append(wb.game.settle(game_id).gas_used)
    sent["challenger"] += 1
    wall = time.perf_counter() - started
    assert arena.base.game.get_game(game_id).status is GameStatus.CHALLENGER_WON

    moves = len(gas["answerMidpoint"])
    assert moves <= max_moves(k)
    assert max(gas["postMidpoint"] + gas["answerMidpoint"]) < GOAL_PER_MOVE, "every bisection move under 150k"
    assert sent["challenger"] <= max_moves(k) + 3 and sent["solver"] <= max_moves(k) + 3
    total = sum(sum(v) for v in gas.values())
    print(
        f"\nk = {k}: {moves} bisection moves (ceil(log2 k) = {max_moves(k)}), transactions challenger "
        f"{sent['challenger']} / solver {sent['solver']}, dispute wall time {wall:.2f} s (job set-up included)"
    )
    for name, values in gas.items():
        print(f"  {name:15s} n={len(values):2d}  max {max(values):>9,}  total {sum(values):>10,}")
    print(f"  {'whole dispute':15s}                     total {total:>10,}")
