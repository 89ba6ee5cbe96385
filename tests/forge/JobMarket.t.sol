// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Fixture} from "./utils/Fixture.sol";
import {JobMarket} from "../../contracts/JobMarket.sol";
import {IJobMarket} from "../../contracts/interfaces/IJobMarket.sol";
import {IStakeManager} from "../../contracts/interfaces/IStakeManager.sol";
import {StakeManager} from "../../contracts/StakeManager.sol";
import {VeriToken} from "../../contracts/VeriToken.sol";
import {
    ForcedSeed,
    Job,
    JobState,
    MarketParams,
    Probe,
    RefundReason,
    ReportSeal,
    Role
} from "../../contracts/Types.sol";
import {ProbeLib} from "../../contracts/libraries/ProbeLib.sol";
import {ProbeClaim} from "../../contracts/interfaces/IDisputeGame.sol";
import {ProbeTree} from "./handlers/DisputeFixture.sol";
import {StandardTree} from "./utils/StandardTree.sol";
import {IERC20Errors} from "@openzeppelin/contracts/interfaces/draft-IERC6093.sol";

contract JobMarketTest is Fixture {
    uint256 internal constant SOLVER_BOND = 50 ether; // max(10, 100 * 50%)
    uint256 internal constant VERIFIER_BOND = 20 ether; // max(5, 100 * 20%)

    function setUp() public {
        _setUpActors();
    }

    // ------------------------------------------------------------------ construction, parameters, wiring

    function test_params_are_readable() public view {
        MarketParams memory p = market.params();
        MarketParams memory want = _params();
        assertEq(keccak256(abi.encode(p)), keccak256(abi.encode(want)), "params round-trip");
        assertEq(market.solverBond(REWARD), SOLVER_BOND, "solver bond");
        assertEq(market.verifierBond(REWARD), VERIFIER_BOND, "verifier bond");
        assertEq(market.solverBond(1 ether), 10 ether, "solver bond floor");
        assertEq(market.verifierBond(1 ether), 5 ether, "verifier bond floor");
        assertEq(address(market.stakeManager()), address(stakes), "stake manager");
        assertEq(address(market.token()), address(token), "token");
        assertEq(market.disputeGame(), game, "game");
        assertTrue(market.wired(), "wired");
    }

    function test_constructor_rejects_bad_params() public {
        MarketParams memory p = _params();
        p.timeoutSlashBps = 10_001;
        vm.expectRevert(_withName(IJobMarket.InvalidParameter.selector, "timeoutSlashBps"));
        new JobMarket(token, stakes, p);
        p = _params();
        p.maxVerifierDraws = 0;
        vm.expectRevert(_withName(IJobMarket.InvalidParameter.selector, "maxVerifierDraws"));
        new JobMarket(token, stakes, p);
        p = _params();
        p.reportWindow = 0;
        vm.expectRevert(_withName(IJobMarket.InvalidParameter.selector, "reportWindow"));
        new JobMarket(token, stakes, p);
        p = _params();
        p.jackpotTaxBps = 10_001;
        vm.expectRevert(_withName(IJobMarket.InvalidParameter.selector, "jackpotTaxBps"));
        new JobMarket(token, stakes, p);
        p = _params();
        p.jackpotShareBps = 3334;
        vm.expectRevert(_withName(IJobMarket.InvalidParameter.selector, "jackpotShareBps"));
        new JobMarket(token, stakes, p);
        p = _params();
        p.forcedErrorRateBps = 10_001;
        vm.expectRevert(_withName(IJobMarket.InvalidParameter.selector, "forcedErrorRateBps"));
        new JobMarket(token, stakes, p);
        p = _params();
        p.probeCount = 0;
        vm.expectRevert(_withName(IJobMarket.InvalidParameter.selector, "probeCount"));
        new JobMarket(token, stakes, p);
        p.probeCount = 33;
        vm.expectRevert(_withName(IJobMarket.InvalidParameter.selector, "probeCount"));
        new JobMarket(token, stakes, p);
        p.probeCount = 32;
        p.jackpotShareBps = 3333;
        p.forcedErrorRateBps = 10_000;
        p.jackpotTaxBps = 10_000;
        assertEq(new JobMarket(token, stakes, p).params().probeCount, 32, "the bounds are allowed");
        assertEq(market.MAX_JACKPOT_SHARE_BPS(), 3333, "Truebit's third");
        VeriToken other = new VeriToken(1);
        vm.expectRevert(_withName(IJobMarket.InvalidParameter.selector, "token"));
        new JobMarket(other, stakes, _params());
    }

    function test_set_dispute_game_once_by_admin() public {
        vm.expectRevert(IJobMarket.AlreadyWired.selector);
        market.setDisputeGame(stranger);
        JobMarket fresh = new JobMarket(token, stakes, _params());
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.NotAuthorized.selector, stranger));
        fresh.setDisputeGame(stranger);
        vm.expectEmit(true, false, false, false, address(fresh));
        emit IJobMarket.DisputeGameSet(address(0));
        fresh.setDisputeGame(address(0));
        assertTrue(fresh.wired(), "wired with no game");
    }

    function test_unauthorized_market_cannot_lock() public {
        JobMarket rogue = new JobMarket(token, stakes, _params());
        vm.prank(submitter);
        token.approve(address(rogue), type(uint256).max);
        vm.prank(submitter);
        uint256 jobId = rogue.postJob(SPEC, REWARD, FEE, COMMIT_WINDOW, false);
        vm.prank(solver);
        vm.expectRevert(abi.encodeWithSelector(IStakeManager.NotAuthorized.selector, address(rogue)));
        rogue.claim(jobId);
    }

    // ------------------------------------------------------------------ postJob

    function test_post_escrows_and_emits() public {
        uint256 before = _bal(submitter);
        vm.expectEmit(true, true, false, true, address(market));
        emit IJobMarket.JobPosted(1, submitter, SPEC, REWARD, FEE, COMMIT_WINDOW, uint32(block.timestamp + 1 days), false);
        uint256 jobId = _post();
        assertEq(jobId, 1, "first id");
        assertEq(market.jobCount(), 1, "count");
        assertEq(_bal(submitter), before - ESCROW, "paid reward, fee and tax");
        assertEq(_bal(address(market)), ESCROW, "escrowed");
        assertEq(market.jackpotTax(REWARD, FEE), TAX, "tax");
        assertEq(market.jackpot(), 0, "the tax joins the jackpot only at finalize");
        Job memory job = market.getJob(jobId);
        assertEq(job.submitter, submitter, "submitter");
        assertEq(job.reward, REWARD, "reward");
        assertEq(job.verifierFee, FEE, "fee");
        assertEq(job.commitWindow, COMMIT_WINDOW, "window");
        assertEq(uint8(job.state), uint8(JobState.Open), "open");
    }

    function _expectPostRevert(bytes memory err, bytes32 spec, uint96 reward, uint96 fee, uint32 window) internal {
        uint256 before = _bal(submitter);
        vm.prank(submitter);
        vm.expectRevert(err);
        market.postJob(spec, reward, fee, window, false);
        assertEq(_bal(submitter), before, "no balance change");
        assertEq(market.jobCount(), 0, "no job");
    }

    function test_post_bad_inputs_revert_and_move_nothing() public {
        _expectPostRevert(abi.encodeWithSelector(IJobMarket.ZeroReward.selector), SPEC, 0, FEE, COMMIT_WINDOW);
        _expectPostRevert(abi.encodeWithSelector(IJobMarket.ZeroVerifierFee.selector), SPEC, REWARD, 0, COMMIT_WINDOW);
        _expectPostRevert(abi.encodeWithSelector(IJobMarket.ZeroCid.selector), bytes32(0), REWARD, FEE, COMMIT_WINDOW);
        _expectPostRevert(
            abi.encodeWithSelector(IJobMarket.InvalidCommitWindow.selector, 0, 7 days), SPEC, REWARD, FEE, 0
        );
        _expectPostRevert(
            abi.encodeWithSelector(IJobMarket.InvalidCommitWindow.selector, 7 days + 1, 7 days),
            SPEC,
            REWARD,
            FEE,
            7 days + 1
        );
    }

    function test_post_without_allowance_reverts() public {
        vm.prank(submitter);
        token.approve(address(market), 0);
        _expectPostRevert(
            abi.encodeWithSelector(
                IERC20Errors.ERC20InsufficientAllowance.selector, address(market), 0, ESCROW
            ),
            SPEC,
            REWARD,
            FEE,
            COMMIT_WINDOW
        );
    }

    function testFuzz_post_escrows_exactly(uint96 reward, uint96 fee, uint32 window) public {
        reward = uint96(bound(reward, 1, FUND / 2));
        fee = uint96(bound(fee, 1, FUND / 2));
        window = uint32(bound(window, 1, 7 days));
        vm.prank(submitter);
        uint256 jobId = market.postJob(SPEC, reward, fee, window, false);
        uint256 tax = (uint256(reward) + fee) * 300 / 10_000;
        assertEq(market.jackpotTax(reward, fee), tax, "tax");
        assertEq(_bal(address(market)), uint256(reward) + fee + tax, "escrow");
        assertEq(market.getJob(jobId).commitWindow, window, "window");
    }

    // ------------------------------------------------------------------ unknown job ids

    function testFuzz_unknown_job_reverts_everywhere(uint256 jobId) public {
        vm.assume(jobId != 1);
        _post();
        bytes memory err = abi.encodeWithSelector(IJobMarket.UnknownJob.selector, jobId);
        vm.expectRevert(err);
        market.getJob(jobId);
        vm.expectRevert(err);
        market.claim(jobId);
        vm.expectRevert(err);
        market.commit(jobId, ROOT, 2, MODEL, MANIFEST);
        vm.expectRevert(err);
        market.assignVerifier(jobId);
        vm.expectRevert(err);
        market.report(jobId, true, REPORT, bytes32(0), bytes32(0), new Probe[](0));
        vm.expectRevert(err);
        market.finalize(jobId);
        vm.expectRevert(err);
        market.cancel(jobId);
        vm.expectRevert(err);
        market.expire(jobId);
        vm.expectRevert(err);
        market.timeoutSolver(jobId);
        vm.expectRevert(err);
        market.timeoutVerifier(jobId);
        vm.expectRevert(err);
        market.timeoutDispute(jobId);
    }

    // ------------------------------------------------------------------ claim

    function test_claim_locks_solver_bond() public {
        uint256 jobId = _post();
        vm.expectEmit(true, true, false, true, address(market));
        emit IJobMarket.JobClaimed(jobId, solver, SOLVER_BOND, uint32(block.timestamp + COMMIT_WINDOW));
        vm.prank(solver);
        market.claim(jobId);
        assertEq(_locked(solver, Role.Solver), SOLVER_BOND, "bond locked");
        Job memory job = market.getJob(jobId);
        assertEq(job.solver, solver, "solver");
        assertEq(uint8(job.state), uint8(JobState.Claimed), "claimed");
        assertEq(job.deadline, block.timestamp + COMMIT_WINDOW, "deadline");
    }

    function test_claim_twice_reverts() public {
        uint256 jobId = _claimed();
        vm.prank(solver2);
        vm.expectRevert(
            abi.encodeWithSelector(IJobMarket.WrongState.selector, jobId, JobState.Claimed, JobState.Open)
        );
        market.claim(jobId);
        assertEq(_locked(solver2, Role.Solver), 0, "loser locks nothing");
    }

    function test_claim_without_stake_reverts() public {
        uint256 jobId = _post();
        vm.prank(stranger);
        vm.expectRevert(
            abi.encodeWithSelector(
                IStakeManager.InsufficientStake.selector, stranger, Role.Solver, 0, MIN_SOLVER_STAKE
            )
        );
        market.claim(jobId);
        assertEq(uint8(_state(jobId)), uint8(JobState.Open), "still open");
    }

    function test_claim_beyond_free_stake_reverts() public {
        _stake(stranger, Role.Solver, 120 ether);
        uint256 a = _post();
        uint256 b = _post();
        uint256 c = _post();
        vm.startPrank(stranger);
        market.claim(a);
        market.claim(b);
        vm.expectRevert(
            abi.encodeWithSelector(
                IStakeManager.InsufficientStake.selector, stranger, Role.Solver, 20 ether, SOLVER_BOND
            )
        );
        market.claim(c);
        vm.stopPrank();
    }

    function test_claim_after_expiry_reverts() public {
        uint256 jobId = _post();
        uint256 expiresAt = market.getJob(jobId).deadline;
        vm.warp(expiresAt + 1);
        vm.prank(solver);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.DeadlinePassed.selector, jobId, expiresAt));
        market.claim(jobId);
    }

    // ------------------------------------------------------------------ commit

    function test_commit_records_trace() public {
        uint256 jobId = _claimed();
        vm.expectEmit(true, true, false, true, address(market));
        emit IJobMarket.TraceCommitted(jobId, solver, ROOT, 11, MODEL, MANIFEST);
        vm.prank(solver);
        market.commit(jobId, ROOT, 11, MODEL, MANIFEST);
        Job memory job = market.getJob(jobId);
        assertEq(uint8(job.state), uint8(JobState.Committed), "committed");
        assertEq(job.traceRoot, ROOT, "root");
        assertEq(job.checkpointCount, 11, "count");
        assertEq(job.anchorBlock, block.number, "Committed: the draw anchor block");
        assertEq(job.deadline, 0, "Committed has no deadline");
    }

    function test_commit_access_deadline_and_input_checks() public {
        uint256 jobId = _claimed();
        vm.prank(solver2);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.NotAuthorized.selector, solver2));
        market.commit(jobId, ROOT, 11, MODEL, MANIFEST);
        vm.startPrank(solver);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.InvalidTrace.selector, bytes32(0), 11));
        market.commit(jobId, bytes32(0), 11, MODEL, MANIFEST);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.InvalidTrace.selector, ROOT, 1));
        market.commit(jobId, ROOT, 1, MODEL, MANIFEST);
        uint256 deadline = market.getJob(jobId).deadline;
        vm.warp(deadline + 1);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.DeadlinePassed.selector, jobId, deadline));
        market.commit(jobId, ROOT, 11, MODEL, MANIFEST);
        vm.stopPrank();
        uint256 open = _post();
        vm.prank(solver);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.WrongState.selector, open, JobState.Open, JobState.Claimed));
        market.commit(open, ROOT, 11, MODEL, MANIFEST);
    }

    // ------------------------------------------------------------------ assignVerifier

    function test_assign_needs_a_later_block() public {
        uint256 jobId = _committed();
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.RandomnessNotReady.selector, jobId, block.number + 2));
        market.assignVerifier(jobId);
        vm.roll(block.number + 1);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.RandomnessNotReady.selector, jobId, block.number + 1));
        market.assignVerifier(jobId);
    }

    function test_assign_draws_a_verifier_and_locks_its_bond() public {
        (uint256 jobId, address verifier) = _verifying();
        assertTrue(verifier == verifier1 || verifier == verifier2 || verifier == verifier3, "a staked verifier");
        assertEq(_locked(verifier, Role.Verifier), VERIFIER_BOND, "bond locked");
        Job memory job = market.getJob(jobId);
        assertEq(uint8(job.state), uint8(JobState.Verifying), "verifying");
        assertEq(job.deadline, block.timestamp + 1 hours, "report deadline");
        assertEq(job.draws, 1, "one draw");
    }

    function testFuzz_assign_never_draws_solver_or_submitter(bytes32 entropy) public {
        // A zero block hash means "older than 256 blocks" and re-anchors instead of drawing.
        vm.assume(entropy != bytes32(0));
        // The solver and the submitter are also the heaviest verifiers.
        _stake(solver, Role.Verifier, 5000 ether);
        _stake(submitter, Role.Verifier, 5000 ether);
        uint256 jobId = _committed();
        vm.roll(block.number + 2);
        vm.setBlockhash(uint256(market.getJob(jobId).anchorBlock) + 1, entropy);
        market.assignVerifier(jobId);
        address verifier = market.getJob(jobId).verifier;
        assertTrue(verifier != solver && verifier != submitter && verifier != address(0), "excluded");
    }

    function test_draw_left_past_256_blocks_costs_the_solver_its_bond() public {
        uint256 jobId = _committed();
        uint256 bond = market.solverBond(REWARD);
        uint256 submitterBefore = _bal(submitter);
        uint256 stakedBefore = _staked(solver, Role.Solver);
        vm.roll(block.number + 300);
        vm.expectEmit(true, true, false, true, address(market));
        emit IJobMarket.DrawExpired(jobId, solver, bond);
        market.assignVerifier(jobId);
        Job memory job = market.getJob(jobId);
        assertEq(uint8(job.state), uint8(JobState.Open), "reopened, not re-drawn");
        assertEq(job.solver, address(0), "solver cleared");
        assertEq(_bal(submitter), submitterBefore + bond, "whole bond to the submitter");
        assertEq(_staked(solver, Role.Solver), stakedBefore - bond, "solver slashed");
        assertEq(_locked(solver, Role.Solver), 0, "nothing left locked");
    }

    function test_assign_reanchors_when_the_drawn_stake_was_locked_since_the_anchor() public {
        uint256 jobId = _committed();
        // After the anchor block, other draws take every verifier's whole stake.
        vm.roll(block.number + 1);
        vm.startPrank(game);
        stakes.lock(verifier1, Role.Verifier, 100 ether);
        stakes.lock(verifier2, Role.Verifier, 200 ether);
        stakes.lock(verifier3, Role.Verifier, 300 ether);
        vm.stopPrank();
        vm.roll(block.number + 1);
        vm.expectEmit(true, false, false, true, address(market));
        emit IJobMarket.DrawReanchored(jobId, block.number);
        market.assignVerifier(jobId);
        assertEq(uint8(_state(jobId)), uint8(JobState.Committed), "still committed");
        assertEq(market.getJob(jobId).anchorBlock, block.number, "re-anchored");
        // Anchored after the locks, nobody has free stake: the job is refunded.
        vm.roll(block.number + 2);
        vm.expectEmit(true, false, false, true, address(market));
        emit IJobMarket.JobRefunded(jobId, RefundReason.NoEligibleVerifier, ESCROW);
        market.assignVerifier(jobId);
    }

    function test_assign_with_no_eligible_verifier_refunds() public {
        // Only verifier1..3 are verifiers; lock all their free stake elsewhere.
        vm.startPrank(game);
        stakes.lock(verifier1, Role.Verifier, 100 ether);
        stakes.lock(verifier2, Role.Verifier, 200 ether);
        stakes.lock(verifier3, Role.Verifier, 300 ether);
        vm.stopPrank();
        uint256 submitterBefore = _bal(submitter);
        uint256 jobId = _committed();
        vm.roll(block.number + 2);
        vm.expectEmit(true, false, false, true, address(market));
        emit IJobMarket.JobRefunded(jobId, RefundReason.NoEligibleVerifier, ESCROW);
        market.assignVerifier(jobId);
        assertEq(uint8(_state(jobId)), uint8(JobState.Refunded), "refunded");
        assertEq(_bal(submitter), submitterBefore, "escrow back");
        assertEq(_locked(solver, Role.Solver), 0, "solver bond released");
        assertEq(_bal(address(market)), 0, "nothing held");
    }

    // ------------------------------------------------------------------ report

    function test_report_pass_opens_challenge_window() public {
        (uint256 jobId, address verifier) = _verifying();
        Probe[] memory probes = _probes(jobId);
        bytes32 root = StandardTree.root(StandardTree.probeLeaves(probes));
        vm.expectEmit(true, true, false, true, address(market));
        emit IJobMarket.ReportSubmitted(jobId, verifier, true, REPORT, root, probes, block.timestamp + 1 hours);
        _report(jobId, verifier, true);
        assertEq(uint8(_state(jobId)), uint8(JobState.Verified), "verified");
    }

    function test_report_fail_opens_dispute() public {
        (uint256 jobId, address verifier) = _verifying();
        vm.expectEmit(true, true, false, true, address(market));
        emit IJobMarket.ReportSubmitted(
            jobId, verifier, false, REPORT, bytes32(0), new Probe[](0), block.timestamp + 1 days
        );
        vm.expectEmit(true, true, false, true, address(market));
        emit IJobMarket.DisputeOpened(jobId, verifier, uint32(block.timestamp + 1 days));
        _report(jobId, verifier, false);
        Job memory job = market.getJob(jobId);
        assertEq(uint8(job.state), uint8(JobState.Disputed), "disputed");
        assertEq(job.challenger, verifier, "verifier challenges");
    }

    function test_report_access_and_deadline() public {
        (uint256 jobId, address verifier) = _verifying();
        ReportSeal memory seal = seals[jobId];
        Probe[] memory probes = _probes(jobId);
        vm.prank(solver);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.NotAuthorized.selector, solver));
        market.report(jobId, true, REPORT, seal.assignSeed, seal.forcedCommitment, probes);
        uint256 deadline = market.getJob(jobId).deadline;
        vm.warp(deadline + 1);
        vm.prank(verifier);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.DeadlinePassed.selector, jobId, deadline));
        market.report(jobId, true, REPORT, seal.assignSeed, seal.forcedCommitment, probes);
    }

    /// A pass reports exactly probeCount probes: fewer or more revert at the first slot that differs.
    function test_pass_with_wrong_probe_count_reverts() public {
        (uint256 jobId, address verifier) = _verifying();
        ReportSeal memory seal = seals[jobId];
        Probe[] memory four = _probes(jobId);
        Probe[] memory three = new Probe[](3);
        Probe[] memory five = new Probe[](5);
        for (uint256 i; i < 4; ++i) {
            if (i < 3) three[i] = four[i];
            five[i] = four[i];
        }
        five[4] = four[0];
        vm.startPrank(verifier);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.InvalidProbe.selector, jobId, 3));
        market.report(jobId, true, REPORT, seal.assignSeed, seal.forcedCommitment, three);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.InvalidProbe.selector, jobId, 4));
        market.report(jobId, true, REPORT, seal.assignSeed, seal.forcedCommitment, five);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.InvalidProbe.selector, jobId, 0));
        market.report(jobId, true, REPORT, seal.assignSeed, seal.forcedCommitment, new Probe[](0));
        vm.stopPrank();
    }

    /// Each slot's segment is the drawn one and its state hash is not 0: a verifier cannot put its
    /// probes where a whistleblower could not dispute them.
    function test_pass_with_a_wrong_segment_or_zero_hash_reverts() public {
        (uint256 jobId, address verifier) = _verifying();
        ReportSeal memory seal = seals[jobId];
        for (uint256 i; i < 4; ++i) {
            Probe[] memory probes = _probes(jobId);
            probes[i].segment = (probes[i].segment + 1) % 10;
            vm.prank(verifier);
            vm.expectRevert(abi.encodeWithSelector(IJobMarket.InvalidProbe.selector, jobId, i));
            market.report(jobId, true, REPORT, seal.assignSeed, seal.forcedCommitment, probes);
            probes = _probes(jobId);
            probes[i].stateHash = bytes32(0);
            vm.prank(verifier);
            vm.expectRevert(abi.encodeWithSelector(IJobMarket.InvalidProbe.selector, jobId, i));
            market.report(jobId, true, REPORT, seal.assignSeed, seal.forcedCommitment, probes);
        }
        // the step is not the chain's rule (it needs k): any step is accepted here
        Probe[] memory anyStep = _probes(jobId);
        anyStep[2].step = 12345;
        vm.prank(verifier);
        market.report(jobId, true, REPORT, seal.assignSeed, seal.forcedCommitment, anyStep);
        assertEq(uint8(_state(jobId)), uint8(JobState.Verified), "verified");
    }

    /// The report names the seal parts of its draw: another assign seed or forced commitment reverts
    /// (on a pass and on a fail), so the probes are bound to the segments the draw fixed.
    function test_report_with_wrong_seal_parts_reverts() public {
        (uint256 jobId, address verifier) = _verifying();
        ReportSeal memory seal = seals[jobId];
        bytes32 other = keccak256("other seed");
        Probe[] memory drawn = _probes(jobId);
        Probe[] memory probes = _probes(jobId);
        for (uint256 i; i < probes.length; ++i) {
            probes[i].segment = market.probeSegment(other, i, 11); // consistent with the wrong seed
        }
        vm.startPrank(verifier);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.InvalidSeal.selector, jobId));
        market.report(jobId, true, REPORT, other, seal.forcedCommitment, probes);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.InvalidSeal.selector, jobId));
        market.report(jobId, true, REPORT, seal.assignSeed, keccak256("fc"), drawn);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.InvalidSeal.selector, jobId));
        market.report(jobId, false, REPORT, seal.assignSeed, keccak256("fc"), new Probe[](0));
        vm.stopPrank();
    }

    function test_failing_report_with_probes_reverts() public {
        (uint256 jobId, address verifier) = _verifying();
        ReportSeal memory seal = seals[jobId];
        Probe[] memory probes = _probes(jobId);
        vm.prank(verifier);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.InvalidProbe.selector, jobId, 0));
        market.report(jobId, false, REPORT, seal.assignSeed, seal.forcedCommitment, probes);
        _report(jobId, verifier, false);
        assertEq(
            market.reportSeal(jobId),
            keccak256(abi.encode(keccak256(abi.encode(seal.assignSeed, seal.forcedCommitment)), bytes32(0))),
            "a fail seals probe root 0"
        );
    }

    /// The root the chain computes from the probes is the OpenZeppelin StandardMerkleTree root that
    /// proofs.probes.ProbeTree gives, for 1..5 probes and for the most (32): a fixed vector from Python,
    ///   .venv/bin/python -c 'from proofs.probes import Probe, ProbeTree; from eth_utils import keccak
    ///   print([ProbeTree([Probe(i, 3 * i + 1, i + 2, keccak((i + 1).to_bytes(32, "big"))) for i in range(n)])
    ///          .root for n in (1, 2, 3, 4, 5, 32)])'
    function test_probe_root_matches_the_python_probe_tree() public {
        ProbeRootHarness harness = new ProbeRootHarness();
        uint8[6] memory sizes = [1, 2, 3, 4, 5, 32];
        bytes32[6] memory want = [
            bytes32(0x49db66b721e0240f6562579e47d537d79b164a091577836aee698aacc50d6b68),
            0x5dd3ea3a29fafe44da5776d8e2e6d7a8efd936909358fb334177388e78e80a0e,
            0xa0899db1948320a03c92646fe911842dbeb0aaa2c7e530fdf8026d1e0695cf4c,
            0x3aebb3530bebeb776f39eeaf1cf7209a392f2ced2d203d2ffab467b8ec4932a1,
            0x17bd60f2638fe360a069e3430051c77fab89c590b3dbe323cc84201003ec0a62,
            0xbe834faba3bc0797b23701bf7483231453e906423217d52db8254ba867c67a92
        ];
        for (uint256 t; t < sizes.length; ++t) {
            Probe[] memory probes = new Probe[](sizes[t]);
            for (uint256 i; i < probes.length; ++i) {
                probes[i] = Probe(3 * i + 1, i + 2, keccak256(abi.encode(i + 1)));
            }
            assertEq(harness.root(probes), want[t], "ProbeLib.root");
            assertEq(StandardTree.root(StandardTree.probeLeaves(probes)), want[t], "test tree");
        }
    }

    // ------------------------------------------------------------------ finalize

    function test_finalize_pays_everyone_and_releases_bonds() public {
        uint256 submitterBefore = _bal(submitter);
        (uint256 jobId, address verifier) = _verified();
        uint256 solverBefore = _bal(solver);
        uint256 verifierBefore = _bal(verifier);
        vm.warp(block.timestamp + 1 hours + 1);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.JobFinalized(jobId, solver, verifier, REWARD, FEE);
        vm.prank(stranger);
        market.finalize(jobId);
        assertEq(_bal(solver), solverBefore + REWARD, "solver paid");
        assertEq(_bal(verifier), verifierBefore + FEE, "verifier paid");
        assertEq(_bal(submitter), submitterBefore - ESCROW, "submitter paid once");
        assertEq(_locked(solver, Role.Solver), 0, "solver bond released");
        assertEq(_locked(verifier, Role.Verifier), 0, "verifier bond released");
        assertEq(market.jackpot(), TAX, "the tax moved into the jackpot");
        assertEq(_bal(address(market)), TAX, "escrow empty: only the jackpot is held");
        assertEq(uint8(_state(jobId)), uint8(JobState.Finalized), "finalized");
    }

    function test_finalize_before_window_reverts() public {
        (uint256 jobId,) = _verified();
        uint256 deadline = market.getJob(jobId).deadline;
        vm.warp(deadline);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.DeadlineNotReached.selector, jobId, deadline));
        market.finalize(jobId);
    }

    function test_double_finalize_reverts_and_pays_nothing() public {
        (uint256 jobId,) = _verified();
        vm.warp(block.timestamp + 1 hours + 1);
        market.finalize(jobId);
        uint256 solverBefore = _bal(solver);
        vm.expectRevert(
            abi.encodeWithSelector(IJobMarket.WrongState.selector, jobId, JobState.Finalized, JobState.Verified)
        );
        market.finalize(jobId);
        assertEq(_bal(solver), solverBefore, "no second payment");
    }

    // ------------------------------------------------------------------ cancel and expire

    function test_cancel_refunds_open_job() public {
        uint256 before = _bal(submitter);
        uint256 jobId = _post();
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.NotAuthorized.selector, stranger));
        market.cancel(jobId);
        vm.expectEmit(true, false, false, true, address(market));
        emit IJobMarket.JobCancelled(jobId, ESCROW);
        vm.prank(submitter);
        market.cancel(jobId);
        assertEq(_bal(submitter), before, "refunded");
        assertEq(uint8(_state(jobId)), uint8(JobState.Cancelled), "cancelled");
        vm.prank(submitter);
        vm.expectRevert(
            abi.encodeWithSelector(IJobMarket.WrongState.selector, jobId, JobState.Cancelled, JobState.Open)
        );
        market.cancel(jobId);
    }

    function test_cancel_after_claim_reverts() public {
        uint256 jobId = _claimed();
        vm.prank(submitter);
        vm.expectRevert(
            abi.encodeWithSelector(IJobMarket.WrongState.selector, jobId, JobState.Claimed, JobState.Open)
        );
        market.cancel(jobId);
    }

    function test_expire_refunds_unclaimed_job() public {
        uint256 before = _bal(submitter);
        uint256 jobId = _post();
        uint256 expiresAt = market.getJob(jobId).deadline;
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.DeadlineNotReached.selector, jobId, expiresAt));
        market.expire(jobId);
        vm.warp(expiresAt + 1);
        vm.prank(stranger);
        market.expire(jobId);
        assertEq(_bal(submitter), before, "refunded");
        assertEq(uint8(_state(jobId)), uint8(JobState.Refunded), "refunded state");
    }

    // ------------------------------------------------------------------ solver timeout

    function test_silent_solver_is_slashed_and_job_reopens() public {
        uint256 jobId = _claimed();
        uint256 deadline = market.getJob(jobId).deadline;
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.DeadlineNotReached.selector, jobId, deadline));
        market.timeoutSolver(jobId);
        vm.warp(deadline + 1);
        uint256 submitterBefore = _bal(submitter);
        vm.expectEmit(true, true, false, true, address(market));
        emit IJobMarket.SolverTimedOut(jobId, solver, SOLVER_BOND / 2);
        vm.expectEmit(true, false, false, true, address(market));
        emit IJobMarket.JobReopened(jobId, uint32(block.timestamp + 1 days));
        vm.prank(stranger);
        market.timeoutSolver(jobId);
        assertEq(_bal(submitter), submitterBefore + SOLVER_BOND / 2, "submitter compensated");
        assertEq(_staked(solver, Role.Solver), 500 ether - SOLVER_BOND / 2, "solver slashed");
        assertEq(_locked(solver, Role.Solver), 0, "rest released");
        Job memory job = market.getJob(jobId);
        assertEq(uint8(job.state), uint8(JobState.Open), "reopened");
        assertEq(job.solver, address(0), "solver cleared");
        // Another solver takes it and finishes.
        vm.prank(solver2);
        market.claim(jobId);
        vm.prank(solver2);
        market.commit(jobId, ROOT, 3, MODEL, MANIFEST);
        assertEq(uint8(_state(jobId)), uint8(JobState.Committed), "second solver committed");
    }

    function test_reopened_job_gets_a_fresh_claim_window_then_expires() public {
        uint256 before = _bal(submitter);
        uint256 jobId = _post();
        vm.warp(market.getJob(jobId).deadline);
        vm.prank(solver);
        market.claim(jobId); // last moment
        vm.warp(block.timestamp + COMMIT_WINDOW + 1);
        market.timeoutSolver(jobId);
        Job memory job = market.getJob(jobId);
        assertEq(uint8(job.state), uint8(JobState.Open), "reopened");
        assertEq(job.deadline, block.timestamp + 1 days, "fresh claim window");
        vm.warp(job.deadline + 1);
        market.expire(jobId);
        assertEq(uint8(_state(jobId)), uint8(JobState.Refunded), "refunded");
        assertEq(_bal(submitter), before + SOLVER_BOND / 2, "escrow back plus slash");
        assertEq(_locked(solver, Role.Solver), 0, "released");
        assertEq(_bal(address(market)), 0, "nothing held");
    }

    // ------------------------------------------------------------------ verifier timeout

    function test_silent_verifier_is_slashed_and_redrawn() public {
        (uint256 jobId, address first) = _verifying();
        uint256 deadline = market.getJob(jobId).deadline;
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.DeadlineNotReached.selector, jobId, deadline));
        market.timeoutVerifier(jobId);
        vm.warp(deadline + 1);
        uint256 solverBefore = _bal(solver);
        uint256 firstStake = _staked(first, Role.Verifier);
        vm.expectEmit(true, true, false, true, address(market));
        emit IJobMarket.VerifierTimedOut(jobId, first, VERIFIER_BOND / 2);
        market.timeoutVerifier(jobId);
        assertEq(_bal(solver), solverBefore + VERIFIER_BOND / 2, "solver compensated");
        assertEq(_staked(first, Role.Verifier), firstStake - VERIFIER_BOND / 2, "verifier slashed");
        assertEq(_locked(first, Role.Verifier), 0, "rest released");
        assertEq(uint8(_state(jobId)), uint8(JobState.Committed), "back to draw");
        address second = _assign(jobId);
        assertTrue(second != first && second != address(0), "a different verifier");
        _report(jobId, second, true);
        assertEq(uint8(_state(jobId)), uint8(JobState.Verified), "verified by the second");
    }

    function test_verifier_draws_exhausted_refunds() public {
        uint256 before = _bal(submitter);
        (uint256 jobId,) = _verifying();
        for (uint256 i = 1; i < 3; ++i) {
            vm.warp(block.timestamp + 1 hours + 1);
            market.timeoutVerifier(jobId);
            vm.roll(block.number + 2);
            market.assignVerifier(jobId);
        }
        assertEq(market.getJob(jobId).draws, 3, "three draws");
        vm.warp(block.timestamp + 1 hours + 1);
        vm.expectEmit(true, false, false, true, address(market));
        emit IJobMarket.JobRefunded(jobId, RefundReason.VerifierDrawsExhausted, ESCROW);
        market.timeoutVerifier(jobId);
        assertEq(uint8(_state(jobId)), uint8(JobState.Refunded), "refunded");
        assertEq(_bal(submitter), before, "escrow back");
        assertEq(_locked(solver, Role.Solver), 0, "solver released");
        assertEq(_locked(verifier1, Role.Verifier) + _locked(verifier2, Role.Verifier) + _locked(verifier3, Role.Verifier), 0, "verifiers released");
    }

    // ------------------------------------------------------------------ disputes

    function test_dispute_timeout_refunds_without_slashing() public {
        uint256 before = _bal(submitter);
        (uint256 jobId, address verifier) = _disputed();
        uint256 deadline = market.getJob(jobId).deadline;
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.DeadlineNotReached.selector, jobId, deadline));
        market.timeoutDispute(jobId);
        vm.warp(deadline + 1);
        market.timeoutDispute(jobId);
        assertEq(uint8(_state(jobId)), uint8(JobState.Refunded), "refunded");
        assertEq(_bal(submitter), before, "escrow back");
        assertEq(_staked(solver, Role.Solver), 500 ether, "solver not slashed");
        assertEq(_locked(solver, Role.Solver), 0, "solver released");
        assertEq(_locked(verifier, Role.Verifier), 0, "verifier released");
    }

    function test_only_the_game_opens_and_resolves_disputes() public {
        (uint256 jobId,) = _verified();
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.NotAuthorized.selector, stranger));
        market.openDispute(jobId, stranger);
        vm.prank(game);
        market.openDispute(jobId, stranger);
        assertEq(market.getJob(jobId).challenger, stranger, "challenger");
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.NotAuthorized.selector, stranger));
        market.resolveDispute(jobId, true, false, stranger);
    }

    function test_open_dispute_after_window_reverts() public {
        (uint256 jobId,) = _verified();
        uint256 deadline = market.getJob(jobId).deadline;
        vm.warp(deadline + 1);
        vm.prank(game);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.DeadlinePassed.selector, jobId, deadline));
        market.openDispute(jobId, stranger);
    }

    function test_resolve_solver_won_a_whistleblower_dispute_resumes_the_window_then_finalizes() public {
        (uint256 jobId, address verifier) = _verified();
        vm.prank(game);
        market.openDispute(jobId, stranger);
        uint256 solverBefore = _bal(solver);
        uint256 verifierBefore = _bal(verifier);
        vm.expectEmit(true, false, false, true, address(market));
        emit IJobMarket.DisputeResolved(jobId, true, false);
        vm.prank(game);
        market.resolveDispute(jobId, true, false, game);
        assertEq(uint8(_state(jobId)), uint8(JobState.Verified), "back to Verified");
        assertEq(_bal(solver), solverBefore, "not paid yet");
        vm.warp(market.getJob(jobId).deadline + 1);
        market.finalize(jobId);
        assertEq(uint8(_state(jobId)), uint8(JobState.Finalized), "finalized");
        assertEq(_bal(solver), solverBefore + REWARD, "solver paid");
        assertEq(_bal(verifier), verifierBefore + FEE, "verifier paid");
        assertEq(_locked(solver, Role.Solver) + _locked(verifier, Role.Verifier), 0, "bonds released");
    }

    function test_resolve_solver_won_against_failing_verifier_slashes_it() public {
        uint256 submitterBefore = _bal(submitter);
        (uint256 jobId, address verifier) = _disputed();
        uint256 verifierStake = _staked(verifier, Role.Verifier);
        uint256 gameBefore = _bal(game);
        vm.prank(game);
        market.resolveDispute(jobId, true, true, game);
        assertEq(uint8(_state(jobId)), uint8(JobState.Finalized), "finalized");
        assertEq(_staked(verifier, Role.Verifier), verifierStake - VERIFIER_BOND, "verifier bond slashed");
        assertEq(_locked(verifier, Role.Verifier), 0, "nothing left locked");
        assertEq(_bal(game), gameBefore + VERIFIER_BOND, "slash to recipient");
        assertEq(_bal(submitter), submitterBefore - REWARD - TAX, "fee back to submitter, tax to the jackpot");
        assertEq(market.jackpot(), TAX, "taxed");
        assertEq(_bal(address(market)), TAX, "escrow empty");
    }

    function test_resolve_solver_lost_slashes_and_reopens() public {
        (uint256 jobId, address verifier) = _disputed();
        uint256 gameBefore = _bal(game);
        vm.prank(game);
        market.resolveDispute(jobId, false, false, game);
        assertEq(_staked(solver, Role.Solver), 500 ether - SOLVER_BOND, "solver slashed in full");
        assertEq(_locked(verifier, Role.Verifier), 0, "honest verifier released");
        assertEq(_bal(game), gameBefore + SOLVER_BOND, "slash to recipient");
        Job memory job = market.getJob(jobId);
        assertEq(uint8(job.state), uint8(JobState.Open), "reopened");
        assertEq(job.traceRoot, bytes32(0), "trace cleared");
        assertEq(job.challenger, address(0), "dispute cleared");
        assertEq(_bal(address(market)), ESCROW, "escrow kept");
        vm.prank(solver2);
        market.claim(jobId);
    }

    function test_resolve_both_slashed_reopens() public {
        (uint256 jobId, address verifier) = _verified();
        vm.prank(game);
        market.openDispute(jobId, stranger);
        uint256 gameBefore = _bal(game);
        vm.prank(game);
        market.resolveDispute(jobId, false, true, game);
        assertEq(uint8(_state(jobId)), uint8(JobState.Open), "reopened");
        assertEq(_bal(game), gameBefore + SOLVER_BOND + VERIFIER_BOND, "both bonds to the recipient");
        assertEq(_locked(solver, Role.Solver) + _locked(verifier, Role.Verifier), 0, "nothing locked");
        Job memory job = market.getJob(jobId);
        assertEq(job.verifier, address(0), "verifier cleared");
        assertEq(job.solver, address(0), "solver cleared");
    }

    function test_resolve_requires_disputed() public {
        (uint256 jobId,) = _verified();
        vm.prank(game);
        vm.expectRevert(
            abi.encodeWithSelector(IJobMarket.WrongState.selector, jobId, JobState.Verified, JobState.Disputed)
        );
        market.resolveDispute(jobId, true, false, game);
    }

    // ------------------------------------------------------------------ patch 1: a lost whistleblower challenge

    /// openDispute pauses the challenge window: the time left is stored with the job.
    function test_open_dispute_stores_the_challenge_time_left() public {
        (uint256 jobId,) = _verified();
        uint256 deadline = market.getJob(jobId).deadline;
        vm.warp(block.timestamp + 20 minutes);
        vm.prank(game);
        market.openDispute(jobId, stranger);
        Job memory job = market.getJob(jobId);
        assertEq(job.challengeLeft, deadline - block.timestamp, "time left stored");
        assertEq(job.challenger, stranger, "challenger");
    }

    /// The solver wins a whistleblower's dispute: Verified again, bonds still locked, the window
    /// resumes with what it had left (not what is left of the original deadline), and another
    /// whistleblower may challenge in it.
    function test_lost_whistleblower_challenge_resumes_the_paused_window() public {
        (uint256 jobId, address verifier) = _verified();
        vm.warp(block.timestamp + 40 minutes); // 20 minutes of the 1 hour window left
        vm.prank(game);
        market.openDispute(jobId, stranger);
        vm.warp(block.timestamp + 2 hours); // a game longer than the whole window
        uint32 resumed = uint32(block.timestamp + 20 minutes);
        vm.expectEmit(true, false, false, true, address(market));
        emit IJobMarket.ChallengeWindowResumed(jobId, resumed);
        vm.prank(game);
        market.resolveDispute(jobId, true, false, game);

        Job memory job = market.getJob(jobId);
        assertEq(uint8(job.state), uint8(JobState.Verified), "Verified");
        assertEq(job.deadline, resumed, "window resumed with the time it had left");
        assertEq(job.challenger, address(0), "challenger cleared");
        assertEq(job.challengeLeft, 0, "time left cleared");
        assertEq(_locked(solver, Role.Solver), SOLVER_BOND, "solver bond still locked");
        assertEq(_locked(verifier, Role.Verifier), VERIFIER_BOND, "verifier bond still locked");
        assertEq(_bal(address(market)), ESCROW, "escrow kept");

        vm.expectRevert(abi.encodeWithSelector(IJobMarket.DeadlineNotReached.selector, jobId, resumed));
        market.finalize(jobId);
        // a second (honest) whistleblower challenges inside the resumed window
        vm.warp(resumed);
        vm.prank(game);
        market.openDispute(jobId, solver2);
        assertEq(market.getJob(jobId).challengeLeft, 0, "opened at the last second");
        vm.prank(game);
        market.resolveDispute(jobId, false, true, game);
        assertEq(uint8(_state(jobId)), uint8(JobState.Open), "the second challenge won: reopened");
        assertEq(market.getJob(jobId).challengeLeft, 0, "reopen clears the paused window");
    }

    /// Outcomes other than "solver won a whistleblower's dispute, verifier not slashed" finalize
    /// as before: a failing verifier's dispute, and a verdict that slashes the passing verifier.
    function test_resolve_solver_won_finalizes_failing_verifier_disputes_and_verifier_slashes() public {
        (uint256 jobId,) = _disputed();
        vm.prank(game);
        market.resolveDispute(jobId, true, false, game);
        assertEq(uint8(_state(jobId)), uint8(JobState.Finalized), "failing verifier's dispute: finalized");

        (uint256 jobId2, address verifier2) = _verified();
        uint256 stake = _staked(verifier2, Role.Verifier);
        vm.prank(game);
        market.openDispute(jobId2, stranger);
        vm.prank(game);
        market.resolveDispute(jobId2, true, true, game);
        assertEq(uint8(_state(jobId2)), uint8(JobState.Finalized), "verifier slashed: finalized");
        assertEq(stake - _staked(verifier2, Role.Verifier), VERIFIER_BOND, "verifier slashed");
    }

    /// Fuzz: wherever in the window the dispute opens and however long the game runs, the resumed
    /// deadline is the resolution time plus exactly the time that was left at opening.
    function testFuzz_resumed_window_is_the_time_left_at_opening(uint32 openAfter, uint32 gameTime) public {
        (uint256 jobId,) = _verified();
        uint256 deadline = market.getJob(jobId).deadline;
        openAfter = uint32(bound(openAfter, 0, deadline - block.timestamp));
        gameTime = uint32(bound(gameTime, 0, 1 days));
        vm.warp(block.timestamp + openAfter);
        uint256 left = deadline - block.timestamp;
        vm.prank(game);
        market.openDispute(jobId, stranger);
        vm.warp(block.timestamp + gameTime);
        vm.prank(game);
        market.resolveDispute(jobId, true, false, game);
        assertEq(market.getJob(jobId).deadline, block.timestamp + left, "resumed deadline");
        assertEq(uint8(_state(jobId)), uint8(JobState.Verified), "Verified");
    }

    // ------------------------------------------------------------------ jackpot

    function test_fund_jackpot() public {
        uint256 before = _bal(stranger);
        vm.expectEmit(true, false, false, true, address(market));
        emit IJobMarket.JackpotFunded(stranger, 7 ether, 7 ether);
        vm.prank(stranger);
        market.fundJackpot(7 ether);
        vm.prank(submitter);
        market.fundJackpot(1 ether);
        assertEq(market.jackpot(), 8 ether, "jackpot");
        assertEq(_bal(stranger), before - 7 ether, "paid");
        assertEq(_bal(address(market)), 8 ether, "held");
    }

    /// Every finalize moves the job's tax into the jackpot: the plain one and the one a dispute
    /// resolution ends in.
    function test_finalize_paths_move_the_tax_into_the_jackpot() public {
        (uint256 a,) = _verified();
        vm.warp(block.timestamp + 1 hours + 1);
        vm.expectEmit(true, false, false, true, address(market));
        emit IJobMarket.JackpotTaxed(a, TAX, TAX);
        market.finalize(a);
        (uint256 b,) = _disputed();
        vm.expectEmit(true, false, false, true, address(market));
        emit IJobMarket.JackpotTaxed(b, TAX, 2 * TAX);
        vm.prank(game);
        market.resolveDispute(b, true, false, game);
        (uint256 c,) = _disputed();
        vm.prank(game);
        market.resolveDispute(c, true, true, game); // the verifier's fee goes back, the tax does not
        assertEq(market.jackpot(), 3 * TAX, "three taxes");
        assertEq(_bal(address(market)), 3 * TAX, "only the jackpot is held");
    }

    /// Every other end returns the tax with the escrow.
    function test_refunds_and_cancel_return_the_tax() public {
        uint256 before = _bal(submitter);
        uint256 a = _post();
        vm.prank(submitter);
        market.cancel(a);
        uint256 b = _post();
        vm.warp(block.timestamp + 1 days + 1);
        market.expire(b);
        (uint256 c,) = _disputed();
        vm.warp(block.timestamp + 1 days + 1);
        market.timeoutDispute(c);
        assertEq(_bal(submitter), before, "reward, fee and tax back every time");
        assertEq(market.jackpot(), 0, "nothing taxed");
        assertEq(_bal(address(market)), 0, "nothing held");
    }

    // ------------------------------------------------------------------ forced seeds and seals

    function test_commit_forced_seed() public {
        vm.expectRevert(IJobMarket.ZeroCommitment.selector);
        vm.prank(verifier1);
        market.commitForcedSeed(bytes32(0));
        vm.expectEmit(true, false, false, true, address(market));
        emit IJobMarket.ForcedSeedCommitted(verifier1, keccak256("a"), block.number);
        vm.prank(verifier1);
        market.commitForcedSeed(keccak256("a"));
        vm.roll(block.number + 5);
        vm.prank(verifier1);
        market.commitForcedSeed(keccak256("b"));
        ForcedSeed memory seed = market.forcedSeedOf(verifier1);
        assertEq(seed.commitment, keccak256("b"), "replaced");
        assertEq(seed.setAtBlock, block.number, "at this block");
    }

    function _seedAll(bytes32 secret) internal {
        address[3] memory vs = [verifier1, verifier2, verifier3];
        for (uint256 i; i < 3; ++i) {
            vm.prank(vs[i]);
            market.commitForcedSeed(keccak256(abi.encode(secret, vs[i])));
        }
    }

    /// The draw snapshots a seed set at or before its anchor block, and the seal is stored and
    /// extended by the report exactly as specified.
    function test_seal_snapshots_a_seed_set_by_the_anchor() public {
        _seedAll(keccak256("s"));
        (uint256 jobId, address verifier) = _verifying();
        ReportSeal memory seal = seals[jobId];
        assertEq(seal.forcedCommitment, keccak256(abi.encode(keccak256("s"), verifier)), "snapshotted");
        assertEq(market.reportSeal(jobId), keccak256(abi.encode(seal.assignSeed, seal.forcedCommitment)), "draw seal");
        _report(jobId, verifier, true);
        bytes32 probeRoot = seals[jobId].probeRoot;
        bytes32 stored = keccak256(abi.encode(keccak256(abi.encode(seal.assignSeed, seal.forcedCommitment)), probeRoot));
        assertEq(market.reportSeal(jobId), stored, "report seal");
    }

    /// A seed set after the anchor (when the draw entropy may be known) is not snapshotted: the job's
    /// forced commitment is 0 and it can never be claimed forced, whatever secret is revealed.
    function test_seed_set_after_the_anchor_is_not_snapshotted() public {
        uint256 jobId = _committed();
        vm.roll(block.number + 1); // the anchor's successor exists: its hash is the draw entropy
        _seedAll(keccak256("late"));
        address verifier = _assign(jobId);
        ReportSeal memory seal = seals[jobId];
        assertEq(seal.forcedCommitment, bytes32(0), "not snapshotted");
        assertEq(market.reportSeal(jobId), keccak256(abi.encode(seal.assignSeed, bytes32(0))), "stored with 0");
        _report(jobId, verifier, true);
        seal = seals[jobId];
        assertTrue(!market.isForced(keccak256("late"), verifier, seal), "cannot be forced");
        vm.prank(game);
        market.openDispute(jobId, stranger);
        vm.prank(game);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.NotForced.selector, jobId));
        market.payForcedError(jobId, seal, keccak256("late"), stranger);
    }

    /// Fuzz: isForced holds exactly for the committed secret and a draw under the rate; any other
    /// secret never passes, nor does a zero commitment.
    function testFuzz_is_forced_needs_the_secret_and_the_rate(bytes32 secret, bytes32 other, bytes32 assignSeed, address v)
        public
        view
    {
        vm.assume(other != secret);
        ReportSeal memory seal = ReportSeal(assignSeed, keccak256(abi.encode(secret, v)), keccak256("root"));
        bool draw = uint256(keccak256(abi.encode(secret, assignSeed))) % 10_000 < 100;
        assertTrue(market.isForced(secret, v, seal) == draw, "the committed secret: forced iff under the rate");
        assertTrue(!market.isForced(other, v, seal), "another secret never");
        assertTrue(!market.isForced(secret, address(uint160(v) ^ 1), seal), "another verifier never");
        seal.forcedCommitment = bytes32(0);
        assertTrue(!market.isForced(secret, v, seal), "no commitment never");
    }

    /// Fuzz: a forced claim on a draw that is not forced (99 % of seeds at 1 %) reverts NotForced.
    function testFuzz_forced_claim_on_an_unforced_draw_reverts(bytes32 secret) public {
        _seedAll(secret);
        (uint256 jobId, address verifier) = _verified();
        ReportSeal memory seal = seals[jobId];
        vm.assume(!market.isForced(secret, verifier, seal));
        vm.prank(game);
        market.openDispute(jobId, stranger);
        vm.prank(game);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.NotForced.selector, jobId));
        market.payForcedError(jobId, seal, secret, stranger);
    }

    /// A report of probeCount probes over the fixture trace (11 checkpoints, k = 8).
    function _probed() internal returns (uint256 jobId, ReportSeal memory seal, ProbeClaim[] memory claims) {
        address verifier;
        (jobId, verifier) = _verifying();
        seal = seals[jobId];
        bytes32[] memory hashes = new bytes32[](4);
        for (uint256 i; i < 4; ++i) {
            hashes[i] = ProbeTree.trueHash(1, i);
        }
        bytes32[] memory leaves;
        (claims, leaves) = ProbeTree.claims(seal.assignSeed, 11, hashes);
        seal.probeRoot = StandardTree.root(leaves);
        vm.prank(verifier);
        market.report(jobId, true, REPORT, seal.assignSeed, seal.forcedCommitment, ProbeTree.probes(claims));
        bytes32 drawSeal = keccak256(abi.encode(seal.assignSeed, seal.forcedCommitment));
        assertEq(market.reportSeal(jobId), keccak256(abi.encode(drawSeal, seal.probeRoot)), "same root on chain");
    }

    function _verifyProbe(uint256 jobId, ReportSeal memory seal, ProbeClaim memory c) internal view returns (bool) {
        return market.verifyProbe(jobId, seal, c.index, c.segment, c.step, c.stateHash, c.proof);
    }

    function test_verify_probe() public {
        (uint256 jobId, ReportSeal memory seal, ProbeClaim[] memory claims) = _probed();
        for (uint256 i; i < claims.length; ++i) {
            assertTrue(_verifyProbe(jobId, seal, claims[i]), "published probe");
            assertEq(claims[i].segment, market.probeSegment(seal.assignSeed, i, 11), "segment rule");
            assertTrue(claims[i].segment < 10, "a segment of the trace");
        }
        ProbeClaim memory p = claims[1];
        ProbeClaim memory c = ProbeClaim(p.index, (p.segment + 1) % 10, p.step, p.stateHash, p.proof);
        assertTrue(!_verifyProbe(jobId, seal, c), "wrong segment");
        c = ProbeClaim(p.index, p.segment, p.step + 1, p.stateHash, p.proof);
        assertTrue(!_verifyProbe(jobId, seal, c), "wrong step");
        c = ProbeClaim(p.index, p.segment, p.step, keccak256("lazy"), p.proof);
        assertTrue(!_verifyProbe(jobId, seal, c), "wrong state");
        c = ProbeClaim(0, market.probeSegment(seal.assignSeed, 0, 11), p.step, p.stateHash, p.proof);
        assertTrue(!_verifyProbe(jobId, seal, c), "another slot's leaf");
        ReportSeal memory bad = ReportSeal(keccak256("seed"), seal.forcedCommitment, seal.probeRoot);
        assertTrue(!_verifyProbe(jobId, bad, p), "wrong assign seed");
        bad = ReportSeal(seal.assignSeed, keccak256("fc"), seal.probeRoot);
        assertTrue(!_verifyProbe(jobId, bad, p), "wrong forced commitment");
        bad = ReportSeal(seal.assignSeed, seal.forcedCommitment, keccak256("root"));
        assertTrue(!_verifyProbe(jobId, bad, p), "wrong probe root");
        assertTrue(_verifyProbe(jobId, seal, p), "the original still verifies");
    }

    /// A slot at or past probeCount is rejected (the chain's tree has exactly probeCount slots).
    function test_verify_probe_rejects_slots_past_probe_count() public {
        (uint256 jobId, ReportSeal memory seal, ProbeClaim[] memory claims) = _probed();
        assertTrue(_verifyProbe(jobId, seal, claims[3]), "slot 3 of 4");
        ProbeClaim memory p = claims[3];
        ProbeClaim memory past =
            ProbeClaim(4, market.probeSegment(seal.assignSeed, 4, 11), p.step, p.stateHash, p.proof);
        assertTrue(!_verifyProbe(jobId, seal, past), "slot 4 >= probeCount");
    }

    function test_probe_segment_needs_a_segment() public {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.InvalidTrace.selector, bytes32(0), 1));
        market.probeSegment(bytes32(0), 0, 1);
        assertEq(market.probeSegment(keccak256("s"), 3, 2), 0, "one segment");
    }

    // ------------------------------------------------------------------ report disputes

    function test_report_dispute_hooks_are_game_only() public {
        (uint256 jobId,) = _verified();
        vm.prank(game);
        market.openDispute(jobId, stranger);
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.NotAuthorized.selector, stranger));
        market.resolveReportDispute(jobId, false, stranger);
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.NotAuthorized.selector, stranger));
        market.payForcedError(jobId, seals[jobId], bytes32(0), stranger);
    }

    function test_report_dispute_verifier_won_resumes_the_window() public {
        (uint256 jobId, address verifier) = _verified();
        vm.warp(block.timestamp + 10 minutes);
        vm.prank(game);
        market.openDispute(jobId, stranger);
        vm.warp(block.timestamp + 5 hours);
        vm.prank(game);
        market.resolveReportDispute(jobId, true, game);
        Job memory job = market.getJob(jobId);
        assertEq(uint8(job.state), uint8(JobState.Verified), "Verified");
        assertEq(job.deadline, block.timestamp + 50 minutes, "the time left");
        assertEq(_locked(verifier, Role.Verifier), VERIFIER_BOND, "bond still locked");
        assertEq(_bal(address(market)), ESCROW, "escrow kept");
    }

    function test_report_dispute_verifier_lost_is_slashed_and_redrawn() public {
        (uint256 jobId, address verifier) = _verified();
        vm.prank(game);
        market.openDispute(jobId, stranger);
        uint256 stake = _staked(verifier, Role.Verifier);
        uint256 gameBefore = _bal(game);
        vm.expectEmit(true, true, false, true, address(market));
        emit IJobMarket.ReportOverturned(jobId, verifier, VERIFIER_BOND);
        vm.prank(game);
        market.resolveReportDispute(jobId, false, game);
        assertEq(_staked(verifier, Role.Verifier), stake - VERIFIER_BOND, "whole bond");
        assertEq(_bal(game), gameBefore + VERIFIER_BOND, "to the recipient");
        Job memory job = market.getJob(jobId);
        assertEq(uint8(job.state), uint8(JobState.Committed), "Committed");
        assertEq(job.anchorBlock, block.number, "re-anchored");
        assertEq(_locked(solver, Role.Solver), SOLVER_BOND, "solver bond kept");
        for (uint256 i; i < 2; ++i) {
            // every later draw excludes the verifier that just lost, the solver and the submitter
            address next = _assign(jobId);
            assertTrue(next != verifier && next != address(0), "re-drawn without it");
            _report(jobId, next, true);
            vm.prank(game);
            market.openDispute(jobId, stranger);
            verifier = next;
            vm.prank(game);
            market.resolveReportDispute(jobId, false, game);
        }
        // the third overturned report used the last of maxVerifierDraws draws: refunded
        assertEq(uint8(_state(jobId)), uint8(JobState.Refunded), "draws exhausted");
        assertEq(_locked(solver, Role.Solver), 0, "solver released");
        assertEq(_bal(address(market)), 0, "escrow and tax refunded");
    }
}

