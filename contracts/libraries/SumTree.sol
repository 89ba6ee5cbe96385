// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Checkpoints} from "@openzeppelin/contracts/utils/structs/Checkpoints.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";

/// @title A growable Fenwick (binary indexed) tree of weights over slots 1..size, with history.
/// @notice Every node, and the (size, total) head, is a checkpoint trace keyed by block number, so
///         the tree can be read as it stood at the end of any past block: a draw anchored at block
///         `a` reads the weights of block `a`, whatever changed since. add / sub cost O(log size)
///         checkpoint writes; prefixAt / findAt cost O(log size) checkpoint lookups (the most recent
///         checkpoint first, so a tree that rarely changes is read in about two loads a node).
library SumTree {
    using Checkpoints for Checkpoints.Trace224;

    /// @dev node[i] holds the sum of the weights of slots (i - lowbit(i), i]. head packs
    ///      size << 192 | total (a draw reads both, as of one block).
    struct Tree {
        Checkpoints.Trace224 head;
        mapping(uint256 index => Checkpoints.Trace224) node;
    }

    uint256 private constant TOTAL_BITS = 192;

    /// @notice Appends a slot of weight 0 and returns its index (size + 1).
    function append(Tree storage t) internal returns (uint256 slot) {
        (uint256 count, uint256 sum) = _head(t.head.latest());
        slot = count + 1;
        _setHead(t, slot, sum);
        // The new node covers (slot - lowbit(slot), slot]: the sum of the existing weights in
        // (stop, slot - 1], which the prefix decomposition of slot - 1 visits down to stop.
        uint256 stop = slot - _lowbit(slot);
        uint256 covered;
        for (uint256 k = slot - 1; k > stop; k -= _lowbit(k)) {
            covered += t.node[k].latest();
        }
        if (covered != 0) _set(t.node[slot], covered);
    }

    /// @notice Adds `amount` to the weight of `slot` (1 <= slot <= size).
    function add(Tree storage t, uint256 slot, uint256 amount) internal {
        (uint256 count, uint256 sum) = _head(t.head.latest());
        for (uint256 i = slot; i <= count; i += _lowbit(i)) {
            _set(t.node[i], t.node[i].latest() + amount);
        }
        _setHead(t, count, sum + amount);
    }

    /// @notice Subtracts `amount` from the weight of `slot` (reverts on underflow).
    function sub(Tree storage t, uint256 slot, uint256 amount) internal {
        (uint256 count, uint256 sum) = _head(t.head.latest());
        for (uint256 i = slot; i <= count; i += _lowbit(i)) {
            _set(t.node[i], t.node[i].latest() - amount);
        }
        _setHead(t, count, sum - amount);
    }

    /// @notice Number of slots now.
    function size(Tree storage t) internal view returns (uint256 count) {
        (count,) = _head(t.head.latest());
    }

    /// @notice Sum of all weights now.
    function total(Tree storage t) internal view returns (uint256 sum) {
        (, sum) = _head(t.head.latest());
    }

    /// @notice (size, total) at the end of block `key`.
    function headAt(Tree storage t, uint32 key) internal view returns (uint256 count, uint256 sum) {
        return _head(t.head.upperLookupRecent(key));
    }

    /// @notice Sum of the weights of slots 1..slot at the end of block `key` (slot <= size then).
    function prefixAt(Tree storage t, uint256 slot, uint32 key) internal view returns (uint256 sum) {
        for (uint256 i = slot; i > 0; i -= _lowbit(i)) {
            sum += t.node[i].upperLookupRecent(key);
        }
    }

    /// @notice The smallest slot whose prefix sum at the end of block `key` exceeds `target`
    ///         (target < total and count = size, both as of `key`): slot i is found for targets in
    ///         [prefixAt(i - 1), prefixAt(i)). Nodes appended after `key` are never visited.
    function findAt(Tree storage t, uint256 target, uint256 count, uint32 key) internal view returns (uint256) {
        uint256 pos;
        uint256 step = 1;
        while (step <= count >> 1) step <<= 1;
        for (; step != 0; step >>= 1) {
            uint256 next = pos + step;
            if (next <= count) {
                uint256 w = t.node[next].upperLookupRecent(key);
                if (w <= target) {
                    pos = next;
                    target -= w;
                }
            }
        }
        return pos + 1;
    }

    function _set(Checkpoints.Trace224 storage trace, uint256 value) private {
        trace.push(SafeCast.toUint32(block.number), SafeCast.toUint224(value));
    }

    function _setHead(Tree storage t, uint256 count, uint256 sum) private {
        // sum < 2**192 and count < 2**32 (both SafeCast: the packed value must fit 224 bits)
        _set(t.head, (count << TOTAL_BITS) | SafeCast.toUint192(sum));
    }

    function _head(uint224 packed) private pure returns (uint256 count, uint256 sum) {
        count = uint256(packed) >> TOTAL_BITS;
        sum = uint256(packed) & ((uint256(1) << TOTAL_BITS) - 1);
    }

    function _lowbit(uint256 i) private pure returns (uint256) {
        unchecked {
            // two's complement trick: i & -i isolates the lowest set bit; i > 0 at every call site
            return i & (~i + 1);
        }
    }
}
