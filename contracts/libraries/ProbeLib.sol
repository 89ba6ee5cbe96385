// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Hashes} from "@openzeppelin/contracts/utils/cryptography/Hashes.sol";
import {MerkleProof} from "@openzeppelin/contracts/utils/cryptography/MerkleProof.sol";
import {Probe} from "../Types.sol";

/// @title Probe slots of a passing report: which segment each slot samples, leaf encoding, proof check.
/// @notice A passing report commits, for each probe slot i in [0, probeCount), to the model state hash
///         at an inner step of segment s_i = keccak256(abi.encode(assignSeed, i)) % (checkpointCount - 1).
///         The solver never committed those states, so only a verifier that replayed can state them.
///         The probe tree is an OpenZeppelin StandardMerkleTree over leaves of types
///         ["uint256", "uint256", "uint256", "bytes32"] with values (index, segment, step, stateHash).
///         JobMarket.report takes the probes themselves (calldata) and computes their root here, so a
///         passing report's probes are always on chain (ReportSubmitted) and on the right segments.
/// @dev The inner step m_i = 1 + keccak256(abi.encode(assignSeed, i, 1)) % max(k_i - 1, 1) depends on the
///      segment's step count k_i (the spec's checkpoint interval), which the chain does not know: it is
///      checked off chain (by the whistleblower and the referees), never here.
library ProbeLib {
    /// @notice The most probe slots a report may have: bounds root()'s sort and tree (JobMarket checks
    ///         probeCount <= MAX_PROBES at deployment).
    uint256 internal constant MAX_PROBES = 32;

    /// @notice The leaf of probe slot `index`: keccak256(bytes.concat(keccak256(abi.encode(index,
    ///         segment, step, stateHash)))).
    function leaf(uint256 index, uint256 segment, uint256 step, bytes32 stateHash)
        internal
        pure
        returns (bytes32 hash)
    {
        // The same bytes as abi.encode(index, segment, step, stateHash), hashed in place: root() calls
        // this probeCount times per report, and abi.encode + bytes.concat would allocate each time.
        assembly ("memory-safe") {
            let m := mload(0x40)
            mstore(m, index)
            mstore(add(m, 0x20), segment)
            mstore(add(m, 0x40), step)
            mstore(add(m, 0x60), stateHash)
            mstore(0x00, keccak256(m, 0x80))
            hash := keccak256(0x00, 0x20)
        }
    }

    /// @notice True when `proof` shows (index, segment, step, stateHash) is a leaf of the probe tree `probeRoot`.
    function verify(
        bytes32 probeRoot,
        uint256 index,
        uint256 segment,
        uint256 step,
        bytes32 stateHash,
        bytes32[] calldata proof
    ) internal pure returns (bool) {
        return MerkleProof.verifyCalldata(proof, probeRoot, leaf(index, segment, step, stateHash));
    }

    /// @notice The segment probe slot `index` samples: keccak256(abi.encode(assignSeed, index)) %
    ///         (checkpointCount - 1). Callers ensure checkpointCount >= 2 (one segment at least).
    function segmentOf(bytes32 assignSeed, uint256 index, uint256 checkpointCount) internal pure returns (uint256) {
        return uint256(keccak256(abi.encode(assignSeed, index))) % (checkpointCount - 1);
    }

    /// @notice The OpenZeppelin StandardMerkleTree root of `probes`, slot i = probes[i] (leaf(i, ...)):
    ///         leaf hashes sorted ascending, laid out in a tree array of 2n - 1 nodes with sorted[i] at
    ///         node 2n - 2 - i, each inner node the sorted-pair hash of its children; one probe: its leaf.
    ///         Equal to proofs.probes.ProbeTree(...).root.
    /// @dev Precondition (JobMarket.report): 1 <= probes.length <= MAX_PROBES, so the insertion sort
    ///      (<= 496 moves) and the tree (<= 63 nodes, one allocation) are bounded.
    function root(Probe[] calldata probes) internal pure returns (bytes32) {
        uint256 n = probes.length;
        uint256 last = 2 * n - 2;
        bytes32[] memory tree = new bytes32[](last + 1);
        // Insertion sort straight into the leaf nodes: after slot i, tree[last - j] = sorted[j], j <= i.
        for (uint256 i = 0; i < n; ++i) {
            Probe calldata p = probes[i];
            bytes32 h = leaf(i, p.segment, p.step, p.stateHash);
            uint256 j = i;
            while (j > 0 && tree[last + 1 - j] > h) {
                tree[last - j] = tree[last + 1 - j];
                --j;
            }
            tree[last - j] = h;
        }
        // Inner nodes n - 2 .. 0, children before parents (the npm package's order).
        for (uint256 i = n - 1; i > 0; --i) {
            tree[i - 1] = Hashes.commutativeKeccak256(tree[2 * i - 1], tree[2 * i]);
        }
        return tree[0];
    }
}