/// @notice payForcedError at the market level, with every seeded draw forced (rate 100 %).
contract JobMarketForcedTest is Fixture {
    uint256 internal constant POOL = 1000 ether;
    bytes32 internal constant SECRET = keccak256("secret");

    function _params() internal pure override returns (MarketParams memory p) {
        p = super._params();
        p.forcedErrorRateBps = 10_000;
        p.jackpotShareBps = 3333;
    }

    function setUp() public {
        _setUpActors();
        vm.prank(stranger);
        market.fundJackpot(POOL);
        address[3] memory vs = [verifier1, verifier2, verifier3];
        for (uint256 i; i < 3; ++i) {
            vm.prank(vs[i]);
            market.commitForcedSeed(keccak256(abi.encode(SECRET, vs[i])));
        }
    }

    function test_pay_forced_error() public {
        (uint256 jobId, address verifier) = _verified();
        vm.warp(block.timestamp + 20 minutes);
        vm.prank(game);
        market.openDispute(jobId, stranger);
        uint256 payout = POOL * 3333 / 10_000;
        uint256 before = _bal(stranger);
        vm.prank(game);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.InvalidSeal.selector, jobId));
        market.payForcedError(jobId, ReportSeal(seals[jobId].assignSeed, seals[jobId].forcedCommitment, 0), SECRET, stranger);
        vm.prank(game);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.NotForced.selector, jobId));
        market.payForcedError(jobId, seals[jobId], keccak256("guess"), stranger);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.ForcedErrorCaught(jobId, verifier, stranger, payout, POOL - payout);
        vm.prank(game);
        assertEq(market.payForcedError(jobId, seals[jobId], SECRET, stranger), payout, "returned payout");
        assertEq(_bal(stranger), before + payout, "paid jackpot * share");
        assertEq(market.jackpot(), POOL - payout, "jackpot");
        assertEq(_bal(address(market)), POOL - payout + ESCROW, "balance == jackpot + escrow");
        assertEq(market.forcedSeedOf(verifier).commitment, bytes32(0), "revealed seed cleared");
        Job memory job = market.getJob(jobId);
        assertEq(uint8(job.state), uint8(JobState.Verified), "window resumes");
        assertEq(job.deadline, block.timestamp + 40 minutes, "with the time left");
        assertEq(_locked(verifier, Role.Verifier), market.verifierBond(REWARD), "bond kept");
    }

    /// A seed replaced after the draw is not the one revealed: it stays (the verifier's next draws use it).
    function test_pay_forced_error_keeps_a_newer_seed() public {
        (uint256 jobId, address verifier) = _verified();
        vm.prank(verifier);
        market.commitForcedSeed(keccak256("newer"));
        vm.prank(game);
        market.openDispute(jobId, stranger);
        vm.prank(game);
        market.payForcedError(jobId, seals[jobId], SECRET, stranger);
        assertEq(market.forcedSeedOf(verifier).commitment, keccak256("newer"), "newer seed kept");
    }

    /// The jackpot never pays more than a third of what it holds, however often it pays.
    function test_repeated_payouts_never_exceed_the_pool() public {
        uint256 paid;
        for (uint256 i; i < 5; ++i) {
            (uint256 jobId, address verifier) = _verified();
            vm.prank(game);
            market.openDispute(jobId, stranger);
            uint256 pool = market.jackpot();
            vm.prank(game);
            uint256 payout = market.payForcedError(jobId, seals[jobId], SECRET, stranger);
            assertEq(payout, pool * 3333 / 10_000, "share of the current pool");
            assertTrue(3 * payout <= pool, "at most a third");
            paid += payout;
            vm.prank(verifier);
            market.commitForcedSeed(keccak256(abi.encode(SECRET, verifier))); // re-seed for the next job
        }
        assertEq(market.jackpot(), POOL - paid, "pool == funded - paid");
    }
}

/// @notice Exposes ProbeLib.root (a calldata function) to the tests.
contract ProbeRootHarness {
    function root(Probe[] calldata probes) external pure returns (bytes32) {
        return ProbeLib.root(probes);
    }
}
