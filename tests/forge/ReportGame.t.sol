// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {DisputeFixture, ProbeTree, TraceTree} from "./handlers/DisputeFixture.sol";
import {Game, GameStatus, IDisputeGame, ProbeClaim, SettleReason} from "../../contracts/interfaces/IDisputeGame.sol";
import {IJobMarket} from "../../contracts/interfaces/IJobMarket.sol";
import {Job, JobState, MarketParams, Probe, ReportSeal, Role} from "../../contracts/Types.sol";
import {Vm} from "./utils/Vm.sol";
import {StandardTree} from "./utils/StandardTree.sol";

/// @notice Report games (a whistleblower disputes a probe of a passing report; the job's verifier
///         defends it) and forced-error concessions, against the real JobMarket + DisputeGame.
/// @dev forcedErrorRateBps is 100 % here, so a verifier is forced exactly when its seed was
///      snapshotted by the draw (_seedVerifiers before the job's commit); without a seed it is not.
contract ReportGameTest is DisputeFixture {
    uint256 internal constant VERIFIER_BOND = 20 ether;
    uint256 internal constant CHALLENGE_BOND = 20 ether;
    uint256 internal constant POOL = 1000 ether;

    function _marketParams() internal pure override returns (MarketParams memory p) {
        p = super._marketParams();
        p.forcedErrorRateBps = 10_000;
    }

    function setUp() public {
        _setUpProtocol();
        vm.prank(stranger);
        market.fundJackpot(POOL);
    }

    /// A passed job, its verifier (forced iff `seeded`) and, unforced, the index of a probe of at least
    /// 3 steps (so the bisection has two moves before the step is isolated); forced: probe 0.
    function _passedJob(bool seeded) internal returns (uint256 jobId, address verifier, uint256 index) {
        if (seeded) _seedVerifiers();
        (jobId, verifier) = _verifying();
        bool forced = _passedProbes(jobId, verifier);
        assertTrue(forced == seeded, "forced iff seeded (rate 100 %)");
        if (seeded) return (jobId, verifier, 0);
        for (index = 1; index < probes[jobId].length; ++index) {
            if (probes[jobId][index].step >= 3) return (jobId, verifier, index);
        }
        revert AssertionFailed("no probe of 3+ steps in this fixture");
    }

    // ------------------------------------------------------------------ opening

    function test_open_on_report_starts_a_game_the_verifier_defends() public {
        (uint256 jobId, address verifier, uint256 index) = _passedJob(false);
        ProbeClaim memory probe = probes[jobId][index];
        uint256 before = _bal(whistleblower);
        vm.expectEmit(true, true, false, true, address(game));
        emit IDisputeGame.ReportDisputeOpened(1, jobId, index, seals[jobId].assignSeed);
        uint256 gameId = _openOnReport(whistleblower, jobId, index);
        Game memory g = game.getGame(gameId);
        assertTrue(g.onReport && !g.byVerifier, "a report game");
        assertEq(g.defender, verifier, "the verifier defends");
        assertEq(g.challenger, whistleblower, "challenger");
        assertEq(g.segment, probe.segment, "segment");
        assertEq(g.steps, probe.step, "steps: the probe's inner step");
        assertEq(g.hi, probe.step, "disputed: the probe step");
        assertEq(g.agreedHash, TraceTree.stateHash(TRACE, probe.segment), "agreed: the checkpoint");
        assertEq(g.disputedHash, probe.stateHash, "disputed: the verifier's probe state");
        assertEq(uint8(g.status), uint8(GameStatus.DefenderToMove), "the defender moves first");
        Job memory job = market.getJob(jobId);
        assertEq(uint8(job.state), uint8(JobState.Disputed), "job disputed");
        assertEq(job.challenger, whistleblower, "job challenger");
        assertEq(_bal(whistleblower), before - CHALLENGE_BOND, "bond escrowed");
        assertEq(_bal(address(game)), CHALLENGE_BOND, "game holds the bond");
    }

    /// A whistleblower needs nothing off chain: the probes and the root the chain computed are in
    /// ReportSubmitted, and a proof built from them opens the report game.
    function test_open_on_report_from_the_probes_on_chain() public {
        (uint256 jobId, address verifier) = _verifying();
        vm.recordLogs();
        _passedProbes(jobId, verifier);
        Vm.Log[] memory logs = vm.getRecordedLogs();
        Probe[] memory onChain;
        bytes32 probeRoot;
        for (uint256 i; i < logs.length; ++i) {
            if (logs[i].topics[0] != IJobMarket.ReportSubmitted.selector) continue;
            (,, probeRoot, onChain,) = abi.decode(logs[i].data, (bool, bytes32, bytes32, Probe[], uint256));
        }
        assertEq(onChain.length, 4, "probeCount probes in the event");
        bytes32[] memory leaves = StandardTree.probeLeaves(onChain);
        assertEq(probeRoot, StandardTree.root(leaves), "the emitted root is the probes' tree root");
        ReportSeal memory seal = ReportSeal(seals[jobId].assignSeed, seals[jobId].forcedCommitment, probeRoot);
        uint256 index = 3;
        Probe memory p = onChain[index];
        ProbeClaim memory claim = ProbeClaim(index, p.segment, p.step, p.stateHash, StandardTree.proof(leaves, index));
        vm.prank(whistleblower);
        uint256 gameId = game.openOnReport(
            jobId, seal, claim, TraceTree.stateHash(TRACE, p.segment), TraceTree.proof(traceLeaves, p.segment)
        );
        assertEq(game.getGame(gameId).disputedHash, p.stateHash, "the emitted probe is disputed");
        assertEq(game.getGame(gameId).defender, verifier, "the verifier defends");
    }

    function test_open_on_report_rejects_bad_probes() public {
        (uint256 jobId,, uint256 index) = _passedJob(false);
        ProbeClaim memory probe = probes[jobId][index];
        ReportSeal memory seal = seals[jobId];
        bytes32 start = TraceTree.stateHash(TRACE, probe.segment);
        bytes32[] memory startProof = TraceTree.proof(traceLeaves, probe.segment);
        bytes memory invalid = abi.encodeWithSelector(IDisputeGame.InvalidProbe.selector, jobId, index);

        ProbeClaim memory wrong = probes[jobId][index]; // a copy (memory assignment would alias `probe`)
        wrong.segment = (probe.segment + 1) % (CHECKPOINTS - 1);
        vm.prank(whistleblower);
        vm.expectRevert(invalid);
        game.openOnReport(jobId, seal, wrong, start, startProof);

        wrong = probes[jobId][index];
        wrong.stateHash = keccak256("another state");
        vm.prank(whistleblower);
        vm.expectRevert(invalid);
        game.openOnReport(jobId, seal, wrong, start, startProof);

        ReportSeal memory badSeal = ReportSeal(seal.assignSeed, keccak256("claimed seed"), seal.probeRoot);
        vm.prank(whistleblower);
        vm.expectRevert(invalid);
        game.openOnReport(jobId, badSeal, probe, start, startProof);

        vm.prank(whistleblower);
        vm.expectRevert(IDisputeGame.ZeroHash.selector);
        game.openOnReport(jobId, seal, probe, bytes32(0), startProof);

        bytes32 otherStart = TraceTree.stateHash(TRACE, probe.segment + 1);
        vm.prank(whistleblower);
        vm.expectRevert(abi.encodeWithSelector(IDisputeGame.InvalidCheckpointProof.selector, probe.segment, otherStart));
        game.openOnReport(jobId, seal, probe, otherStart, startProof);
    }

    function test_open_on_report_whistleblower_rules() public {
        (uint256 jobId, address verifier, uint256 index) = _passedJob(false);
        ProbeClaim memory probe = probes[jobId][index];
        ReportSeal memory seal = seals[jobId];
        bytes32 start = TraceTree.stateHash(TRACE, probe.segment);
        bytes32[] memory startProof = TraceTree.proof(traceLeaves, probe.segment);
        _stake(solver, Role.Whistleblower, 50 ether);
        address[2] memory parties = [solver, verifier];
        for (uint256 i; i < 2; ++i) {
            vm.prank(parties[i]);
            vm.expectRevert(abi.encodeWithSelector(IDisputeGame.NotAuthorized.selector, parties[i]));
            game.openOnReport(jobId, seal, probe, start, startProof);
        }
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IDisputeGame.NotWhistleblower.selector, stranger));
        game.openOnReport(jobId, seal, probe, start, startProof);
        vm.warp(market.getJob(jobId).deadline + 1);
        vm.prank(whistleblower);
        vm.expectRevert(abi.encodeWithSelector(IDisputeGame.NotChallengeable.selector, jobId));
        game.openOnReport(jobId, seal, probe, start, startProof);
    }

    // ------------------------------------------------------------------ outcomes

    /// The verifier defends its probe, then goes silent: it loses its whole bond to the whistleblower
    /// and the job goes back to Committed for a draw that excludes it (the solver keeps its bond).
    function test_verifier_loses_by_clock_is_slashed_and_redrawn() public {
        (uint256 jobId, address verifier, uint256 index) = _passedJob(false);
        uint256 gameId = _openOnReport(whistleblower, jobId, index);
        uint256 mid = game.nextMidpoint(gameId);
        vm.prank(verifier);
        game.postMidpoint(gameId, ProbeTree.trueHash(99, mid), bytes32(0));
        vm.prank(whistleblower);
        game.answerMidpoint(gameId, false);
        uint256 stake = _staked(verifier, Role.Verifier);
        uint256 wbBefore = _bal(whistleblower);
        vm.warp(block.timestamp + game.params().clockTime + 1);
        vm.expectEmit(true, true, false, true, address(market));
        emit IJobMarket.ReportOverturned(jobId, verifier, VERIFIER_BOND);
        vm.expectEmit(true, false, false, true, address(market));
        emit IJobMarket.DrawReanchored(jobId, block.number);
        game.timeoutClock(gameId);

        Game memory g = game.getGame(gameId);
        assertEq(uint8(g.status), uint8(GameStatus.ChallengerWon), "challenger won");
        assertEq(_staked(verifier, Role.Verifier), stake - VERIFIER_BOND, "whole verifier bond slashed");
        assertEq(_locked(verifier, Role.Verifier), 0, "nothing left locked");
        assertEq(_bal(whistleblower), wbBefore + CHALLENGE_BOND + VERIFIER_BOND, "bond back + the slash");
        Job memory job = market.getJob(jobId);
        assertEq(uint8(job.state), uint8(JobState.Committed), "back to Committed");
        assertEq(job.verifier, verifier, "kept for the exclusion");
        assertEq(job.challenger, address(0), "challenger cleared");
        assertEq(_locked(solver, Role.Solver), 50 ether, "the solver is not at fault");
        assertEq(_bal(address(game)), 0, "game empty");

        address next = _assign(jobId);
        assertTrue(next != verifier && next != address(0), "re-drawn, excluding the overturned verifier");
        assertEq(uint8(_jobState(jobId)), uint8(JobState.Verifying), "verifying again");
        assertEq(
            market.reportSeal(jobId),
            keccak256(abi.encode(seals[jobId].assignSeed, seals[jobId].forcedCommitment)),
            "fresh seal"
        );
    }

    /// The whistleblower goes silent: the verifier wins its bond, the challenge window resumes, and
    /// the job finalizes normally (the tax moves into the jackpot).
    function test_verifier_wins_and_the_window_resumes() public {
        (uint256 jobId, address verifier, uint256 index) = _passedJob(false);
        uint256 left = market.getJob(jobId).deadline - block.timestamp;
        uint256 gameId = _openOnReport(whistleblower, jobId, index);
        uint256 mid = game.nextMidpoint(gameId);
        vm.prank(verifier);
        game.postMidpoint(gameId, ProbeTree.trueHash(99, mid), bytes32(0));
        uint256 vBefore = _bal(verifier);
        vm.warp(block.timestamp + game.params().clockTime + 1);
        vm.expectEmit(true, false, false, true, address(market));
        emit IJobMarket.ChallengeWindowResumed(jobId, SafeCast.toUint32(block.timestamp + left));
        game.timeoutClock(gameId);
        assertEq(uint8(_status(gameId)), uint8(GameStatus.DefenderWon), "defender won");
        assertEq(_bal(verifier), vBefore + CHALLENGE_BOND, "the challenge bond to the verifier");
        Job memory job = market.getJob(jobId);
        assertEq(uint8(job.state), uint8(JobState.Verified), "Verified again");
        assertEq(job.deadline, block.timestamp + left, "resumed with the time left");
        assertEq(_locked(verifier, Role.Verifier), VERIFIER_BOND, "verifier bond still locked");

        vm.warp(block.timestamp + left + 1);
        uint256 pool = market.jackpot();
        market.finalize(jobId);
        assertEq(_bal(verifier), vBefore + CHALLENGE_BOND + FEE, "fee paid");
        assertEq(market.jackpot(), pool + market.jackpotTax(REWARD, FEE), "taxed");
    }

    /// A committee verdict against the verifier's step; the committee of a report game excludes the
    /// defending verifier, the challenger, the job's solver and its submitter.
    function test_report_game_verdict_and_committee_exclusions() public {
        _stake(solver, Role.Verifier, 600 ether);
        _stake(submitter, Role.Verifier, 600 ether);
        (uint256 jobId, address verifier, uint256 index) = _passedJob(false);
        uint256 gameId = _openOnReport(whistleblower, jobId, index);
        _bisect(gameId, 1);
        assertEq(uint8(_status(gameId)), uint8(GameStatus.Isolated), "isolated");
        address[] memory referees = _draw(gameId);
        for (uint256 i; i < referees.length; ++i) {
            address r = referees[i];
            assertTrue(r != verifier && r != whistleblower && r != solver && r != submitter, "excluded");
            _commit(gameId, r, false);
        }
        for (uint256 i; i < referees.length; ++i) {
            _reveal(gameId, referees[i], false);
        }
        uint256 stake = _staked(verifier, Role.Verifier);
        game.settle(gameId);
        Game memory g = game.getGame(gameId);
        assertEq(uint8(g.status), uint8(GameStatus.ChallengerWon), "verdict against the verifier");
        assertEq(_staked(verifier, Role.Verifier), stake - VERIFIER_BOND, "verifier slashed");
        assertEq(uint8(_jobState(jobId)), uint8(JobState.Committed), "re-draw");
    }

    // ------------------------------------------------------------------ forced errors

    function test_concede_forced_pays_the_jackpot_share() public {
        (uint256 jobId, address verifier,) = _passedJob(true);
        uint256 gameId = _openOnReport(whistleblower, jobId, 0);
        uint256 payout = POOL * 2000 / 10_000;
        uint256 wbBefore = _bal(whistleblower);
        uint256 stake = _staked(verifier, Role.Verifier);
        uint256 left = market.getJob(jobId).challengeLeft;
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.ForcedErrorCaught(jobId, verifier, whistleblower, payout, POOL - payout);
        vm.expectEmit(true, true, false, true, address(game));
        emit IDisputeGame.DisputeSettled(
            gameId, jobId, GameStatus.ChallengerWon, SettleReason.ForcedError, whistleblower, payout + CHALLENGE_BOND, 0
        );
        vm.prank(verifier);
        game.concedeForced(gameId, _secret(verifier), seals[jobId]);

        assertEq(_bal(whistleblower), wbBefore + payout + CHALLENGE_BOND, "share of the jackpot + bond back");
        assertEq(market.jackpot(), POOL - payout, "jackpot paid out");
        assertEq(_bal(address(game)), 0, "game empty");
        assertEq(game.activeGame(jobId), 0, "no active game");
        assertEq(_staked(verifier, Role.Verifier), stake, "forced verifier not slashed");
        assertEq(_locked(verifier, Role.Verifier), VERIFIER_BOND, "bond locked until finalize");
        assertEq(market.forcedSeedOf(verifier).commitment, bytes32(0), "revealed seed cleared");
        Job memory job = market.getJob(jobId);
        assertEq(uint8(job.state), uint8(JobState.Verified), "window resumes");
        assertEq(job.deadline, block.timestamp + left, "with the time left");

        uint256 vBefore = _bal(verifier);
        vm.warp(job.deadline + 1);
        market.finalize(jobId);
        assertEq(_bal(verifier), vBefore + FEE, "the forced verifier keeps its fee");
        assertEq(_locked(verifier, Role.Verifier), 0, "and its bond");
        assertEq(market.jackpot(), POOL - payout + market.jackpotTax(REWARD, FEE), "tax in");
    }

    function test_concede_rules() public {
        (uint256 jobId, address verifier,) = _passedJob(true);
        uint256 gameId = _openOnReport(whistleblower, jobId, 0);
        ReportSeal memory seal = seals[jobId];
        vm.prank(whistleblower);
        vm.expectRevert(abi.encodeWithSelector(IDisputeGame.NotAuthorized.selector, whistleblower));
        game.concedeForced(gameId, _secret(verifier), seal);
        vm.prank(verifier);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.NotForced.selector, jobId));
        game.concedeForced(gameId, keccak256("not my secret"), seal);
        ReportSeal memory bad = ReportSeal(seal.assignSeed, seal.forcedCommitment, keccak256("another root"));
        vm.prank(verifier);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.InvalidSeal.selector, jobId));
        game.concedeForced(gameId, _secret(verifier), bad);

        // after the committee draw the step is the referees' to judge
        _bisect(gameId, 1);
        _draw(gameId);
        vm.prank(verifier);
        vm.expectRevert(abi.encodeWithSelector(IDisputeGame.NotConcedable.selector, gameId));
        game.concedeForced(gameId, _secret(verifier), seal);
    }

    function test_concede_on_a_solver_game_reverts() public {
        (uint256 jobId,) = _failed();
        uint256 gameId = _open(market.getJob(jobId).verifier, jobId, 2, 8);
        vm.prank(solver);
        vm.expectRevert(abi.encodeWithSelector(IDisputeGame.NotConcedable.selector, gameId));
        game.concedeForced(gameId, bytes32(0), seals[jobId]);
    }

    /// One payout per seal: after a concession the forced probe cannot be disputed again, and a game
    /// on another probe cannot be conceded (it is defended or lost like any other).
    function test_a_seal_pays_once() public {
        (uint256 jobId, address verifier,) = _passedJob(true);
        uint256 first = _openOnReport(whistleblower, jobId, 0);
        vm.prank(verifier);
        game.concedeForced(first, _secret(verifier), seals[jobId]);
        ProbeClaim memory probe = probes[jobId][0];
        vm.prank(whistleblower);
        vm.expectRevert(abi.encodeWithSelector(IDisputeGame.InvalidProbe.selector, jobId, 0));
        game.openOnReport(
            jobId,
            seals[jobId],
            probe,
            TraceTree.stateHash(TRACE, probe.segment),
            TraceTree.proof(traceLeaves, probe.segment)
        );
        uint256 second = _openOnReport(whistleblower, jobId, 1);
        vm.prank(verifier);
        vm.expectRevert(abi.encodeWithSelector(IDisputeGame.NotConcedable.selector, second));
        game.concedeForced(second, _secret(verifier), seals[jobId]);
    }

    /// An unforced verifier cannot claim its probe was forced: no seed snapshotted, nothing to reveal.
    function test_unforced_verifier_cannot_concede() public {
        (uint256 jobId, address verifier, uint256 index) = _passedJob(false);
        vm.prank(verifier);
        market.commitForcedSeed(keccak256(abi.encode(_secret(verifier), verifier))); // too late: after the anchor
        uint256 gameId = _openOnReport(whistleblower, jobId, index);
        vm.prank(verifier);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.NotForced.selector, jobId));
        game.concedeForced(gameId, _secret(verifier), seals[jobId]);
    }
}
