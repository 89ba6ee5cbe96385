// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Fixture} from "./utils/Fixture.sol";
import {JobMarket} from "../../contracts/JobMarket.sol";
import {IJobMarket} from "../../contracts/interfaces/IJobMarket.sol";
import {Job, JobState, MarketParams, Role} from "../../contracts/Types.sol";

/// @notice Full replay at random (issue 31): the coin, its bounds over many draws, that no call block
///         or re-anchor steers it, the longer report window, and who is paid the replay fee.
/// @dev Each job starts from the same base state with fresh entropy (vm.setBlockhash), as in
///      DrawFairness.t.sol; counts go to snapshots/FullReplay.json.
contract FullReplayTest is Fixture {
    uint16 internal constant RATE_BPS = 2500; // p = 1/4, the public default (deploy/params/public.json)
    uint16 internal constant FEE_BPS = 10_000; // the replay fee is the reward: a full replay is the job's compute
    uint256 internal constant DRAWS = 400;
    uint256 internal _base;

    function _params() internal pure override returns (MarketParams memory p) {
        p = super._params();
        p.solverBondBps = 40_000; // four times the reward (docs/incentives.md, "Full replay")
        p.fullReplayRateBps = RATE_BPS;
        p.fullReplayFeeBps = FEE_BPS;
    }

    function setUp() public {
        _setUpActors();
        _stake(solver, Role.Solver, 1000 ether); // 1500 VERI: a 400 VERI bond per job
        vm.roll(block.number + 1);
        _base = vm.snapshotState();
    }

    /// A committed job whose draw entropy is `entropy`, ready to draw.
    function _committedWith(bytes32 entropy) internal returns (uint256 jobId) {
        jobId = _committed();
        uint256 anchor = market.getJob(jobId).anchorBlock;
        vm.roll(anchor + 2);
        vm.setBlockhash(anchor + 1, entropy);
    }

    function _entropy(uint256 i) internal pure returns (bytes32) {
        return keccak256(abi.encode("full-replay entropy", i));
    }

    /// The first entropy index from `from` whose draw chooses (or not) a full replay.
    function _find(bool full, uint256 from) internal returns (uint256 i, uint256 jobId, address verifier) {
        for (i = from;; ++i) {
            vm.revertToState(_base);
            jobId = _committedWith(_entropy(i));
            verifier = _assign(jobId);
            if (market.isFullReplay(jobId) == full) return (i, jobId, verifier);
        }
    }

    function test_rate_is_within_bounds_over_many_draws() public {
        uint256 full;
        for (uint256 i; i < DRAWS; ++i) {
            vm.revertToState(_base);
            uint256 jobId = _committedWith(_entropy(i));
            _assign(jobId);
            bool chosen = market.isFullReplay(jobId);
            assertTrue(
                chosen == market.isFullReplayDraw(seals[jobId].assignSeed), "the flag is the coin of the assignSeed"
            );
            if (chosen) ++full;
        }
        // p = 0.25: mean 100, sd sqrt(400 * 0.25 * 0.75) = 8.66, 4 sd = 34.6.
        vm.snapshotValue("FullReplay", "fullOf400", full);
        assertTrue(full >= 100 - 35 && full <= 100 + 35, "full replays within 4 sd of p");
    }

    function test_the_call_block_does_not_steer_the_coin() public {
        for (uint256 i; i < 40; ++i) {
            vm.revertToState(_base);
            uint256 jobId = _committedWith(_entropy(i));
            uint256 anchor = market.getJob(jobId).anchorBlock;
            uint256 snap = vm.snapshotState();
            market.assignVerifier(jobId);
            bool first = market.isFullReplay(jobId);
            for (uint256 late = 1; late < 256; late += 63) {
                vm.revertToState(snap);
                vm.roll(anchor + 2 + late);
                vm.setBlockhash(anchor + 1, _entropy(i));
                market.assignVerifier(jobId);
                assertTrue(market.isFullReplay(jobId) == first, "any call block in the horizon gives the same coin");
            }
        }
    }

    function test_a_full_replay_gets_the_training_time_to_report() public {
        (, uint256 jobId,) = _find(true, 0);
        Job memory job = market.getJob(jobId);
        assertEq(job.deadline, block.timestamp + 1 hours + COMMIT_WINDOW, "reportWindow + commitWindow");
        (, uint256 sampled,) = _find(false, 0);
        assertEq(market.getJob(sampled).deadline, block.timestamp + 1 hours, "a sampled job: reportWindow");
    }

    function test_post_escrows_the_replay_fee() public {
        uint256 before = _bal(submitter);
        _post();
        assertEq(market.replayFee(REWARD), REWARD, "fee bps 1e4: the reward");
        assertEq(before - _bal(submitter), ESCROW + REWARD, "reward + fee + tax + replay fee");
    }

    function test_a_full_replay_is_paid_the_replay_fee() public {
        (, uint256 jobId, address verifier) = _find(true, 0);
        _reportAndFinalizePaid(jobId, verifier);
    }

    function test_a_sampled_job_refunds_the_replay_fee() public {
        (, uint256 jobId, address verifier) = _find(false, 0);
        _report(jobId, verifier, true);
        vm.warp(block.timestamp + 1 hours + 1);
        uint256 v = _bal(verifier);
        uint256 s = _bal(submitter);
        market.finalize(jobId);
        assertEq(_bal(verifier) - v, FEE, "the fee only");
        assertEq(_bal(submitter) - s, REWARD, "the replay fee back");
    }

    function test_a_slashed_full_replayer_is_not_paid_the_replay_fee() public {
        (, uint256 jobId, address verifier) = _find(true, 0);
        _report(jobId, verifier, false); // a false accusation
        uint256 s = _bal(submitter);
        vm.prank(game);
        market.resolveDispute(jobId, true, true, solver);
        assertTrue(_state(jobId) == JobState.Finalized, "finalized");
        assertEq(_bal(submitter) - s, FEE + REWARD, "the fee and the replay fee back to the submitter");
    }

    function test_a_timeout_redraw_keeps_the_full_replay() public {
        (, uint256 jobId,) = _find(true, 0);
        vm.warp(block.timestamp + 1 hours + COMMIT_WINDOW + 1);
        market.timeoutVerifier(jobId);
        Job memory job = market.getJob(jobId);
        vm.roll(job.anchorBlock + 2);
        vm.setBlockhash(job.anchorBlock + 1, keccak256("another entropy"));
        market.assignVerifier(jobId);
        assertTrue(market.isFullReplay(jobId), "sticky for the commit");
        assertEq(market.getJob(jobId).deadline, block.timestamp + 1 hours + COMMIT_WINDOW, "the longer window again");
    }

    function test_a_caught_cheat_clears_the_choice_and_keeps_the_fee_escrowed() public {
        (, uint256 jobId, address verifier) = _find(true, 0);
        _report(jobId, verifier, false);
        uint256 held = _bal(address(market));
        vm.prank(game);
        uint256 slashed = market.resolveDispute(jobId, false, false, verifier);
        assertEq(slashed, 400 ether, "the solver's whole bond, four times the reward");
        assertTrue(_state(jobId) == JobState.Open, "reopened");
        assertTrue(!market.isFullReplay(jobId), "a new commit draws again");
        assertEq(_bal(address(market)), held, "reward, fee, tax and replay fee stay for the redo");
    }

    /// A caller who double-books the drawn verifier after seeing a full-replay coin gets a re-anchor,
    /// not a fresh coin: the commit stays chosen and the later draw gives the full window.
    function test_a_reanchor_cannot_take_a_full_replay_back() public {
        uint256 i;
        for (;; ++i) {
            vm.revertToState(_base);
            uint256 probe = _committedWith(_entropy(i));
            _assign(probe);
            if (market.isFullReplay(probe)) break;
        }
        vm.revertToState(_base);
        uint256 jobId = _committed();
        uint256 anchor = market.getJob(jobId).anchorBlock;
        vm.roll(anchor + 1);
        vm.startPrank(game); // other draws take every verifier's stake after the anchor
        stakes.lock(verifier1, Role.Verifier, 100 ether);
        stakes.lock(verifier2, Role.Verifier, 200 ether);
        stakes.lock(verifier3, Role.Verifier, 300 ether);
        vm.stopPrank();
        vm.roll(anchor + 2);
        vm.setBlockhash(anchor + 1, _entropy(i));
        market.assignVerifier(jobId);
        assertTrue(market.getJob(jobId).state == JobState.Committed, "re-anchored");
        assertTrue(market.isFullReplay(jobId), "the coin of the re-anchored attempt counts");
        vm.startPrank(game);
        stakes.unlock(verifier3, Role.Verifier, 300 ether);
        vm.stopPrank();
        Job memory job = market.getJob(jobId);
        vm.roll(job.anchorBlock + 2);
        // A fresh entropy whose own coin is tails.
        for (uint256 j;; ++j) {
            bytes32 e = keccak256(abi.encode("tails", j));
            if (!market.isFullReplayDraw(keccak256(abi.encode(keccak256(abi.encode(e, jobId, job.draws)))))) {
                vm.setBlockhash(job.anchorBlock + 1, e);
                break;
            }
        }
        market.assignVerifier(jobId);
        assertTrue(market.getJob(jobId).state == JobState.Verifying, "drawn");
        assertTrue(market.isFullReplay(jobId), "still chosen");
        assertEq(market.getJob(jobId).deadline, block.timestamp + 1 hours + COMMIT_WINDOW, "the full window");
    }

    function test_cancel_returns_the_replay_fee() public {
        uint256 before = _bal(submitter);
        uint256 jobId = _post();
        vm.prank(submitter);
        market.cancel(jobId);
        assertEq(_bal(submitter), before, "all of it");
    }

    // ------------------------------------------------------------------ posted for full replay

    /// A job posted for full replay (a tolerance-mode spec), claimed and committed by `by`.
    function _committedFull(address by) internal returns (uint256 jobId) {
        vm.prank(submitter);
        jobId = market.postJob(SPEC, REWARD, FEE, COMMIT_WINDOW, true);
        _claimAndCommit(jobId, by);
    }

    function _claimAndCommit(uint256 jobId, address by) internal {
        vm.prank(by);
        market.claim(jobId);
        vm.prank(by);
        market.commit(jobId, ROOT, 11, MODEL, MANIFEST);
    }

    /// Draws the committed job's verifier from an entropy whose own coin is tails (heads when `heads`).
    function _drawWithCoin(uint256 jobId, bool heads) internal returns (address verifier) {
        Job memory job = market.getJob(jobId);
        vm.roll(job.anchorBlock + 2);
        for (uint256 j;; ++j) {
            bytes32 e = keccak256(abi.encode("coin", heads, j));
            if (market.isFullReplayDraw(keccak256(abi.encode(keccak256(abi.encode(e, jobId, job.draws))))) == heads) {
                vm.setBlockhash(job.anchorBlock + 1, e);
                break;
            }
        }
        verifier = _assign(jobId);
    }

    function test_post_emits_the_full_replay_flag() public {
        vm.expectEmit(true, true, false, true, address(market));
        emit IJobMarket.JobPosted(
            1, submitter, SPEC, REWARD, FEE, COMMIT_WINDOW, uint32(block.timestamp + 1 days), true
        );
        vm.prank(submitter);
        uint256 jobId = market.postJob(SPEC, REWARD, FEE, COMMIT_WINDOW, true);
        assertTrue(market.isFullReplay(jobId), "full replay from the post on");
        assertTrue(!market.isFullReplay(_post()), "an unflagged job is not, before its draw");
    }

    function test_a_posted_full_replay_is_chosen_at_every_draw() public {
        uint256 tails;
        for (uint256 i; i < 40; ++i) {
            vm.revertToState(_base);
            vm.prank(submitter);
            uint256 jobId = market.postJob(SPEC, REWARD, FEE, COMMIT_WINDOW, true);
            _claimAndCommit(jobId, solver);
            uint256 anchor = market.getJob(jobId).anchorBlock;
            vm.roll(anchor + 2);
            vm.setBlockhash(anchor + 1, _entropy(i));
            _assign(jobId);
            if (!market.isFullReplayDraw(seals[jobId].assignSeed)) ++tails;
            assertTrue(market.isFullReplay(jobId), "whatever the coin");
            assertEq(market.getJob(jobId).deadline, block.timestamp + 1 hours + COMMIT_WINDOW, "the full window");
        }
        assertTrue(tails > 0, "some coins were tails");
    }

    function test_an_unflagged_job_still_follows_the_coin() public {
        uint256 jobId = _committed();
        _drawWithCoin(jobId, false);
        assertTrue(!market.isFullReplay(jobId), "tails: sampled");
        assertEq(market.getJob(jobId).deadline, block.timestamp + 1 hours, "reportWindow");
        vm.revertToState(_base);
        jobId = _committed();
        _drawWithCoin(jobId, true);
        assertTrue(market.isFullReplay(jobId), "heads: full");
    }

    /// Reopened after a caught cheat, the job is still posted for full replay: the redo's draw, tails
    /// too, is a full replay with the full window, and its verifier is paid the replay fee.
    function test_a_posted_full_replay_is_kept_when_the_job_reopens() public {
        uint256 jobId = _committedFull(solver);
        address verifier = _drawWithCoin(jobId, false);
        assertEq(market.getJob(jobId).deadline, block.timestamp + 1 hours + COMMIT_WINDOW, "the full window");
        _report(jobId, verifier, false);
        vm.prank(game);
        market.resolveDispute(jobId, false, false, verifier);
        assertTrue(_state(jobId) == JobState.Open, "reopened");
        assertTrue(market.isFullReplay(jobId), "kept on reopen");
        _claimAndCommit(jobId, solver2);
        verifier = _drawWithCoin(jobId, false);
        assertTrue(market.isFullReplay(jobId), "the redo is a full replay, tails too");
        assertEq(market.getJob(jobId).deadline, block.timestamp + 1 hours + COMMIT_WINDOW, "the full window again");
        _reportAndFinalizePaid(jobId, verifier);
    }

    function test_a_posted_full_replay_keeps_it_across_a_timeout_redraw() public {
        uint256 jobId = _committedFull(solver);
        _drawWithCoin(jobId, false);
        vm.warp(block.timestamp + 1 hours + COMMIT_WINDOW + 1);
        market.timeoutVerifier(jobId);
        _drawWithCoin(jobId, false);
        assertTrue(market.isFullReplay(jobId), "still full");
        assertEq(market.getJob(jobId).deadline, block.timestamp + 1 hours + COMMIT_WINDOW, "the full window");
    }

    function test_a_slashed_posted_full_replayer_is_not_paid_the_replay_fee() public {
        uint256 jobId = _committedFull(solver);
        address verifier = _drawWithCoin(jobId, false);
        _report(jobId, verifier, false); // a false accusation
        uint256 s = _bal(submitter);
        vm.prank(game);
        market.resolveDispute(jobId, true, true, solver);
        assertEq(_bal(submitter) - s, FEE + REWARD, "the fee and the replay fee back to the submitter");
    }

    function test_constructor_bounds() public {
        MarketParams memory p = _params();
        p.fullReplayRateBps = 10_001;
        vm.expectRevert(_withName(IJobMarket.InvalidParameter.selector, "fullReplayRateBps"));
        new JobMarket(token, stakes, p);
        p.fullReplayRateBps = 10_000;
        p.solverBondBps = type(uint16).max;
        JobMarket m = new JobMarket(token, stakes, p);
        assertEq(m.params().fullReplayRateBps, 10_000, "readable");
        assertEq(m.solverBond(100 ether), 655.35 ether, "a bond above the reward is allowed");
        assertTrue(m.isFullReplayDraw(keccak256("any")), "p = 1: every draw");
        p.fullReplayRateBps = 0;
        assertTrue(!new JobMarket(token, stakes, p).isFullReplayDraw(keccak256("any")), "p = 0: none");
    }

    /// A passing report on a full replay, finalized: the verifier is paid its fee and the replay fee,
    /// nothing goes back to the submitter.
    function _reportAndFinalizePaid(uint256 jobId, address verifier) internal {
        _report(jobId, verifier, true);
        vm.warp(block.timestamp + 1 hours + 1);
        uint256 v = _bal(verifier);
        uint256 s = _bal(submitter);
        vm.expectEmit(true, true, false, true, address(market));
        emit IJobMarket.ReplayFeePaid(jobId, verifier, REWARD, true);
        market.finalize(jobId);
        assertEq(_bal(verifier) - v, FEE + REWARD, "fee + replay fee");
        assertEq(_bal(submitter), s, "nothing back");
    }
}

