// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {Hashes} from "@openzeppelin/contracts/utils/cryptography/Hashes.sol";
import {Test} from "../utils/Test.sol";
import {VeriToken} from "../../../contracts/VeriToken.sol";
import {StakeManager} from "../../../contracts/StakeManager.sol";
import {JobMarket} from "../../../contracts/JobMarket.sol";
import {DisputeGame} from "../../../contracts/DisputeGame.sol";
import {Game, GameParams, GameStatus, ProbeClaim} from "../../../contracts/interfaces/IDisputeGame.sol";
import {ForcedSeed, JobState, MarketParams, Probe, ReportSeal, Role} from "../../../contracts/Types.sol";
import {ProbeLib} from "../../../contracts/libraries/ProbeLib.sol";
import {TraceLib} from "../../../contracts/libraries/TraceLib.sol";
import {StandardTree} from "../utils/StandardTree.sol";

// The committed manifest of the dispute suites: its bytes and their CIDv0 digest
// (core.storage.unixfs.file_cid, as in Availability.t.sol), so that a solver can publish it when challenged.
bytes constant MANIFEST_BYTES = "veritrain manifest";
bytes32 constant MANIFEST_CID = 0xa795f0678211148d1b44c7cc390a051611d7c4a5aa2d392f23c2cd885d288b4e;

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

