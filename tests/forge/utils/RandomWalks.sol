// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Test} from "./Test.sol";

/// A handler that counts, per action (its selector), the protocol calls that succeeded.
interface CountingHandler {
    function calls(bytes4 action) external view returns (uint256);
}

/// @notice The reach of an invariant suite's handler: walks like the fuzzer's runs (random actions with
///         random arguments from the set-up state), counting what each action got done, so that a
///         suite can assert its walk is not vacuous. A fuzzer run is too short for a per-run
///         minimum: with the suites' runs and depths some runs post no job at all, and a deep path
///         needs a job through five or more actions while time jumps close its windows. So every
///         action's reach is asserted over a fixed set of longer walks here.
abstract contract RandomWalks is Test {
    error TooLittleReach(bytes4 action, uint256 reached, uint256 minimum);

    /// Calls `action` on `handler` with four arguments drawn from `seed`: each a random word of 1, 8,
    /// 16, 32 or 96 bits, so that every parameter type the handlers take (bool, uint8 .. uint256)
    /// decodes some of the time (a call that does not decode, or that the handler's guards stop,
    /// does nothing, as in a fuzzer run).
    function _randomCall(address handler, bytes4 action, uint256 seed) internal {
        uint256 free;
        assembly ("memory-safe") {
            free := mload(0x40)
        }
        uint8[5] memory widths = [1, 8, 16, 32, 96];
        bytes memory args;
        for (uint256 k; k < 4; ++k) {
            uint256 w = uint256(keccak256(abi.encode(seed, k)));
            args = bytes.concat(args, abi.encode(w >> (256 - uint256(widths[w % 5]))));
        }
        (bool ok,) = handler.call(bytes.concat(action, args));
        ok; // see above: a call that did nothing is part of a walk
        assembly ("memory-safe") {
            // nothing allocated here outlives the call: free it (a walk makes thousands)
            mstore(0x40, free)
        }
    }

    /// `walks` walks of `depth` random actions among `actions`, each from the current state (restored
    /// after each); returns the successful protocol calls of each action over all of them.
    function _walk(address handler, bytes4[] memory actions, uint256 walks, uint256 depth)
        internal
        returns (uint256[] memory reached)
    {
        reached = new uint256[](actions.length);
        uint256 start = vm.snapshotState();
        for (uint256 w; w < walks; ++w) {
            for (uint256 i; i < depth; ++i) {
                uint256 seed = uint256(keccak256(abi.encode("walk", w, i)));
                _randomCall(handler, actions[seed % actions.length], seed);
            }
            for (uint256 a; a < actions.length; ++a) {
                reached[a] += CountingHandler(handler).calls(actions[a]);
            }
            vm.revertToState(start);
        }
    }

    /// Reverts TooLittleReach unless `reached[a] >= minimum[a]` for every action.
    function _assertReach(bytes4[] memory actions, uint256[] memory reached, uint256[] memory minimum)
        internal
        pure
    {
        for (uint256 a; a < actions.length; ++a) {
            if (reached[a] < minimum[a]) revert TooLittleReach(actions[a], reached[a], minimum[a]);
        }
    }
}
