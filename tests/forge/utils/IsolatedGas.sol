// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Test} from "./Test.sol";

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
