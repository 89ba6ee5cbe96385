// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Fixture} from "./utils/Fixture.sol";
import {Vm} from "./utils/Vm.sol";
import {Job, JobState, Role} from "../../contracts/Types.sol";

/// @notice Draw fairness against an accomplice that sees the entropy and then may act (issue 11): a
///         coalition of two verifiers (40% of the verifier stake) tries, for each job, every
///         move a strategy allows (previewed on a state snapshot, as a real attacker previews with
///         eth_call) and plays one that gets it drawn if there is one. Over 200 jobs per strategy
///         its wins must stay within 4 binomial standard deviations of its fair share, and the
///         sampling seed must be the same whatever it did. Figures: snapshots/DrawFairness.json.
/// @dev Each job starts from the same base state with fresh entropy (vm.setBlockhash), so the 200
///      draws are independent trials of the same fair share. With the draw reading live stakes
///      (before issue 11), the top-up strategy alone won ~90% of its draws.
contract DrawFairnessTest is Fixture {
    uint256 internal constant DRAWS = 200;
    address internal accomplice = address(0xACC1);
    address internal accomplice2 = address(0xACC2);

    enum Strategy {
        Honest, // calls at once, changes nothing (the control)
        TopUp, // tops up either accomplice's stake by 1 wei .. 10,000 VERI before calling
        Unstake, // either accomplice asks to unstake 1 wei .. all of its stake before calling
        CallTime // calls at any of the next 9 blocks, or after the 256-block horizon
    }

    uint256 internal _base;

    function setUp() public {
        _setUpActors(); // verifiers: 100, 200, 300
        _fund(accomplice);
        _fund(accomplice2);
        _stake(accomplice, Role.Verifier, 200 ether);
        _stake(accomplice2, Role.Verifier, 200 ether);
        vm.roll(block.number + 1);
        _base = vm.snapshotState();
    }

    function test_honest_caller_wins_its_fair_share() public {
        _measure(Strategy.Honest, "honest");
    }

    function test_topping_up_after_the_entropy_does_not_steer_the_draw() public {
        _measure(Strategy.TopUp, "topUp");
    }

    function test_unstaking_after_the_entropy_does_not_steer_the_draw() public {
        _measure(Strategy.Unstake, "unstake");
    }

    function test_choosing_when_to_call_does_not_steer_the_draw() public {
        _measure(Strategy.CallTime, "callTime");
    }

    /// Plays DRAWS jobs under `strategy` and checks the coalition's wins against its fair share:
    /// coalition stake / verifier stake at the anchor (400 / 1000; solver and submitter hold none).
    function _measure(Strategy strategy, string memory name) internal {
        uint256 wins;
        for (uint256 i; i < DRAWS; ++i) {
            vm.revertToState(_base);
            if (_play(strategy, i)) ++wins;
        }
        // Fair share p = 0.4: mean 80, sd sqrt(n p (1 - p)) = 6.93, 4 sd = 27.7.
        uint256 expected = DRAWS * 4 / 10;
        uint256 bound4 = 28;
        vm.snapshotValue("DrawFairness", string.concat(name, "Wins"), wins);
        assertTrue(wins + bound4 >= expected && wins <= expected + bound4, "coalition wins within 4 sd of 0.4");
    }

    /// One job: commit, fresh entropy for its anchor, then the accomplice's best move. True when the
    /// coalition was drawn.
    function _play(Strategy strategy, uint256 i) internal returns (bool) {
        uint256 jobId = _committed();
        uint256 anchor = market.getJob(jobId).anchorBlock;
        vm.roll(anchor + 2);
        vm.setBlockhash(anchor + 1, keccak256(abi.encode("entropy", i)));
        // The outcome and the sampling seed of calling now, doing nothing.
        (address honest, bytes32 seed) = _preview(jobId, 0);
        uint256 chosen;
        uint256 moves = _moves(strategy);
        for (uint256 m = 1; m < moves && !_won(honest); ++m) {
            (address drawn, bytes32 s) = _preview(jobId, _move(strategy, m));
            if (drawn != address(0)) assertEq(s, seed, "the sampling seed does not depend on the move");
            if (_won(drawn)) {
                chosen = _move(strategy, m);
                break;
            }
        }
        _apply(jobId, chosen);
        Job memory job = market.getJob(jobId);
        if (job.state != JobState.Verifying) return false; // expired: nobody drawn
        assertEq(job.verifier, honest, "no move changes who is drawn");
        return _won(job.verifier);
    }

    function _won(address drawn) internal view returns (bool) {
        return drawn == accomplice || drawn == accomplice2;
    }

    /// Move count of a strategy (move 0 is doing nothing).
    function _moves(Strategy strategy) internal pure returns (uint256) {
        return strategy == Strategy.Honest ? 1 : 1 + 10;
    }

    /// Move m of a strategy as a code: kind * 100 + option (kind 1 top-up, 2 unstake, 3 call time).
    function _move(Strategy strategy, uint256 m) internal pure returns (uint256) {
        return uint256(strategy) * 100 + m;
    }

    /// The verifier drawn and the sampling seed if the accomplice plays `move` and then calls.
    function _preview(uint256 jobId, uint256 move) internal returns (address drawn, bytes32 seed) {
        uint256 snap = vm.snapshotState();
        vm.recordLogs();
        _apply(jobId, move);
        Job memory job = market.getJob(jobId);
        if (job.state == JobState.Verifying) {
            drawn = job.verifier;
            seed = _assignSeed();
        }
        vm.revertToState(snap);
    }

    /// Plays `move` (option o in 1..10 of kind k, see _move; 0 does nothing), then calls the draw.
    /// Top-up and unstake: odd options move accomplice2, even ones accomplice, by the amount (o-1)/2
    /// indexes. Call time: o blocks later, or 300 (past the blockhash horizon) for o = 10.
    function _apply(uint256 jobId, uint256 move) internal {
        uint256 kind = move / 100;
        uint256 o = move % 100;
        address who = o % 2 == 0 ? accomplice : accomplice2;
        if (kind == 1) {
            uint96[5] memory topUps = [uint96(1), 1 ether, 100 ether, 1000 ether, 10_000 ether];
            _stake(who, Role.Verifier, topUps[(o - 1) / 2]);
        } else if (kind == 2) {
            // 200 VERI staked, minimum 100: these leave 200-, 199, 190, 100 or 0 (all of it).
            uint96[5] memory unstakes = [uint96(1), 1 ether, 10 ether, 100 ether, 200 ether];
            vm.prank(who);
            stakes.requestUnstake(Role.Verifier, unstakes[(o - 1) / 2]);
        } else if (kind == 3) {
            vm.roll(block.number + (o == 10 ? 300 : o));
        }
        market.assignVerifier(jobId);
    }

    /// The assignSeed of the VerifierAssigned log just recorded.
    function _assignSeed() internal returns (bytes32 seed) {
        bytes32 topic = keccak256("VerifierAssigned(uint256,address,uint256,uint256,bytes32,bytes32)");
        Vm.Log[] memory logs = vm.getRecordedLogs();
        for (uint256 i; i < logs.length; ++i) {
            if (logs[i].topics[0] == topic) (,, seed,) = abi.decode(logs[i].data, (uint256, uint256, bytes32, bytes32));
        }
    }
}