/// @notice A job posted for full replay on a market whose coin never chooses one (p = 0, the devnet's):
///         every draw is a full replay all the same, and an unflagged job is never one.
contract PostedFullReplayAtRateZeroTest is Fixture {
    function _params() internal pure override returns (MarketParams memory p) {
        p = super._params();
        p.fullReplayFeeBps = 5000;
    }

    function setUp() public {
        _setUpActors();
        vm.roll(block.number + 1);
    }

    function test_posted_is_fully_replayed_and_paid_unflagged_never() public {
        assertEq(market.params().fullReplayRateBps, 0, "the coin never chooses");
        uint256 plain = _committed();
        address pv = _assign(plain);
        assertTrue(!market.isFullReplay(plain), "unflagged: sampled");
        assertEq(market.getJob(plain).deadline, block.timestamp + 1 hours, "reportWindow");
        vm.prank(submitter);
        uint256 jobId = market.postJob(SPEC, REWARD, FEE, COMMIT_WINDOW, true);
        vm.prank(solver2);
        market.claim(jobId);
        vm.prank(solver2);
        market.commit(jobId, ROOT, 11, MODEL, MANIFEST);
        address verifier = _assign(jobId);
        assertTrue(market.isFullReplay(jobId), "posted: full");
        assertEq(market.getJob(jobId).deadline, block.timestamp + 1 hours + COMMIT_WINDOW, "the full window");
        _report(plain, pv, true);
        _report(jobId, verifier, true);
        vm.warp(block.timestamp + 1 hours + COMMIT_WINDOW + 1);
        uint256 s = _bal(submitter);
        uint256 v = _bal(verifier);
        market.finalize(jobId);
        assertEq(_bal(verifier) - v, FEE + REWARD / 2, "fee + replay fee");
        market.finalize(plain);
        assertEq(_bal(submitter) - s, REWARD / 2, "the unflagged job's replay fee back");
    }
}
