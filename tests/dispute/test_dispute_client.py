"""The DisputeGame wrapper, the deployment and wiring, and core.dispute checked against the contract."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from core import artifacts
from core.contracts import Ballot, Bytes32, DisputeGame, Game, GameId, GameParams, GameStatus, snake_case
from core.dispute import Action, isolated_step, next_turn, opening, vote_commitment
from core.errors import ConfigError
from core.reverts import revert_class
from deploy.deployer import DeployParams
from proofs.checkpoint import state_hash
from proofs.merkle import TraceTree

from .arena import SEGMENT, Arena, K


def test_every_abi_function_has_a_wrapper_method() -> None:
    abi = artifacts.load("DisputeGame").abi
    names = {snake_case(e["name"]) for e in abi if e["type"] == "function"}
    assert not sorted(n for n in names if not callable(getattr(DisputeGame, n, None)))


@pytest.mark.parametrize(("cls", "function"), [(Game, "getGame"), (GameParams, "params")])
def test_result_dataclasses_match_the_abi_structs(cls: type, function: str) -> None:
    (entry,) = [e for e in artifacts.load("DisputeGame").abi if e.get("name") == function]
    assert entry["type"] == "function"
    assert [snake_case(c["name"]) for c in entry["outputs"][0]["components"]] == [f.name for f in dataclasses.fields(cls)]


def test_the_game_is_deployed_wired_and_in_the_address_book(arena: Arena) -> None:
    proto, want = arena.base, DeployParams.devnet().game
    assert proto.game.address == arena.net.book.address("DisputeGame")
    assert proto.market.dispute_game() == proto.game.address and proto.market.wired()
    assert proto.stakes.is_protocol(proto.game.address) and proto.stakes.is_protocol(proto.market.address)
    assert proto.game.market() == proto.market.address and proto.game.token() == proto.token.address
    params = proto.game.params()
    assert dataclasses.asdict(params) == {snake_case(k): v for k, v in want.items()}
    assert params.max_game_duration == proto.game.max_game_duration()
    assert params.open_window + params.max_game_duration < proto.market.params().dispute_window


def test_parameters_whose_game_outlasts_the_dispute_window_are_refused_before_sending() -> None:
    raw = DeployParams.devnet().to_json()
    raw["market"]["disputeWindow"] = 100
    with pytest.raises(ValueError, match="below market.disputeWindow = 100"):
        DeployParams.model_validate(raw)


def test_parameter_file_errors_name_the_problem(tmp_path: Path) -> None:
    raw = DeployParams.devnet().to_json()
    raw["game"]["clockTime"] = 10**6
    path = tmp_path / "p.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match="disputeWindow"):
        DeployParams.load(path)


def test_turns_deadlines_and_commitments_agree_with_the_contract(arena: Arena) -> None:
    cheat = arena.trained.cheating(9)
    job_id, challenger, cids = arena.commit_job(cheat, by_verifier=False)
    game_api, client = arena.base.game, arena.net.client
    hashes = [state_hash(c) for c in arena.trained.checkpoints(cheat)]
    bad_proof = dataclasses.replace(opening(hashes, TraceTree(hashes), SEGMENT, K), start_hash=Bytes32(b"\x09" * 32))
    with pytest.raises(revert_class("InvalidCheckpointProof")):
        arena.proto(challenger).game.open(job_id, *bad_proof.call_args())
    played = arena.open(job_id, challenger, cheat)
    gid = played.game_id

    game = game_api.get_game(gid)
    turn = next_turn(game, arena.params, client.timestamp())
    assert turn.action is Action.POST_MIDPOINT and turn.step == game_api.next_midpoint(gid) == K // 2
    assert turn.deadline is not None and turn.deadline - client.timestamp() == game_api.clocks(gid)[0]
    arena.net.chain.travel_to(turn.deadline + 1)
    with pytest.raises(revert_class("ClockRanOut")) as late:
        arena.proto(arena.solver).game.post_midpoint(gid, b"\x01" * 32, b"\x00" * 32)
    assert late.value.expiredAt == turn.deadline
    assert next_turn(game_api.get_game(gid), arena.params, client.timestamp()).action is Action.TIMEOUT_CLOCK


def test_committee_turns_and_commitments_agree_with_the_contract(arena: Arena) -> None:
    cheat = arena.trained.cheating(1)
    job_id, challenger, cids = arena.commit_job(cheat, by_verifier=False)
    played = arena.open(job_id, challenger, cheat)
    arena.bisect(played, cheat, lambda i: "trace", lambda i: "truth")
    gid, game_api, client = played.game_id, arena.base.game, arena.net.client
    game = game_api.get_game(gid)
    assert game.status is GameStatus.ISOLATED and (game.lo, game.hi) == (0, 1)
    assert isolated_step(game, K, cids).pre_cid == cids[SEGMENT], "step 0: the pre-state is checkpoint j"
    turn = next_turn(game, arena.params, client.timestamp(), client.block_number())
    with pytest.raises(revert_class("RandomnessNotReady")) as early:
        arena.proto(arena.outsider).game.draw_committee(gid)
    assert early.value.readyBlock == turn.ready_block
    arena.net.chain.mine(2)
    arena.proto(arena.outsider).game.draw_committee(gid)
    referees = game_api.committee(gid)
    assert len(referees) == 3 and not {arena.solver.address, challenger.address} & set(referees)
    game = game_api.get_game(gid)
    assert next_turn(game, arena.params, client.timestamp()).action is Action.COMMIT_VOTE

    first = arena.proto(arena.by_address[referees[0]]).game
    salt = b"\x42" * 32
    first.commit_vote(gid, vote_commitment(gid, False, salt, referees[0]))
    assert game_api.ballot_of(gid, referees[0]) == (Ballot.COMMITTED, vote_commitment(gid, False, salt, referees[0]))
    with pytest.raises(revert_class("RevealNotOpen")):
        first.reveal_vote(gid, False, salt)
    with pytest.raises(revert_class("NotSettleable")) as early_settle:
        arena.proto(arena.outsider).game.settle(gid)
    assert early_settle.value.readyAt == game.deadline + arena.params.reveal_window + 1
    arena.net.chain.travel_to(game.deadline + 1)
    assert next_turn(game_api.get_game(gid), arena.params, client.timestamp()).action is Action.REVEAL_VOTE
    with pytest.raises(revert_class("CommitmentMismatch")):
        first.reveal_vote(gid, True, salt)
    first.reveal_vote(gid, False, salt)
    assert game_api.ballot_of(gid, referees[0])[0] is Ballot.REVEALED_DEFENDER_WRONG


def test_an_account_cannot_release_a_referee_seat(arena: Arena) -> None:
    """Only a protocol contract of the wiring releases a seat (SealedJobs.declineSeat, forge-tested);
    an account that tries, a game's party included, is refused before any game is read."""
    with pytest.raises(revert_class("NotAuthorized")):
        arena.proto(arena.outsider).game.release_seat(GameId(1), arena.verifiers[0].address)
