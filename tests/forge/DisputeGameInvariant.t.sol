// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {DisputeFixture} from "./handlers/DisputeFixture.sol";
import {DisputeHandler} from "./handlers/DisputeHandler.sol";
import {Ballot, Game, GameStatus} from "../../contracts/interfaces/IDisputeGame.sol";
import {Job, JobState, MarketParams, Role, StakeInfo} from "../../contracts/Types.sol";
import {LibPosition} from "../../contracts/libraries/LibPosition.sol";
import {RandomWalks} from "./utils/RandomWalks.sol";

/// @notice Invariants of StakeManager + JobMarket + DisputeGame together under random actors
///         (DisputeHandler: every entry point, wrong callers, wrong states, time and block jumps).
/// forge-config: default.invariant.runs = 24
/// forge-config: default.invariant.depth = 200
/// forge-config: default.invariant.fail-on-revert = true
contract DisputeGameInvariantTest is DisputeFixture, RandomWalks {
    DisputeHandler internal handler;

    /// Half of the seeded draws forced, so report games meet both forced and unforced verifiers.
    function _marketParams() internal pure override returns (MarketParams memory p) {
        p = super._marketParams();
        p.forcedErrorRateBps = 5000;
    }

    function setUp() public {
        _deploy();
        handler = new DisputeHandler(token, stakes, market, game);
        for (uint256 i; i < handler.ACTORS(); ++i) {
            assertTrue(token.transfer(handler.actor(i), FUND), "funded");
        }
        handler.seedStakes();
    }

    /// @notice Only the handler is fuzzed (its view helpers and the liveness driver excluded).
    function targetContracts() public view returns (address[] memory targets) {
        targets = new address[](1);
        targets[0] = address(handler);
    }

    struct FuzzSelector {
        address addr;
        bytes4[] selectors;
    }

    function targetSelectors() public view returns (FuzzSelector[] memory targets) {
        bytes4[] memory s = new bytes4[](32);
        s[0] = DisputeHandler.stake.selector;
        s[1] = DisputeHandler.requestUnstake.selector;
        s[2] = DisputeHandler.withdraw.selector;
        s[3] = DisputeHandler.postJob.selector;
        s[4] = DisputeHandler.claim.selector;
        s[5] = DisputeHandler.commit.selector;
        s[6] = DisputeHandler.assignVerifier.selector;
        s[7] = DisputeHandler.report.selector;
        s[8] = DisputeHandler.finalize.selector;
        s[9] = DisputeHandler.expire.selector;
        s[10] = DisputeHandler.timeoutSolver.selector;
        s[11] = DisputeHandler.timeoutVerifier.selector;
        s[12] = DisputeHandler.timeoutDispute.selector;
        s[13] = DisputeHandler.openGame.selector;
        s[14] = DisputeHandler.postMidpoint.selector;
        s[15] = DisputeHandler.answerMidpoint.selector;
        s[16] = DisputeHandler.timeoutClock.selector;
        s[17] = DisputeHandler.drawCommittee.selector;
        s[18] = DisputeHandler.commitVote.selector;
        s[19] = DisputeHandler.revealVote.selector;
        s[20] = DisputeHandler.settle.selector;
        s[21] = DisputeHandler.forfeitUnopened.selector;
        s[22] = DisputeHandler.warp.selector;
        s[23] = DisputeHandler.roll.selector;
        s[24] = DisputeHandler.openGame.selector; // twice: games are the point of this suite
        s[25] = DisputeHandler.openOnReport.selector;
        s[26] = DisputeHandler.openOnReport.selector; // twice: report games as often as the others
        s[27] = DisputeHandler.concedeForced.selector;
        s[28] = DisputeHandler.fundJackpot.selector;
        s[29] = DisputeHandler.commitForcedSeed.selector;
        s[30] = DisputeHandler.publishManifest.selector;
        s[31] = DisputeHandler.openOnManifest.selector;
        targets = new FuzzSelector[](1);
        targets[0] = FuzzSelector(address(handler), s);
    }

    function _live(GameStatus s) internal pure returns (bool) {
        return s >= GameStatus.DefenderToMove && s <= GameStatus.Arbitrating;
    }

    function _isFinal(JobState s) internal pure returns (bool) {
        return s == JobState.Finalized || s == JobState.Cancelled || s == JobState.Refunded;
    }

    /// @notice Token balance of the protocol == stakes + escrows + jackpot + game bonds + credits, each summed
    ///         from the records (an escrow is reward + fee + tax of a non-final job), and no token leaves
    ///         the actors + protocol (no payout to a stranger, none stuck).
    function invariant_tokens_are_conserved() public view {
        uint256 held;
        uint256 wallets;
        for (uint256 i; i < handler.ACTORS(); ++i) {
            address a = handler.actor(i);
            wallets += token.balanceOf(a);
            for (uint256 r; r < 3; ++r) {
                StakeInfo memory s = stakes.stakeOf(a, Role(r));
                assertTrue(s.locked <= s.staked, "locked <= staked");
                held += uint256(s.staked) + s.unbonding;
            }
        }
        assertEq(token.balanceOf(address(stakes)), held, "stake manager == sum of stakes");
        uint256 escrow;
        for (uint256 id = 1; id <= market.jobCount(); ++id) {
            Job memory job = market.getJob(id);
            if (!_isFinal(job.state)) {
                escrow += uint256(job.reward) + job.verifierFee + market.jackpotTax(job.reward, job.verifierFee);
            }
        }
        assertEq(token.balanceOf(address(market)), escrow + market.jackpot(), "market == sum of escrows + jackpot");
        uint256 live;
        for (uint256 id = 1; id <= game.gameCount(); ++id) {
            if (_live(game.getGame(id).status)) ++live;
        }
        assertEq(
            token.balanceOf(address(game)), live * game.params().challengeBond + game.totalCredit(), "game == live bonds + credits"
        );
        uint256 credits;
        for (uint256 i; i < handler.ACTORS(); ++i) {
            credits += game.credit(handler.actor(i));
        }
        assertEq(credits, game.totalCredit(), "the credits are the actors'");
        uint256 protocol =
            token.balanceOf(address(stakes)) + token.balanceOf(address(market)) + token.balanceOf(address(game));
        assertEq(wallets + protocol, handler.ACTORS() * FUND, "no token leaves actors + protocol");
    }

    /// @notice Locked stake is exactly the bonds in flight: job bonds, plus referee bonds of seats in
    ///         live arbitrations.
    function invariant_locks_are_the_bonds_in_flight() public view {
        for (uint256 i; i < handler.ACTORS(); ++i) {
            address a = handler.actor(i);
            uint256 solverBonds;
            uint256 verifierBonds;
            for (uint256 id = 1; id <= market.jobCount(); ++id) {
                Job memory job = market.getJob(id);
                if (job.solver == a && job.state >= JobState.Claimed && job.state <= JobState.Disputed) {
                    solverBonds += market.solverBond(job.reward);
                }
                if (job.verifier == a && job.state >= JobState.Verifying && job.state <= JobState.Disputed) {
                    verifierBonds += market.verifierBond(job.reward);
                }
            }
            for (uint256 id = 1; id <= game.gameCount(); ++id) {
                if (game.getGame(id).status != GameStatus.Arbitrating) continue;
                (Ballot b,) = game.ballotOf(id, a);
                if (b != Ballot.Vacant) verifierBonds += game.params().refereeBond;
            }
            assertEq(stakes.stakeOf(a, Role.Solver).locked, solverBonds, "solver locks");
            assertEq(stakes.stakeOf(a, Role.Verifier).locked, verifierBonds, "verifier locks");
            assertEq(stakes.stakeOf(a, Role.Whistleblower).locked, 0, "whistleblower locks");
        }
    }

    /// @notice A live game is its job's only game and its job is Disputed; bisection stays within
    ///         ceil(log2 steps) moves; a settled game never moves again.
    function invariant_games_are_consistent() public view {
        assertTrue(!handler.settledGameMoved(), "a settled game moved");
        for (uint256 id = 1; id <= game.gameCount(); ++id) {
            Game memory g = game.getGame(id);
            if (g.steps == 0) {
                // a manifest game: nothing to bisect, isolated at once
                assertTrue(g.lo == 0 && g.hi == 0 && g.moves == 0 && g.segment == 0, "manifest game");
            } else {
                assertTrue(g.lo < g.hi && g.hi <= g.steps, "lo < hi <= steps");
                assertTrue(g.moves + LibPosition.movesLeft(g.lo, g.hi) <= LibPosition.ceilLog2(g.steps), "move bound");
            }
            if (!_live(g.status)) continue;
            assertEq(game.activeGame(g.jobId), id, "the job's active game");
            assertTrue(market.getJob(g.jobId).state == JobState.Disputed, "job disputed");
        }
    }

    /// @notice Every conceded forced error paid exactly jackpot * share / 1e4 (share <= 1/3).
    function invariant_jackpot_pays_its_share() public view {
        assertTrue(!handler.badPayout(), "payout != jackpot * share / 1e4");
    }

    /// @notice Reach: a whistleblower game whose committee cannot be drawn (its seed left past the
    ///         256-block horizon) settles Undecided, the challenge bond goes to the jackpot and the job
    ///         goes back to Verified; the books hold (a random walk does not reach this in every run).
    function test_handler_reaches_an_undecided_whistleblower_game() public {
        handler.postJob(0, 100 ether);
        // Job seeds: 2 picks a job in the wanted state with its entitled caller (1 would send a
        // stranger), 3 (odd) makes openGame pick a Verified job.
        handler.claim(1, 2);
        handler.commit(2);
        handler.assignVerifier(2, 2); // rolls 1 + 2 % 3 = 3 blocks
        handler.report(2, 0); // verdict 0: a true pass
        assertTrue(market.getJob(1).state == JobState.Verified, "passed");
        // A non-party whistleblower opens a one-step game: isolated at once.
        Job memory job = market.getJob(1);
        uint256 wb;
        while (handler.actor(wb) == job.solver || handler.actor(wb) == job.verifier) ++wb;
        handler.openGame(3, wb, 0, 0); // steps bound to 1 + 0 % 64 = 1
        assertTrue(game.getGame(1).status == GameStatus.Isolated, "isolated");
        uint256 jackpotBefore = market.jackpot();
        handler.roll(296); // 296 % 8 == 0: up to 300 blocks, past the horizon
        handler.drawCommittee(2, 1);
        assertEq(handler.undecidedGames(), 1, "undecided");
        assertEq(handler.undecidedJobsResumed(), 1, "the challenged job goes on");
        assertEq(market.jackpot(), jackpotBefore + game.params().challengeBond, "bond to the jackpot");
        invariant_tokens_are_conserved();
        invariant_locks_are_the_bonds_in_flight();
        invariant_games_are_consistent();
    }

    /// @notice Reach: 20 walks of 1000 random handler actions (deeper than the fuzzer's runs, which
    ///         seldom get a job past its report) get every action done at least a quarter of what
    ///         these fixed walks reached when written (the argument is a regression bound, not a
    ///         fair-share one). Not counted: warp and roll (they always act), and revealVote and
    ///         forfeitUnopened, which these walks do not reach (DisputeGame.t.sol plays them, and the
    ///         liveness driver forfeits every unopened failed report after each fuzzer run).
    function test_random_walks_reach_every_action() public {
        bytes4[] memory actions = targetSelectors()[0].selectors;
        uint256[] memory reached = _walk(address(handler), actions, 20, 1000);
        // reached when written: 587 441 7 160 187 169 172 99 3 1 15 29 2 50 67 27 16 38 24 0 16 0 - - 50 26 26 6
        // 653 786 40 36, in targetSelectors() order
        uint256[32] memory quarter = [
            uint256(146), 110, 1, 40, 46, 42, 43, 24, 1, 1, 3, 7, 1, 12, 16, 6, 4, 9, 6, 0, 4, 0, 0, 0, 12, 6, 6, 1,
            163, 196, 10, 9
        ];
        uint256[] memory minimum = new uint256[](actions.length);
        for (uint256 a; a < actions.length; ++a) {
            minimum[a] = quarter[a];
        }
        _assertReach(actions, reached, minimum);
    }

    /// @notice Liveness: with everyone silent, permissionless calls end every game and every job;
    ///         then, once every credit is claimed, the game and the market hold nothing and no stake is locked.
    function afterInvariant() public {
        handler.driveAllToFinal(4 * uint256(market.params().maxVerifierDraws) + 12);
        invariant_tokens_are_conserved();
        invariant_locks_are_the_bonds_in_flight();
        invariant_games_are_consistent();
        for (uint256 i; i < handler.ACTORS(); ++i) {
            address a = handler.actor(i);
            if (game.credit(a) != 0) game.claimCredit(a);
        }
        invariant_tokens_are_conserved();
        assertEq(token.balanceOf(address(game)), 0, "every credit claimed: the game holds nothing");
        assertEq(token.balanceOf(address(market)), market.jackpot(), "market holds only the jackpot");
    }
}
