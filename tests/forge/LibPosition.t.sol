// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Test} from "./utils/Test.sol";
import {LibPosition} from "../../contracts/libraries/LibPosition.sol";

/// @notice The bisection math: log bounds, midpoints, and the move bound for every answer sequence.
contract LibPositionTest is Test {
    /// External wrapper so expectRevert sees the library's revert one call deep.
    function midpoint(uint256 lo, uint256 hi) external pure returns (uint256) {
        return LibPosition.midpoint(lo, hi);
    }

    function ceilLog2(uint256 x) external pure returns (uint256) {
        return LibPosition.ceilLog2(x);
    }

    function test_ceil_and_floor_log2_known_values() public pure {
        uint256[8] memory xs = [uint256(1), 2, 3, 4, 5, 50, 1000, 1024];
        uint256[8] memory ceils = [uint256(0), 1, 2, 2, 3, 6, 10, 10];
        uint256[8] memory floors = [uint256(0), 1, 1, 2, 2, 5, 9, 10];
        for (uint256 i; i < xs.length; ++i) {
            assertEq(LibPosition.ceilLog2(xs[i]), ceils[i], "ceilLog2");
            assertEq(LibPosition.floorLog2(xs[i]), floors[i], "floorLog2");
        }
        assertEq(LibPosition.ceilLog2(type(uint256).max), 256, "ceilLog2(max)");
    }

    function test_log2_of_zero_reverts() public {
        vm.expectRevert(LibPosition.ZeroSteps.selector);
        this.ceilLog2(0);
    }

    function test_midpoint_of_a_single_step_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(LibPosition.InvalidInterval.selector, 7, 8));
        this.midpoint(7, 8);
        vm.expectRevert(abi.encodeWithSelector(LibPosition.InvalidInterval.selector, 8, 7));
        this.midpoint(8, 7);
    }

    function testFuzz_ceil_log2_brackets_x(uint256 x) public pure {
        x = bound(x, 1, 1 << 255);
        uint256 r = LibPosition.ceilLog2(x);
        assertTrue((uint256(1) << r) >= x, "2**r >= x");
        assertTrue(r == 0 || (uint256(1) << (r - 1)) < x, "2**(r-1) < x");
        uint256 f = LibPosition.floorLog2(x);
        assertTrue((uint256(1) << f) <= x && (f == 255 || (uint256(1) << (f + 1)) > x), "floor bracket");
    }

    function testFuzz_midpoint_is_strictly_inside(uint256 lo, uint256 len) public pure {
        lo = bound(lo, 0, type(uint32).max);
        len = bound(len, 2, type(uint32).max);
        uint256 hi = lo + len;
        uint256 mid = LibPosition.midpoint(lo, hi);
        assertTrue(lo < mid && mid < hi, "lo < mid < hi");
        // Both halves need one move fewer than the whole (at most).
        assertTrue(LibPosition.movesLeft(mid, hi) < LibPosition.movesLeft(lo, hi), "upper half shorter");
        assertTrue(LibPosition.movesLeft(lo, mid) < LibPosition.movesLeft(lo, hi), "lower half shorter");
    }

    /// Whatever the answers, a segment of `steps` steps isolates one step in floor..ceil(log2 steps)
    /// moves, and each move takes at least one off the moves left.
    function testFuzz_bisection_ends_within_ceil_log2_moves(uint256 steps, uint256 answers) public pure {
        steps = bound(steps, 1, type(uint32).max);
        uint256 lo;
        uint256 hi = steps;
        uint256 moves;
        uint256 budget = LibPosition.maxMoves(steps);
        while (!LibPosition.isIsolated(lo, hi)) {
            uint256 left = LibPosition.movesLeft(lo, hi);
            // INVARIANT: moves made + moves left never exceed ceil(log2 steps).
            assertTrue(moves + left <= budget, "within budget");
            (lo, hi) = LibPosition.next(lo, hi, (answers >> (moves % 256)) & 1 == 1);
            assertTrue(LibPosition.movesLeft(lo, hi) <= left - 1, "at least one move closer");
            ++moves;
        }
        assertTrue(hi == lo + 1 && hi <= steps, "one step inside the segment");
        assertTrue(moves <= budget, "at most ceil(log2 steps)");
        assertTrue(moves >= LibPosition.floorLog2(steps), "at least floor(log2 steps)");
    }

    /// A power-of-two segment always takes exactly log2 moves.
    function testFuzz_power_of_two_segment_takes_exactly_log2_moves(uint8 exp, uint256 answers) public pure {
        uint256 steps = uint256(1) << bound(exp, 0, 31);
        uint256 lo;
        uint256 hi = steps;
        uint256 moves;
        while (!LibPosition.isIsolated(lo, hi)) {
            (lo, hi) = LibPosition.next(lo, hi, (answers >> moves) & 1 == 1);
            ++moves;
        }
        assertEq(moves, LibPosition.ceilLog2(steps), "exactly log2");
    }
}
