// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Test} from "./Test.sol";
import {VeriToken} from "../../../contracts/VeriToken.sol";
import {StakeManager} from "../../../contracts/StakeManager.sol";
import {JobMarket} from "../../../contracts/JobMarket.sol";
import {ForcedSeed, Job, JobState, MarketParams, Probe, ReportSeal, Role} from "../../../contracts/Types.sol";
import {StandardTree} from "./StandardTree.sol";

/// @notice A deployed and wired protocol with funded actors; `game` stands in for the dispute game.
abstract contract Fixture is Test {
    uint256 internal constant SUPPLY = 1_000_000_000 ether;
    uint256 internal constant FUND = 1_000_000 ether;
    uint96 internal constant MIN_SOLVER_STAKE = 100 ether;
    uint96 internal constant MIN_VERIFIER_STAKE = 100 ether;
    uint96 internal constant MIN_WHISTLEBLOWER_STAKE = 50 ether;
    uint32 internal constant UNBONDING = 1 days;
    uint96 internal constant REWARD = 100 ether;
    uint96 internal constant FEE = 10 ether;
    uint256 internal constant TAX = 3.3 ether; // (REWARD + FEE) * jackpotTaxBps (3 %)
    uint256 internal constant ESCROW = REWARD + FEE + TAX;
    uint32 internal constant COMMIT_WINDOW = 2 hours;
    bytes32 internal constant SPEC = keccak256("spec");
    bytes32 internal constant ROOT = keccak256("root");
    bytes32 internal constant MODEL = keccak256("model");
    bytes32 internal constant MANIFEST = keccak256("manifest");
    bytes32 internal constant REPORT = keccak256("report");

    VeriToken internal token;
    StakeManager internal stakes;
    JobMarket internal market;

    address internal submitter = address(0x5B);
    address internal solver = address(0x50);
    address internal solver2 = address(0x51);
    address internal verifier1 = address(0xF1);
    address internal verifier2 = address(0xF2);
    address internal verifier3 = address(0xF3);
    address internal game = address(0x6A);
    address internal stranger = address(0xBAD);

    /// Each job's last draw seal (probeRoot 0) as the tests computed it from the draw's inputs.
    mapping(uint256 jobId => ReportSeal) internal seals;

    function _params() internal pure virtual returns (MarketParams memory) {
        return MarketParams({
            minSolverBond: 10 ether,
            solverBondBps: 5000,
            minVerifierBond: 5 ether,
            verifierBondBps: 2000,
            timeoutSlashBps: 5000,
            openWindow: 1 days,
            maxCommitWindow: 7 days,
            reportWindow: 1 hours,
            challengeWindow: 1 hours,
            disputeWindow: 1 days,
            maxVerifierDraws: 3,
            jackpotTaxBps: 300,
            jackpotShareBps: 2000,
            forcedErrorRateBps: 100,
            probeCount: 4,
            availabilityWindow: 1 hours,
            availabilityDeposit: 1 ether,
            fullReplayRateBps: 0, // sampled verification only: FullReplay.t.sol draws full replays
            fullReplayFeeBps: 0
        });
    }

    function _deploy() internal {
        vm.warp(1_700_000_000);
        vm.roll(100);
        token = new VeriToken(SUPPLY);
        stakes = new StakeManager(token, [MIN_SOLVER_STAKE, MIN_VERIFIER_STAKE, MIN_WHISTLEBLOWER_STAKE], UNBONDING);
        market = new JobMarket(token, stakes, _params());
        address[] memory more = _moreProtocols();
        address[] memory protocols = new address[](2 + more.length);
        protocols[0] = address(market);
        protocols[1] = game;
        for (uint256 i; i < more.length; ++i) {
            protocols[2 + i] = more[i];
        }
        stakes.authorize(protocols);
        market.setDisputeGame(game);
    }

    /// Protocol contracts a fixture deploys once the market exists, authorized with it (none here).
    function _moreProtocols() internal virtual returns (address[] memory) {
        return new address[](0);
    }

    function _fund(address account) internal {
        assertTrue(token.transfer(account, FUND), "funded");
        vm.startPrank(account);
        token.approve(address(stakes), type(uint256).max);
        token.approve(address(market), type(uint256).max);
        vm.stopPrank();
    }

    function _stake(address account, Role role, uint96 amount) internal {
        vm.prank(account);
        stakes.stake(role, amount);
    }

    /// Deploys, funds every actor, stakes the solvers and three verifiers (weights 100, 200, 300).
    function _setUpActors() internal {
        _deploy();
        address[8] memory actors = [submitter, solver, solver2, verifier1, verifier2, verifier3, game, stranger];
        for (uint256 i; i < actors.length; ++i) {
            _fund(actors[i]);
        }
        _stake(solver, Role.Solver, 500 ether);
        _stake(solver2, Role.Solver, 500 ether);
        _stake(verifier1, Role.Verifier, 100 ether);
        _stake(verifier2, Role.Verifier, 200 ether);
        _stake(verifier3, Role.Verifier, 300 ether);
    }

    function _post() internal returns (uint256 jobId) {
        vm.prank(submitter);
        jobId = market.postJob(SPEC, REWARD, FEE, COMMIT_WINDOW, false);
    }

    function _claimed() internal returns (uint256 jobId) {
        jobId = _post();
        vm.prank(solver);
        market.claim(jobId);
    }

    function _committed() internal returns (uint256 jobId) {
        jobId = _claimed();
        vm.prank(solver);
        market.commit(jobId, ROOT, 11, MODEL, MANIFEST);
    }

    function _verifying() internal returns (uint256 jobId, address verifier) {
        jobId = _committed();
        verifier = _assign(jobId);
    }

    /// Draws the job's verifier (waiting for the seed block) and records the seal of the draw,
    /// computed the way the market specifies it: assignSeed = keccak256(abi.encode(drawSeed)) (not
    /// the verifier), the forced commitment only if set at or before the anchor block.
    function _assign(uint256 jobId) internal returns (address verifier) {
        Job memory job = market.getJob(jobId);
        if (block.number < job.anchorBlock + 2) vm.roll(job.anchorBlock + 2);
        market.assignVerifier(jobId);
        verifier = _recordSeal(jobId, job);
    }

    /// Records the seal of the draw that just made `before` (the job before assignVerifier) Verifying.
    function _recordSeal(uint256 jobId, Job memory before) internal returns (address verifier) {
        uint256 anchor = before.anchorBlock;
        verifier = market.getJob(jobId).verifier;
        bytes32 drawSeed = keccak256(abi.encode(blockhash(anchor + 1), jobId, before.draws));
        ForcedSeed memory seed = market.forcedSeedOf(verifier);
        seals[jobId] =
            ReportSeal(keccak256(abi.encode(drawSeed)), seed.setAtBlock <= anchor ? seed.commitment : bytes32(0), 0);
    }

    /// The probes a passing report of job `jobId` publishes under its last draw's seal: probeCount
    /// slots, slot i on probeSegment(assignSeed, i, checkpointCount), at step i + 1, a made-up state.
    function _probes(uint256 jobId) internal view returns (Probe[] memory probes) {
        bytes32 assignSeed = seals[jobId].assignSeed;
        uint256 checkpoints = market.getJob(jobId).checkpointCount;
        probes = new Probe[](market.params().probeCount);
        for (uint256 i; i < probes.length; ++i) {
            probes[i] =
                Probe(market.probeSegment(assignSeed, i, checkpoints), i + 1, keccak256(abi.encode("probe", jobId, i)));
        }
    }

    /// `verifier` reports on `jobId` under the seal _assign recorded (with _probes when it passes) and
    /// the recorded seal gains the probe root (0 on a fail).
    function _report(uint256 jobId, address verifier, bool passed) internal {
        Probe[] memory probes = passed ? _probes(jobId) : new Probe[](0);
        ReportSeal memory seal = seals[jobId];
        vm.prank(verifier);
        market.report(jobId, passed, REPORT, seal.assignSeed, seal.forcedCommitment, probes);
        seals[jobId].probeRoot = passed ? StandardTree.root(StandardTree.probeLeaves(probes)) : bytes32(0);
    }

    function _verified() internal returns (uint256 jobId, address verifier) {
        (jobId, verifier) = _verifying();
        _report(jobId, verifier, true);
    }

    function _disputed() internal returns (uint256 jobId, address verifier) {
        (jobId, verifier) = _verifying();
        _report(jobId, verifier, false);
    }

    /// Revert data of an error taking one bytes32 name (a string literal converts implicitly).
    function _withName(bytes4 selector, bytes32 name) internal pure returns (bytes memory) {
        return abi.encodeWithSelector(selector, name);
    }

    function _state(uint256 jobId) internal view returns (JobState) {
        return market.getJob(jobId).state;
    }

    function _locked(address account, Role role) internal view returns (uint256) {
        return stakes.stakeOf(account, role).locked;
    }

    function _staked(address account, Role role) internal view returns (uint256) {
        return stakes.stakeOf(account, role).staked;
    }

    /// The account's tokens (a fixture with a contract that pays by credit claims it first).
    function _bal(address account) internal virtual returns (uint256) {
        return token.balanceOf(account);
    }
}
