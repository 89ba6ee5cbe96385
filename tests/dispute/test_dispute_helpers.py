"""core.dispute without a chain: opening arguments, position math, turns, commitments, salts."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import pytest
from eth_abi import encode as abi_encode
from eth_utils import keccak
from hypothesis import given
from hypothesis import strategies as st

from core.chain import Address
from core.cid import cid_to_digest
from core.contracts import Bytes32, Game, GameParams, GameStatus, JobId, ReportSeal, TokenAmount
from core.dispute import (
    ZERO32,
    Action,
    Actor,
    DisputeError,
    derive_salt,
    global_step,
    isolated_step,
    max_moves,
    midpoint,
    next_turn,
    opening,
    opening_on_report,
    party_move,
    vote_commitment,
    winner,
)
from proofs.merkle import TraceTree, verify_proof
from proofs.probes import Probe, ProbeTree, verify_probe

SOLVER = Address("0x70997970C51812dc3A010C7d01b50e0d17dc79C8")
CHALLENGER = Address("0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC")
PARAMS = GameParams(
    challenge_bond=TokenAmount(20), referee_bond=TokenAmount(10), referee_fee=TokenAmount(2), clock_time=30,
    open_window=15, draw_window=10, commit_window=15, reveal_window=15, max_segment_steps=100_000, committee_size=3,
)  # fmt: skip
CID_A = "QmWvQxBLsmXh3mxoVLPKhshqDfK8Ydj2ZVTqKQ3pL8n1z4"
H3 = Bytes32(b"\x03" * 32)  # a probe's state hash


def _game(**changes: Any) -> Game:
    base = Game(
        defender=SOLVER, job_id=JobId(1), segment=2, by_verifier=False, challenger=CHALLENGER, steps=50, on_report=False, commits=0,
        votes_defender_right=0, votes_defender_wrong=0, status=GameStatus.DEFENDER_TO_MOVE, lo=0, hi=50, defender_clock=30,
        challenger_clock=30, last_move_at=1_000, deadline=0, moves=0, anchor_block=0, agreed_hash=Bytes32(b"\x11" * 32),
        agreed_cid=ZERO32, disputed_hash=Bytes32(b"\x22" * 32), mid_hash=ZERO32, mid_cid=ZERO32,
    )  # fmt: skip
    return dataclasses.replace(base, **changes)


@given(st.lists(st.binary(min_size=32, max_size=32).map(Bytes32), min_size=2, max_size=40), st.data())
def test_opening_proves_both_ends_of_the_segment(hashes: list[Bytes32], data: st.DataObject) -> None:
    tree = TraceTree(hashes)
    j = data.draw(st.integers(0, len(hashes) - 2))
    args = opening(hashes, tree, j, 50)
    assert (args.segment, args.steps, args.start_hash, args.end_hash) == (j, 50, hashes[j], hashes[j + 1])
    assert verify_proof(tree.root, j, args.start_hash, args.start_proof)
    assert verify_proof(tree.root, j + 1, args.end_hash, args.end_proof)
    segment, steps, start, start_proof, end, end_proof = args.call_args()
    assert isinstance(start_proof, list) and all(len(p) == 32 for p in start_proof + end_proof)


@pytest.mark.parametrize(
    ("segment", "k", "hashes", "match"),
    [(2, 50, 3, "segment 2"), (-1, 50, 3, "segment -1"), (0, 0, 3, "at least one step"), (0, 50, 1, "segment 0")],
)
def test_opening_refuses_impossible_arguments(segment: int, k: int, hashes: int, match: str) -> None:
    values = [Bytes32(bytes([i + 1]) * 32) for i in range(hashes)]
    with pytest.raises(DisputeError, match=match):
        opening(values, TraceTree(values), segment, k)


SEAL = ReportSeal(Bytes32(b"\x01" * 32), ZERO32, Bytes32(b"\x02" * 32))


@given(st.lists(st.binary(min_size=32, max_size=32).map(Bytes32), min_size=2, max_size=20), st.data())
def test_opening_on_report_proves_the_probe_and_its_start(hashes: list[Bytes32], data: st.DataObject) -> None:
    trace = TraceTree(hashes)
    probes = ProbeTree([Probe(i, data.draw(st.integers(0, len(hashes) - 2)), 1 + i, Bytes32(bytes([i + 1]) * 32)) for i in range(4)])
    index = data.draw(st.integers(0, 3))
    probe = probes.probe(index)
    args = opening_on_report(SEAL, probe, probes.proof(index), hashes, trace)
    assert (args.seal, args.index, args.segment, args.step) == (SEAL, index, probe.segment, probe.step)
    assert verify_probe(probes.root, probe, args.proof) and args.state_hash == probe.state_hash
    assert args.start_hash == hashes[probe.segment] and verify_proof(trace.root, probe.segment, args.start_hash, args.start_proof)
    assert args.call_args()[0] == SEAL and isinstance(args.call_args()[5], list)


@pytest.mark.parametrize(
    ("seal", "probe", "match"),
    [(None, Probe(0, 0, 1, H3), "no report"), (SEAL, Probe(0, 2, 1, H3), "segment 2"), (SEAL, Probe(0, 0, 0, H3), "at least one step")],
)  # fmt: skip
def test_opening_on_report_refuses_impossible_probes(seal: ReportSeal | None, probe: Probe, match: str) -> None:
    hashes = [Bytes32(b"\x01" * 32), Bytes32(b"\x02" * 32), Bytes32(b"\x03" * 32)]
    with pytest.raises(DisputeError, match=match):
        opening_on_report(seal, probe, ProbeTree([probe]).proof(0), hashes[:2], TraceTree(hashes[:2]))


def test_report_seal_digest_is_the_stored_preimage() -> None:
    drawn = keccak(abi_encode(["bytes32", "bytes32"], [SEAL.assign_seed, SEAL.forced_commitment]))
    assert SEAL.digest() == keccak(drawn + SEAL.probe_root)
    assert SEAL.as_tuple() == (SEAL.assign_seed, SEAL.forced_commitment, SEAL.probe_root)


@given(st.integers(1, 2**32 - 1), st.data())
def test_bisection_isolates_the_first_bad_step_within_max_moves(k: int, data: st.DataObject) -> None:
    first_bad = data.draw(st.integers(1, k))  # states before first_bad agreed, from it on disputed
    assert max_moves(k) == (k - 1).bit_length() == (math.ceil(math.log2(k)) if k > 1 else 0)
    lo, hi, moves = 0, k, 0
    while hi - lo > 1:
        mid = midpoint(lo, hi)
        assert lo < mid < hi
        lo, hi = (mid, hi) if mid < first_bad else (lo, mid)
        moves += 1
    assert (lo, hi) == (first_bad - 1, first_bad) and moves <= max_moves(k)


def test_max_moves_refuses_an_empty_segment() -> None:
    with pytest.raises(DisputeError):
        max_moves(0)


def test_turns_while_bisecting() -> None:
    game = _game(lo=12, hi=25, defender_clock=20, last_move_at=1_000)
    turn = next_turn(game, PARAMS, now=1_020)
    assert (turn.action, turn.actor, turn.deadline, turn.step) == (Action.POST_MIDPOINT, Actor.SOLVER, 1_020, 18)
    assert next_turn(game, PARAMS, now=1_021).action is Action.TIMEOUT_CLOCK
    game = _game(status=GameStatus.CHALLENGER_TO_MOVE, challenger_clock=7, last_move_at=500)
    turn = next_turn(game, PARAMS, now=501)
    assert (turn.action, turn.actor, turn.deadline) == (Action.ANSWER_MIDPOINT, Actor.CHALLENGER, 507)
    assert next_turn(game, PARAMS, now=508).actor is Actor.ANYONE


def test_turns_after_isolation() -> None:
    game = _game(status=GameStatus.ISOLATED, lo=7, hi=8, last_move_at=2_000, anchor_block=77)
    turn = next_turn(game, PARAMS, now=2_010, block=78)
    assert (turn.action, turn.ready_block, turn.deadline) == (Action.DRAW_COMMITTEE, 79, 2_010)
    assert next_turn(game, PARAMS, now=2_011).action is Action.SETTLE
    arb = _game(status=GameStatus.ARBITRATING, lo=7, hi=8, deadline=3_000)
    assert next_turn(arb, PARAMS, now=3_000).action is Action.COMMIT_VOTE
    assert next_turn(dataclasses.replace(arb, commits=3), PARAMS, now=2_990).action is Action.REVEAL_VOTE
    turn = next_turn(dataclasses.replace(arb, commits=2), PARAMS, now=3_001)
    assert (turn.action, turn.deadline) == (Action.REVEAL_VOTE, 3_015)
    assert next_turn(dataclasses.replace(arb, commits=2), PARAMS, now=3_016).action is Action.SETTLE
    done = dataclasses.replace(arb, commits=3, votes_defender_right=2, votes_defender_wrong=1)
    assert next_turn(done, PARAMS, now=2_990).action is Action.SETTLE
    for status in (GameStatus.DEFENDER_WON, GameStatus.CHALLENGER_WON, GameStatus.UNDECIDED):
        assert next_turn(_game(status=status), PARAMS, now=0).actor is Actor.NOBODY


def test_a_party_makes_its_own_moves_and_the_calls_that_pay_it_at_once() -> None:
    S, C = Actor.SOLVER, Actor.CHALLENGER
    bisecting = _game(defender_clock=20, last_move_at=1_000)
    assert (party_move(bisecting, PARAMS, 1_020, 0, S), party_move(bisecting, PARAMS, 1_020, 0, C)) == (Action.POST_MIDPOINT, None)
    assert (party_move(bisecting, PARAMS, 1_021, 0, S), party_move(bisecting, PARAMS, 1_021, 0, C)) == (None, Action.TIMEOUT_CLOCK)  # never its own clock
    answering = _game(status=GameStatus.CHALLENGER_TO_MOVE, challenger_clock=7, last_move_at=500)
    assert (party_move(answering, PARAMS, 501, 0, S), party_move(answering, PARAMS, 501, 0, C)) == (None, Action.ANSWER_MIDPOINT)
    assert (party_move(answering, PARAMS, 508, 0, S), party_move(answering, PARAMS, 508, 0, C)) == (Action.TIMEOUT_CLOCK, None)
    isolated = _game(status=GameStatus.ISOLATED, lo=7, hi=8, last_move_at=2_000, anchor_block=77)
    assert [party_move(isolated, PARAMS, 2_010, b, C) for b in (78, 79)] == [None, Action.DRAW_COMMITTEE]
    assert party_move(isolated, PARAMS, 2_011, 0, S) is Action.SETTLE
    arb = _game(status=GameStatus.ARBITRATING, lo=7, hi=8, deadline=3_000)
    assert party_move(arb, PARAMS, 3_000, 0, C) is None  # the referees vote, not the parties
    assert party_move(dataclasses.replace(arb, commits=3, votes_defender_right=3), PARAMS, 2_990, 0, C) is Action.SETTLE  # early


def test_isolated_step_names_the_pre_state_by_cid() -> None:
    cids = [CID_A, "QmPZ9gcCEpqKTo6aq61g2nXGUhM4iCL3ewB6LDXZCtioEB", "QmTest"]
    game = _game(status=GameStatus.ISOLATED, lo=0, hi=1, segment=1)
    task = isolated_step(game, 50, cids)
    assert (task.pre_cid, task.step, task.global_step) == (cids[1], 0, 50)
    posted = _game(status=GameStatus.ARBITRATING, lo=24, hi=25, segment=1, agreed_cid=Bytes32(cid_to_digest(CID_A)))
    task = isolated_step(posted, 50, cids)
    assert (task.pre_cid, task.global_step, task.post_hash) == (CID_A, 74, b"\x22" * 32)
    with pytest.raises(DisputeError, match="no step isolated"):
        isolated_step(_game(), 50, cids)
    with pytest.raises(DisputeError, match="outside"):
        global_step(_game(), 50, 51)


def test_vote_commitment_is_the_contracts_preimage() -> None:
    salt = b"\x05" * 32
    want = keccak(abi_encode(["uint256", "bool", "bytes32", "address"], [7, True, salt, SOLVER]))
    assert vote_commitment(7, True, salt, SOLVER) == want
    assert vote_commitment(7, True, "0x" + salt.hex(), SOLVER.lower()) == want
    others = {vote_commitment(8, True, salt, SOLVER), vote_commitment(7, False, salt, SOLVER),
              vote_commitment(7, True, b"\x06" * 32, SOLVER), vote_commitment(7, True, salt, CHALLENGER)}  # fmt: skip
    assert want not in others and len(others) == 4


def test_salts_are_rederivable_per_game_and_need_a_real_secret() -> None:
    secret = b"s" * 32
    assert derive_salt(secret, 1) == derive_salt(secret, 1)
    assert len({derive_salt(secret, 1), derive_salt(secret, 2), derive_salt(b"t" * 32, 1)}) == 3
    with pytest.raises(DisputeError, match="32 bytes"):
        derive_salt(b"short", 1)


def test_winner() -> None:
    assert winner(_game(status=GameStatus.DEFENDER_WON)) == SOLVER
    assert winner(_game(status=GameStatus.CHALLENGER_WON)) == CHALLENGER
    assert winner(_game(status=GameStatus.UNDECIDED)) is None and winner(_game()) is None
