// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Test} from "../utils/Test.sol";
import {VeriToken} from "../../../contracts/VeriToken.sol";
import {StakeManager} from "../../../contracts/StakeManager.sol";
import {JobMarket} from "../../../contracts/JobMarket.sol";
import {ForcedSeed, Job, JobState, MarketParams, Probe, ReportSeal, Role} from "../../../contracts/Types.sol";
import {StandardTree} from "../utils/StandardTree.sol";
import {CidLib} from "../../../contracts/libraries/CidLib.sol";
import {TraceLib} from "../../../contracts/libraries/TraceLib.sol";
import {Hashes} from "@openzeppelin/contracts/utils/cryptography/Hashes.sol";

// Deadlines are timestamps by design: windows are minutes to days, far above the seconds a
// block producer can shift a timestamp.
// forge-lint: disable-next-item(block-timestamp)
/// @notice Random actors driving every entry point of the protocol, with ghost sums kept from the
///         handler's own reading of the rules (not from the contracts' accounting).
contract ProtocolHandler is Test {
    uint256 public constant ACTORS = 6;
    uint256 public constant MAX_JOBS = 24;

    VeriToken public immutable token;
    StakeManager public immutable stakes;
    JobMarket public immutable market;
    address public immutable game;

    address[ACTORS] internal _actors;

    /// Expected token balance of the StakeManager: staked in - withdrawn - slashed.
    uint256 public ghostStaked;
    /// Expected escrow of the JobMarket: reward + fee + tax + replay fee of jobs not yet final.
    uint256 public ghostEscrow;
    /// Expected jackpot: funded + taxes of finalized jobs - forced-error payouts.
    uint256 public ghostJackpot;
    /// Expected availability deposits held by the market: challenged - answered - timed out.
    uint256 public ghostDeposits;
    /// Availability challenges answered and timed out (coverage of the data-availability game).
    uint256 public availabilityAnswers;
    uint256 public availabilityTimeouts;
    /// Set when a forced-error payout was not exactly jackpot * share / 1e4 or above a third of it.
    bool public badPayout;
    /// Each job's seal as the handler computed it from the draw (and the report's probe root).
    mapping(uint256 jobId => ReportSeal) internal _seals;
    /// The secret behind each forced-seed commitment an actor made.
    mapping(bytes32 commitment => bytes32 secret) internal _secrets;
    /// Times each job entered Finalized.
    mapping(uint256 jobId => uint256) public finalizations;
    /// Set when a call succeeded on a job that was already final (a second settlement).
    bool public settledTwice;
    /// Draws that expired (solver slashed, job reopened), that re-anchored because the drawn stake was
    /// locked since the anchor, and that took a bond back from a verifier unstaking after the anchor.
    uint256 public drawsExpired;
    uint256 public drawsReanchored;
    uint256 public drawsReclaimed;
    /// Successful transitions into each state (coverage of the random walk).
    mapping(JobState state => uint256) public reached;
    /// Protocol calls that succeeded, per handler action (its selector): the reach of the walk.
    mapping(bytes4 action => uint256) public calls;
    /// Set when resolveDispute / resolveReportDispute returned another amount than it slashed to the game.
    bool public badSlashAmount;

    constructor(VeriToken token_, StakeManager stakes_, JobMarket market_, address game_) {
        token = token_;
        stakes = stakes_;
        market = market_;
        game = game_;
        for (uint256 i; i < ACTORS; ++i) {
            // forge-lint: disable-next-line(unsafe-typecast)
            address a = address(uint160(0xA000 + i)); // small constants
            _actors[i] = a;
            vm.startPrank(a);
            token.approve(address(stakes), type(uint256).max);
            token.approve(address(market), type(uint256).max);
            vm.stopPrank();
        }
    }

    function actor(uint256 i) external view returns (address) {
        return _actors[i];
    }

    /// Called by the test after funding the actors: every actor stakes as solver and verifier and
    /// commits a forced-error seed.
    function seedStakes() external {
        for (uint256 i; i < ACTORS; ++i) {
            _tryStake(_actors[i], Role.Solver, 200 ether);
            // forge-lint: disable-next-line(unsafe-typecast)
            _tryStake(_actors[i], Role.Verifier, uint96(100 ether + i * 50 ether)); // < 500 ether
            this.commitForcedSeed(i, keccak256(abi.encode("seed", i)));
        }
    }

    // ------------------------------------------------------------------ helpers

    function _actor(uint256 seed) internal view returns (address) {
        return _actors[seed % ACTORS];
    }

    function _role(uint256 seed) internal pure returns (Role) {
        return Role(seed % 3);
    }

    /// Mostly a job in state `want` (scanning from a random offset) so the walk goes deep; one
    /// time in eight, or when none is in that state, any job (exercising the wrong-state reverts).
    function _pick(uint256 seed, JobState want) internal view returns (uint256) {
        uint256 n = market.jobCount();
        if (n == 0) return 0;
        if (uint256(keccak256(abi.encode("any", seed))) % 8 != 0) {
            for (uint256 k; k < n; ++k) {
                uint256 id = 1 + (seed % n + k) % n;
                if (market.getJob(id).state == want) return id;
            }
        }
        return 1 + (seed >> 3) % n;
    }

    /// One call in eight comes from a random actor instead of the party entitled to make it.
    function _stranger(uint256 seed) internal pure returns (bool) {
        return uint256(keccak256(abi.encode("stranger", seed))) % 8 == 0;
    }

    function _final(JobState s) internal pure returns (bool) {
        return s == JobState.Finalized || s == JobState.Cancelled || s == JobState.Refunded;
    }

    function _tryStake(address who, Role role, uint96 amount) internal {
        vm.prank(who);
        try stakes.stake(role, amount) {
            ++calls[msg.sig];
            ghostStaked += amount;
        } catch {}
    }

    /// Books the effects of a job call that succeeded: escrow leaves on entering a final state;
    /// a call that succeeds on a final job is a second settlement.
    function _settled(uint256 jobId, JobState before) internal {
        Job memory job = market.getJob(jobId);
        if (_final(before)) settledTwice = true;
        if (!_final(before) && _final(job.state)) {
            uint256 tax = market.jackpotTax(job.reward, job.verifierFee);
            ghostEscrow -= uint256(job.reward) + job.verifierFee + tax + market.replayFee(job.reward);
            if (job.state == JobState.Finalized) ghostJackpot += tax;
        }
        if (before != JobState.Finalized && job.state == JobState.Finalized) ++finalizations[jobId];
        if (before != job.state) ++reached[job.state];
    }

    function _slashShare(uint256 bond) internal view returns (uint256) {
        return bond * market.params().timeoutSlashBps / 10_000;
    }

    // ------------------------------------------------------------------ stakes

    function stake(uint256 actorSeed, uint256 roleSeed, uint96 amount) external {
        _tryStake(_actor(actorSeed), _role(roleSeed), uint96(bound(amount, 1, 300 ether)));
    }

    function requestUnstake(uint256 actorSeed, uint256 roleSeed, uint96 amount) external {
        address who = _actor(actorSeed);
        Role role = _role(roleSeed);
        uint256 free = stakes.freeStake(who, role);
        if (free == 0) return;
        vm.prank(who);
        try stakes.requestUnstake(role, uint96(bound(amount, 1, free))) {
            ++calls[msg.sig];
        } catch {}
    }

    function withdraw(uint256 actorSeed, uint256 roleSeed) external {
        vm.prank(_actor(actorSeed));
        try stakes.withdraw(_role(roleSeed)) returns (uint256 amount) {
            ++calls[msg.sig];
            ghostStaked -= amount;
        } catch {}
    }

    // ------------------------------------------------------------------ lifecycle

    function postJob(uint256 actorSeed, uint96 reward, uint96 fee, uint32 window) external {
        if (market.jobCount() >= MAX_JOBS) return;
        reward = uint96(bound(reward, 1, 200 ether));
        fee = uint96(bound(fee, 1, 20 ether));
        window = uint32(bound(window, 1, 3 hours));
        vm.prank(_actor(actorSeed));
        try market.postJob(keccak256(abi.encode(reward, fee)), reward, fee, window, reward % 2 == 0) {
            ++calls[msg.sig];
            ghostEscrow += uint256(reward) + fee + (uint256(reward) + fee) * market.params().jackpotTaxBps / 10_000
                + uint256(reward) * market.params().fullReplayFeeBps / 10_000;
        } catch {}
    }

    function claim(uint256 actorSeed, uint256 jobSeed) external {
        uint256 jobId = _pick(jobSeed, JobState.Open);
        if (jobId == 0) return;
        JobState before = market.getJob(jobId).state;
        vm.prank(_actor(actorSeed));
        try market.claim(jobId) {
            ++calls[msg.sig];
            _settled(jobId, before);
        } catch {}
    }

    function commit(uint256 jobSeed, uint32 count) external {
        uint256 jobId = _pick(jobSeed, JobState.Claimed);
        if (jobId == 0) return;
        Job memory job = market.getJob(jobId);
        // The root is a real two-leaf trace tree (checkpoints 0 and 1, see _content), so availability
        // answers can be proven; the other indices are committed but never answerable.
        bytes32 root = Hashes.commutativeKeccak256(_leaf(jobId, 0), _leaf(jobId, 1));
        bytes32 manifestCid = this.cidOf(_manifest(jobId));
        vm.prank(_stranger(jobSeed) ? _actor(jobSeed >> 8) : job.solver);
        try market.commit(jobId, root, uint32(bound(count, 1, 1000)), bytes32(0), manifestCid) {
            ++calls[msg.sig];
            _settled(jobId, job.state);
        } catch {}
    }

    function assignVerifier(uint256 jobSeed, uint8 blocks) external {
        uint256 jobId = _pick(jobSeed, JobState.Committed);
        if (jobId == 0) return;
        vm.roll(block.number + bound(blocks, 1, 3));
        Job memory job = market.getJob(jobId);
        uint256 unbonding = _verifierUnbonding();
        try market.assignVerifier(jobId) {
            ++calls[msg.sig];
            _drew(jobId, job, unbonding);
            _settled(jobId, job.state);
        } catch {}
    }

    /// Books a draw call that succeeded: an expired draw slashed the solver's whole bond (to the
    /// submitter), a re-anchor or a refund drew nobody, a draw recorded its seal.
    function _drew(uint256 jobId, Job memory before, uint256 unbondingBefore) internal {
        Job memory job = market.getJob(jobId);
        if (job.state == JobState.Open) {
            ghostStaked -= market.solverBond(before.reward);
            ++drawsExpired;
        } else if (job.state == JobState.Committed) {
            ++drawsReanchored;
        }
        if (_verifierUnbonding() < unbondingBefore) ++drawsReclaimed;
        _sealDraw(jobId, before);
    }

    function _verifierUnbonding() internal view returns (uint256 sum) {
        for (uint256 i; i < ACTORS; ++i) {
            sum += stakes.stakeOf(_actors[i], Role.Verifier).unbonding;
        }
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

    function report(uint256 jobSeed, uint8 verdict) external {
        uint256 jobId = _pick(jobSeed, JobState.Verifying);
        if (jobId == 0) return;
        Job memory job = market.getJob(jobId);
        bool passed = verdict % 4 != 0;
        ReportSeal memory seal = _seals[jobId];
        Probe[] memory probes = new Probe[](passed ? market.params().probeCount : 0);
        // The drawn segments, from the rule (a picked job may not be Verifying: any count then).
        uint256 segments = job.checkpointCount < 2 ? 1 : job.checkpointCount - 1;
        for (uint256 i; i < probes.length; ++i) {
            uint256 segment = uint256(keccak256(abi.encode(seal.assignSeed, i))) % segments;
            probes[i] = Probe(segment, i + 1, keccak256(abi.encode("probe", jobId, verdict, i)));
        }
        vm.prank(_stranger(jobSeed) ? _actor(jobSeed >> 8) : job.verifier);
        try market.report(jobId, passed, bytes32(uint256(1)), seal.assignSeed, seal.forcedCommitment, probes) {
            ++calls[msg.sig];
            _seals[jobId].probeRoot = passed ? StandardTree.root(StandardTree.probeLeaves(probes)) : bytes32(0);
            _settled(jobId, job.state);
        } catch {}
    }

    // ------------------------------------------------------------------ data availability

    /// Checkpoint `index` of job `jobId` as every solver of the walk trains it (0 and 1 are in its tree).
    function _content(uint256 jobId, uint256 index) internal pure returns (bytes memory) {
        return abi.encode("checkpoint", jobId, index);
    }

    function _leaf(uint256 jobId, uint256 index) internal pure returns (bytes32) {
        return TraceLib.leaf(index, keccak256(_content(jobId, index)));
    }

    function _manifest(uint256 jobId) internal pure returns (bytes memory) {
        return abi.encode("manifest", jobId);
    }

    /// CIDv0 digest of `data` (CidLib takes calldata). Not a fuzzed action.
    function cidOf(bytes calldata data) external pure returns (bytes32) {
        return CidLib.fileDigest(data);
    }

    /// The verifier of a Verifying job (or one time in eight a stranger), or any actor on a Verified job
    /// (a whistleblower when it staked as one), challenges checkpoint 0, 1, a later index, the
    /// manifest, or an index past the trace.
    function challengeAvailability(uint256 jobSeed, uint8 itemSeed) external {
        bool audit = itemSeed >= 128; // a whistleblower's challenge during the challenge window
        uint256 jobId = _pick(jobSeed, audit ? JobState.Verified : JobState.Verifying);
        if (jobId == 0) return;
        Job memory job = market.getJob(jobId);
        uint256 item = itemSeed % 5 == 4 ? market.MANIFEST_ITEM() : itemSeed % 5 == 3 ? job.checkpointCount : itemSeed % 3;
        vm.prank(audit || _stranger(jobSeed) ? _actor(jobSeed >> 8) : job.verifier);
        try market.challengeAvailability(jobId, item) {
            ++calls[msg.sig];
            ghostDeposits += market.params().availabilityDeposit;
            _settled(jobId, job.state);
        } catch {}
    }

    /// Someone publishes the challenged item: the true content with its proof, or (one time in four)
    /// content that is not the committed one (ContentMismatch).
    function answerAvailability(uint256 jobSeed, uint256 actorSeed, uint8 how) external {
        uint256 jobId = _pick(jobSeed, JobState.DataChallenged);
        if (jobId == 0) return;
        Job memory job = market.getJob(jobId);
        uint256 item = market.availabilityChallenge(jobId).item;
        bytes memory content;
        bytes32[] memory proof;
        if (item == market.MANIFEST_ITEM()) {
            content = _manifest(how % 4 == 0 ? jobId + 1 : jobId);
        } else {
            content = _content(how % 4 == 0 ? jobId + 1 : jobId, item);
            proof = new bytes32[](1);
            proof[0] = _leaf(jobId, 1 - item % 2);
        }
        address answerer = _actor(actorSeed);
        vm.prank(answerer);
        try market.answerAvailability(jobId, content, proof) {
            ++calls[msg.sig];
            ghostDeposits -= market.params().availabilityDeposit;
            ++availabilityAnswers;
            _settled(jobId, job.state);
        } catch {}
    }

    function timeoutAvailability(uint256 jobSeed) external {
        uint256 jobId = _pick(jobSeed, JobState.DataChallenged);
        if (jobId == 0) return;
        Job memory job = market.getJob(jobId);
        try market.timeoutAvailability(jobId) {
            ++calls[msg.sig];
            _availabilityTimedOut(job);
            _settled(jobId, job.state);
        } catch {}
    }

    /// The solver's whole bond left the StakeManager (to the verifier); the deposit went back.
    function _availabilityTimedOut(Job memory job) internal {
        ghostStaked -= market.solverBond(job.reward);
        ghostDeposits -= market.params().availabilityDeposit;
        ++availabilityTimeouts;
    }

    function finalize(uint256 jobSeed) external {
        uint256 jobId = _pick(jobSeed, JobState.Verified);
        if (jobId == 0) return;
        JobState before = market.getJob(jobId).state;
        try market.finalize(jobId) {
            ++calls[msg.sig];
            _settled(jobId, before);
        } catch {}
    }

    function cancel(uint256 jobSeed) external {
        if (uint256(keccak256(abi.encode("cancel", jobSeed))) % 4 != 0) return; // rarer than the other moves, so jobs live long enough to go deep
        uint256 jobId = _pick(jobSeed, JobState.Open);
        if (jobId == 0) return;
        Job memory job = market.getJob(jobId);
        vm.prank(_stranger(jobSeed) ? _actor(jobSeed >> 8) : job.submitter);
        try market.cancel(jobId) {
            ++calls[msg.sig];
            _settled(jobId, job.state);
        } catch {}
    }

    function expire(uint256 jobSeed) external {
        uint256 jobId = _pick(jobSeed, JobState.Open);
        if (jobId == 0) return;
        JobState before = market.getJob(jobId).state;
        try market.expire(jobId) {
            ++calls[msg.sig];
            _settled(jobId, before);
        } catch {}
    }

    function timeoutSolver(uint256 jobSeed) external {
        uint256 jobId = _pick(jobSeed, JobState.Claimed);
        if (jobId == 0) return;
        Job memory job = market.getJob(jobId);
        try market.timeoutSolver(jobId) {
            ++calls[msg.sig];
            ghostStaked -= _slashShare(market.solverBond(job.reward));
            _settled(jobId, job.state);
        } catch {}
    }

    function timeoutVerifier(uint256 jobSeed) external {
        uint256 jobId = _pick(jobSeed, JobState.Verifying);
        if (jobId == 0) return;
        Job memory job = market.getJob(jobId);
        try market.timeoutVerifier(jobId) {
            ++calls[msg.sig];
            ghostStaked -= _slashShare(market.verifierBond(job.reward));
            _settled(jobId, job.state);
        } catch {}
    }

    function timeoutDispute(uint256 jobSeed) external {
        uint256 jobId = _pick(jobSeed, JobState.Disputed);
        if (jobId == 0) return;
        JobState before = market.getJob(jobId).state;
        try market.timeoutDispute(jobId) {
            ++calls[msg.sig];
            _settled(jobId, before);
        } catch {}
    }

    function openDispute(uint256 jobSeed, uint256 challengerSeed) external {
        uint256 jobId = _pick(jobSeed, JobState.Verified);
        if (jobId == 0) return;
        JobState before = market.getJob(jobId).state;
        vm.prank(game);
        try market.openDispute(jobId, _actor(challengerSeed)) {
            ++calls[msg.sig];
            _settled(jobId, before);
        } catch {}
    }

    function resolveDispute(uint256 jobSeed, bool solverWon, bool verifierSlashed) external {
        uint256 jobId = _pick(jobSeed, JobState.Disputed);
        if (jobId == 0) return;
        Job memory job = market.getJob(jobId);
        uint256 gameBefore = token.balanceOf(game);
        vm.prank(game);
        try market.resolveDispute(jobId, solverWon, verifierSlashed, game) returns (uint256 slashed) {
            ++calls[msg.sig];
            if (!solverWon) ghostStaked -= market.solverBond(job.reward);
            if (verifierSlashed) ghostStaked -= market.verifierBond(job.reward);
            if (token.balanceOf(game) - gameBefore != slashed) badSlashAmount = true;
            _settled(jobId, job.state);
        } catch {}
    }

    function resolveReportDispute(uint256 jobSeed, bool verifierWon) external {
        uint256 jobId = _pick(jobSeed, JobState.Disputed);
        if (jobId == 0) return;
        Job memory job = market.getJob(jobId);
        uint256 gameBefore = token.balanceOf(game);
        vm.prank(game);
        try market.resolveReportDispute(jobId, verifierWon, game) returns (uint256 slashed) {
            ++calls[msg.sig];
            if (!verifierWon) ghostStaked -= market.verifierBond(job.reward);
            if (token.balanceOf(game) - gameBefore != slashed) badSlashAmount = true;
            _settled(jobId, job.state);
        } catch {}
    }

    /// The game pays a forced error with the verifier's revealed secret (one time in eight a guess).
    function payForcedError(uint256 jobSeed, uint256 whistleblowerSeed) external {
        uint256 jobId = _pick(jobSeed, JobState.Disputed);
        if (jobId == 0) return;
        Job memory job = market.getJob(jobId);
        ReportSeal memory seal = _seals[jobId];
        bytes32 secret = _stranger(jobSeed) ? keccak256(abi.encode(jobSeed)) : _secrets[seal.forcedCommitment];
        uint256 pool = market.jackpot();
        vm.prank(game);
        try market.payForcedError(jobId, seal, secret, _actor(whistleblowerSeed)) returns (uint256 payout) {
            ++calls[msg.sig];
            if (payout != pool * market.params().jackpotShareBps / 10_000 || 3 * payout > pool) badPayout = true;
            ghostJackpot -= payout;
            _settled(jobId, job.state);
        } catch {}
    }

    function fundJackpot(uint256 actorSeed, uint96 amount) external {
        uint256 a = bound(amount, 0, 100 ether);
        vm.prank(_actor(actorSeed));
        try market.fundJackpot(a) {
            ++calls[msg.sig];
            ghostJackpot += a;
        } catch {}
    }

    /// An actor commits (or replaces) its forced-error seed; the handler keeps the secret.
    function commitForcedSeed(uint256 actorSeed, bytes32 secret) external {
        address who = _actor(actorSeed);
        bytes32 commitment = keccak256(abi.encode(secret, who));
        vm.prank(who);
        try market.commitForcedSeed(commitment) {
            ++calls[msg.sig];
            _secrets[commitment] = secret;
        } catch {}
    }

    // ------------------------------------------------------------------ time

    function warp(uint32 secondsForward) external {
        // Mostly short steps (parties act within their windows), sometimes long ones (they miss them).
        uint256 max = secondsForward % 8 == 0 ? 2 days : 20 minutes;
        vm.warp(block.timestamp + bound(secondsForward, 1, max));
    }

    function roll(uint16 blocks) external {
        // Sometimes past the 256-block horizon of blockhash, so draws expire.
        vm.roll(block.number + bound(blocks, 1, blocks % 8 == 0 ? 300 : 8));
    }

    // ------------------------------------------------------------------ liveness driver

    /// With every party silent, moves each job along using only calls anyone may make, warping past
    /// each deadline. Returns the number of rounds it took for every job to be final (reverts if
    /// `maxRounds` is not enough).
    function driveAllToFinal(uint256 maxRounds) external returns (uint256 rounds) {
        uint256 n = market.jobCount();
        for (rounds = 0; rounds < maxRounds; ++rounds) {
            bool open;
            for (uint256 id = 1; id <= n; ++id) {
                Job memory job = market.getJob(id);
                if (_final(job.state)) continue;
                open = true;
                if (job.state == JobState.Committed) {
                    if (block.number <= uint256(job.anchorBlock) + 1) vm.roll(uint256(job.anchorBlock) + 2);
                    uint256 unbonding = _verifierUnbonding();
                    market.assignVerifier(id);
                    _drew(id, job, unbonding);
                } else {
                    if (block.timestamp <= job.deadline) vm.warp(uint256(job.deadline) + 1);
                    if (job.state == JobState.Open) {
                        market.expire(id);
                    } else if (job.state == JobState.Claimed) {
                        ghostStaked -= _slashShare(market.solverBond(job.reward));
                        market.timeoutSolver(id);
                    } else if (job.state == JobState.Verifying) {
                        ghostStaked -= _slashShare(market.verifierBond(job.reward));
                        market.timeoutVerifier(id);
                    } else if (job.state == JobState.Verified) {
                        market.finalize(id);
                    } else if (job.state == JobState.DataChallenged) {
                        market.timeoutAvailability(id);
                        _availabilityTimedOut(job);
                    } else {
                        market.timeoutDispute(id);
                    }
                }
                _settled(id, job.state);
            }
            if (!open) return rounds;
        }
        revert AssertionFailed("a job did not reach a final state");
    }
}
