// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {Math} from "@openzeppelin/contracts/utils/math/Math.sol";
import {Test} from "../utils/Test.sol";
import {MANIFEST_BYTES, MANIFEST_CID, ProbeTree, TraceTree} from "./DisputeFixture.sol";
import {StandardTree} from "../utils/StandardTree.sol";
import {VeriToken} from "../../../contracts/VeriToken.sol";
import {StakeManager} from "../../../contracts/StakeManager.sol";
import {JobMarket} from "../../../contracts/JobMarket.sol";
import {DisputeGame} from "../../../contracts/DisputeGame.sol";
import {Game, GameStatus, ProbeClaim} from "../../../contracts/interfaces/IDisputeGame.sol";
import {ForcedSeed, Job, JobState, ReportSeal, Role} from "../../../contracts/Types.sol";

/// @notice Random actors driving StakeManager + JobMarket + DisputeGame through every entry point,
///         wrong callers and wrong states included (each call is tried; reverts are expected).
contract DisputeHandler is Test {
    uint256 public constant ACTORS = 8;
    uint256 public constant MAX_JOBS = 8;
    uint256 public constant CHECKPOINTS = 11;
    uint256 internal constant TRACE = 11;

    VeriToken internal token;
    StakeManager internal stakes;
    JobMarket internal market;
    DisputeGame internal game;
    address[ACTORS] internal _actors;
    bytes32[] internal _leaves;
    bytes32 internal _root;

    /// A call moved a game out of a final status.
    bool public settledGameMoved;
    /// Games that settled Undecided, and among them whistleblower games whose job went back to
    /// Verified (an undecided challenge counts as lost: the job is not refunded).
    uint256 public undecidedGames;
    uint256 public undecidedJobsResumed;
    /// Protocol calls that succeeded, per handler action (its selector): the reach of the walk.
    mapping(bytes4 action => uint256) public calls;
    mapping(uint256 gameId => mapping(address referee => bool)) internal _vote;
    /// Set when a forced-error payout was not exactly jackpot * share / 1e4.
    bool public badPayout;
    /// Each job's seal as the handler computed it from the draw and the report's probe root.
    mapping(uint256 jobId => ReportSeal) internal _seals;
    /// Each job's published probes (with proofs) of its last passing report.
    mapping(uint256 jobId => ProbeClaim[]) internal _probes;
    /// The secret behind each forced-seed commitment an actor made.
    mapping(bytes32 commitment => bytes32 secret) internal _secrets;

    constructor(VeriToken token_, StakeManager stakes_, JobMarket market_, DisputeGame game_) {
        token = token_;
        stakes = stakes_;
        market = market_;
        game = game_;
        _leaves = TraceTree.leaves(TRACE, CHECKPOINTS);
        _root = TraceTree.root(_leaves);
        for (uint256 i; i < ACTORS; ++i) {
            // forge-lint: disable-next-line(unsafe-typecast)
            address a = address(uint160(0xD000 + i)); // small constants
            _actors[i] = a;
            vm.startPrank(a);
            token.approve(address(stakes), type(uint256).max);
            token.approve(address(market), type(uint256).max);
            token.approve(address(game), type(uint256).max);
            vm.stopPrank();
        }
    }

    function actor(uint256 i) external view returns (address) {
        return _actors[i];
    }

    /// Called after funding: every actor stakes in every role and commits a forced-error seed.
    function seedStakes() external {
        for (uint256 i; i < ACTORS; ++i) {
            _try(_actors[i], abi.encodeCall(stakes.stake, (Role.Solver, 200 ether)), address(stakes));
            _try(
                _actors[i],
                abi.encodeCall(stakes.stake, (Role.Verifier, SafeCast.toUint96(100 ether + i * 50 ether))),
                address(stakes)
            );
            _try(_actors[i], abi.encodeCall(stakes.stake, (Role.Whistleblower, 50 ether)), address(stakes));
            this.commitForcedSeed(i, keccak256(abi.encode("seed", i)));
        }
    }

    // ------------------------------------------------------------------ helpers

    function _actor(uint256 seed) internal view returns (address) {
        return _actors[seed % ACTORS];
    }

    /// Calls `target` as `who`; returns whether it succeeded and counts the success for the action.
    function _try(address who, bytes memory data, address target) internal returns (bool ok) {
        vm.prank(who);
        (ok,) = target.call(data);
        if (ok) ++calls[msg.sig];
    }

    function _pickJob(uint256 seed, JobState want) internal view returns (uint256) {
        uint256 n = market.jobCount();
        if (n == 0) return 0;
        if (seed % 8 != 0) {
            for (uint256 k; k < n; ++k) {
                uint256 id = 1 + (seed % n + k) % n;
                if (market.getJob(id).state == want) return id;
            }
        }
        return 1 + (seed >> 3) % n;
    }

    function _pickGame(uint256 seed, GameStatus want) internal view returns (uint256) {
        uint256 n = game.gameCount();
        if (n == 0) return 0;
        if (seed % 8 != 0) {
            for (uint256 k; k < n; ++k) {
                uint256 id = 1 + (seed % n + k) % n;
                if (game.getGame(id).status == want) return id;
            }
        }
        return 1 + (seed >> 3) % n;
    }

    function _final(GameStatus s) internal pure returns (bool) {
        return s == GameStatus.DefenderWon || s == GameStatus.ChallengerWon || s == GameStatus.Undecided;
    }

    /// Runs a game call and records a final game that changed status.
    function _gameCall(uint256 gameId, address who, bytes memory data) internal {
        GameStatus before = gameId == 0 ? GameStatus.None : game.getGame(gameId).status;
        bool ok = _try(who, data, address(game));
        if (!ok || gameId == 0) return;
        Game memory g = game.getGame(gameId);
        if (_final(before) && g.status != before) settledGameMoved = true;
        if (before != GameStatus.Undecided && g.status == GameStatus.Undecided) {
            ++undecidedGames;
            if (market.getJob(g.jobId).state == JobState.Verified) ++undecidedJobsResumed;
        }
    }

    // ------------------------------------------------------------------ stakes

    function stake(uint256 actorSeed, uint256 roleSeed, uint96 amount) external {
        // forge-lint: disable-next-line(unsafe-typecast)
        uint96 a = uint96(bound(amount, 1, 300 ether));
        _try(_actor(actorSeed), abi.encodeCall(stakes.stake, (Role(roleSeed % 3), a)), address(stakes));
    }

    function requestUnstake(uint256 actorSeed, uint256 roleSeed, uint96 amount) external {
        address who = _actor(actorSeed);
        Role role = Role(roleSeed % 3);
        uint256 free = stakes.freeStake(who, role);
        if (free == 0) return;
        // forge-lint: disable-next-line(unsafe-typecast)
        uint96 a = uint96(bound(amount, 1, free));
        _try(who, abi.encodeCall(stakes.requestUnstake, (role, a)), address(stakes));
    }

    function withdraw(uint256 actorSeed, uint256 roleSeed) external {
        _try(_actor(actorSeed), abi.encodeCall(stakes.withdraw, (Role(roleSeed % 3))), address(stakes));
    }

    // ------------------------------------------------------------------ jobs

    function postJob(uint256 actorSeed, uint96 reward) external {
        if (market.jobCount() >= MAX_JOBS) return;
        // forge-lint: disable-next-line(unsafe-typecast)
        uint96 r = uint96(bound(reward, 1 ether, 150 ether));
        _try(
            _actor(actorSeed), abi.encodeCall(market.postJob, (keccak256("spec"), r, 5 ether, 2 hours, false)), address(market)
        );
    }

    function claim(uint256 actorSeed, uint256 jobSeed) external {
        uint256 id = _pickJob(jobSeed, JobState.Open);
        if (id != 0) _try(_actor(actorSeed), abi.encodeCall(market.claim, (id)), address(market));
    }

    function commit(uint256 jobSeed) external {
        uint256 id = _pickJob(jobSeed, JobState.Claimed);
        if (id == 0) return;
        address who = jobSeed % 8 == 1 ? _actor(jobSeed >> 8) : market.getJob(id).solver;
        _try(
            who,
            abi.encodeCall(market.commit, (id, _root, SafeCast.toUint32(CHECKPOINTS), bytes32(0), MANIFEST_CID)),
            address(market)
        );
    }

    function assignVerifier(uint256 jobSeed, uint8 blocks) external {
        uint256 id = _pickJob(jobSeed, JobState.Committed);
        if (id == 0) return;
        vm.roll(block.number + bound(blocks, 1, 3));
        Job memory before = market.getJob(id);
        if (_try(address(this), abi.encodeCall(market.assignVerifier, (id)), address(market))) _sealDraw(id, before);
    }

    /// Records the seal of a draw that just happened, computed from the rules (not the contract).
    function _sealDraw(uint256 jobId, Job memory before) internal {
        Job memory job = market.getJob(jobId);
        if (job.state != JobState.Verifying) return; // re-anchored or refunded: no draw
        uint256 anchor = before.anchorBlock;
        bytes32 drawSeed = keccak256(abi.encode(blockhash(anchor + 1), jobId, before.draws));
        ForcedSeed memory seed = market.forcedSeedOf(job.verifier);
        _seals[jobId] = ReportSeal(
            keccak256(abi.encode(drawSeed)), seed.setAtBlock <= anchor ? seed.commitment : bytes32(0), 0
        );
    }

    /// The verifier reports: a pass publishes probeCount probes (the true states; probe 0 forced when
    /// the verifier is; one report in four lazy: made-up states), a fail publishes none.
    function report(uint256 jobSeed, uint8 verdict) external {
        uint256 id = _pickJob(jobSeed, JobState.Verifying);
        if (id == 0) return;
        address verifier = market.getJob(id).verifier;
        address who = jobSeed % 8 == 1 ? _actor(jobSeed >> 8) : verifier;
        bool passed = verdict % 2 == 0;
        ReportSeal memory seal = _seals[id];
        ProbeClaim[] memory claims;
        if (passed) {
            bytes32[] memory hashes = new bytes32[](market.params().probeCount);
            for (uint256 i; i < hashes.length; ++i) {
                hashes[i] = verdict % 8 == 2 ? keccak256(abi.encode("lazy", i)) : ProbeTree.trueHash(TRACE, i);
            }
            if (market.isForced(_secrets[seal.forcedCommitment], verifier, seal)) {
                hashes[0] = ProbeTree.forcedHash(hashes[0]);
            }
            bytes32[] memory leaves;
            (claims, leaves) = ProbeTree.claims(seal.assignSeed, CHECKPOINTS, hashes);
            seal.probeRoot = StandardTree.root(leaves);
        }
        bytes memory call = abi.encodeCall(
            market.report,
            (id, passed, bytes32(uint256(1)), seal.assignSeed, seal.forcedCommitment, ProbeTree.probes(claims))
        );
        if (!_try(who, call, address(market))) return;
        _seals[id] = seal;
        delete _probes[id];
        for (uint256 i; i < claims.length; ++i) {
            _probes[id].push(claims[i]);
        }
    }

    function fundJackpot(uint256 actorSeed, uint96 amount) external {
        _try(_actor(actorSeed), abi.encodeCall(market.fundJackpot, (bound(amount, 0, 100 ether))), address(market));
    }

    /// An actor commits (or replaces) its forced-error seed; the handler keeps the secret.
    function commitForcedSeed(uint256 actorSeed, bytes32 secret) external {
        address who = _actor(actorSeed);
        bytes32 commitment = keccak256(abi.encode(secret, who));
        if (_try(who, abi.encodeCall(market.commitForcedSeed, (commitment)), address(market))) {
            _secrets[commitment] = secret;
        }
    }

    function finalize(uint256 jobSeed) external {
        uint256 id = _pickJob(jobSeed, JobState.Verified);
        if (id != 0) _try(address(this), abi.encodeCall(market.finalize, (id)), address(market));
    }

    function expire(uint256 jobSeed) external {
        uint256 id = _pickJob(jobSeed, JobState.Open);
        if (id != 0) _try(address(this), abi.encodeCall(market.expire, (id)), address(market));
    }

    function timeoutSolver(uint256 jobSeed) external {
        uint256 id = _pickJob(jobSeed, JobState.Claimed);
        if (id != 0) _try(address(this), abi.encodeCall(market.timeoutSolver, (id)), address(market));
    }

    function timeoutVerifier(uint256 jobSeed) external {
        uint256 id = _pickJob(jobSeed, JobState.Verifying);
        if (id != 0) _try(address(this), abi.encodeCall(market.timeoutVerifier, (id)), address(market));
    }

    function timeoutDispute(uint256 jobSeed) external {
        uint256 id = _pickJob(jobSeed, JobState.Disputed);
        if (id != 0) _try(address(this), abi.encodeCall(market.timeoutDispute, (id)), address(market));
    }

    // ------------------------------------------------------------------ games

    function openGame(uint256 jobSeed, uint256 actorSeed, uint256 segment, uint256 steps) external {
        uint256 id = _pickJob(jobSeed, jobSeed % 2 == 0 ? JobState.Disputed : JobState.Verified);
        if (id == 0) return;
        Job memory job = market.getJob(id);
        address who = job.state == JobState.Disputed && actorSeed % 8 != 0 ? job.verifier : _actor(actorSeed);
        segment = bound(segment, 0, CHECKPOINTS - 2);
        steps = bound(steps, 1, 64);
        bytes memory data = abi.encodeCall(
            game.open,
            (
                id,
                segment,
                steps,
                TraceTree.stateHash(TRACE, segment),
                TraceTree.proof(_leaves, segment),
                TraceTree.stateHash(TRACE, segment + 1),
                TraceTree.proof(_leaves, segment + 1)
            )
        );
        _gameCall(0, who, data);
    }

    /// The manifest gets published: the verifier of a Verifying job, or an actor on a Verified job,
    /// challenges its availability and the solver answers at once (the deposit moves between actors;
    /// every job commits the same manifest, so one publication serves them all).
    function publishManifest(uint256 jobSeed, uint256 actorSeed) external {
        uint256 id = _pickJob(jobSeed, jobSeed % 2 == 0 ? JobState.Verifying : JobState.Verified);
        if (id == 0) return;
        Job memory job = market.getJob(id);
        address who = job.state == JobState.Verifying ? job.verifier : _actor(actorSeed);
        uint256 item = market.MANIFEST_ITEM();
        if (!_try(who, abi.encodeCall(market.challengeAvailability, (id, item)), address(market))) return;
        bytes memory answer = abi.encodeCall(market.answerAvailability, (id, MANIFEST_BYTES, new bytes32[](0)));
        assertTrue(_try(job.solver, answer, address(market)), "the solver publishes the committed manifest");
    }

    /// The failing verifier (or, one time in eight, an actor), or an actor on a Verified job, disputes
    /// the manifest itself (it must be published).
    function openOnManifest(uint256 jobSeed, uint256 actorSeed) external {
        uint256 id = _pickJob(jobSeed, jobSeed % 2 == 0 ? JobState.Disputed : JobState.Verified);
        if (id == 0) return;
        Job memory job = market.getJob(id);
        address who = job.state == JobState.Disputed && actorSeed % 8 != 0 ? job.verifier : _actor(actorSeed);
        _gameCall(0, who, abi.encodeCall(game.openOnManifest, (id)));
    }

    /// A whistleblower disputes probe `index` of a passed job (one time in eight a slot past probeCount).
    function openOnReport(uint256 jobSeed, uint256 actorSeed, uint256 index) external {
        uint256 id = _pickJob(jobSeed, JobState.Verified);
        if (id == 0 || _probes[id].length == 0) return;
        ProbeClaim memory probe = _probes[id][index % _probes[id].length];
        if (index % 8 == 7) probe.index = _probes[id].length;
        bytes memory data = abi.encodeCall(
            game.openOnReport,
            (id, _seals[id], probe, TraceTree.stateHash(TRACE, probe.segment), TraceTree.proof(_leaves, probe.segment))
        );
        _gameCall(0, _actor(actorSeed), data);
    }

    /// The defender of a report game concedes with its secret (one time in eight a stranger or a guess).
    function concedeForced(uint256 gameSeed) external {
        uint256 id = _pickGame(gameSeed, GameStatus(1 + gameSeed % 3)); // DefenderToMove .. Isolated
        if (id == 0) return;
        Game memory g = game.getGame(id);
        ReportSeal memory seal = _seals[g.jobId];
        address who = gameSeed % 8 == 1 ? _actor(gameSeed >> 8) : g.defender;
        bytes32 secret = gameSeed % 8 == 2 ? keccak256(abi.encode(gameSeed)) : _secrets[seal.forcedCommitment];
        uint256 pool = market.jackpot();
        GameStatus before = g.status;
        _gameCall(id, who, abi.encodeCall(game.concedeForced, (id, secret, seal)));
        if (
            game.getGame(id).status != before
                && market.jackpot() != pool - pool * market.params().jackpotShareBps / 10_000
        ) {
            badPayout = true;
        }
    }

    function postMidpoint(uint256 gameSeed, bytes32 stateHash) external {
        uint256 id = _pickGame(gameSeed, GameStatus.DefenderToMove);
        if (id == 0) return;
        address who = gameSeed % 8 == 1 ? _actor(gameSeed >> 8) : game.getGame(id).defender;
        _gameCall(id, who, abi.encodeCall(game.postMidpoint, (id, stateHash, keccak256(abi.encode(stateHash)))));
    }

    function answerMidpoint(uint256 gameSeed, bool agree) external {
        uint256 id = _pickGame(gameSeed, GameStatus.ChallengerToMove);
        if (id == 0) return;
        address who = gameSeed % 8 == 1 ? _actor(gameSeed >> 8) : game.getGame(id).challenger;
        _gameCall(id, who, abi.encodeCall(game.answerMidpoint, (id, agree)));
    }

    function timeoutClock(uint256 gameSeed) external {
        uint256 id = _pickGame(gameSeed, gameSeed % 2 == 0 ? GameStatus.DefenderToMove : GameStatus.ChallengerToMove);
        if (id != 0) _gameCall(id, address(this), abi.encodeCall(game.timeoutClock, (id)));
    }

    function drawCommittee(uint256 gameSeed, uint8 blocks) external {
        uint256 id = _pickGame(gameSeed, GameStatus.Isolated);
        if (id == 0) return;
        vm.roll(block.number + bound(blocks, 1, 3));
        _gameCall(id, address(this), abi.encodeCall(game.drawCommittee, (id)));
    }

    function commitVote(uint256 gameSeed, uint256 seat, bool defenderRight) external {
        uint256 id = _pickGame(gameSeed, GameStatus.Arbitrating);
        if (id == 0) return;
        address[] memory referees = game.committee(id);
        address who = referees.length == 0 || seat % 8 == 7 ? _actor(seat) : referees[seat % referees.length];
        _vote[id][who] = defenderRight;
        bytes32 commitment = keccak256(abi.encode(id, defenderRight, keccak256(abi.encode(id, who)), who));
        _gameCall(id, who, abi.encodeCall(game.commitVote, (id, commitment)));
    }

    function revealVote(uint256 gameSeed, uint256 seat) external {
        uint256 id = _pickGame(gameSeed, GameStatus.Arbitrating);
        if (id == 0) return;
        address[] memory referees = game.committee(id);
        if (referees.length == 0) return;
        address who = referees[seat % referees.length];
        _gameCall(id, who, abi.encodeCall(game.revealVote, (id, _vote[id][who], keccak256(abi.encode(id, who)))));
    }

    function settle(uint256 gameSeed) external {
        uint256 id = _pickGame(gameSeed, gameSeed % 2 == 0 ? GameStatus.Arbitrating : GameStatus.Isolated);
        if (id != 0) _gameCall(id, address(this), abi.encodeCall(game.settle, (id)));
    }

    function forfeitUnopened(uint256 jobSeed) external {
        uint256 id = _pickJob(jobSeed, JobState.Disputed);
        if (id != 0) _gameCall(0, address(this), abi.encodeCall(game.forfeitUnopened, (id)));
    }

    // ------------------------------------------------------------------ time

    function warp(uint32 secondsForward) external {
        uint256 max = secondsForward % 8 == 0 ? 1 days : 15 minutes;
        vm.warp(block.timestamp + bound(secondsForward, 1, max));
    }

    function roll(uint16 blocks) external {
        vm.roll(block.number + bound(blocks, 1, blocks % 8 == 0 ? 300 : 8));
    }

    // ------------------------------------------------------------------ liveness driver

    /// With every party silent, ends every game and then every job using only calls anyone may
    /// make, warping past each deadline; reverts if `maxRounds` rounds are not enough.
    function driveAllToFinal(uint256 maxRounds) external returns (uint256 rounds) {
        for (rounds = 0; rounds < maxRounds; ++rounds) {
            bool open = _stepGames();
            if (!open) open = _stepJobs();
            if (!open) return rounds;
        }
        revert AssertionFailed("a game or job did not reach a final state");
    }

    function _stepGames() internal returns (bool open) {
        uint256 n = game.gameCount();
        for (uint256 id = 1; id <= n; ++id) {
            Game memory g = game.getGame(id);
            if (_final(g.status)) continue;
            open = true;
            if (g.status == GameStatus.DefenderToMove || g.status == GameStatus.ChallengerToMove) {
                vm.warp(uint256(g.lastMoveAt) + game.params().clockTime + 1);
                game.timeoutClock(id);
            } else if (g.status == GameStatus.Isolated) {
                vm.warp(uint256(g.lastMoveAt) + game.params().drawWindow + 1);
                game.settle(id);
            } else {
                vm.warp(uint256(g.deadline) + game.params().revealWindow + 1);
                game.settle(id);
            }
        }
    }

    function _stepJobs() internal returns (bool open) {
        uint256 n = market.jobCount();
        for (uint256 id = 1; id <= n; ++id) {
            Job memory job = market.getJob(id);
            JobState s = job.state;
            if (s == JobState.Finalized || s == JobState.Cancelled || s == JobState.Refunded) continue;
            open = true;
            if (s == JobState.Committed) {
                if (block.number <= uint256(job.anchorBlock) + 1) vm.roll(uint256(job.anchorBlock) + 2);
                market.assignVerifier(id);
                _sealDraw(id, job);
                continue;
            }
            if (s == JobState.Disputed && game.activeGame(id) == 0 && job.challenger == job.verifier) {
                uint256 openBy = game.openDeadline(id);
                vm.warp(Math.max(block.timestamp, openBy + 1));
                game.forfeitUnopened(id);
                continue;
            }
            vm.warp(Math.max(block.timestamp, uint256(job.deadline) + 1));
            if (s == JobState.Open) market.expire(id);
            else if (s == JobState.Claimed) market.timeoutSolver(id);
            else if (s == JobState.Verifying) market.timeoutVerifier(id);
            else if (s == JobState.Verified) market.finalize(id);
            else market.timeoutDispute(id);
        }
    }
}
