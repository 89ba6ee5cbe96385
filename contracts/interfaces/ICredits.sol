// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @title ICredits
/// @notice Pull payments, as Optimism's dispute games pay: a settlement credits what it owes each
///         party here instead of transferring it, and the party (or anyone on its behalf) claims the
///         sum in one transfer. A settlement's cost no longer grows by a token transfer per payee,
///         and no payee can make another party's settlement fail.
interface ICredits {
    /// @notice A settlement owes `to` another `amount` (base units), claimable now.
    event Credited(address indexed to, uint256 amount);
    /// @notice `amount`, all the credit of `to`, was transferred to it.
    event CreditClaimed(address indexed to, uint256 amount);

    /// @notice `to` has no credit to claim.
    error NoCredit(address to);

    /// @notice What `to` may claim (base units).
    function credit(address to) external view returns (uint256);

    /// @notice The sum of every party's credit; this contract's token balance is at least this.
    function totalCredit() external view returns (uint256);

    /// @notice Transfers all the credit of `to` to `to`. Anyone may send it: the tokens go only to `to`.
    /// @return amount what was transferred
    function claimCredit(address to) external returns (uint256 amount);
}
