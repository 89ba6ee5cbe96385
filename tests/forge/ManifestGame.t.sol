// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {DisputeFixture, MANIFEST_BYTES} from "./handlers/DisputeFixture.sol";
import {Game, GameStatus, IDisputeGame, SettleReason} from "../../contracts/interfaces/IDisputeGame.sol";
import {JobState, Probe, Role} from "../../contracts/Types.sol";
import {IsolatedGas} from "./utils/IsolatedGas.sol";

/// @notice A job whose committed manifest (MANIFEST_BYTES) a challenger can get published and dispute.
abstract contract ManifestGameFixture is DisputeFixture {
    uint256 internal constant SOLVER_BOND = 50 ether;
    uint256 internal constant VERIFIER_BOND = 20 ether;
    uint256 internal constant CHALLENGE_BOND = 20 ether;
    uint256 internal constant REFEREE_FEE = 2 ether;
    uint256 internal constant FEES = 3 * REFEREE_FEE;
    uint256 internal constant DEPOSIT = 1 ether;

    uint256 internal manifestItem;

    function setUp() public {
        _setUpProtocol();
        _seedVerifiers();
        manifestItem = market.MANIFEST_ITEM();
    }

    /// `challenger` challenges the manifest's availability and the solver publishes it, unless it is
    /// published already (a publication is keyed by the manifest CID: every job of this file commits
    /// the same manifest).
    function _publish(uint256 jobId, address challenger) internal {
        if (market.isPublished(jobId, manifestItem)) return;
        vm.prank(challenger);
        market.challengeAvailability(jobId, manifestItem);
        vm.prank(solver);
        market.answerAvailability(jobId, MANIFEST_BYTES, new bytes32[](0));
    }

    /// A job whose verifier challenged the manifest, got it published and reported a failure.
    function _failedOnManifest() internal returns (uint256 jobId, address verifier) {
        (jobId, verifier) = _verifying();
        _publish(jobId, verifier);
        vm.prank(verifier);
        market.report(
            jobId, false, keccak256("report"), seals[jobId].assignSeed, seals[jobId].forcedCommitment, new Probe[](0)
        );
    }

    function _openOnManifest(address challenger, uint256 jobId) internal returns (uint256 gameId) {
        vm.prank(challenger);
        gameId = game.openOnManifest(jobId);
    }

    /// Draws the committee and every referee votes `defenderRight`.
    function _vote(uint256 gameId, bool defenderRight) internal {
        address[] memory referees = _draw(gameId);
        for (uint256 i; i < referees.length; ++i) {
            _commit(gameId, referees[i], defenderRight);
        }
        for (uint256 i; i < referees.length; ++i) {
            _reveal(gameId, referees[i], defenderRight);
        }
    }
}

