// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {DisputeFixture} from "./handlers/DisputeFixture.sol";
import {GameStatus} from "../../contracts/interfaces/IDisputeGame.sol";
import {LibPosition} from "../../contracts/libraries/LibPosition.sol";
import {IsolatedGas} from "./utils/IsolatedGas.sol";

/// @notice Transaction gas of every move of a whole dispute for k = 50 and k = 1000, written to
///         snapshots/DisputeGameGas.json. Regenerate with:
///             node_modules/.bin/forge test --offline --isolate --match-contract DisputeGameGasTest
/// @dev `--isolate` runs each call as its own transaction (intrinsic 21k + calldata, cold storage,
///      refunds); without it the figures mean nothing and the tests skip themselves.
///      Steady state: another game is open (the game holds a bond, gameCount is non-zero), and every
///      actor was paid by the game and claimed before (its credit slot is written).
///      The dispute: a failing verifier opens segment 3, the solver defends, the first diverging
///      state is at 2k/3 (both agree and disagree answers), a committee of 3 votes for the challenger,
///      who then claims its credit.
contract DisputeGameGasTest is DisputeFixture, IsolatedGas {
    uint256 internal constant MOVE_GOAL = 150_000;
    string internal constant GROUP = "DisputeGameGas";

    function setUp() public {
        _setUpProtocol();
        _paidBefore(game, _actors());
        (uint256 warm, address v) = _failed();
        _open(v, warm, 1, 8); // stays open
    }

    function test_dispute_gas_k50() public {
        _dispute(50, "k50_");
    }

    function test_dispute_gas_k1000() public {
        _dispute(1000, "k1000_");
    }

    /// Gas of each call of one dispute, and the transactions per side.
    struct Figures {
        uint256 open;
        uint256 moves;
        uint256 postMax;
        uint256 answerMax;
        uint256 bisectTotal;
        uint256 draw;
        uint256 commitMax;
        uint256 revealMax;
        uint256 settle;
        uint256 claim;
    }

    function _dispute(uint256 k, string memory prefix) internal {
        if (!_isolated()) return;
        (uint256 jobId, address verifier) = _failed();
        Figures memory f;
        f.open = _measureOpen(verifier, jobId, k);
        uint256 gameId = game.activeGame(jobId);
        (f.moves, f.postMax, f.answerMax, f.bisectTotal) = _bisectMeasured(gameId, k);
        _arbitrateMeasured(gameId, f);
        assertTrue(_status(gameId) == GameStatus.ChallengerWon, "challenger won");

        // Transactions per side: the challenger opens, answers each move, draws and settles; the
        // solver posts each midpoint.
        uint256 challengerTx = 1 + f.moves + 2;
        uint256 budget = LibPosition.ceilLog2(k) + 3;
        vm.snapshotValue(GROUP, string.concat(prefix, "open"), f.open);
        vm.snapshotValue(GROUP, string.concat(prefix, "postMidpointMax"), f.postMax);
        vm.snapshotValue(GROUP, string.concat(prefix, "answerMidpointMax"), f.answerMax);
        vm.snapshotValue(GROUP, string.concat(prefix, "moves"), f.moves);
        vm.snapshotValue(GROUP, string.concat(prefix, "drawCommittee3"), f.draw);
        vm.snapshotValue(GROUP, string.concat(prefix, "commitVoteMax"), f.commitMax);
        vm.snapshotValue(GROUP, string.concat(prefix, "revealVoteMax"), f.revealMax);
        vm.snapshotValue(GROUP, string.concat(prefix, "settleVerdict"), f.settle);
        vm.snapshotValue(GROUP, string.concat(prefix, "claimCredit"), f.claim);
        vm.snapshotValue(GROUP, string.concat(prefix, "txChallenger"), challengerTx);
        vm.snapshotValue(GROUP, string.concat(prefix, "txSolver"), f.moves);
        uint256 total = f.open + f.bisectTotal + f.draw + f.settle + 3 * (f.commitMax + f.revealMax);
        vm.snapshotValue(GROUP, string.concat(prefix, "wholeDisputeUpperBound"), total);
        assertTrue(challengerTx <= budget && f.moves <= budget, "within ceil(log2 k) + 3 transactions per side");
        assertTrue(f.postMax < MOVE_GOAL && f.answerMax < MOVE_GOAL, "every bisection move under 150k gas");
    }

    function _arbitrateMeasured(uint256 gameId, Figures memory f) internal {
        vm.roll(block.number + 2);
        game.drawCommittee(gameId);
        f.draw = _gas();
        address[] memory referees = game.committee(gameId);
        for (uint256 i; i < referees.length; ++i) {
            _commit(gameId, referees[i], false);
            f.commitMax = _max(f.commitMax, _gas());
        }
        for (uint256 i; i < referees.length; ++i) {
            _reveal(gameId, referees[i], false);
            f.revealMax = _max(f.revealMax, _gas());
        }
        game.settle(gameId);
        f.settle = _gas();
        address winner = game.getGame(gameId).challenger;
        game.claimCredit(winner);
        f.claim = _gas();
    }

    function _measureOpen(address verifier, uint256 jobId, uint256 k) internal returns (uint256) {
        _open(verifier, jobId, 3, k);
        return _gas();
    }

    function _bisectMeasured(uint256 gameId, uint256 k)
        internal
        returns (uint256 moves, uint256 postMax, uint256 answerMax, uint256 total)
    {
        uint256 divergence = 2 * k / 3;
        address challenger = game.getGame(gameId).challenger;
        while (_status(gameId) == GameStatus.DefenderToMove) {
            uint256 mid = game.nextMidpoint(gameId);
            vm.prank(solver);
            game.postMidpoint(gameId, _claim(mid), _cid(mid));
            uint256 post = _gas();
            vm.prank(challenger);
            game.answerMidpoint(gameId, mid < divergence);
            uint256 answer = _gas();
            postMax = _max(postMax, post);
            answerMax = _max(answerMax, answer);
            total += post + answer;
            ++moves;
        }
    }

    function _max(uint256 a, uint256 b) internal pure returns (uint256) {
        return a > b ? a : b;
    }
}
