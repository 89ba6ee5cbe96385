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

    function prefix(uint256 slot) external view returns (uint256) {
        return tree.prefix(slot);
    }

    function find(uint256 target) external view returns (uint256) {
        return tree.find(target);
    }

    function total() external view returns (uint256) {
        return tree.total;
    }
}

/// @notice The Fenwick tree against a plain array, under random appends, adds and subs.
contract SumTreeTest is Test {
    function testFuzz_tree_matches_naive_sums(uint256 seed) public {
        SumTreeHarness t = new SumTreeHarness();
        uint256[] memory w = new uint256[](41);
        uint256 size;
        for (uint256 step; step < 60; ++step) {
            uint256 r = uint256(keccak256(abi.encode(seed, step)));
            if (size < 40 && (size == 0 || r % 3 == 0)) {
                size = t.append();
                continue;
            }
            uint256 slot = 1 + (r >> 8) % size;
            uint256 amount = (r >> 40) % 1000;
            if ((r >> 80) % 2 == 0 || w[slot] < amount) {
                t.add(slot, amount);
                w[slot] += amount;
            } else {
                t.sub(slot, amount);
                w[slot] -= amount;
            }
        }
        uint256 running;
        for (uint256 i = 1; i <= size; ++i) {
            running += w[i];
            assertEq(t.prefix(i), running, "prefix");
        }
        assertEq(t.total(), running, "total");
        // find(target) lands on the slot whose range [prefix(i-1), prefix(i)) holds the target.
        for (uint256 k; k < 20 && running > 0; ++k) {
            uint256 target = uint256(keccak256(abi.encode(seed, "t", k))) % running;
            uint256 slot = t.find(target);
            assertTrue(slot >= 1 && slot <= size, "slot in range");
            assertTrue(t.prefix(slot - 1) <= target && target < t.prefix(slot), "target in slot range");
        }
    }
}