/// @notice The manifest game (DisputeGame.openOnManifest): a committed manifest that gives no leaves
///         for `open` (it does not parse, or names another root) is disputed whole, once the solver
///         published it on chain; the step is isolated at once and the committee rules on it. The
///         payouts are those of a trace game on segment 0.
contract ManifestGameTest is ManifestGameFixture {
    function test_failing_verifier_wins_the_solver_bond_on_a_manifest_the_referees_reject() public {
        (uint256 jobId, address verifier) = _failedOnManifest();
        uint256 verifierBefore = _bal(verifier);
        uint256 verifierStake = _staked(verifier, Role.Verifier);
        uint256 solverStake = _staked(solver, Role.Solver);
        vm.expectEmit(true, true, false, false, address(game));
        emit IDisputeGame.ManifestDisputeOpened(1, jobId);
        uint256 gameId = _openOnManifest(verifier, jobId);
        Game memory g = game.getGame(gameId);
        assertTrue(g.status == GameStatus.Isolated, "isolated at once: nothing to bisect");
        assertEq(uint256(g.steps) + g.segment + g.lo + g.hi, 0, "segment 0, no steps");
        assertTrue(g.byVerifier && g.challenger == verifier && g.defender == solver, "parties");
        assertEq(_bal(verifier), verifierBefore - CHALLENGE_BOND, "challenge bond escrowed");
        _vote(gameId, false);
        vm.expectEmit(true, true, false, true, address(game));
        emit IDisputeGame.DisputeSettled(
            gameId,
            jobId,
            GameStatus.ChallengerWon,
            SettleReason.Verdict,
            verifier,
            CHALLENGE_BOND + SOLVER_BOND - FEES,
            FEES
        );
        game.settle(gameId);
        assertEq(_bal(verifier), verifierBefore + SOLVER_BOND - FEES, "the solver bond, less the referees' fees");
        assertEq(_staked(verifier, Role.Verifier), verifierStake, "the verifier keeps its stake");
        assertEq(stakes.stakeOf(verifier, Role.Verifier).locked, 0, "its bond released");
        assertEq(solverStake - _staked(solver, Role.Solver), SOLVER_BOND, "the solver loses its bond");
        assertTrue(_jobState(jobId) == JobState.Open, "reopened with its escrow: the submitter pays nothing");
        assertEq(_bal(address(game)), game.totalCredit(), "the game holds only the referees' credits");
    }

    function test_failing_verifier_that_disputes_a_manifest_the_referees_accept_loses_its_bond() public {
        (uint256 jobId, address verifier) = _failedOnManifest();
        uint256 solverBefore = _bal(solver);
        uint256 verifierStake = _staked(verifier, Role.Verifier);
        uint256 gameId = _openOnManifest(verifier, jobId);
        _vote(gameId, true);
        game.settle(gameId);
        assertTrue(_status(gameId) == GameStatus.DefenderWon, "solver won");
        // the reward, the game's payout (challenge bond + verifier bond - fees)
        assertEq(_bal(solver) - solverBefore, REWARD + CHALLENGE_BOND + VERIFIER_BOND - FEES, "solver paid");
        assertEq(verifierStake - _staked(verifier, Role.Verifier), VERIFIER_BOND, "the verifier loses its bond");
        assertTrue(_jobState(jobId) == JobState.Finalized, "finalized");
    }

    function test_whistleblower_disputes_the_manifest_of_a_passed_report() public {
        (uint256 jobId, address verifier) = _passed();
        _publish(jobId, whistleblower);
        uint256 wbBefore = _bal(whistleblower);
        uint256 verifierStake = _staked(verifier, Role.Verifier);
        uint256 gameId = _openOnManifest(whistleblower, jobId);
        assertTrue(_jobState(jobId) == JobState.Disputed && !game.getGame(gameId).byVerifier, "a whistleblower's game");
        _vote(gameId, false);
        game.settle(gameId);
        // the solver bond and the verifier bond (it passed a trace the referees rejected), less the fees
        assertEq(_bal(whistleblower) - wbBefore, SOLVER_BOND + VERIFIER_BOND - FEES, "whistleblower paid");
        assertEq(verifierStake - _staked(verifier, Role.Verifier), VERIFIER_BOND, "the verifier that passed it loses");
        assertTrue(_jobState(jobId) == JobState.Open, "reopened");
    }

    function test_open_on_manifest_guards() public {
        (uint256 jobId, address verifier) = _failed(); // reported without publishing the manifest
        vm.expectRevert(abi.encodeWithSelector(IDisputeGame.ManifestNotPublished.selector, jobId));
        _openOnManifest(verifier, jobId);

        (jobId, verifier) = _failedOnManifest();
        vm.expectRevert(abi.encodeWithSelector(IDisputeGame.NotAuthorized.selector, stranger));
        _openOnManifest(stranger, jobId);
        uint256 deadline = game.openDeadline(jobId);
        uint256 snap = vm.snapshotState();
        vm.warp(deadline + 1);
        vm.expectRevert(abi.encodeWithSelector(IDisputeGame.OpenWindowPassed.selector, jobId, deadline));
        _openOnManifest(verifier, jobId);
        vm.revertToState(snap);
        uint256 gameId = _openOnManifest(verifier, jobId);
        vm.expectRevert(abi.encodeWithSelector(IDisputeGame.GameExists.selector, jobId, gameId));
        _openOnManifest(verifier, jobId);

        (jobId, verifier) = _passed();
        _publish(jobId, whistleblower);
        vm.expectRevert(abi.encodeWithSelector(IDisputeGame.NotAuthorized.selector, solver));
        _openOnManifest(solver, jobId);
        vm.expectRevert(abi.encodeWithSelector(IDisputeGame.NotWhistleblower.selector, stranger));
        _openOnManifest(stranger, jobId);
        vm.warp(market.getJob(jobId).deadline + 1);
        vm.expectRevert(abi.encodeWithSelector(IDisputeGame.NotChallengeable.selector, jobId));
        _openOnManifest(whistleblower, jobId);
    }
}

/// Transaction gas of the manifest game (snapshots/ManifestGameGas.json), regenerated by
///   node_modules/.bin/forge test --offline --isolate --match-contract ManifestGameGasTest
/// (without --isolate the test skips itself and writes nothing). Steady state: another manifest game
/// is open, the manifest is published (by its CID, for both jobs), every actor was used once and was
/// paid by the game and claimed before.
contract ManifestGameGasTest is ManifestGameFixture, IsolatedGas {
    string internal constant GROUP = "ManifestGameGas";
    /// Budgets: openOnManifest reads the job and the publication and stores a game (as `open` does,
    /// without its two proofs); the settlement is a trace game's (committee of 3, two job bonds moved).
    uint256 internal constant OPEN_BUDGET = 200_000;
    uint256 internal constant SETTLE_BUDGET = 250_000;

    function test_manifest_game_gas() public {
        if (!_isolated()) return;
        _paidBefore(game, _actors());
        (uint256 warm, address warmVerifier) = _failedOnManifest();
        _openOnManifest(warmVerifier, warm); // stays open
        (uint256 jobId, address verifier) = _failedOnManifest();
        uint256 gameId = _openOnManifest(verifier, jobId);
        uint256 open = _gas();
        _vote(gameId, false);
        game.settle(gameId);
        uint256 settle = _gas();
        vm.snapshotValue(GROUP, "openOnManifest", open);
        vm.snapshotValue(GROUP, "settleVerdict", settle);
        assertTrue(open <= OPEN_BUDGET, "openOnManifest within its budget");
        assertTrue(settle <= SETTLE_BUDGET, "settle within its budget");
    }
}
