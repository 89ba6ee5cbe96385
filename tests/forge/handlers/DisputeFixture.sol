// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Hashes} from "@openzeppelin/contracts/utils/cryptography/Hashes.sol";
import {Test} from "../utils/Test.sol";
import {VeriToken} from "../../../contracts/VeriToken.sol";
import {StakeManager} from "../../../contracts/StakeManager.sol";
import {JobMarket} from "../../../contracts/JobMarket.sol";
import {DisputeGame} from "../../../contracts/DisputeGame.sol";
import {Game, GameParams, GameStatus} from "../../../contracts/interfaces/IDisputeGame.sol";
import {JobState, MarketParams, Role} from "../../../contracts/Types.sol";
import {TraceLib} from "../../../contracts/libraries/TraceLib.sol";

/// @notice Trace trees the way the solver builds them: OpenZeppelin-compatible (sorted-pair keccak),
///         leaves TraceLib.leaf(index, stateHash). Any tree shape verifies with MerkleProof; this one
///         promotes an odd last node unchanged to the next level.
library TraceTree {
    /// The state hash checkpoint `index` has in the solver's trace `salt`.
    function stateHash(uint256 salt, uint256 index) internal pure returns (bytes32) {
        return keccak256(abi.encode("state", salt, index));
    }

    function leaves(uint256 salt, uint256 count) internal pure returns (bytes32[] memory out) {
        out = new bytes32[](count);
        for (uint256 i; i < count; ++i) {
            out[i] = TraceLib.leaf(i, stateHash(salt, i));
        }
    }

    function root(bytes32[] memory layer) internal pure returns (bytes32) {
        while (layer.length > 1) layer = _up(layer);
        return layer[0];
    }

    function proof(bytes32[] memory layer, uint256 index) internal pure returns (bytes32[] memory out) {
        bytes32[] memory path = new bytes32[](64);
        uint256 n;
        while (layer.length > 1) {
            uint256 sibling = index ^ 1;
            if (sibling < layer.length) path[n++] = layer[sibling];
            layer = _up(layer);
            index /= 2;
        }
        out = new bytes32[](n);
        for (uint256 i; i < n; ++i) {
            out[i] = path[i];
        }
    }

    function _up(bytes32[] memory layer) private pure returns (bytes32[] memory next) {
        next = new bytes32[]((layer.length + 1) / 2);
        for (uint256 i; i < next.length; ++i) {
            next[i] =
                2 * i + 1 < layer.length ? Hashes.commutativeKeccak256(layer[2 * i], layer[2 * i + 1]) : layer[2 * i];
        }
    }
}

