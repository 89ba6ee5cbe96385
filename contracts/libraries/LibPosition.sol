// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @title Bisection positions over the steps of one disputed segment.
/// @notice A segment of `steps` training steps has states 0..steps: state 0 (checkpoint j) is
///         agreed, state `steps` (checkpoint j + 1) is disputed. A position is the open interval
///         (lo, hi) with the state at `lo` agreed and the state at `hi` disputed. Each move posts the
///         state at `midpoint(lo, hi)` and keeps the half the challenger still disputes, until
///         hi == lo + 1 isolates the single step lo -> lo + 1.
/// @dev Bound: an interval of length L <= 2**d splits into halves of length ceil(L / 2) <= 2**(d-1),
///      so a segment of `steps` ends in at most ceilLog2(steps) moves, whatever the answers, and in
///      at least floorLog2(steps) (exactly ceilLog2(steps) when `steps` is a power of two).
library LibPosition {
    /// @notice An interval that is empty, reversed, or already a single step where a split is needed.
    error InvalidInterval(uint256 lo, uint256 hi);
    /// @notice ceilLog2 / maxMoves of zero.
    error ZeroSteps();

    /// @notice ceil(log2(x)) for x >= 1 (0 for x == 1).
    function ceilLog2(uint256 x) internal pure returns (uint256 r) {
        if (x == 0) revert ZeroSteps();
        unchecked {
            // x >= 1, so x - 1 does not underflow; r counts the bits of x - 1.
            uint256 y = x - 1;
            while (y != 0) {
                y >>= 1;
                ++r;
            }
        }
    }

    /// @notice floor(log2(x)) for x >= 1.
    function floorLog2(uint256 x) internal pure returns (uint256 r) {
        if (x == 0) revert ZeroSteps();
        unchecked {
            // r < 256: at most 255 shifts of a non-zero word.
            while (x > 1) {
                x >>= 1;
                ++r;
            }
        }
    }

    /// @notice The most moves a bisection over `steps` steps can take: ceil(log2(steps)).
    function maxMoves(uint256 steps) internal pure returns (uint256) {
        return ceilLog2(steps);
    }

    /// @notice The most moves left from the interval (lo, hi): ceil(log2(hi - lo)).
    function movesLeft(uint256 lo, uint256 hi) internal pure returns (uint256) {
        if (hi <= lo) revert InvalidInterval(lo, hi);
        return ceilLog2(hi - lo);
    }

    /// @notice True once the interval is the single step lo -> lo + 1.
    function isIsolated(uint256 lo, uint256 hi) internal pure returns (bool) {
        return hi == lo + 1;
    }

    /// @notice The step whose state the solver posts next: lo + floor((hi - lo) / 2), strictly
    ///         inside (lo, hi).
    function midpoint(uint256 lo, uint256 hi) internal pure returns (uint256) {
        // INVARIANT: only an interval of at least two steps is split.
        if (hi < lo + 2) revert InvalidInterval(lo, hi);
        unchecked {
            // hi >= lo + 2, checked above
            return lo + (hi - lo) / 2;
        }
    }

    /// @notice The interval after the challenger's answer to the midpoint: agree -> (mid, hi),
    ///         disagree -> (lo, mid).
    function next(uint256 lo, uint256 hi, bool agree) internal pure returns (uint256, uint256) {
        uint256 mid = midpoint(lo, hi);
        return agree ? (mid, hi) : (lo, mid);
    }
}
