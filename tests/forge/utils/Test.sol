// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Vm} from "./Vm.sol";

/// @notice Minimal assertions and helpers for forge tests without forge-std.
abstract contract Test {
    Vm internal constant vm = Vm(address(uint160(uint256(keccak256("hevm cheat code")))));

    error AssertionFailed(string what);
    error NotEqual(string what, uint256 left, uint256 right);
    error NotEqualBytes32(string what, bytes32 left, bytes32 right);
    error NotEqualAddress(string what, address left, address right);

    /// @notice Tells forge this is a test contract.
    bool public IS_TEST = true;

    function assertTrue(bool condition, string memory what) internal pure {
        if (!condition) revert AssertionFailed(what);
    }

    function assertEq(uint256 left, uint256 right, string memory what) internal pure {
        if (left != right) revert NotEqual(what, left, right);
    }

    function assertEq(bytes32 left, bytes32 right, string memory what) internal pure {
        if (left != right) revert NotEqualBytes32(what, left, right);
    }

    function assertEq(address left, address right, string memory what) internal pure {
        if (left != right) revert NotEqualAddress(what, left, right);
    }

    /// @notice `x` mapped into [min, max] (inclusive), uniformly enough for fuzzing.
    function bound(uint256 x, uint256 min, uint256 max) internal pure returns (uint256) {
        if (max < min) revert AssertionFailed("bound: max < min");
        if (max == type(uint256).max && min == 0) return x;
        return min + x % (max - min + 1);
    }
}
