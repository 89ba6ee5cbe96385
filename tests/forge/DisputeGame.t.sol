// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {DisputeFixture, MANIFEST_CID, TraceTree} from "./handlers/DisputeFixture.sol";
import {DisputeGame} from "../../contracts/DisputeGame.sol";
import {
    Ballot,
    Game,
    GameParams,
    GameStatus,
    IDisputeGame,
    SettleReason
} from "../../contracts/interfaces/IDisputeGame.sol";
import {ICredits} from "../../contracts/interfaces/ICredits.sol";
import {IJobMarket} from "../../contracts/interfaces/IJobMarket.sol";
import {Job, JobState, MarketParams, Probe, ReportSeal, Role} from "../../contracts/Types.sol";
import {JobMarket} from "../../contracts/JobMarket.sol";
import {LibPosition} from "../../contracts/libraries/LibPosition.sol";
import {TraceLib} from "../../contracts/libraries/TraceLib.sol";

/// @notice Every move of the dispute game and its access control, the clocks, the committee, the
///         fallbacks and the money, on the real JobMarket and StakeManager.
contract DisputeGameTest is DisputeFixture {
    uint256 internal constant SOLVER_BOND = 50 ether;
    uint256 internal constant VERIFIER_BOND = 20 ether;
    uint256 internal constant CHALLENGE_BOND = 20 ether;
    uint256 internal constant REFEREE_BOND = 10 ether;
    uint256 internal constant REFEREE_FEE = 2 ether;
    uint256 internal constant SEGMENT = 3;
    uint256 internal constant K = 50;

    function setUp() public {
        _setUpProtocol();
    }

    function _err(bytes4 selector, uint256 a) internal pure returns (bytes memory) {
        return abi.encodeWithSelector(selector, a);
    }

    function _err(bytes4 selector, uint256 a, uint256 b) internal pure returns (bytes memory) {
        return abi.encodeWithSelector(selector, a, b);
    }

    function _notAuthorized(address caller) internal pure returns (bytes memory) {
        return abi.encodeWithSelector(IDisputeGame.NotAuthorized.selector, caller);
    }

    function _wrongStatus(uint256 gameId, GameStatus have, GameStatus want) internal pure returns (bytes memory) {
        return abi.encodeWithSelector(IDisputeGame.WrongStatus.selector, gameId, have, want);
    }

    /// The game holds exactly the challenge bonds of its unsettled games and the credits not claimed.
    function _assertGameHoldsLiveBonds(uint256 live) internal view {
        assertEq(token.balanceOf(address(game)), live * CHALLENGE_BOND + game.totalCredit(), "game balance == live bonds + credits");
    }

    /// A failed job with a game opened by its verifier, bisected to an isolated step.
    function _isolatedByVerifier() internal returns (uint256 jobId, address verifier, uint256 gameId) {
        (jobId, verifier) = _failed();
        gameId = _open(verifier, jobId, SEGMENT, K);
        _bisect(gameId, 20);
    }

    /// A passed job with a game opened by the whistleblower, bisected to an isolated step.
    function _isolatedByWhistleblower() internal returns (uint256 jobId, address verifier, uint256 gameId) {
        (jobId, verifier) = _passed();
        gameId = _open(whistleblower, jobId, SEGMENT, K);
        _bisect(gameId, 20);
    }

    // ------------------------------------------------------------------ deployment

    function test_parameters_are_readable() public view {
        GameParams memory p = game.params();
        assertEq(p.challengeBond, CHALLENGE_BOND, "challengeBond");
        assertEq(p.committeeSize, 3, "committeeSize");
        assertEq(p.clockTime, 1 hours, "clockTime");
        assertEq(game.maxGameDuration(), 2 hours + 30 minutes + 2 hours, "maxGameDuration");
        assertEq(address(game.market()), address(market), "market");
        assertEq(address(game.stakeManager()), address(stakes), "stakeManager");
        assertEq(address(game.token()), address(token), "token");
        assertEq(game.maxMoves(50), 6, "maxMoves(50)");
        assertEq(game.maxMoves(1000), 10, "maxMoves(1000)");
    }

    /// Expect the constructor's InvalidParameter(name): the literal converts to bytes32 implicitly, as in the contract.
    function _expectInvalidParameter(bytes32 name) internal {
        vm.expectRevert(abi.encodeWithSelector(IDisputeGame.InvalidParameter.selector, name));
    }

    function test_constructor_rejects_an_even_committee() public {
        GameParams memory p = _gameParams();
        p.committeeSize = 4;
        _expectInvalidParameter("committeeSize");
        new DisputeGame(market, p);
    }

    function test_constructor_rejects_a_committee_the_draw_cannot_exclude() public {
        GameParams memory p = _gameParams();
        p.committeeSize = 15; // 3 + 15 > MAX_EXCLUDED (16)
        p.refereeFee = 1 ether;
        _expectInvalidParameter("committeeSize");
        new DisputeGame(market, p);
    }

    function test_constructor_rejects_fees_the_challenge_bond_cannot_cover() public {
        GameParams memory p = _gameParams();
        p.refereeFee = 7 ether; // 3 * 7 > 20
        _expectInvalidParameter("refereeFee");
        new DisputeGame(market, p);
    }

    /// A whistleblower that wins a report game by verdict gets challengeBond + the verifier bond - the
    /// majority's fees: the fees must stay below the smallest verifier bond (10 VERI here), even when
    /// the challenge bond covers them.
    function test_constructor_rejects_fees_a_report_game_winner_would_not_recover() public {
        GameParams memory p = _gameParams();
        p.refereeFee = 4 ether; // 3 * 4 <= 20 (challenge bond) but >= 10 (minVerifierBond)
        _expectInvalidParameter("refereeFee");
        new DisputeGame(market, p);
        p.committeeSize = 5;
        p.refereeFee = 2 ether; // 5 * 2 == 10: the winner would net nothing
        _expectInvalidParameter("refereeFee");
        new DisputeGame(market, p);
        p.refereeFee = 1.99 ether; // 9.95 < 10
        new DisputeGame(market, p);
    }

    function test_constructor_rejects_a_game_longer_than_the_dispute_window() public {
        GameParams memory p = _gameParams();
        p.clockTime = 12 hours; // 1h open + 24h + 2.5h >= 1 day
        _expectInvalidParameter("disputeWindow");
        new DisputeGame(market, p);
    }

    // ------------------------------------------------------------------ opening

    function test_failing_verifier_opens_with_bond_and_defender_clock_runs() public {
        (uint256 jobId, address verifier) = _failed();
        uint256 before = _bal(verifier);
        uint256 gameId = _open(verifier, jobId, SEGMENT, K);
        assertEq(before - _bal(verifier), CHALLENGE_BOND, "bond paid");
        _assertGameHoldsLiveBonds(1);
        Game memory g = game.getGame(gameId);
        assertTrue(g.status == GameStatus.DefenderToMove, "solver to move");
        assertTrue(g.byVerifier, "by verifier");
        assertEq(g.defender, solver, "solver");
        assertEq(g.challenger, verifier, "challenger");
        assertEq(g.segment, SEGMENT, "segment");
        assertEq(g.lo, 0, "lo");
        assertEq(g.hi, K, "hi");
        assertEq(g.agreedHash, TraceTree.stateHash(TRACE, SEGMENT), "agreed = checkpoint j");
        assertEq(g.disputedHash, TraceTree.stateHash(TRACE, SEGMENT + 1), "disputed = checkpoint j+1");
        assertEq(game.activeGame(jobId), gameId, "active game");
        assertEq(game.nextMidpoint(gameId), 25, "first midpoint");
        (uint256 s, uint256 c) = game.clocks(gameId);
        assertEq(s, 1 hours, "solver clock");
        assertEq(c, 1 hours, "challenger clock");
    }

    function test_whistleblower_opens_in_the_challenge_window_and_disputes_the_job() public {
        (uint256 jobId,) = _passed();
        uint256 gameId = _open(whistleblower, jobId, SEGMENT, K);
        Job memory job = market.getJob(jobId);
        assertTrue(job.state == JobState.Disputed, "job disputed");
        assertEq(job.challenger, whistleblower, "market challenger");
        assertTrue(!game.getGame(gameId).byVerifier, "whistleblower game");
        _assertGameHoldsLiveBonds(1);
    }

    function test_open_on_a_failed_job_by_anyone_but_its_verifier_reverts() public {
        (uint256 jobId,) = _failed();
        vm.expectRevert(_notAuthorized(whistleblower));
        _open(whistleblower, jobId, SEGMENT, K);
    }

    function test_open_on_a_passed_job_without_whistleblower_stake_reverts() public {
        (uint256 jobId,) = _passed();
        vm.expectRevert(abi.encodeWithSelector(IDisputeGame.NotWhistleblower.selector, stranger));
        _open(stranger, jobId, SEGMENT, K);
    }

    function test_open_on_a_passed_job_by_its_solver_or_verifier_reverts() public {
        (uint256 jobId, address verifier) = _passed();
        _stake(verifier, Role.Whistleblower, 50 ether);
        vm.expectRevert(_notAuthorized(solver));
        _open(solver, jobId, SEGMENT, K);
        vm.expectRevert(_notAuthorized(verifier));
        _open(verifier, jobId, SEGMENT, K);
    }

    function test_open_after_the_challenge_window_reverts() public {
        (uint256 jobId,) = _passed();
        vm.warp(block.timestamp + 1 hours + 1);
        vm.expectRevert(_err(IDisputeGame.NotChallengeable.selector, jobId));
        _open(whistleblower, jobId, SEGMENT, K);
    }

    function test_open_on_a_job_without_a_report_reverts() public {
        (uint256 jobId, address verifier) = _verifying();
        vm.expectRevert(_err(IDisputeGame.NotChallengeable.selector, jobId));
        _open(verifier, jobId, SEGMENT, K);
    }

    function test_failing_verifier_opening_after_its_open_window_reverts() public {
        (uint256 jobId, address verifier) = _failed();
        uint256 deadline = game.openDeadline(jobId);
        assertEq(deadline, block.timestamp + 1 hours, "open deadline");
        vm.warp(deadline + 1);
        vm.expectRevert(_err(IDisputeGame.OpenWindowPassed.selector, jobId, deadline));
        _open(verifier, jobId, SEGMENT, K);
    }

    function test_open_with_a_state_hash_not_in_the_trace_reverts() public {
        (uint256 jobId, address verifier) = _failed();
        bytes32 forged = keccak256("forged");
        vm.expectRevert(abi.encodeWithSelector(IDisputeGame.InvalidCheckpointProof.selector, SEGMENT + 1, forged));
        vm.prank(verifier);
        game.open(
            jobId,
            SEGMENT,
            K,
            TraceTree.stateHash(TRACE, SEGMENT),
            TraceTree.proof(traceLeaves, SEGMENT),
            forged,
            TraceTree.proof(traceLeaves, SEGMENT + 1)
        );
    }

    function test_open_with_a_proof_of_another_index_reverts() public {
        (uint256 jobId, address verifier) = _failed();
        bytes32 start = TraceTree.stateHash(TRACE, SEGMENT);
        vm.expectRevert(abi.encodeWithSelector(IDisputeGame.InvalidCheckpointProof.selector, SEGMENT, start));
        vm.prank(verifier);
        game.open(
            jobId,
            SEGMENT,
            K,
            start,
            TraceTree.proof(traceLeaves, SEGMENT + 1),
            TraceTree.stateHash(TRACE, SEGMENT + 1),
            TraceTree.proof(traceLeaves, SEGMENT + 1)
        );
    }

    function test_open_beyond_the_last_segment_reverts() public {
        (uint256 jobId, address verifier) = _failed();
        vm.expectRevert(_err(IDisputeGame.InvalidSegment.selector, CHECKPOINTS - 1, CHECKPOINTS));
        vm.prank(verifier);
        game.open(
            jobId, CHECKPOINTS - 1, K, bytes32(uint256(1)), new bytes32[](0), bytes32(uint256(2)), new bytes32[](0)
        );
        _open(verifier, jobId, CHECKPOINTS - 2, K); // the last segment is fine
    }

    function test_open_with_steps_out_of_range_reverts() public {
        (uint256 jobId, address verifier) = _failed();
        vm.expectRevert(_err(IDisputeGame.InvalidSteps.selector, 0, 100_000));
        _open(verifier, jobId, SEGMENT, 0);
        vm.expectRevert(_err(IDisputeGame.InvalidSteps.selector, 100_001, 100_000));
        _open(verifier, jobId, SEGMENT, 100_001);
    }

    function test_second_game_on_a_job_reverts() public {
        (uint256 jobId, address verifier) = _failed();
        uint256 gameId = _open(verifier, jobId, SEGMENT, K);
        vm.expectRevert(_err(IDisputeGame.GameExists.selector, jobId, gameId));
        _open(verifier, jobId, SEGMENT + 1, K);
    }

    function test_single_step_segment_is_isolated_at_opening() public {
        (uint256 jobId, address verifier) = _failed();
        uint256 gameId = _open(verifier, jobId, SEGMENT, 1);
        Game memory g = game.getGame(gameId);
        assertTrue(g.status == GameStatus.Isolated, "isolated");
        assertEq(g.anchorBlock, block.number, "anchor block");
        assertEq(g.moves, 0, "no moves");
    }

    // ------------------------------------------------------------------ bisection moves

    function test_post_midpoint_by_anyone_but_the_solver_reverts() public {
        (uint256 jobId, address verifier) = _failed();
        uint256 gameId = _open(verifier, jobId, SEGMENT, K);
        vm.expectRevert(_notAuthorized(verifier));
        vm.prank(verifier);
        game.postMidpoint(gameId, _claim(25), _cid(25));
        vm.expectRevert(_notAuthorized(stranger));
        vm.prank(stranger);
        game.postMidpoint(gameId, _claim(25), _cid(25));
    }

    function test_post_zero_state_hash_reverts() public {
        (uint256 jobId, address verifier) = _failed();
        uint256 gameId = _open(verifier, jobId, SEGMENT, K);
        vm.expectRevert(IDisputeGame.ZeroHash.selector);
        vm.prank(solver);
        game.postMidpoint(gameId, bytes32(0), _cid(25));
    }

    function test_moves_out_of_turn_revert() public {
        (uint256 jobId, address verifier) = _failed();
        uint256 gameId = _open(verifier, jobId, SEGMENT, K);
        vm.expectRevert(_wrongStatus(gameId, GameStatus.DefenderToMove, GameStatus.ChallengerToMove));
        vm.prank(verifier);
        game.answerMidpoint(gameId, true);
        vm.prank(solver);
        game.postMidpoint(gameId, _claim(25), _cid(25));
        vm.expectRevert(_wrongStatus(gameId, GameStatus.ChallengerToMove, GameStatus.DefenderToMove));
        vm.prank(solver);
        game.postMidpoint(gameId, _claim(25), _cid(25));
    }

    function test_answer_by_anyone_but_the_challenger_reverts() public {
        (uint256 jobId, address verifier) = _failed();
        uint256 gameId = _open(verifier, jobId, SEGMENT, K);
        vm.prank(solver);
        game.postMidpoint(gameId, _claim(25), _cid(25));
        vm.expectRevert(_notAuthorized(solver));
        vm.prank(solver);
        game.answerMidpoint(gameId, true);
    }

    function test_agree_moves_the_agreed_state_up() public {
        (uint256 jobId, address verifier) = _failed();
        uint256 gameId = _open(verifier, jobId, SEGMENT, K);
        vm.prank(solver);
        game.postMidpoint(gameId, _claim(25), _cid(25));
        vm.prank(verifier);
        game.answerMidpoint(gameId, true);
        Game memory g = game.getGame(gameId);
        assertEq(g.lo, 25, "lo");
        assertEq(g.hi, K, "hi");
        assertEq(g.agreedHash, _claim(25), "agreed hash");
        assertEq(g.agreedCid, _cid(25), "agreed cid");
        assertEq(g.moves, 1, "moves");
        assertTrue(g.status == GameStatus.DefenderToMove, "solver to move");
        assertEq(game.nextMidpoint(gameId), 37, "next midpoint");
    }

    function test_disagree_moves_the_disputed_state_down() public {
        (uint256 jobId, address verifier) = _failed();
        uint256 gameId = _open(verifier, jobId, SEGMENT, K);
        vm.prank(solver);
        game.postMidpoint(gameId, _claim(25), _cid(25));
        vm.prank(verifier);
        game.answerMidpoint(gameId, false);
        Game memory g = game.getGame(gameId);
        assertEq(g.lo, 0, "lo");
        assertEq(g.hi, 25, "hi");
        assertEq(g.agreedHash, TraceTree.stateHash(TRACE, SEGMENT), "agreed stays checkpoint j");
        assertEq(g.disputedHash, _claim(25), "disputed hash");
    }

    function test_bisection_isolates_the_first_diverging_step() public {
        (uint256 jobId, address verifier) = _failed();
        uint256 gameId = _open(verifier, jobId, SEGMENT, K);
        uint256 moves = _bisect(gameId, 37);
        Game memory g = game.getGame(gameId);
        assertTrue(g.status == GameStatus.Isolated, "isolated");
        assertEq(g.lo, 36, "pre-state step");
        assertEq(g.hi, 37, "post-state step");
        assertEq(g.agreedHash, _claim(36), "pre-state hash");
        assertEq(g.agreedCid, _cid(36), "pre-state cid");
        assertEq(g.disputedHash, _claim(37), "post-state hash");
        assertTrue(moves <= LibPosition.ceilLog2(K) && moves >= LibPosition.floorLog2(K), "moves in [5, 6]");
        assertEq(g.moves, moves, "moves counted");
    }

    function test_divergence_at_the_first_step_keeps_checkpoint_j_as_pre_state() public {
        (uint256 jobId, address verifier) = _failed();
        uint256 gameId = _open(verifier, jobId, SEGMENT, K);
        _bisect(gameId, 1);
        Game memory g = game.getGame(gameId);
        assertEq(g.lo, 0, "step 0");
        assertEq(g.agreedHash, TraceTree.stateHash(TRACE, SEGMENT), "checkpoint j");
        assertEq(g.agreedCid, bytes32(0), "cid 0: from the manifest");
        assertEq(g.disputedHash, _claim(1), "solver's state after step 1");
    }

    function test_divergence_at_the_last_step_keeps_checkpoint_j1_as_post_state() public {
        (uint256 jobId, address verifier) = _failed();
        uint256 gameId = _open(verifier, jobId, SEGMENT, K);
        _bisect(gameId, K);
        Game memory g = game.getGame(gameId);
        assertEq(g.lo, K - 1, "last step");
        assertEq(g.disputedHash, TraceTree.stateHash(TRACE, SEGMENT + 1), "checkpoint j+1");
    }

    // ------------------------------------------------------------------ clocks

    function test_silent_solver_loses_on_its_clock() public {
        (uint256 jobId, address verifier) = _failed();
        uint256 gameId = _open(verifier, jobId, SEGMENT, K);
        uint256 verifierBefore = _bal(verifier);
        uint256 solverStake = _staked(solver, Role.Solver);
        uint256 escrow = _bal(address(market));
        vm.warp(block.timestamp + 1 hours);
        vm.expectRevert(_err(IDisputeGame.ClockNotExpired.selector, gameId, block.timestamp));
        game.timeoutClock(gameId);
        vm.warp(block.timestamp + 1);
        vm.expectRevert(_err(IDisputeGame.ClockRanOut.selector, gameId, block.timestamp - 1));
        vm.prank(solver);
        game.postMidpoint(gameId, _claim(25), _cid(25));
        game.timeoutClock(gameId);

        assertTrue(_status(gameId) == GameStatus.ChallengerWon, "challenger won");
        assertEq(solverStake - _staked(solver, Role.Solver), SOLVER_BOND, "solver bond slashed");
        assertEq(_bal(verifier) - verifierBefore, CHALLENGE_BOND + SOLVER_BOND, "bond back + solver bond");
        assertEq(_locked(verifier, Role.Verifier), 0, "failing verifier's bond released");
        assertTrue(_jobState(jobId) == JobState.Open, "job reopened for another solver");
        assertEq(_bal(address(market)), escrow, "escrow kept for the submitter");
        assertEq(game.activeGame(jobId), 0, "no active game");
        _assertGameHoldsLiveBonds(0);
    }

    /// Pull payments: the settlement credits the winner instead of transferring; anyone may claim for
    /// it and the tokens go only to it; a second claim has nothing to take.
    function test_a_settlement_credits_the_winner_who_claims_it_once() public {
        (uint256 jobId, address verifier) = _failed();
        uint256 gameId = _open(verifier, jobId, SEGMENT, K);
        uint256 wallet = token.balanceOf(verifier);
        vm.warp(block.timestamp + 1 hours + 1);
        vm.expectEmit(true, false, false, true, address(game));
        emit ICredits.Credited(verifier, CHALLENGE_BOND + SOLVER_BOND);
        game.timeoutClock(gameId);
        assertEq(token.balanceOf(verifier), wallet, "nothing transferred by the settlement");
        assertEq(game.credit(verifier), CHALLENGE_BOND + SOLVER_BOND, "bond back + solver bond, credited");
        assertEq(game.totalCredit(), CHALLENGE_BOND + SOLVER_BOND, "the only credit");
        uint256 strangerWallet = token.balanceOf(stranger);
        vm.expectEmit(true, false, false, true, address(game));
        emit ICredits.CreditClaimed(verifier, CHALLENGE_BOND + SOLVER_BOND);
        vm.prank(stranger);
        assertEq(game.claimCredit(verifier), CHALLENGE_BOND + SOLVER_BOND, "claimed for the verifier");
        assertEq(token.balanceOf(verifier), wallet + CHALLENGE_BOND + SOLVER_BOND, "paid to the verifier");
        assertEq(token.balanceOf(stranger), strangerWallet, "the claimer gets nothing");
        assertEq(game.totalCredit(), 0, "no credit left");
        vm.expectRevert(abi.encodeWithSelector(ICredits.NoCredit.selector, verifier));
        game.claimCredit(verifier);
        _assertGameHoldsLiveBonds(0);
    }

    function test_silent_whistleblower_loses_on_its_clock() public {
        (uint256 jobId, address verifier) = _passed();
        uint256 gameId = _open(whistleblower, jobId, SEGMENT, K);
        uint256 solverBefore = _bal(solver);
        uint256 verifierBefore = _bal(verifier);
        vm.warp(block.timestamp + 10 minutes);
        vm.prank(solver);
        game.postMidpoint(gameId, _claim(25), _cid(25));
        (uint256 s,) = game.clocks(gameId);
        assertEq(s, 50 minutes, "solver spent 10 minutes");
        vm.warp(block.timestamp + 1 hours + 1);
        game.timeoutClock(gameId);

        assertTrue(_status(gameId) == GameStatus.DefenderWon, "solver won");
        assertEq(_bal(solver) - solverBefore, CHALLENGE_BOND, "whistleblower bond");
        // JobMarket patch 1: the challenge window, paused while the game ran, resumes
        assertTrue(_jobState(jobId) == JobState.Verified, "job Verified again");
        assertEq(game.activeGame(jobId), 0, "another whistleblower may open");
        vm.warp(uint256(market.getJob(jobId).deadline) + 1);
        market.finalize(jobId);
        assertEq(_bal(solver) - solverBefore, REWARD + CHALLENGE_BOND, "reward + whistleblower bond");
        assertEq(_bal(verifier) - verifierBefore, FEE, "passing verifier paid");
        assertEq(_locked(solver, Role.Solver), 0, "solver bond released");
        assertTrue(_jobState(jobId) == JobState.Finalized, "job finalized");
        _assertGameHoldsLiveBonds(0);
    }

    function test_whistleblower_winning_on_the_defender_clock_does_not_slash_the_verifier() public {
        (uint256 jobId, address verifier) = _passed();
        uint256 gameId = _open(whistleblower, jobId, SEGMENT, K);
        uint256 wbBefore = _bal(whistleblower);
        uint256 verifierStake = _staked(verifier, Role.Verifier);
        vm.warp(block.timestamp + 1 hours + 1);
        game.timeoutClock(gameId);
        assertTrue(_status(gameId) == GameStatus.ChallengerWon, "challenger won");
        assertEq(_bal(whistleblower) - wbBefore, CHALLENGE_BOND + SOLVER_BOND, "bond back + solver bond only");
        assertEq(_staked(verifier, Role.Verifier), verifierStake, "verifier not slashed");
        assertEq(_locked(verifier, Role.Verifier), 0, "verifier bond released");
        assertTrue(_jobState(jobId) == JobState.Open, "job reopened");
    }

    function test_failing_verifier_that_goes_silent_loses_its_bond() public {
        (uint256 jobId, address verifier) = _failed();
        uint256 gameId = _open(verifier, jobId, SEGMENT, K);
        vm.prank(solver);
        game.postMidpoint(gameId, _claim(25), _cid(25));
        uint256 solverBefore = _bal(solver);
        uint256 submitterBefore = _bal(submitter);
        uint256 verifierStake = _staked(verifier, Role.Verifier);
        vm.warp(block.timestamp + 1 hours + 1);
        game.timeoutClock(gameId);
        assertEq(_bal(solver) - solverBefore, REWARD + CHALLENGE_BOND + VERIFIER_BOND, "reward + both bonds");
        assertEq(verifierStake - _staked(verifier, Role.Verifier), VERIFIER_BOND, "verifier bond slashed");
        assertEq(_bal(submitter) - submitterBefore, FEE, "fee back to the submitter");
    }

    function test_clock_is_cumulative_over_moves() public {
        (uint256 jobId, address verifier) = _failed();
        uint256 gameId = _open(verifier, jobId, SEGMENT, K);
        vm.warp(block.timestamp + 40 minutes);
        vm.prank(solver);
        game.postMidpoint(gameId, _claim(25), _cid(25));
        vm.prank(verifier);
        game.answerMidpoint(gameId, true);
        vm.warp(block.timestamp + 21 minutes); // 61 minutes in all
        vm.expectRevert(_err(IDisputeGame.ClockRanOut.selector, gameId, block.timestamp - 1 minutes));
        vm.prank(solver);
        game.postMidpoint(gameId, _claim(37), _cid(37));
    }

    function test_timeout_clock_outside_bisection_reverts() public {
        (,, uint256 gameId) = _isolatedByVerifier();
        vm.expectRevert(_wrongStatus(gameId, GameStatus.Isolated, GameStatus.DefenderToMove));
        game.timeoutClock(gameId);
    }

    // ------------------------------------------------------------------ committee draw

    function test_draw_before_the_seed_block_reverts() public {
        (,, uint256 gameId) = _isolatedByVerifier();
        uint256 anchor = game.getGame(gameId).anchorBlock;
        vm.expectRevert(_err(IDisputeGame.RandomnessNotReady.selector, gameId, anchor + 2));
        game.drawCommittee(gameId);
    }

    function test_draw_seats_non_parties_and_locks_their_bonds() public {
        (uint256 jobId, address verifier, uint256 gameId) = _isolatedByVerifier();
        address[] memory referees = _draw(gameId);
        assertEq(referees.length, 3, "committee size");
        Job memory job = market.getJob(jobId);
        for (uint256 i; i < referees.length; ++i) {
            address r = referees[i];
            assertTrue(r != solver && r != verifier && r != job.submitter, "not a party");
            for (uint256 j; j < i; ++j) {
                assertTrue(referees[j] != r, "distinct");
            }
            assertEq(_locked(r, Role.Verifier), REFEREE_BOND, "referee bond locked");
            (Ballot b,) = game.ballotOf(gameId, r);
            assertTrue(b == Ballot.Seated, "seated");
        }
        Game memory g = game.getGame(gameId);
        assertTrue(g.status == GameStatus.Arbitrating, "arbitrating");
        assertEq(g.deadline, block.timestamp + 1 hours, "commit deadline");
    }

    /// The committee is drawn from stakes as of the isolation block: a referee candidate that tops
    /// up, or one that asks to unstake, once the seed exists changes no seat.
    function test_stake_moves_after_the_seed_do_not_change_the_committee() public {
        (, address verifier, uint256 gameId) = _isolatedByVerifier();
        vm.roll(block.number + 2);
        uint256 base = vm.snapshotState();
        game.drawCommittee(gameId);
        address[] memory honest = game.committee(gameId);
        for (uint256 i; i < VERIFIERS; ++i) {
            address v = verifiers[i];
            if (v == verifier) continue;
            vm.revertToState(base);
            uint96 free = uint96(stakes.freeStake(v, Role.Verifier));
            vm.prank(v);
            if (i % 2 == 0) stakes.stake(Role.Verifier, 10_000 ether);
            else stakes.requestUnstake(Role.Verifier, free);
            game.drawCommittee(gameId);
            address[] memory drawn = game.committee(gameId);
            assertEq(drawn.length, honest.length, "same size");
            for (uint256 j; j < drawn.length; ++j) {
                assertEq(drawn[j], honest[j], "same seat");
            }
        }
    }

    function test_committee_left_past_256_blocks_is_undecided_not_redrawn() public {
        (uint256 jobId, address verifier, uint256 gameId) = _isolatedByVerifier();
        uint256 challengerBefore = _bal(verifier);
        uint256 jackpotBefore = market.jackpot();
        vm.roll(block.number + 300);
        vm.expectEmit(true, true, false, true, address(game));
        emit IDisputeGame.DisputeSettled(gameId, jobId, GameStatus.Undecided, SettleReason.NoCommittee, address(0), 0, 0);
        game.drawCommittee(gameId);
        assertEq(game.committee(gameId).length, 0, "nobody seated");
        assertEq(_bal(verifier), challengerBefore, "no bond back");
        assertEq(market.jackpot(), jackpotBefore + CHALLENGE_BOND, "bond to the jackpot");
        _assertGameHoldsLiveBonds(0);
    }

    function test_committee_reanchors_when_a_seat_was_locked_since_the_anchor() public {
        (,, uint256 gameId) = _isolatedByVerifier();
        // After the anchor block, other draws take every verifier's whole stake.
        vm.roll(block.number + 1);
        vm.startPrank(address(market));
        for (uint256 i; i < VERIFIERS; ++i) {
            uint256 free = stakes.freeStake(verifiers[i], Role.Verifier);
            if (free != 0) stakes.lock(verifiers[i], Role.Verifier, free);
        }
        vm.stopPrank();
        vm.roll(block.number + 1);
        vm.expectEmit(true, false, false, true, address(game));
        emit IDisputeGame.DrawReanchored(gameId, block.number);
        game.drawCommittee(gameId);
        Game memory g = game.getGame(gameId);
        assertTrue(g.status == GameStatus.Isolated, "still isolated");
        assertEq(g.anchorBlock, block.number, "re-anchored");
        assertEq(game.committee(gameId).length, 0, "nobody seated");
    }

    function test_committee_that_cannot_be_drawn_is_undecided_and_releases_seats() public {
        (uint256 jobId, address verifier, uint256 gameId) = _isolatedByVerifier();
        // Leave exactly two eligible non-party verifiers: two seats fill, the third cannot.
        uint256 left;
        address[2] memory kept;
        for (uint256 i; i < VERIFIERS; ++i) {
            address v = verifiers[i];
            if (v == verifier) continue;
            if (left < 2) {
                kept[left++] = v;
                continue;
            }
            uint96 all = uint96(_staked(v, Role.Verifier));
            vm.prank(v);
            stakes.requestUnstake(Role.Verifier, all);
        }
        uint256 challengerBefore = _bal(verifier);
        _draw(gameId);
        assertTrue(_status(gameId) == GameStatus.Undecided, "undecided");
        assertEq(_locked(kept[0], Role.Verifier), 0, "seat 1 released");
        assertEq(_locked(kept[1], Role.Verifier), 0, "seat 2 released");
        assertEq(_bal(verifier), challengerBefore, "the challenge bond is lost");
        assertTrue(_jobState(jobId) == JobState.Disputed, "job waits for the dispute timeout");
        _assertGameHoldsLiveBonds(0);
    }

    /// Griefing: a whistleblower's challenge that no committee can decide costs the challenger its
    /// bond (to the jackpot, not to the solver) and leaves the honest solver's job to finalize.
    function test_undecided_whistleblower_challenge_costs_its_bond_and_the_job_goes_on() public {
        (uint256 jobId, address verifier, uint256 gameId) = _isolatedByWhistleblower();
        for (uint256 i; i < VERIFIERS; ++i) {
            address v = verifiers[i];
            if (v == verifier) continue;
            uint96 all = uint96(_staked(v, Role.Verifier));
            vm.prank(v);
            stakes.requestUnstake(Role.Verifier, all);
        }
        uint256 wbBefore = _bal(whistleblower);
        uint256 solverBefore = _bal(solver);
        uint256 jackpotBefore = market.jackpot();
        uint256 windowLeft = market.getJob(jobId).challengeLeft;
        _draw(gameId);
        assertTrue(_status(gameId) == GameStatus.Undecided, "no committee: undecided");
        assertEq(_bal(whistleblower), wbBefore, "the challenger lost its bond");
        assertEq(_bal(solver), solverBefore, "and the solver did not get it");
        assertEq(market.jackpot(), jackpotBefore + CHALLENGE_BOND, "it went to the jackpot");
        _assertGameHoldsLiveBonds(0);
        Job memory job = market.getJob(jobId);
        assertTrue(job.state == JobState.Verified, "the challenge counts as lost");
        assertEq(job.deadline, block.timestamp + windowLeft, "challenge window resumed");
        assertEq(game.activeGame(jobId), 0, "another whistleblower may open");
        vm.warp(uint256(job.deadline) + 1);
        market.finalize(jobId);
        assertEq(_bal(solver) - solverBefore, REWARD, "the honest solver is paid, not refunded");
        assertEq(_locked(verifier, Role.Verifier), 0, "verifier bond released");
    }

    function test_committee_not_drawn_in_time_settles_undecided() public {
        (uint256 jobId,, uint256 gameId) = _isolatedByVerifier();
        uint256 drawDeadline = uint256(game.getGame(gameId).lastMoveAt) + 30 minutes;
        vm.expectRevert(_err(IDisputeGame.NotSettleable.selector, gameId, drawDeadline + 1));
        game.settle(gameId);
        vm.warp(drawDeadline + 1);
        vm.roll(block.number + 2);
        vm.expectRevert(_err(IDisputeGame.DrawWindowPassed.selector, gameId, drawDeadline));
        game.drawCommittee(gameId);
        game.settle(gameId);
        assertTrue(_status(gameId) == GameStatus.Undecided, "undecided");
        assertEq(game.activeGame(jobId), gameId, "the undecided game still blocks new games");
    }

    // ------------------------------------------------------------------ votes

    function test_commit_by_a_non_referee_or_twice_reverts() public {
        (,, uint256 gameId) = _isolatedByVerifier();
        address[] memory referees = _draw(gameId);
        vm.expectRevert(
            abi.encodeWithSelector(IDisputeGame.WrongBallot.selector, gameId, stranger, Ballot.Vacant, Ballot.Seated)
        );
        vm.prank(stranger);
        game.commitVote(gameId, keccak256("x"));
        _commit(gameId, referees[0], true);
        vm.expectRevert(
            abi.encodeWithSelector(
                IDisputeGame.WrongBallot.selector, gameId, referees[0], Ballot.Committed, Ballot.Seated
            )
        );
        _commit(gameId, referees[0], true);
        vm.expectRevert(IDisputeGame.ZeroHash.selector);
        vm.prank(referees[1]);
        game.commitVote(gameId, bytes32(0));
    }

    function test_commit_after_the_commit_phase_reverts() public {
        (,, uint256 gameId) = _isolatedByVerifier();
        address[] memory referees = _draw(gameId);
        uint256 commitEnd = game.getGame(gameId).deadline;
        vm.warp(commitEnd + 1);
        vm.expectRevert(_err(IDisputeGame.PhaseClosed.selector, gameId, commitEnd));
        _commit(gameId, referees[0], true);
    }

    function test_reveal_rules() public {
        (,, uint256 gameId) = _isolatedByVerifier();
        address[] memory referees = _draw(gameId);
        uint256 commitEnd = game.getGame(gameId).deadline;
        _commit(gameId, referees[0], true);
        _commit(gameId, referees[1], true);
        // Not everyone committed and the commit phase runs: no reveal yet.
        vm.expectRevert(_err(IDisputeGame.RevealNotOpen.selector, gameId, commitEnd));
        _reveal(gameId, referees[0], true);
        vm.warp(commitEnd + 1);
        // A vote that is not the committed one.
        vm.expectRevert(abi.encodeWithSelector(IDisputeGame.CommitmentMismatch.selector, gameId, referees[0]));
        _reveal(gameId, referees[0], false);
        // A referee that never committed cannot reveal.
        vm.expectRevert(
            abi.encodeWithSelector(
                IDisputeGame.WrongBallot.selector, gameId, referees[2], Ballot.Seated, Ballot.Committed
            )
        );
        _reveal(gameId, referees[2], true);
        _reveal(gameId, referees[0], true);
        vm.warp(commitEnd + 1 hours + 1);
        vm.expectRevert(_err(IDisputeGame.PhaseClosed.selector, gameId, commitEnd + 1 hours));
        _reveal(gameId, referees[1], true);
    }

    function test_reveals_open_early_once_everyone_committed() public {
        (,, uint256 gameId) = _isolatedByVerifier();
        address[] memory referees = _draw(gameId);
        for (uint256 i; i < 3; ++i) {
            _commit(gameId, referees[i], true);
        }
        for (uint256 i; i < 3; ++i) {
            _reveal(gameId, referees[i], true);
        }
        game.settle(gameId); // all revealed: no need to wait for the reveal deadline
        assertTrue(_status(gameId) == GameStatus.DefenderWon, "settled early");
    }

    function test_settle_before_the_reveal_phase_ends_reverts() public {
        (,, uint256 gameId) = _isolatedByVerifier();
        address[] memory referees = _draw(gameId);
        _commit(gameId, referees[0], true);
        uint256 revealEnd = uint256(game.getGame(gameId).deadline) + 1 hours;
        vm.expectRevert(_err(IDisputeGame.NotSettleable.selector, gameId, revealEnd + 1));
        game.settle(gameId);
    }

    // ------------------------------------------------------------------ verdicts and payouts

    function test_verdict_for_the_solver_slashes_the_failing_verifier() public {
        (uint256 jobId, address verifier, uint256 gameId) = _isolatedByVerifier();
        address[] memory referees = _draw(gameId);
        uint256 solverBefore = _bal(solver);
        uint256 verifierStake = _staked(verifier, Role.Verifier);
        uint256[3] memory refBefore;
        for (uint256 i; i < 3; ++i) {
            refBefore[i] = _bal(referees[i]);
            _commit(gameId, referees[i], true);
        }
        for (uint256 i; i < 3; ++i) {
            _reveal(gameId, referees[i], true);
        }
        game.settle(gameId);
        assertTrue(_status(gameId) == GameStatus.DefenderWon, "solver won");
        assertEq(
            _bal(solver) - solverBefore,
            REWARD + CHALLENGE_BOND + VERIFIER_BOND - 3 * REFEREE_FEE,
            "reward + loser's bonds - fees"
        );
        assertEq(verifierStake - _staked(verifier, Role.Verifier), VERIFIER_BOND, "verifier slashed");
        for (uint256 i; i < 3; ++i) {
            assertEq(_bal(referees[i]) - refBefore[i], REFEREE_FEE, "fee");
            assertEq(_locked(referees[i], Role.Verifier), 0, "referee bond released");
        }
        assertTrue(_jobState(jobId) == JobState.Finalized, "finalized");
        _assertGameHoldsLiveBonds(0);
    }

    function test_verdict_against_the_solver_slashes_solver_and_passing_verifier() public {
        (uint256 jobId, address verifier, uint256 gameId) = _isolatedByWhistleblower();
        address[] memory referees = _draw(gameId);
        uint256 wbBefore = _bal(whistleblower);
        uint256 solverStake = _staked(solver, Role.Solver);
        uint256 verifierStake = _staked(verifier, Role.Verifier);
        uint256 escrow = _bal(address(market));
        for (uint256 i; i < 3; ++i) {
            _commit(gameId, referees[i], false);
        }
        for (uint256 i; i < 3; ++i) {
            _reveal(gameId, referees[i], false);
        }
        game.settle(gameId);
        assertTrue(_status(gameId) == GameStatus.ChallengerWon, "challenger won");
        assertEq(
            _bal(whistleblower) - wbBefore,
            CHALLENGE_BOND + SOLVER_BOND + VERIFIER_BOND - 3 * REFEREE_FEE,
            "bond back + both slashes - fees"
        );
        assertEq(solverStake - _staked(solver, Role.Solver), SOLVER_BOND, "solver slashed");
        assertEq(verifierStake - _staked(verifier, Role.Verifier), VERIFIER_BOND, "passing verifier slashed");
        assertTrue(_jobState(jobId) == JobState.Open, "job reopened");
        assertEq(_bal(address(market)), escrow, "submitter's escrow kept for the next solver");
        _assertGameHoldsLiveBonds(0);
    }

    function test_minority_referee_gets_its_bond_back_but_no_fee() public {
        (,, uint256 gameId) = _isolatedByVerifier();
        address[] memory referees = _draw(gameId);
        uint256 minorityBefore = _bal(referees[2]);
        _commit(gameId, referees[0], true);
        _commit(gameId, referees[1], true);
        _commit(gameId, referees[2], false);
        _reveal(gameId, referees[0], true);
        _reveal(gameId, referees[1], true);
        _reveal(gameId, referees[2], false);
        game.settle(gameId);
        assertTrue(_status(gameId) == GameStatus.DefenderWon, "majority decides");
        assertEq(_bal(referees[2]), minorityBefore, "no fee for the minority");
        assertEq(_locked(referees[2], Role.Verifier), 0, "minority bond released");
    }

    function test_referee_that_does_not_reveal_is_slashed() public {
        (,, uint256 gameId) = _isolatedByWhistleblower();
        address[] memory referees = _draw(gameId);
        uint256 silentStake = _staked(referees[2], Role.Verifier);
        uint256 wbBefore = _bal(whistleblower);
        for (uint256 i; i < 3; ++i) {
            _commit(gameId, referees[i], false);
        }
        _reveal(gameId, referees[0], false);
        _reveal(gameId, referees[1], false);
        vm.warp(uint256(game.getGame(gameId).deadline) + 1 hours + 1);
        game.settle(gameId);
        assertTrue(_status(gameId) == GameStatus.ChallengerWon, "verdict of the revealed majority");
        assertEq(silentStake - _staked(referees[2], Role.Verifier), REFEREE_BOND, "silent referee slashed");
        assertEq(_locked(referees[2], Role.Verifier), 0, "nothing left locked");
        assertEq(
            _bal(whistleblower) - wbBefore,
            CHALLENGE_BOND + SOLVER_BOND + VERIFIER_BOND + REFEREE_BOND - 2 * REFEREE_FEE,
            "winner gets the silent referee's bond"
        );
        _assertGameHoldsLiveBonds(0);
    }

    function test_a_protocol_releases_a_seat_not_committed_unslashed_and_the_rest_decide() public {
        (,, uint256 gameId) = _isolatedByWhistleblower();
        address[] memory referees = _draw(gameId);
        address released = referees[2];
        uint256 releasedStake = _staked(released, Role.Verifier);
        // only a protocol contract of the StakeManager's wiring releases a seat (SealedJobs, for a sealed job)
        vm.prank(stranger);
        vm.expectRevert(_notAuthorized(stranger));
        game.releaseSeat(gameId, released);
        _commit(gameId, referees[0], false);
        vm.prank(address(market));
        vm.expectRevert(abi.encodeWithSelector(IDisputeGame.WrongBallot.selector, gameId, referees[0], Ballot.Committed, Ballot.Seated));
        game.releaseSeat(gameId, referees[0]);
        vm.expectEmit(true, true, true, true, address(game));
        emit IDisputeGame.SeatReleased(gameId, released, address(market));
        vm.prank(address(market));
        game.releaseSeat(gameId, released);
        (Ballot ballot,) = game.ballotOf(gameId, released);
        assertTrue(ballot == Ballot.Declined, "declined");
        assertEq(_locked(released, Role.Verifier), 0, "its bond unlocked at once");
        vm.prank(released);
        vm.expectRevert(abi.encodeWithSelector(IDisputeGame.WrongBallot.selector, gameId, released, Ballot.Declined, Ballot.Seated));
        game.commitVote(gameId, _commitment(gameId, false, released));
        _commit(gameId, referees[1], false);
        uint256 deadline = game.getGame(gameId).deadline;
        vm.warp(deadline + 1);
        vm.prank(address(market));
        vm.expectRevert(_err(IDisputeGame.PhaseClosed.selector, gameId, deadline));
        game.releaseSeat(gameId, referees[1]);
        uint256 wbBefore = _bal(whistleblower);
        _reveal(gameId, referees[0], false);
        _reveal(gameId, referees[1], false);
        vm.warp(deadline + 1 hours + 1);
        game.settle(gameId);
        assertTrue(_status(gameId) == GameStatus.ChallengerWon, "the two that voted decided");
        assertEq(_staked(released, Role.Verifier), releasedStake, "the released referee is not slashed");
        assertEq(game.credit(released), 0, "and earns nothing");
        assertEq(_bal(whistleblower) - wbBefore, CHALLENGE_BOND + SOLVER_BOND + VERIFIER_BOND - 2 * REFEREE_FEE, "two fees paid, no slash to share");
        _assertGameHoldsLiveBonds(0);
    }

    function test_tie_is_undecided_and_the_job_times_out_refunded() public {
        (uint256 jobId, address verifier, uint256 gameId) = _isolatedByVerifier();
        address[] memory referees = _draw(gameId);
        uint256 solverBefore = _bal(solver);
        uint256 challengerBefore = _bal(verifier);
        _commit(gameId, referees[0], true);
        _commit(gameId, referees[1], false);
        vm.warp(uint256(game.getGame(gameId).deadline) + 1);
        _reveal(gameId, referees[0], true);
        _reveal(gameId, referees[1], false);
        vm.warp(block.timestamp + 1 hours);
        game.settle(gameId);
        assertTrue(_status(gameId) == GameStatus.Undecided, "tie: no verdict");
        assertEq(_bal(verifier) - challengerBefore, REFEREE_BOND / 2, "no bond back, half a slash");
        assertEq(_bal(solver) - solverBefore, REFEREE_BOND / 2, "half a slash");
        assertEq(_locked(referees[2], Role.Verifier), 0, "silent referee settled");
        _assertGameHoldsLiveBonds(0);
        // The fallback: no second game, and the JobMarket's dispute timeout refunds the submitter.
        vm.expectRevert(_err(IDisputeGame.GameExists.selector, jobId, gameId));
        _open(verifier, jobId, SEGMENT, K);
        vm.warp(market.getJob(jobId).deadline + 1);
        market.timeoutDispute(jobId);
        assertTrue(_jobState(jobId) == JobState.Refunded, "refunded");
        assertEq(_locked(solver, Role.Solver), 0, "solver bond released");
        assertEq(_locked(verifier, Role.Verifier), 0, "verifier bond released");
    }

    function test_no_reveal_at_all_is_undecided_and_every_referee_slashed() public {
        (, address verifier, uint256 gameId) = _isolatedByVerifier();
        address[] memory referees = _draw(gameId);
        uint256 challengerBefore = _bal(verifier);
        vm.warp(uint256(game.getGame(gameId).deadline) + 1 hours + 1);
        game.settle(gameId);
        assertTrue(_status(gameId) == GameStatus.Undecided, "undecided");
        uint256 slashed = 3 * REFEREE_BOND;
        assertEq(_bal(verifier) - challengerBefore, slashed - slashed / 2, "challenger share");
        for (uint256 i; i < 3; ++i) {
            assertEq(_locked(referees[i], Role.Verifier), 0, "slashed, not locked");
        }
    }

    function test_settling_after_the_job_timed_out_returns_every_bond() public {
        (uint256 jobId, address verifier, uint256 gameId) = _isolatedByVerifier();
        address[] memory referees = _draw(gameId);
        for (uint256 i; i < 3; ++i) {
            _commit(gameId, referees[i], true);
        }
        for (uint256 i; i < 3; ++i) {
            _reveal(gameId, referees[i], true);
        }
        // Nobody settles in time: the JobMarket's dispute timeout refunds the job first.
        vm.warp(market.getJob(jobId).deadline + 1);
        market.timeoutDispute(jobId);
        uint256 challengerBefore = _bal(verifier);
        game.settle(gameId);
        Game memory g = game.getGame(gameId);
        assertTrue(g.status == GameStatus.Undecided, "job gone: undecided");
        assertEq(_bal(verifier), challengerBefore, "bond to the jackpot");
        for (uint256 i; i < 3; ++i) {
            assertEq(_locked(referees[i], Role.Verifier), 0, "referees released");
        }
        _assertGameHoldsLiveBonds(0);
    }

    function test_settle_twice_reverts() public {
        (,, uint256 gameId) = _isolatedByVerifier();
        address[] memory referees = _draw(gameId);
        for (uint256 i; i < 3; ++i) {
            _commit(gameId, referees[i], true);
        }
        for (uint256 i; i < 3; ++i) {
            _reveal(gameId, referees[i], true);
        }
        game.settle(gameId);
        vm.expectRevert(_wrongStatus(gameId, GameStatus.DefenderWon, GameStatus.Arbitrating));
        game.settle(gameId);
    }

    function test_new_solver_can_be_challenged_again_after_a_reopen() public {
        (uint256 jobId, address verifier) = _failed();
        uint256 gameId = _open(verifier, jobId, SEGMENT, K);
        vm.warp(block.timestamp + 1 hours + 1);
        game.timeoutClock(gameId); // solver silent: job reopens
        assertEq(game.activeGame(jobId), 0, "cleared");
        vm.prank(solver);
        market.claim(jobId);
        vm.prank(solver);
        // forge-lint: disable-next-line(unsafe-typecast)
        market.commit(jobId, TraceTree.root(traceLeaves), uint32(CHECKPOINTS), keccak256("m"), keccak256("n"));
        address v2 = _assign(jobId);
        ReportSeal memory seal = seals[jobId];
        vm.prank(v2);
        market.report(jobId, false, keccak256("r"), seal.assignSeed, seal.forcedCommitment, new Probe[](0));
        assertEq(_open(v2, jobId, SEGMENT, K), gameId + 1, "second game");
    }

    // ------------------------------------------------------------------ unopened failing reports

    function test_failing_verifier_that_never_opens_forfeits_its_bond_to_the_solver() public {
        (uint256 jobId, address verifier) = _failed();
        uint256 deadline = game.openDeadline(jobId);
        vm.expectRevert(_err(IDisputeGame.OpenWindowNotPassed.selector, jobId, deadline));
        game.forfeitUnopened(jobId);
        uint256 solverBefore = _bal(solver);
        uint256 verifierStake = _staked(verifier, Role.Verifier);
        vm.warp(deadline + 1);
        game.forfeitUnopened(jobId);
        assertEq(_bal(solver) - solverBefore, REWARD + VERIFIER_BOND, "reward + verifier bond");
        assertEq(verifierStake - _staked(verifier, Role.Verifier), VERIFIER_BOND, "verifier slashed");
        assertTrue(_jobState(jobId) == JobState.Finalized, "finalized");
        _assertGameHoldsLiveBonds(0);
    }

    function test_forfeit_of_an_opened_or_passed_dispute_reverts() public {
        (uint256 jobId, address verifier) = _failed();
        _open(verifier, jobId, SEGMENT, K);
        vm.warp(block.timestamp + 2 hours);
        vm.expectRevert(_err(IDisputeGame.NotChallengeable.selector, jobId));
        game.forfeitUnopened(jobId);
        (uint256 passedJob,) = _passed();
        assertEq(game.openDeadline(passedJob), 0, "no open deadline on a passed job");
        vm.expectRevert(_err(IDisputeGame.NotChallengeable.selector, passedJob));
        game.forfeitUnopened(passedJob);
    }

    // ------------------------------------------------------------------ JobMarket hooks

    function test_only_the_game_calls_the_market_dispute_hooks() public {
        (uint256 jobId,) = _passed();
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.NotAuthorized.selector, stranger));
        vm.prank(stranger);
        market.openDispute(jobId, stranger);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.NotAuthorized.selector, stranger));
        vm.prank(stranger);
        market.resolveDispute(jobId, false, true, stranger);
    }

    // ------------------------------------------------------------------ verifyCheckpoint

    // Root and proofs from the npm package openzeppelin/merkle-tree 1.0.8, StandardMerkleTree.of(leaves,
    // ["uint256","bytes32"]) with leaves (i, sha256("state" + i)) for i = 0..4.
    bytes32 internal constant OZ_ROOT = 0x2015887ea9a89b241898f031b2458de3b9aaa60eb7ace03e55f9d2bb417bce10;

    function _committed(bytes32 traceRoot, uint32 count) internal returns (uint256 jobId) {
        vm.prank(submitter);
        jobId = market.postJob(keccak256("spec"), REWARD, FEE, COMMIT_WINDOW, false);
        vm.prank(solver);
        market.claim(jobId);
        vm.prank(solver);
        market.commit(jobId, traceRoot, count, keccak256("model"), MANIFEST_CID);
    }

    function test_verify_checkpoint_accepts_openzeppelin_tree() public {
        uint256 jobId = _committed(OZ_ROOT, 5);
        bytes32[] memory proof = new bytes32[](2);
        proof[0] = 0xb476b1ddb2ee2486c12d1c96ed19ae2359c98024630725d7445774e3759da192;
        proof[1] = 0xbecfeeb193a93f3dfb317b4a7efccace4b73dffe3f2318bbe34105b019d116e4;
        bytes32 state2 = 0x0c7e4bc57ad2b7d41133091f979ebe92b79db0df7baf8c5c69e589ea2b80f726;
        assertTrue(game.verifyCheckpoint(jobId, 2, state2, proof), "leaf 2");
        assertTrue(!game.verifyCheckpoint(jobId, 2, keccak256("other"), proof), "wrong state hash");
        assertTrue(!game.verifyCheckpoint(jobId, 3, state2, proof), "wrong index");

        bytes32[] memory proof0 = new bytes32[](3);
        proof0[0] = 0x3c02e3a3c6adda377669f32c5541de93859e0f43c0da2936048eb175769239d8;
        proof0[1] = 0xdc1dbac2dad5a232eecd4b7293b295189f725009c1b3615eaa31a8c341b10bde;
        proof0[2] = 0x3e175f54a4a66184601706d82d6b800ad3f6156420c90bebf925e8aae5adbeb2;
        bytes32 state0 = 0x290a11a975fd3c956331c2cc4e1becd682c611435af44d336d9260d205166b52;
        assertTrue(game.verifyCheckpoint(jobId, 0, state0, proof0), "leaf 0");
    }

    function test_verify_checkpoint_rejects_index_beyond_count() public {
        // A two-leaf tree whose leaf 4 is genuine, committed with a count of 3.
        bytes32 a = TraceLib.leaf(4, keccak256("s4"));
        bytes32 b = TraceLib.leaf(0, keccak256("s0"));
        bytes32 root = a < b ? keccak256(abi.encode(a, b)) : keccak256(abi.encode(b, a));
        uint256 jobId = _committed(root, 3);
        bytes32[] memory proof = new bytes32[](1);
        proof[0] = a;
        assertTrue(game.verifyCheckpoint(jobId, 0, keccak256("s0"), proof), "leaf 0 inside count");
        proof[0] = b;
        assertTrue(!game.verifyCheckpoint(jobId, 4, keccak256("s4"), proof), "leaf 4 beyond count");
    }

    function test_verify_checkpoint_of_an_unknown_job_reverts() public {
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.UnknownJob.selector, 99));
        game.verifyCheckpoint(99, 0, bytes32(0), new bytes32[](0));
    }
}
