// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {ERC20} from "@openzeppelin/contracts/token/ERC20/ERC20.sol";

/// @title VeriToken (VERI): the ERC20 of stakes, fees, rewards and bonds.
/// @notice A fixed supply, minted once to the deployer; no mint or burn afterwards.
contract VeriToken is ERC20 {
    /// @notice The supply does not fit the protocol's uint96 amounts.
    error SupplyTooLarge(uint256 supply, uint256 max);

    /// @param supply the whole supply, in base units (18 decimals), minted to the deployer
    constructor(uint256 supply) ERC20("VeriTrain Token", "VERI") {
        // INVARIANT: every balance fits uint96, the width of amounts in StakeManager and JobMarket.
        if (supply > type(uint96).max) revert SupplyTooLarge(supply, type(uint96).max);
        _mint(msg.sender, supply);
    }
}
