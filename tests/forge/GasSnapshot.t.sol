// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Fixture} from "./utils/Fixture.sol";
import {DisputeFixture} from "./handlers/DisputeFixture.sol";
import {GameStatus} from "../../contracts/interfaces/IDisputeGame.sol";
import {Job, MarketParams, Role} from "../../contracts/Types.sol";
import {IsolatedGas} from "./utils/IsolatedGas.sol";

/// @notice Transaction gas of every call of the honest lifecycle (and of the jackpot and seed calls),
///         written to snapshots/JobMarketGas.json. Regenerate with:
///             node_modules/.bin/forge test --offline --isolate --match-contract GasSnapshotTest
/// @dev `--isolate` runs each call as its own transaction (intrinsic 21k + calldata, cold storage,
///      refunds): the numbers a receipt shows. Without it the calls share one transaction and
///      the figures mean nothing, so the test skips itself (and writes nothing).
///      Measured in the steady state: another job is open (the market holds escrow), the jackpot
///      holds a tax, every actor has a balance and a stake record and every verifier a forced seed; a market's first escrow or an account's first
///      token balance costs ~17k more, once (zero to non-zero storage).
///      The honest job is above the former 400k goal since issue 5: assignVerifier stores the job's
///      seal in a fresh slot (~22k zero to non-zero, once per job), report rewrites it (~5k) and
///      finalize moves the tax into the jackpot (~5k + its event); report also carries its probeCount
///      probes as calldata, checks their segments, computes their root and emits them (~19k for 4
///      probes); docs/contracts.md has the figures. Since issue 11 the draw reads stakes as of its
///      anchor block: assignVerifier looks up checkpoints and appends one to the drawn verifier's
///      free-stake history (~+44k), finalize appends another when it unlocks the bond (~+8k). Since
///      issue 24 the draw's anchor block has a field of its own (Job.anchorBlock, slot 4, written by
///      commit: a fresh slot, ~22k once per job) instead of sharing the deadline's.
contract GasSnapshotTest is Fixture, IsolatedGas {
    /// The honest lifecycle's budget since the report seal and the on-chain probes (was 400k before
    /// issue 5, 440k with the seal alone, 460k before commit stored the manifest CID for the
    /// data-availability game: a fresh slot, ~22k once per job), 485k before draws read stakes as of
    /// their anchor (two free-stake checkpoints per job, ~52k), 535k before the draw's anchor block had
    /// a field of its own (a fresh slot at commit, ~22k).
    uint256 internal constant HONEST_GOAL = 560_000;

    string internal constant GROUP = "JobMarketGas";

    function setUp() public {
        _setUpActors();
        // Every verifier has a forced seed (the draw reads both of its slots), none is forced here.
        address[3] memory vs = [verifier1, verifier2, verifier3];
        for (uint256 i; i < 3; ++i) {
            vm.prank(vs[i]);
            market.commitForcedSeed(keccak256(abi.encode("seed", i)));
        }
        // Warm-up job: the protocol and the actors have all been used once.
        (uint256 warm, address v) = _verified();
        vm.warp(block.timestamp + 1 hours + 1);
        market.finalize(warm);
        _stake(v, Role.Verifier, 1);
        _post(); // stays open: the market holds escrow
    }

    function test_honest_lifecycle_gas() public {
        if (!_isolated()) return;
        uint256[6] memory used;
        vm.prank(submitter);
        uint256 jobId = market.postJob(SPEC, REWARD, FEE, COMMIT_WINDOW, false);
        used[0] = _gas();

        vm.prank(solver);
        market.claim(jobId);
        used[1] = _gas();

        vm.prank(solver);
        market.commit(jobId, ROOT, 101, MODEL, MANIFEST);
        used[2] = _gas();

        Job memory committed = market.getJob(jobId);
        vm.roll(block.number + 2);
        market.assignVerifier(jobId);
        used[3] = _gas();

        address verifier = _recordSeal(jobId, committed);
        _report(jobId, verifier, true); // probeCount (4) probes, the root computed on chain
        used[4] = _gas();

        vm.warp(block.timestamp + 1 hours + 1);
        market.finalize(jobId);
        used[5] = _gas();

        string[6] memory names = ["postJob", "claim", "commit", "assignVerifier", "report", "finalize"];
        uint256 total;
        for (uint256 i; i < 6; ++i) {
            vm.snapshotValue(GROUP, names[i], used[i]);
            total += used[i];
        }
        vm.snapshotValue(GROUP, "honestLifecycleTotal", total);
        assertTrue(total < HONEST_GOAL, "honest lifecycle under its goal");
    }

    /// A verifier commits its first forced seed, then replaces it; anyone tops up the jackpot
    /// (steady state: non-zero).
    function test_jackpot_and_seed_gas() public {
        if (!_isolated()) return;
        vm.prank(stranger);
        market.commitForcedSeed(keccak256("first"));
        vm.snapshotValue(GROUP, "commitForcedSeedFirst", _gas());
        vm.roll(block.number + 1);
        vm.prank(stranger);
        market.commitForcedSeed(keccak256("second"));
        vm.snapshotValue(GROUP, "commitForcedSeedReplace", _gas());
        vm.prank(stranger);
        market.fundJackpot(1 ether);
        vm.snapshotValue(GROUP, "fundJackpot", _gas());
    }
}