/// @notice The real protocol (token, StakeManager, JobMarket, DisputeGame) deployed and wired the way
///         deploy/ wires it, with funded and staked actors and a committed trace of CHECKPOINTS leaves.
abstract contract DisputeFixture is Test {
    uint256 internal constant SUPPLY = 1_000_000_000 ether;
    uint256 internal constant FUND = 1_000_000 ether;
    uint96 internal constant REWARD = 100 ether;
    uint96 internal constant FEE = 10 ether;
    uint32 internal constant COMMIT_WINDOW = 2 hours;
    uint256 internal constant CHECKPOINTS = 11; // 10 segments
    uint256 internal constant TRACE = 7; // the solver's trace salt
    uint256 internal constant VERIFIERS = 6;

    VeriToken internal token;
    StakeManager internal stakes;
    JobMarket internal market;
    DisputeGame internal game;
    bytes32[] internal traceLeaves;

    address internal submitter = address(0x5B);
    address internal solver = address(0x50);
    address internal whistleblower = address(0xB1);
    address internal stranger = address(0xBAD);
    address[VERIFIERS] internal verifiers =
        [address(0xF1), address(0xF2), address(0xF3), address(0xF4), address(0xF5), address(0xF6)];

    function _marketParams() internal pure returns (MarketParams memory) {
        return MarketParams({
            minSolverBond: 10 ether,
            solverBondBps: 5000, // solver bond 50 VERI at REWARD
            minVerifierBond: 5 ether,
            verifierBondBps: 2000, // verifier bond 20 VERI at REWARD
            timeoutSlashBps: 5000,
            openWindow: 1 days,
            maxCommitWindow: 7 days,
            reportWindow: 1 hours,
            challengeWindow: 1 hours,
            disputeWindow: 1 days,
            maxVerifierDraws: 3
        });
    }

    function _gameParams() internal pure returns (GameParams memory) {
        return GameParams({
            challengeBond: 20 ether,
            refereeBond: 10 ether,
            refereeFee: 2 ether,
            clockTime: 1 hours,
            openWindow: 1 hours,
            drawWindow: 30 minutes,
            commitWindow: 1 hours,
            revealWindow: 1 hours,
            maxSegmentSteps: 100_000,
            committeeSize: 3
        });
    }

    function _deploy() internal {
        vm.warp(1_700_000_000);
        vm.roll(100);
        token = new VeriToken(SUPPLY);
        stakes = new StakeManager(token, [uint96(100 ether), uint96(100 ether), uint96(50 ether)], 1 days);
        market = new JobMarket(token, stakes, _marketParams());
        game = new DisputeGame(market, _gameParams());
        address[] memory protocols = new address[](2);
        protocols[0] = address(market);
        protocols[1] = address(game);
        stakes.authorize(protocols);
        market.setDisputeGame(address(game));
    }

    function _fund(address account) internal {
        assertTrue(token.transfer(account, FUND), "funded");
        vm.startPrank(account);
        token.approve(address(stakes), type(uint256).max);
        token.approve(address(market), type(uint256).max);
        token.approve(address(game), type(uint256).max);
        vm.stopPrank();
    }

    function _stake(address account, Role role, uint96 amount) internal {
        vm.prank(account);
        stakes.stake(role, amount);
    }

    /// Deploys, funds and stakes: the solver, a whistleblower, and six verifiers of 100..600 VERI.
    function _setUpProtocol() internal {
        _deploy();
        _fund(submitter);
        _fund(solver);
        _fund(whistleblower);
        _fund(stranger);
        _stake(solver, Role.Solver, 500 ether);
        _stake(whistleblower, Role.Whistleblower, 50 ether);
        for (uint256 i; i < VERIFIERS; ++i) {
            _fund(verifiers[i]);
            _stake(verifiers[i], Role.Verifier, uint96(100 ether * (i + 1)));
        }
        traceLeaves = TraceTree.leaves(TRACE, CHECKPOINTS);
    }

    // ------------------------------------------------------------------ jobs

    function _verifying() internal returns (uint256 jobId, address verifier) {
        vm.prank(submitter);
        jobId = market.postJob(keccak256("spec"), REWARD, FEE, COMMIT_WINDOW);
        vm.prank(solver);
        market.claim(jobId);
        vm.prank(solver);
        // forge-lint: disable-next-line(unsafe-typecast)
        market.commit(
            jobId, TraceTree.root(traceLeaves), uint32(CHECKPOINTS), keccak256("model"), keccak256("manifest")
        );
        vm.roll(block.number + 2);
        market.assignVerifier(jobId);
        verifier = market.getJob(jobId).verifier;
    }

    /// A job whose verifier reported a failure (Disputed, the verifier is the challenger).
    function _failed() internal returns (uint256 jobId, address verifier) {
        (jobId, verifier) = _verifying();
        vm.prank(verifier);
        market.report(jobId, false, keccak256("report"));
    }

    /// A job whose verifier passed it (Verified, challenge window running).
    function _passed() internal returns (uint256 jobId, address verifier) {
        (jobId, verifier) = _verifying();
        vm.prank(verifier);
        market.report(jobId, true, keccak256("report"));
    }

    /// `challenger` opens a game on `segment` of `jobId` with `steps` steps.
    function _open(address challenger, uint256 jobId, uint256 segment, uint256 steps)
        internal
        returns (uint256 gameId)
    {
        vm.prank(challenger);
        gameId = game.open(
            jobId,
            segment,
            steps,
            TraceTree.stateHash(TRACE, segment),
            TraceTree.proof(traceLeaves, segment),
            TraceTree.stateHash(TRACE, segment + 1),
            TraceTree.proof(traceLeaves, segment + 1)
        );
    }

    // ------------------------------------------------------------------ bisection

    /// The solver's state hash at `step` of a game (what its daemon would recompute and post).
    function _claim(uint256 step) internal pure returns (bytes32) {
        return keccak256(abi.encode("solver state", step));
    }

    function _cid(uint256 step) internal pure returns (bytes32) {
        return keccak256(abi.encode("cid", step));
    }

    /// Plays the bisection: the solver posts its state at each midpoint; an honest challenger whose
    /// first diverging state is `divergence` agrees exactly with the midpoints below it.
    function _bisect(uint256 gameId, uint256 divergence) internal returns (uint256 moves) {
        Game memory g = game.getGame(gameId);
        while (g.status == GameStatus.SolverToMove) {
            uint256 mid = game.nextMidpoint(gameId);
            vm.prank(g.solver);
            game.postMidpoint(gameId, _claim(mid), _cid(mid));
            vm.prank(g.challenger);
            game.answerMidpoint(gameId, mid < divergence);
            ++moves;
            g = game.getGame(gameId);
        }
    }

    // ------------------------------------------------------------------ arbitration

    function _salt(address referee) internal pure returns (bytes32) {
        return keccak256(abi.encode("salt", referee));
    }

    function _commitment(uint256 gameId, bool solverRight, address referee) internal pure returns (bytes32) {
        return keccak256(abi.encode(gameId, solverRight, _salt(referee), referee));
    }

    /// Draws the committee (waiting for the seed block) and returns it.
    function _draw(uint256 gameId) internal returns (address[] memory referees) {
        vm.roll(block.number + 2);
        game.drawCommittee(gameId);
        referees = game.committee(gameId);
    }

    function _commit(uint256 gameId, address referee, bool solverRight) internal {
        vm.prank(referee);
        game.commitVote(gameId, _commitment(gameId, solverRight, referee));
    }

    function _reveal(uint256 gameId, address referee, bool solverRight) internal {
        vm.prank(referee);
        game.revealVote(gameId, solverRight, _salt(referee));
    }

    // ------------------------------------------------------------------ reading

    function _bal(address account) internal view returns (uint256) {
        return token.balanceOf(account);
    }

    function _staked(address account, Role role) internal view returns (uint256) {
        return stakes.stakeOf(account, role).staked;
    }

    function _locked(address account, Role role) internal view returns (uint256) {
        return stakes.stakeOf(account, role).locked;
    }

    function _status(uint256 gameId) internal view returns (GameStatus) {
        return game.getGame(gameId).status;
    }

    function _jobState(uint256 jobId) internal view returns (JobState) {
        return market.getJob(jobId).state;
    }
}
