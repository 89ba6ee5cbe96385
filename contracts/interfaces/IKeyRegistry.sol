// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IStakeManager} from "./IStakeManager.sol";

/// @title Encryption keys of staked accounts (issue 30: job data sealed to the parties that need it).
/// @notice A staked account (any role) registers one 32-byte X25519 public key, to which a job's
///         submitter wraps the job's data key (docs/sealing.md). It is not the account's signing key:
///         a leaked encryption key reveals sealed content but cannot move stake, and it can be rotated
///         without touching the account. Registering again rotates the key; `version` counts the
///         registrations, so a wrap names the key version it was made for.
interface IKeyRegistry {
    // ------------------------------------------------------------------ events

    /// @notice `account` registered `key` as its encryption key, its `version`-th (1 for the first).
    event KeyRegistered(address indexed account, bytes32 key, uint64 version);

    // ------------------------------------------------------------------ errors

    /// @notice Only an account with stake in some role may register an encryption key: `account` has none.
    error NotStaked(address account);
    /// @notice A zero encryption key (no X25519 public key is all zeros; it would read as "none").
    error ZeroKey();
    /// @notice A zero address where the StakeManager is needed.
    error ZeroAddress();

    // ------------------------------------------------------------------ views

    /// @notice The StakeManager whose stakes admit a registration.
    function stakeManager() external view returns (IStakeManager);

    /// @notice The encryption key `account` registered last and its version (0 and 0: none).
    /// @dev A key outlives the stake that admitted it: readers that need a staked party check the
    ///      stake as well (the chain decides who is entitled to a job's data, not this registry).
    function keyOf(address account) external view returns (bytes32 key, uint64 version);

    // ------------------------------------------------------------------ anyone staked

    /// @notice Register `key` (an X25519 public key) as the caller's encryption key, replacing any
    ///         earlier one; the caller must have stake in some role now.
    /// @return version the key's version: the caller's number of registrations so far
    function registerKey(bytes32 key) external returns (uint64 version);
}
