// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Hashes} from "@openzeppelin/contracts/utils/cryptography/Hashes.sol";
import {Probe} from "../../../contracts/Types.sol";
import {ProbeLib} from "../../../contracts/libraries/ProbeLib.sol";

/// @notice OpenZeppelin StandardMerkleTree layout over leaf hashes (proofs/merkle.py StandardTree), in
///         memory and written independently of ProbeLib.root: leaves sorted ascending, tree array of
///         2n - 1 nodes, sorted[i] at node 2n - 2 - i, node j = hashPair(node 2j + 1, node 2j + 2).
library StandardTree {
    function root(bytes32[] memory leaves) internal pure returns (bytes32) {
        return _nodes(leaves)[0];
    }

    /// The proof of value `position` (leaves[position]): siblings from its leaf up to the root.
    function proof(bytes32[] memory leaves, uint256 position) internal pure returns (bytes32[] memory out) {
        bytes32[] memory nodes = _nodes(leaves);
        uint256 i = nodes.length;
        for (uint256 j; j < nodes.length; ++j) {
            if (nodes[j] == leaves[position] && j >= leaves.length - 1) i = j;
        }
        bytes32[] memory path = new bytes32[](64);
        uint256 n;
        while (i > 0) {
            path[n++] = nodes[i % 2 == 1 ? i + 1 : i - 1];
            i = (i - 1) / 2;
        }
        out = new bytes32[](n);
        for (uint256 j; j < n; ++j) {
            out[j] = path[j];
        }
    }

    /// The leaves of `probes` (slot i = probes[i]), as JobMarket.report hashes them.
    function probeLeaves(Probe[] memory probes) internal pure returns (bytes32[] memory leaves) {
        leaves = new bytes32[](probes.length);
        for (uint256 i; i < probes.length; ++i) {
            leaves[i] = ProbeLib.leaf(i, probes[i].segment, probes[i].step, probes[i].stateHash);
        }
    }

    function _nodes(bytes32[] memory leaves) private pure returns (bytes32[] memory nodes) {
        uint256 n = leaves.length;
        bytes32[] memory sorted = new bytes32[](n);
        for (uint256 i; i < n; ++i) {
            sorted[i] = leaves[i];
        }
        for (uint256 i; i < n; ++i) {
            for (uint256 j = i + 1; j < n; ++j) {
                if (sorted[j] < sorted[i]) (sorted[i], sorted[j]) = (sorted[j], sorted[i]);
            }
        }
        nodes = new bytes32[](2 * n - 1);
        for (uint256 i; i < n; ++i) {
            nodes[nodes.length - 1 - i] = sorted[i];
        }
        for (uint256 j = n - 1; j > 0; --j) {
            nodes[j - 1] = Hashes.commutativeKeccak256(nodes[2 * j - 1], nodes[2 * j]);
        }
    }
}
