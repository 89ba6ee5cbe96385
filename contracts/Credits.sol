// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";
import {ICredits} from "./interfaces/ICredits.sol";

/// @title Credits
/// @notice The pull payments of a contract that settles games (ICredits): the DisputeGame and the
///         AvailabilityCourt credit every payout of a settlement and their parties claim it.
/// @dev Every slot keeps 1 more than it means once written, and a claim leaves that 1: the next
///      credit to a party that was ever paid, and every settlement after the first, rewrites a
///      non-zero slot (2,900 gas) instead of filling an empty one (20,000). A settlement then costs
///      about what the token transfers it replaced did.
///      INVARIANT: totalCredit == the sum of credit over every account, and the token balance of the
///      contract is at least totalCredit (a credit is made only of tokens the contract holds).
abstract contract Credits is ICredits, ReentrancyGuardTransient {
    using SafeERC20 for IERC20;

    /// 0: never credited; else 1 + what the account may claim.
    mapping(address account => uint256) private _owed;
    /// 1 + the sum of every account's credit (1 from the deployment on).
    uint256 private _total = 1;

    /// @inheritdoc ICredits
    function credit(address to) external view returns (uint256) {
        uint256 owed = _owed[to];
        return owed == 0 ? 0 : owed - 1;
    }

    /// @inheritdoc ICredits
    function totalCredit() external view returns (uint256) {
        return _totalCredit();
    }

    /// @inheritdoc ICredits
    function claimCredit(address to) external nonReentrant returns (uint256 amount) {
        uint256 owed = _owed[to];
        if (owed <= 1) revert NoCredit(to);
        amount = owed - 1;
        _owed[to] = 1;
        _total -= amount;
        emit CreditClaimed(to, amount);
        _creditToken().safeTransfer(to, amount);
    }

    /// Owes `to` another `amount` of the tokens this contract holds (nothing for 0).
    function _credit(address to, uint256 amount) internal {
        if (amount == 0) return;
        uint256 owed = _owed[to];
        _owed[to] = (owed == 0 ? 1 : owed) + amount;
        _total += amount;
        emit Credited(to, amount);
    }

    /// The sum of every account's credit.
    function _totalCredit() internal view returns (uint256) {
        return _total - 1;
    }

    /// The token the credits are paid in.
    function _creditToken() internal view virtual returns (IERC20);
}
