// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Test} from "./utils/Test.sol";
import {SumTree} from "../../contracts/libraries/SumTree.sol";

contract SumTreeHarness {
    using SumTree for SumTree.Tree;

    SumTree.Tree internal tree;

    function append() external returns (uint256) {
        return tree.append();
    }

    function add(uint256 slot, uint256 amount) external {
        tree.add(slot, amount);
    }

    function sub(uint256 slot, uint256 amount) external {
        tree.sub(slot, amount);
    }

    function prefixAt(uint256 slot, uint32 key) external view returns (uint256) {
        return tree.prefixAt(slot, key);
    }

    function findAt(uint256 target, uint32 key) external view returns (uint256) {
        (uint256 size,) = tree.headAt(key);
        return tree.findAt(target, size, key);
    }

    function headAt(uint32 key) external view returns (uint256, uint256) {
        return tree.headAt(key);
    }

    function total() external view returns (uint256) {
        return tree.total();
    }
}

/// @notice The checkpointed Fenwick tree against plain arrays, under random appends, adds and subs
///         spread over blocks: read as of a past block it matches the weights of that block.
contract SumTreeTest is Test {
    struct Naive {
        uint256[] w;
        uint256 size;
    }

    function testFuzz_tree_matches_naive_sums_now_and_in_the_past(uint256 seed) public {
        SumTreeHarness t = new SumTreeHarness();
        vm.roll(10);
        Naive memory now_ = Naive(new uint256[](41), 0);
        Naive memory past = Naive(new uint256[](41), 0);
        uint32 pastBlock;
        for (uint256 step; step < 60; ++step) {
            uint256 r = uint256(keccak256(abi.encode(seed, step)));
            if (step == 30) {
                // Freeze the naive copy as of the end of this block, then move on.
                pastBlock = uint32(block.number);
                for (uint256 i; i < 41; ++i) {
                    past.w[i] = now_.w[i];
                }
                past.size = now_.size;
                vm.roll(block.number + 1);
            } else if (r % 4 == 0) {
                vm.roll(block.number + 1);
            }
            if (now_.size < 40 && (now_.size == 0 || r % 3 == 0)) {
                now_.size = t.append();
                continue;
            }
            uint256 slot = 1 + (r >> 8) % now_.size;
            uint256 amount = (r >> 40) % 1000;
            if ((r >> 80) % 2 == 0 || now_.w[slot] < amount) {
                t.add(slot, amount);
                now_.w[slot] += amount;
            } else {
                t.sub(slot, amount);
                now_.w[slot] -= amount;
            }
        }
        assertEq(t.total(), _check(t, now_, uint32(block.number), seed), "total now");
        _check(t, past, pastBlock, seed);
    }

    /// prefixAt, headAt and findAt at `key` against the naive weights `n`; returns their sum.
    function _check(SumTreeHarness t, Naive memory n, uint32 key, uint256 seed) internal view returns (uint256 running) {
        for (uint256 i = 1; i <= n.size; ++i) {
            running += n.w[i];
            assertEq(t.prefixAt(i, key), running, "prefix");
        }
        (uint256 size, uint256 total) = t.headAt(key);
        assertEq(size, n.size, "size");
        assertEq(total, running, "total");
        // findAt(target) lands on the slot whose range [prefix(i-1), prefix(i)) holds the target.
        for (uint256 k; k < 20 && running > 0; ++k) {
            uint256 target = uint256(keccak256(abi.encode(seed, "t", k))) % running;
            uint256 slot = t.findAt(target, key);
            assertTrue(slot >= 1 && slot <= n.size, "slot in range");
            assertTrue(t.prefixAt(slot - 1, key) <= target && target < t.prefixAt(slot, key), "target in slot range");
        }
    }
}