/// @notice Transaction gas of report games (a whistleblower disputes a probe; the verifier defends)
///         and of a forced-error concession, against the real DisputeGame; also written to
///         snapshots/JobMarketGas.json (same command). Steady state: another game is open.
contract ReportGameGasSnapshotTest is DisputeFixture, IsolatedGas {
    string internal constant GROUP = "JobMarketGas";

    /// Every seeded draw is forced, so a seeded verifier concedes and an unseeded one defends.
    function _marketParams() internal pure override returns (MarketParams memory p) {
        p = super._marketParams();
        p.forcedErrorRateBps = 10_000;
    }

    function setUp() public {
        _setUpProtocol();
        _paidBefore(game, _actors());
        vm.prank(stranger);
        market.fundJackpot(1000 ether);
        (uint256 warm, address v) = _failed();
        _open(v, warm, 1, 8); // stays open
    }

    /// An unforced verifier defends a probe of 3+ steps, posts one midpoint, then loses on its clock:
    /// slashed, the job back to Committed.
    function test_report_game_lost_by_the_verifier_gas() public {
        (uint256 jobId, address verifier) = _verifying();
        _passedProbes(jobId, verifier);
        uint256 index = 1;
        while (index < probes[jobId].length && probes[jobId][index].step < 3) ++index;
        assertTrue(index < probes[jobId].length, "a probe of 3+ steps");
        if (!_isolated()) return;
        _openOnReport(whistleblower, jobId, index);
        vm.snapshotValue(GROUP, "reportGame_openOnReport", _gas());
        uint256 gameId = game.gameCount();
        uint256 mid = game.nextMidpoint(gameId);
        vm.prank(verifier);
        game.postMidpoint(gameId, keccak256(abi.encode(mid)), bytes32(0));
        vm.snapshotValue(GROUP, "reportGame_postMidpoint", _gas());
        vm.prank(whistleblower);
        game.answerMidpoint(gameId, false);
        vm.snapshotValue(GROUP, "reportGame_answerMidpoint", _gas());
        assertTrue(game.getGame(gameId).status == GameStatus.DefenderToMove, "the verifier to move");
        vm.warp(block.timestamp + game.params().clockTime + 1);
        game.timeoutClock(gameId);
        vm.snapshotValue(GROUP, "reportGame_timeoutClockVerifierSlashed", _gas());
    }

    /// A forced verifier concedes the game on its probe 0 right after it opened.
    function test_forced_concession_gas() public {
        _seedVerifiers();
        (uint256 jobId, address verifier) = _verifying();
        assertTrue(_passedProbes(jobId, verifier), "forced");
        uint256 gameId = _openOnReport(whistleblower, jobId, 0);
        if (!_isolated()) return;
        vm.prank(verifier);
        game.concedeForced(gameId, _secret(verifier), seals[jobId]);
        vm.snapshotValue(GROUP, "reportGame_concedeForced", _gas());
    }
}

/// @notice Transaction gas of the calls full replay at random changes (issue 31), at the public
///         defaults (p = 1/4, replay fee = the reward, bond 4 x the reward): the draw that chooses a
///         sampled or a full verification, and finalize, which refunds the replay fee or pays it to the
///         full replay's verifier; written to snapshots/FullReplayGas.json (same command as above).
///         Steady state as GasSnapshotTest's.
contract FullReplayGasSnapshotTest is Fixture, IsolatedGas {
    string internal constant GROUP = "FullReplayGas";

    function _params() internal pure override returns (MarketParams memory p) {
        p = super._params();
        p.solverBondBps = 40_000;
        p.fullReplayRateBps = 2500;
        p.fullReplayFeeBps = 10_000;
    }

    function setUp() public {
        _setUpActors();
        address[3] memory vs = [verifier1, verifier2, verifier3];
        for (uint256 i; i < 3; ++i) {
            vm.prank(vs[i]);
            market.commitForcedSeed(keccak256(abi.encode("seed", i)));
        }
        (uint256 warm, address v) = _verified();
        vm.warp(block.timestamp + 1 hours + 1 + COMMIT_WINDOW);
        market.finalize(warm);
        _stake(v, Role.Verifier, 1);
        _post(); // stays open: the market holds escrow
    }

    function test_sampled_job_gas() public {
        _measure(false, "sampled");
    }

    function test_full_replay_job_gas() public {
        _measure(true, "full");
    }

    /// One honest job whose draw chooses `full`: entropy picked so that the coin lands as asked.
    function _measure(bool full, string memory name) internal {
        if (!_isolated()) return;
        vm.prank(submitter);
        uint256 jobId = market.postJob(SPEC, REWARD, FEE, COMMIT_WINDOW, false);
        vm.snapshotValue(GROUP, string.concat(name, "_postJob"), _gas());
        vm.prank(solver);
        market.claim(jobId);
        vm.prank(solver);
        market.commit(jobId, ROOT, 101, MODEL, MANIFEST);
        Job memory committed = market.getJob(jobId);
        vm.roll(block.number + 2);
        bytes32 entropy;
        for (uint256 i;; ++i) {
            entropy = keccak256(abi.encode("gas entropy", i));
            bytes32 assignSeed = keccak256(abi.encode(keccak256(abi.encode(entropy, jobId, committed.draws))));
            if (market.isFullReplayDraw(assignSeed) == full) break;
        }
        vm.setBlockhash(committed.anchorBlock + 1, entropy);
        market.assignVerifier(jobId);
        vm.snapshotValue(GROUP, string.concat(name, "_assignVerifier"), _gas());
        assertTrue(market.isFullReplay(jobId) == full, "the coin as chosen");
        address verifier = _recordSeal(jobId, committed);
        _report(jobId, verifier, true);
        vm.warp(block.timestamp + 1 hours + 1);
        market.finalize(jobId);
        vm.snapshotValue(GROUP, string.concat(name, "_finalize"), _gas());
    }
}
