// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";

/// @title A growable Fenwick (binary indexed) tree of uint256 weights over slots 1..size.
/// @notice add / sub / prefix / find cost O(log size) storage reads or writes; `total` is kept
///         alongside so a draw needs no prefix query of the whole tree.
library SumTree {
    /// @dev node[i] holds the sum of the weights of slots (i - lowbit(i), i].
    ///      size and total share one storage slot (a draw reads both).
    struct Tree {
        uint64 size;
        uint192 total;
        mapping(uint256 index => uint256) node;
    }

    /// @notice Appends a slot of weight 0 and returns its index (size + 1).
    function append(Tree storage t) internal returns (uint256 slot) {
        slot = uint256(t.size) + 1;
        // callers bound the size far below 2**64
        // forge-lint: disable-next-line(unsafe-typecast)
        t.size = uint64(slot);
        // The new node covers (slot - lowbit(slot), slot]: the sum of the existing weights in
        // (stop, slot - 1], which the prefix decomposition of slot - 1 visits down to stop.
        uint256 stop = slot - _lowbit(slot);
        uint256 sum;
        for (uint256 k = slot - 1; k > stop; k -= _lowbit(k)) {
            sum += t.node[k];
        }
        if (sum != 0) t.node[slot] = sum;
    }

    /// @notice Adds `amount` to the weight of `slot` (1 <= slot <= size).
    function add(Tree storage t, uint256 slot, uint256 amount) internal {
        uint256 size = t.size;
        for (uint256 i = slot; i <= size; i += _lowbit(i)) {
            t.node[i] += amount;
        }
        t.total += SafeCast.toUint192(amount);
    }

    /// @notice Subtracts `amount` from the weight of `slot` (reverts on underflow).
    function sub(Tree storage t, uint256 slot, uint256 amount) internal {
        uint256 size = t.size;
        for (uint256 i = slot; i <= size; i += _lowbit(i)) {
            t.node[i] -= amount;
        }
        t.total -= SafeCast.toUint192(amount);
    }

    /// @notice Sum of the weights of slots 1..slot.
    function prefix(Tree storage t, uint256 slot) internal view returns (uint256 sum) {
        for (uint256 i = slot; i > 0; i -= _lowbit(i)) {
            sum += t.node[i];
        }
    }

    /// @notice The smallest slot whose prefix sum exceeds `target` (target < total required):
    ///         slot i is found for targets in [prefix(i - 1), prefix(i)).
    function find(Tree storage t, uint256 target) internal view returns (uint256) {
        uint256 size = t.size;
        uint256 pos;
        uint256 step = 1;
        while (step <= size >> 1) step <<= 1;
        for (; step != 0; step >>= 1) {
            uint256 next = pos + step;
            if (next <= size) {
                uint256 w = t.node[next];
                if (w <= target) {
                    pos = next;
                    target -= w;
                }
            }
        }
        return pos + 1;
    }

    function _lowbit(uint256 i) private pure returns (uint256) {
        unchecked {
            // two's complement trick: i & -i isolates the lowest set bit; i > 0 at every call site
            return i & (~i + 1);
        }
    }
}
