// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Fixture} from "./utils/Fixture.sol";
import {Role} from "../../contracts/Types.sol";

/// @notice Transaction gas of every call of the honest lifecycle, written to
///         snapshots/JobMarketGas.json. Regenerate with:
///             node_modules/.bin/forge test --offline --isolate --match-contract GasSnapshotTest
/// @dev `--isolate` runs each call as its own transaction (intrinsic 21k + calldata, cold storage,
///      refunds): the numbers a receipt shows. Without it the calls share one transaction and
///      the figures mean nothing, so the test skips itself (and writes nothing).
///      Measured in the steady state: another job is open (the market holds escrow) and every
///      actor has a balance and a stake record; a market's first escrow or an account's first
///      token balance costs ~17k more, once (zero to non-zero storage).
contract GasSnapshotTest is Fixture {
    string internal constant GROUP = "JobMarketGas";
    uint256 internal constant INTRINSIC_GAS = 21_000;

    function setUp() public {
        _setUpActors();
        // Warm-up job: the protocol and the actors have all been used once.
        (uint256 warm, address v) = _verified();
        vm.warp(block.timestamp + 1 hours + 1);
        market.finalize(warm);
        _stake(v, Role.Verifier, 1);
        _post(); // stays open: the market holds escrow
    }

    function _gas() internal view returns (uint256) {
        return vm.lastCallGas().gasTotalUsed;
    }

    function test_honest_lifecycle_gas() public {
        uint256[6] memory used;
        vm.prank(submitter);
        uint256 jobId = market.postJob(SPEC, REWARD, FEE, COMMIT_WINDOW);
        used[0] = _gas();

        vm.prank(solver);
        market.claim(jobId);
        used[1] = _gas();

        vm.prank(solver);
        market.commit(jobId, ROOT, 101, MODEL, MANIFEST);
        used[2] = _gas();

        vm.roll(block.number + 2);
        market.assignVerifier(jobId);
        used[3] = _gas();

        address verifier = market.getJob(jobId).verifier;
        vm.prank(verifier);
        market.report(jobId, true, REPORT);
        used[4] = _gas();

        vm.warp(block.timestamp + 1 hours + 1);
        market.finalize(jobId);
        used[5] = _gas();

        // Only an isolated call pays the intrinsic gas; report executes in well under 21k.
        if (used[4] < INTRINSIC_GAS) {
            vm.skip(true);
            return;
        }
        string[6] memory names = ["postJob", "claim", "commit", "assignVerifier", "report", "finalize"];
        uint256 total;
        for (uint256 i; i < 6; ++i) {
            vm.snapshotValue(GROUP, names[i], used[i]);
            total += used[i];
        }
        vm.snapshotValue(GROUP, "honestLifecycleTotal", total);
        assertTrue(total < 400_000, "honest lifecycle under 400k gas");
    }
}
