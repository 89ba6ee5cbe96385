// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {Fixture} from "../utils/Fixture.sol";
import {ProtocolHandler} from "./ProtocolHandler.sol";
import {RandomWalks} from "../utils/RandomWalks.sol";
import {StakeManager} from "../../../contracts/StakeManager.sol";
import {JobMarket} from "../../../contracts/JobMarket.sol";
import {VeriToken} from "../../../contracts/VeriToken.sol";
import {Job, JobState, MarketParams, Role, StakeInfo} from "../../../contracts/Types.sol";

/// @notice Invariants of StakeManager + JobMarket under random actors (ProtocolHandler).
///         fail-on-revert: the handler catches every revert the protocol may give, so any other
///         revert (a ghost sum underflowing, i.e. more tokens leaving than the rules allow) fails.
/// forge-config: default.invariant.runs = 32
/// forge-config: default.invariant.depth = 256
/// forge-config: default.invariant.fail-on-revert = true
contract ProtocolInvariantTest is Fixture, RandomWalks {
    ProtocolHandler internal handler;

    /// Half of the seeded draws forced and the largest share, so payForcedError succeeds often.
    function _params() internal pure override returns (MarketParams memory p) {
        p = super._params();
        p.forcedErrorRateBps = 5000;
        p.jackpotShareBps = 3333;
        p.fullReplayRateBps = 5000; // half of the commits fully replayed: longer windows, replay fees paid
        p.fullReplayFeeBps = 5000;
    }

    function setUp() public {
        _deploy();
        handler = new ProtocolHandler(token, stakes, market, game);
        for (uint256 i; i < handler.ACTORS(); ++i) {
            assertTrue(token.transfer(handler.actor(i), FUND), "funded");
        }
        handler.seedStakes();
    }

    struct FuzzSelector {
        address addr;
        bytes4[] selectors;
    }

    /// @notice Only the handler is fuzzed.
    function targetContracts() public view returns (address[] memory targets) {
        targets = new address[](1);
        targets[0] = address(handler);
    }

    /// @notice Every handler action but the set-up and the end-of-run liveness driver.
    function targetSelectors() public view returns (FuzzSelector[] memory targets) {
        bytes4[] memory s = new bytes4[](25);
        s[0] = ProtocolHandler.stake.selector;
        s[1] = ProtocolHandler.requestUnstake.selector;
        s[2] = ProtocolHandler.withdraw.selector;
        s[3] = ProtocolHandler.postJob.selector;
        s[4] = ProtocolHandler.claim.selector;
        s[5] = ProtocolHandler.commit.selector;
        s[6] = ProtocolHandler.assignVerifier.selector;
        s[7] = ProtocolHandler.report.selector;
        s[8] = ProtocolHandler.finalize.selector;
        s[9] = ProtocolHandler.cancel.selector;
        s[10] = ProtocolHandler.expire.selector;
        s[11] = ProtocolHandler.timeoutSolver.selector;
        s[12] = ProtocolHandler.timeoutVerifier.selector;
        s[13] = ProtocolHandler.timeoutDispute.selector;
        s[14] = ProtocolHandler.openDispute.selector;
        s[15] = ProtocolHandler.resolveDispute.selector;
        s[16] = ProtocolHandler.warp.selector;
        s[17] = ProtocolHandler.roll.selector;
        s[18] = ProtocolHandler.resolveReportDispute.selector;
        s[19] = ProtocolHandler.payForcedError.selector;
        s[20] = ProtocolHandler.fundJackpot.selector;
        s[21] = ProtocolHandler.commitForcedSeed.selector;
        s[22] = ProtocolHandler.challengeAvailability.selector;
        s[23] = ProtocolHandler.answerAvailability.selector;
        s[24] = ProtocolHandler.timeoutAvailability.selector;
        targets = new FuzzSelector[](1);
        targets[0] = FuzzSelector(address(handler), s);
    }

    /// @notice Token balance of the protocol == stakes (bonds included) + escrows + jackpot + open
    ///         availability deposits, by the handler's independent bookkeeping and by summing every
    ///         account and every job: the market holds reward + fee + tax of every non-final job, the
    ///         deposit of every DataChallenged job, plus the jackpot.
    function invariant_tokens_are_conserved() public view {
        assertEq(token.balanceOf(address(stakes)), handler.ghostStaked(), "stake manager balance");
        assertEq(market.jackpot(), handler.ghostJackpot(), "jackpot");
        assertEq(
            token.balanceOf(address(market)),
            handler.ghostEscrow() + handler.ghostJackpot() + handler.ghostDeposits(),
            "market balance"
        );
        uint256 held;
        for (uint256 i; i < handler.ACTORS(); ++i) {
            for (uint256 r; r < 3; ++r) {
                StakeInfo memory s = stakes.stakeOf(handler.actor(i), Role(r));
                assertTrue(s.locked <= s.staked, "locked <= staked");
                held += uint256(s.staked) + s.unbonding;
            }
        }
        assertEq(held, token.balanceOf(address(stakes)), "sum of stakes");
        uint256 escrow;
        uint256 n = market.jobCount();
        for (uint256 id = 1; id <= n; ++id) {
            Job memory job = market.getJob(id);
            if (!_isFinal(job.state)) {
                escrow += uint256(job.reward) + job.verifierFee + market.jackpotTax(job.reward, job.verifierFee)
                    + market.replayFee(job.reward);
            }
            if (job.state == JobState.DataChallenged) escrow += market.params().availabilityDeposit;
        }
        assertEq(escrow + market.jackpot(), token.balanceOf(address(market)), "sum of escrows + deposits + jackpot");
    }

    /// @notice Every forced-error payout was exactly jackpot * share / 1e4, at most a third of the pool.
    function invariant_jackpot_pays_its_share() public view {
        assertTrue(!handler.badPayout(), "payout != jackpot * share / 1e4");
    }

    /// @notice resolveDispute and resolveReportDispute return exactly what they slashed to the game
    ///         (DisputeGame pays out these amounts, not balance differences).
    function invariant_resolutions_return_what_they_slash() public view {
        assertTrue(!handler.badSlashAmount(), "returned != slashed to the game");
    }

    /// @notice Every locked amount is exactly the bonds of the jobs in flight.
    function invariant_locks_are_the_bonds_of_live_jobs() public view {
        uint256 n = market.jobCount();
        for (uint256 i; i < handler.ACTORS(); ++i) {
            address a = handler.actor(i);
            uint256 solverBonds;
            uint256 verifierBonds;
            for (uint256 id = 1; id <= n; ++id) {
                Job memory job = market.getJob(id);
                JobState s = job.state;
                bool challenged = s == JobState.DataChallenged; // a paused Verifying: both bonds locked
                if (job.solver == a && (challenged || s >= JobState.Claimed && s <= JobState.Disputed)) {
                    solverBonds += market.solverBond(job.reward);
                }
                if (job.verifier == a && (challenged || s >= JobState.Verifying && s <= JobState.Disputed)) {
                    verifierBonds += market.verifierBond(job.reward);
                }
            }
            assertEq(stakes.stakeOf(a, Role.Solver).locked, solverBonds, "solver locks");
            assertEq(stakes.stakeOf(a, Role.Verifier).locked, verifierBonds, "verifier locks");
            assertEq(stakes.stakeOf(a, Role.Whistleblower).locked, 0, "whistleblower locks");
        }
    }

    /// @notice No job is settled twice; no job is finalized twice.
    function invariant_no_job_settles_twice() public view {
        assertTrue(!handler.settledTwice(), "a final job moved again");
        uint256 n = market.jobCount();
        for (uint256 id = 1; id <= n; ++id) {
            assertTrue(handler.finalizations(id) <= 1, "finalized twice");
        }
    }

    /// @notice The draw tree weighs exactly the eligible verifier stakes.
    function invariant_draw_weights_match_stakes() public view {
        uint256 total;
        for (uint256 i; i < handler.ACTORS(); ++i) {
            total += stakes.verifierWeight(handler.actor(i));
        }
        assertEq(stakes.totalVerifierWeight(), total, "tree total");
    }

    /// @notice Liveness: once every party goes silent, timeouts and permissionless calls bring
    ///         every job to a final state within a bounded number of rounds, after which the
    ///         market holds nothing and no stake is locked.
    function afterInvariant() public {
        // Per job: Claimed -> Open -> Refunded, or Committed -> (Verifying -> Committed) x draws
        // -> Refunded, plus one re-anchor; DataChallenged -> Open -> Refunded: at most
        // 2 * maxVerifierDraws + 4 rounds.
        uint256 bound_ = 2 * uint256(market.params().maxVerifierDraws) + 4;
        handler.driveAllToFinal(bound_);
        invariant_tokens_are_conserved();
        invariant_locks_are_the_bonds_of_live_jobs();
        invariant_no_job_settles_twice();
        assertEq(token.balanceOf(address(market)), market.jackpot(), "market holds only the jackpot");
    }

    /// @notice Reach: 20 walks of 1000 random handler actions (deeper than the fuzzer's runs) get every
    ///         action done at least a quarter of what these fixed walks reached when written (a
    ///         regression bound). Not counted: warp and roll, which always act.
    function test_random_walks_reach_every_action() public {
        bytes4[] memory actions = targetSelectors()[0].selectors;
        uint256[] memory reached = _walk(address(handler), actions, 20, 1000);
        // reached when written, in targetSelectors() order:
        // 655 545 41 480 558 227 195 96 19 90 53 218 28 3 120 16 - - 50 56 767 923 57 27 21
        uint256[25] memory quarter = [
            uint256(163), 136, 10, 120, 139, 56, 48, 24, 4, 22, 13, 54, 7, 1, 30, 4, 0, 0, 12, 14, 191, 230, 14, 6, 5
        ];
        uint256[] memory minimum = new uint256[](actions.length);
        for (uint256 a; a < actions.length; ++a) {
            minimum[a] = quarter[a];
        }
        _assertReach(actions, reached, minimum);
    }

    /// @notice Reach: the handler's data-availability moves can play every path (a random walk does not
    ///         reach them in every run, so this scripted walk shows they are not vacuous): a challenge
    ///         answered with the committed checkpoint, a wrong answer refused, a challenge on an index the
    ///         solver cannot prove timed out; the conservation invariant holds throughout.
    function test_handler_reaches_the_availability_game() public {
        uint256 seed = _plainSeed();
        handler.postJob(0, 100 ether, 10 ether, 3600);
        handler.claim(1, seed);
        handler.commit(seed, 5);
        handler.assignVerifier(seed, 3); // rolls one block: too early (RandomnessNotReady)
        handler.assignVerifier(seed, 3); // one more: drawn
        assertEq(uint8(market.getJob(1).state), uint8(JobState.Verifying), "drawn");
        handler.challengeAvailability(seed, 1); // checkpoint 1
        handler.answerAvailability(seed, 2, 0); // how % 4 == 0: another job's bytes, refused
        assertEq(handler.availabilityAnswers(), 0, "a wrong answer is refused");
        handler.answerAvailability(seed, 2, 1);
        assertEq(handler.availabilityAnswers(), 1, "answered");
        invariant_tokens_are_conserved();
        handler.challengeAvailability(seed, 2); // checkpoint 2: committed, never provable
        invariant_tokens_are_conserved();
        handler.warp(2 hours);
        handler.timeoutAvailability(seed);
        assertEq(handler.availabilityTimeouts(), 1, "timed out");
        assertEq(handler.reached(JobState.DataChallenged), 2, "two challenges");
        assertEq(uint8(market.getJob(1).state), uint8(JobState.Open), "reopened");
        invariant_tokens_are_conserved();
        invariant_locks_are_the_bonds_of_live_jobs();
        // a whistleblower's challenge of a passed job, answered: back to its challenge window
        handler.postJob(0, 100 ether, 10 ether, 3600);
        uint256 second = seed + 1; // odd: _pick starts its scan of the two Open jobs at job 2
        while (second % 2 == 0 || !_plain(second)) ++second;
        handler.claim(1, second);
        handler.commit(second, 5);
        handler.assignVerifier(second, 3);
        handler.assignVerifier(second, 3);
        handler.report(second, 1);
        assertEq(uint8(market.getJob(2).state), uint8(JobState.Verified), "passed");
        uint256 w = 2; // a whistleblower that is neither the job's solver (actor 1) nor its verifier
        if (handler.actor(w) == market.getJob(2).verifier) ++w;
        handler.stake(w, 2, 50 ether); // role 2: Whistleblower
        uint256 audit = w << 8; // the caller is actor (seed >> 8) % 6
        while (!_plain(audit)) audit += 6 << 8;
        handler.challengeAvailability(audit, 130); // itemSeed >= 128: an audit, of checkpoint 130 % 3 = 1
        assertEq(uint8(market.getJob(2).state), uint8(JobState.DataChallenged), "a whistleblower challenged");
        invariant_locks_are_the_bonds_of_live_jobs();
        handler.timeoutAvailability(second);
        assertEq(handler.availabilityTimeouts(), 1, "not yet due");
        handler.warp(2 hours);
        handler.timeoutAvailability(second);
        assertEq(handler.availabilityTimeouts(), 2, "timed out to the whistleblower");
        invariant_tokens_are_conserved();
        invariant_locks_are_the_bonds_of_live_jobs();
    }

    /// @notice Reach: the handler's anchored-draw paths are played and keep the books: a draw left past
    ///         256 blocks (the solver's whole bond to the submitter, the job reopened), a draw whose
    ///         verifiers all asked to unstake after the anchor (a bond taken back from unbonding), and
    ///         a draw whose stake other locks took since the anchor (re-anchored, then refunded).
    function test_handler_reaches_the_anchored_draw_paths() public {
        uint256 seed = _plainSeed();
        handler.postJob(0, 100 ether, 10 ether, 3600);
        handler.claim(1, seed);
        handler.commit(seed, 5);
        handler.roll(296); // 296 % 8 == 0: up to 300 blocks
        handler.assignVerifier(seed, 3);
        assertEq(handler.drawsExpired(), 1, "expired");
        assertEq(uint8(market.getJob(1).state), uint8(JobState.Open), "reopened");
        invariant_tokens_are_conserved();
        invariant_locks_are_the_bonds_of_live_jobs();

        handler.claim(2, seed);
        handler.commit(seed, 5);
        handler.roll(1);
        for (uint256 i; i < handler.ACTORS(); ++i) {
            address a = handler.actor(i);
            uint256 free = stakes.freeStake(a, Role.Verifier);
            vm.prank(a);
            stakes.requestUnstake(Role.Verifier, SafeCast.toUint96(free)); // all of it, after the anchor
        }
        handler.assignVerifier(seed, 3);
        assertEq(uint8(market.getJob(1).state), uint8(JobState.Verifying), "drawn from the anchored stakes");
        assertEq(handler.drawsReclaimed(), 1, "bond taken back from unbonding");
        invariant_tokens_are_conserved();
        invariant_locks_are_the_bonds_of_live_jobs();

        for (uint256 i; i < handler.ACTORS(); ++i) {
            handler.stake(i, 1, 300 ether - 1); // 300 ether (bound: 1 + x % 300 ether), verifiers again
        }
        handler.postJob(0, 100 ether, 10 ether, 3600);
        handler.claim(3, seed);
        handler.commit(seed, 5);
        assertEq(uint8(market.getJob(2).state), uint8(JobState.Committed), "second job committed");
        vm.roll(block.number + 1);
        for (uint256 i; i < handler.ACTORS(); ++i) {
            address a = handler.actor(i);
            uint256 free = stakes.freeStake(a, Role.Verifier);
            vm.prank(game);
            if (free != 0) stakes.lock(a, Role.Verifier, free);
        }
        handler.assignVerifier(seed, 1);
        assertEq(handler.drawsReanchored(), 1, "re-anchored");
        for (uint256 i; i < handler.ACTORS(); ++i) {
            address a = handler.actor(i);
            uint256 extra = _locked(a, Role.Verifier) - (market.getJob(1).verifier == a ? market.verifierBond(100 ether) : 0);
            vm.prank(game);
            if (extra != 0) stakes.unlock(a, Role.Verifier, extra);
        }
        invariant_tokens_are_conserved();
        invariant_locks_are_the_bonds_of_live_jobs();
    }

    /// A job seed the handler neither redirects to a stranger nor to a random job.
    function _plainSeed() internal pure returns (uint256 seed) {
        while (!_plain(seed)) ++seed;
    }

    function _plain(uint256 seed) internal pure returns (bool) {
        return uint256(keccak256(abi.encode("stranger", seed))) % 8 != 0
            && uint256(keccak256(abi.encode("any", seed))) % 8 != 0;
    }

    function _isFinal(JobState s) internal pure returns (bool) {
        return s == JobState.Finalized || s == JobState.Cancelled || s == JobState.Refunded;
    }
}
