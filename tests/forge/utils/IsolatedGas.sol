// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Test} from "./Test.sol";
import {ICredits} from "../../../contracts/interfaces/ICredits.sol";

/// A call that executes in a few hundred gas.
contract IsolationProbe {
    event Pinged();

    function ping() external {
        emit Pinged();
    }
}

/// @notice Transaction gas of single calls for the gas suites. Under `forge test --isolate` every call
///         of the test is its own transaction (intrinsic 21k + calldata, cold storage, refunds): the
///         numbers a receipt shows. Without it the calls share one transaction and the figures mean
///         nothing, so a gas test skips itself (and writes no snapshot): `_isolated()` first.
abstract contract IsolatedGas is Test {
    uint256 internal constant INTRINSIC_GAS = 21_000;

    /// The gas of the test's last call.
    function _gas() internal view returns (uint256) {
        return vm.lastCallGas().gasTotalUsed;
    }

    /// Steady state for a contract that pays by credit: each account was paid and claimed before, so
    /// its credit slot holds the 1 a claim leaves (contracts/Credits.sol) and the next credit rewrites
    /// a non-zero slot. The slot is the one `credit(account)` reads.
    function _paidBefore(ICredits credits, address[] memory accounts) internal {
        for (uint256 i; i < accounts.length; ++i) {
            vm.record();
            assertEq(credits.credit(accounts[i]), 0, "no credit yet");
            (bytes32[] memory reads,) = vm.accesses(address(credits));
            assertEq(reads.length, 1, "credit() reads one slot");
            vm.store(address(credits), reads[0], bytes32(uint256(1)));
            assertEq(credits.credit(accounts[i]), 0, "paid and claimed: still no credit");
        }
    }

    /// True under --isolate: a call that executes in well under 21k gas costs more only as its own
    /// transaction. Otherwise the test skips itself.
    function _isolated() internal returns (bool) {
        IsolationProbe probe = new IsolationProbe();
        probe.ping();
        if (_gas() >= INTRINSIC_GAS) return true;
        vm.skip(true);
        return false;
    }
}