/// @notice Probe trees the way the chain builds them (JobMarket.report, ProbeLib.root): leaves
///         ProbeLib.leaf(index, segment, step, stateHash) in an OpenZeppelin StandardMerkleTree
///         (StandardTree); segments and steps from the assign seed.
library ProbeTree {
    /// Steps per segment of the fixture traces (the spec's checkpoint interval k).
    uint256 internal constant K = 8;

    /// The inner step probe slot `index` states: 1 + keccak256(abi.encode(assignSeed, index, 1)) % (K - 1).
    function step(bytes32 assignSeed, uint256 index) internal pure returns (uint256) {
        return 1 + uint256(keccak256(abi.encode(assignSeed, index, 1))) % (K - 1);
    }

    /// The true model state at probe slot `index` of trace `salt` (what a replay yields).
    function trueHash(uint256 salt, uint256 index) internal pure returns (bytes32) {
        return keccak256(abi.encode("probe state", salt, index));
    }

    /// What a forced verifier publishes instead of `truth` (proofs/probes.py forced_hash).
    function forcedHash(bytes32 truth) internal pure returns (bytes32) {
        return keccak256(bytes.concat("veritrain/forced", truth));
    }

    /// The claims (with proofs against StandardTree.root(leaves)) of `hashes.length` probe slots under
    /// `assignSeed`.
    function claims(bytes32 assignSeed, uint256 checkpoints, bytes32[] memory hashes)
        internal
        pure
        returns (ProbeClaim[] memory out, bytes32[] memory leaves)
    {
        out = new ProbeClaim[](hashes.length);
        leaves = new bytes32[](hashes.length);
        for (uint256 i; i < hashes.length; ++i) {
            uint256 segment = ProbeLib.segmentOf(assignSeed, i, checkpoints);
            out[i] = ProbeClaim(i, segment, step(assignSeed, i), hashes[i], new bytes32[](0));
            leaves[i] = ProbeLib.leaf(i, segment, out[i].step, hashes[i]);
        }
        for (uint256 i; i < hashes.length; ++i) {
            out[i].proof = StandardTree.proof(leaves, i);
        }
    }

    /// The probes of `published` as JobMarket.report takes them (slot i = published[i]).
    function probes(ProbeClaim[] memory published) internal pure returns (Probe[] memory out) {
        out = new Probe[](published.length);
        for (uint256 i; i < published.length; ++i) {
            out[i] = Probe(published[i].segment, published[i].step, published[i].stateHash);
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
    /// Each job's last ReportSeal as the tests computed it (independently of the market's storage).
    mapping(uint256 jobId => ReportSeal) internal seals;
    /// Each job's published probe claims (with proofs) of its last passing report made by _passedProbes.
    mapping(uint256 jobId => ProbeClaim[]) internal probes;

    address internal submitter = address(0x5B);
    address internal solver = address(0x50);
    address internal whistleblower = address(0xB1);
    address internal stranger = address(0xBAD);
    address[VERIFIERS] internal verifiers =
        [address(0xF1), address(0xF2), address(0xF3), address(0xF4), address(0xF5), address(0xF6)];

    function _marketParams() internal pure virtual returns (MarketParams memory) {
        return MarketParams({
            minSolverBond: 10 ether,
            solverBondBps: 5000, // solver bond 50 VERI at REWARD
            minVerifierBond: 10 ether, // > committeeSize * refereeFee (DisputeGame constructor)
            verifierBondBps: 2000, // verifier bond 20 VERI at REWARD
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

    /// Every account the fixture funds.
    function _actors() internal view returns (address[] memory all) {
        all = new address[](4 + VERIFIERS);
        (all[0], all[1], all[2], all[3]) = (submitter, solver, whistleblower, stranger);
        for (uint256 i; i < VERIFIERS; ++i) {
            all[4 + i] = verifiers[i];
        }
    }

    // ------------------------------------------------------------------ jobs

    function _verifying() internal returns (uint256 jobId, address verifier) {
        vm.prank(submitter);
        jobId = market.postJob(keccak256("spec"), REWARD, FEE, COMMIT_WINDOW, false);
        vm.prank(solver);
        market.claim(jobId);
        vm.prank(solver);
        market.commit(
            jobId, TraceTree.root(traceLeaves), SafeCast.toUint32(CHECKPOINTS), keccak256("model"), MANIFEST_CID
        );
        verifier = _assign(jobId);
    }

    /// Draws the job's verifier (waiting for the seed block) and records the seal of the draw,
    /// computed the way the market specifies it.
    function _assign(uint256 jobId) internal returns (address verifier) {
        uint256 anchor = market.getJob(jobId).anchorBlock;
        uint256 draws = market.getJob(jobId).draws;
        if (block.number < anchor + 2) vm.roll(anchor + 2);
        market.assignVerifier(jobId);
        verifier = market.getJob(jobId).verifier;
        bytes32 drawSeed = keccak256(abi.encode(blockhash(anchor + 1), jobId, draws));
        ForcedSeed memory seed = market.forcedSeedOf(verifier);
        seals[jobId] = ReportSeal(
            keccak256(abi.encode(drawSeed)), seed.setAtBlock <= anchor ? seed.commitment : bytes32(0), 0
        );
    }

    /// The secret verifier `v` commits with _seedVerifiers.
    function _secret(address v) internal pure returns (bytes32) {
        return keccak256(abi.encode("secret", v));
    }

    /// Every verifier commits its forced-error seed (before any draw anchored from now on).
    function _seedVerifiers() internal {
        for (uint256 i; i < VERIFIERS; ++i) {
            vm.prank(verifiers[i]);
            market.commitForcedSeed(keccak256(abi.encode(_secret(verifiers[i]), verifiers[i])));
        }
    }

    /// The verifier passes the job with probeCount probes: the true states, except probe 0 when it is
    /// forced (isForced with its secret), which carries the forced hash. Records the claims and the seal.
    function _passedProbes(uint256 jobId, address verifier) internal returns (bool forced) {
        ReportSeal memory seal = seals[jobId];
        forced = market.isForced(_secret(verifier), verifier, seal);
        bytes32[] memory hashes = new bytes32[](market.params().probeCount);
        for (uint256 i; i < hashes.length; ++i) {
            hashes[i] = ProbeTree.trueHash(TRACE, i);
        }
        if (forced) hashes[0] = ProbeTree.forcedHash(hashes[0]);
        (ProbeClaim[] memory claims, bytes32[] memory leaves) = ProbeTree.claims(seal.assignSeed, CHECKPOINTS, hashes);
        seal.probeRoot = StandardTree.root(leaves);
        seals[jobId] = seal;
        delete probes[jobId];
        for (uint256 i; i < claims.length; ++i) {
            probes[jobId].push(claims[i]);
        }
        vm.prank(verifier);
        market.report(
            jobId, true, keccak256("report"), seal.assignSeed, seal.forcedCommitment, ProbeTree.probes(claims)
        );
    }

    /// `challenger` opens a report game on probe `index` of the job's last passing report.
    function _openOnReport(address challenger, uint256 jobId, uint256 index) internal returns (uint256 gameId) {
        ProbeClaim memory probe = probes[jobId][index];
        vm.prank(challenger);
        gameId = game.openOnReport(
            jobId,
            seals[jobId],
            probe,
            TraceTree.stateHash(TRACE, probe.segment),
            TraceTree.proof(traceLeaves, probe.segment)
        );
    }

    /// A job whose verifier reported a failure (Disputed, the verifier is the challenger).
    function _failed() internal returns (uint256 jobId, address verifier) {
        (jobId, verifier) = _verifying();
        ReportSeal memory seal = seals[jobId];
        vm.prank(verifier);
        market.report(jobId, false, keccak256("report"), seal.assignSeed, seal.forcedCommitment, new Probe[](0));
    }

    /// A job whose verifier passed it (Verified, challenge window running) with the true probes.
    function _passed() internal returns (uint256 jobId, address verifier) {
        (jobId, verifier) = _verifying();
        _passedProbes(jobId, verifier);
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
        while (g.status == GameStatus.DefenderToMove) {
            uint256 mid = game.nextMidpoint(gameId);
            vm.prank(g.defender);
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

    function _commitment(uint256 gameId, bool defenderRight, address referee) internal pure returns (bytes32) {
        return keccak256(abi.encode(gameId, defenderRight, _salt(referee), referee));
    }

    /// Draws the committee (waiting for the seed block) and returns it.
    function _draw(uint256 gameId) internal returns (address[] memory referees) {
        vm.roll(block.number + 2);
        game.drawCommittee(gameId);
        referees = game.committee(gameId);
    }

    function _commit(uint256 gameId, address referee, bool defenderRight) internal {
        vm.prank(referee);
        game.commitVote(gameId, _commitment(gameId, defenderRight, referee));
    }

    function _reveal(uint256 gameId, address referee, bool defenderRight) internal {
        vm.prank(referee);
        game.revealVote(gameId, defenderRight, _salt(referee));
    }

    // ------------------------------------------------------------------ reading

    /// The account's tokens once it has claimed what the game owes it (the game pays by credit:
    /// every test that reads a payout also claims it).
    function _bal(address account) internal returns (uint256) {
        if (game.credit(account) != 0) game.claimCredit(account);
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
