// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {DisputeFixture, TraceTree} from "./handlers/DisputeFixture.sol";
import {Game, GameStatus} from "../../contracts/interfaces/IDisputeGame.sol";
import {LibPosition} from "../../contracts/libraries/LibPosition.sol";

/// @notice Bisection through the real game: every answer sequence isolates one step in at most
///         ceil(log2 k) moves, and the step's two states are ones the two sides committed to.
/// forge-config: default.fuzz.runs = 256
contract DisputeGameFuzzTest is DisputeFixture {
    uint256 internal constant SEGMENT = 4;

    function setUp() public {
        _setUpProtocol();
    }

    /// Random answers: the isolated pre-state is the last midpoint the challenger agreed with (or
    /// checkpoint j), the post-state the last one it rejected (or checkpoint j + 1), both posted by
    /// the solver at exactly those steps.
    function testFuzz_any_answers_isolate_a_step_both_sides_committed_to(uint256 k, uint256 answers) public {
        k = bound(k, 1, 100_000);
        (uint256 jobId, address verifier) = _failed();
        uint256 gameId = _open(verifier, jobId, SEGMENT, k);
        bytes32 agreed = TraceTree.stateHash(TRACE, SEGMENT);
        bytes32 agreedCid;
        bytes32 disputed = TraceTree.stateHash(TRACE, SEGMENT + 1);
        uint256 moves;
        while (_status(gameId) == GameStatus.DefenderToMove) {
            uint256 mid = game.nextMidpoint(gameId);
            vm.prank(solver);
            game.postMidpoint(gameId, _claim(mid), _cid(mid));
            bool agree = (answers >> moves) & 1 == 1;
            vm.prank(verifier);
            game.answerMidpoint(gameId, agree);
            if (agree) (agreed, agreedCid) = (_claim(mid), _cid(mid));
            else disputed = _claim(mid);
            ++moves;
        }
        Game memory g = game.getGame(gameId);
        assertTrue(g.status == GameStatus.Isolated, "isolated");
        assertEq(g.hi, uint256(g.lo) + 1, "one step");
        assertTrue(moves <= LibPosition.ceilLog2(k), "at most ceil(log2 k) moves");
        assertTrue(moves >= LibPosition.floorLog2(k), "at least floor(log2 k) moves");
        assertEq(g.moves, moves, "moves recorded");
        assertEq(g.agreedHash, agreed, "pre-state: the last agreed commitment");
        assertEq(g.agreedCid, agreedCid, "pre-state cid");
        assertEq(g.disputedHash, disputed, "post-state: the last disputed commitment");
        assertEq(g.agreedHash, g.lo == 0 ? TraceTree.stateHash(TRACE, SEGMENT) : _claim(g.lo), "solver's state at lo");
        assertEq(
            g.disputedHash, g.hi == k ? TraceTree.stateHash(TRACE, SEGMENT + 1) : _claim(g.hi), "solver's state at hi"
        );
    }

    /// An honest challenger whose first diverging state is `divergence` isolates exactly that step.
    function testFuzz_honest_challenger_isolates_the_first_diverging_step(uint256 k, uint256 divergence) public {
        k = bound(k, 1, 100_000);
        divergence = bound(divergence, 1, k);
        (uint256 jobId, address verifier) = _failed();
        uint256 gameId = _open(verifier, jobId, SEGMENT, k);
        uint256 moves = _bisect(gameId, divergence);
        Game memory g = game.getGame(gameId);
        assertEq(g.lo, divergence - 1, "pre-state step");
        assertEq(g.hi, divergence, "post-state step");
        assertTrue(moves <= LibPosition.ceilLog2(k), "at most ceil(log2 k) moves");
    }
}
