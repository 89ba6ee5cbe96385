// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IKeyRegistry} from "./interfaces/IKeyRegistry.sol";
import {IStakeManager} from "./interfaces/IStakeManager.sol";
import {Role} from "./Types.sol";

/// @title KeyRegistry
/// @notice Staked accounts' encryption keys (IKeyRegistry has the rules, docs/sealing.md the design).
///         One concern, kept out of the StakeManager: the keys are read by the parties of a sealed job
///         and by nothing that moves money.
/// @dev One slot per account: the key (32 bytes) and, in the next slot, its version. Holds no tokens.
contract KeyRegistry is IKeyRegistry {
    /// @inheritdoc IKeyRegistry
    IStakeManager public immutable stakeManager;

    /// An account's encryption key and the number of times it registered one.
    struct EncryptionKey {
        bytes32 key;
        uint64 version;
    }

    mapping(address account => EncryptionKey) private _keys;

    /// @param stakes the StakeManager whose stakes (any role) admit a registration
    constructor(IStakeManager stakes) {
        if (address(stakes) == address(0)) revert ZeroAddress();
        stakeManager = stakes;
    }

    // ------------------------------------------------------------------ views

    /// @inheritdoc IKeyRegistry
    function keyOf(address account) external view returns (bytes32 key, uint64 version) {
        EncryptionKey storage k = _keys[account];
        return (k.key, k.version);
    }

    // ------------------------------------------------------------------ anyone staked

    /// @inheritdoc IKeyRegistry
    function registerKey(bytes32 key) external returns (uint64 version) {
        // INVARIANT: a registered key is never zero (zero reads as "no key").
        if (key == bytes32(0)) revert ZeroKey();
        // INVARIANT: only an account with stake at the moment it registers writes a key.
        if (!_staked(msg.sender)) revert NotStaked(msg.sender);
        EncryptionKey storage k = _keys[msg.sender];
        // INVARIANT: versions count registrations from 1 and only go up.
        // unchecked: one registration per transaction cannot reach 2^64 registrations
        unchecked {
            version = k.version + 1;
        }
        k.key = key;
        k.version = version;
        emit KeyRegistered(msg.sender, key, version);
    }

    /// Whether `account` has stake (staked, not unbonding) in any role.
    function _staked(address account) private view returns (bool) {
        return stakeManager.stakeOf(account, Role.Solver).staked != 0 || stakeManager.stakeOf(account, Role.Verifier).staked != 0
            || stakeManager.stakeOf(account, Role.Whistleblower).staked != 0;
    }
}
