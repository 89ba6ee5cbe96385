// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {MerkleProof} from "@openzeppelin/contracts/utils/cryptography/MerkleProof.sol";

/// @title Leaf encoding and proof check of a training trace tree.
/// @notice The tree is an OpenZeppelin StandardMerkleTree over leaves of types
///         ["uint256", "bytes32"] with values (checkpoint index, state hash), sorted-pair hashing.
///         Checkpoint 0 is the initial state; checkpoint i is the state after i * k steps.
library TraceLib {
    /// @notice The leaf of checkpoint `index` with state hash `stateHash`:
    ///         keccak256(bytes.concat(keccak256(abi.encode(index, stateHash)))).
    function leaf(uint256 index, bytes32 stateHash) internal pure returns (bytes32) {
        return keccak256(bytes.concat(keccak256(abi.encode(index, stateHash))));
    }

    /// @notice True when `proof` shows (index, stateHash) is a leaf of the tree with root `root`.
    function verify(bytes32 root, uint256 index, bytes32 stateHash, bytes32[] calldata proof)
        internal
        pure
        returns (bool)
    {
        return MerkleProof.verifyCalldata(proof, root, leaf(index, stateHash));
    }
}
