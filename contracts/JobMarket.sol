// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";
import {IJobMarket} from "./interfaces/IJobMarket.sol";
import {IStakeManager} from "./interfaces/IStakeManager.sol";
import {
    AvailabilityChallenge,
    ForcedSeed,
    Job,
    JobState,
    MarketParams,
    Probe,
    RefundReason,
    ReportSeal,
    Role
} from "./Types.sol";
import {CidLib} from "./libraries/CidLib.sol";
import {ProbeLib} from "./libraries/ProbeLib.sol";
import {TraceLib} from "./libraries/TraceLib.sol";

// Deadlines are timestamps by design: windows are minutes to days, far above the seconds a
// block producer can shift a timestamp.
// forge-lint: disable-next-item(block-timestamp)
/// @title JobMarket
/// @notice Escrow and lifecycle of training jobs: post, claim, commit, verifier draw, report,
///         challenge window, finalize; a timeout for every party; dispute hooks for the dispute game;
///         the jackpot that pays whistleblowers for caught forced errors, and the report seals that
///         bind a verifier to its probes and its forced-error draw.
/// @dev Token balance of this contract == jackpot + sum of reward + verifierFee + jackpotTax + replayFee
///      over jobs not in a final state (Finalized, Cancelled, Refunded) + availabilityDeposit per job in
///      DataChallenged (the deposit leaves when the challenge ends: to the answerer, or back to the
///      verifier on a timeout): every final transition pays out exactly
///      reward + fee + tax + replay fee, except finalize, which moves the tax into the jackpot; the jackpot pays out
///      only payForcedError's jackpot * share / 1e4 (share <= 1/3), so it never pays more than it holds.
///      Bonds are locked stake in the StakeManager, never held here.
contract JobMarket is IJobMarket, ReentrancyGuardTransient {
    using SafeERC20 for IERC20;

    uint256 private constant BPS = 10_000;
    uint256 private constant MAX_WINDOW = 365 days;

    /// @inheritdoc IJobMarket
    uint256 public constant MAX_JACKPOT_SHARE_BPS = 3333;
    /// @inheritdoc IJobMarket
    uint256 public constant MANIFEST_ITEM = type(uint24).max;
    /// Domain tag of the full-replay coin (isFullReplayDraw), apart from the probe and forced draws.
    bytes32 private constant FULL_REPLAY_TAG = keccak256("veritrain/full-replay");
    uint8 private constant CHOSEN = 1; // _fullReplay: chosen by a draw's coin for the current commit
    uint8 private constant POSTED = 2; // _fullReplay: posted for full replay (a tolerance-mode spec)

    /// @inheritdoc IJobMarket
    IERC20 public immutable token;
    /// @inheritdoc IJobMarket
    IStakeManager public immutable stakeManager;
    /// @inheritdoc IJobMarket
    address public immutable wiringAdmin;

    uint96 private immutable _minSolverBond;
    uint16 private immutable _solverBondBps;
    uint96 private immutable _minVerifierBond;
    uint16 private immutable _verifierBondBps;
    uint16 private immutable _timeoutSlashBps;
    uint32 private immutable _openWindow;
    uint32 private immutable _maxCommitWindow;
    uint32 private immutable _reportWindow;
    uint32 private immutable _challengeWindow;
    uint32 private immutable _disputeWindow;
    uint8 private immutable _maxVerifierDraws;
    uint16 private immutable _jackpotTaxBps;
    uint16 private immutable _jackpotShareBps;
    uint16 private immutable _forcedErrorRateBps;
    uint8 private immutable _probeCount;
    uint32 private immutable _availabilityWindow;
    uint96 private immutable _availabilityDeposit;
    uint16 private immutable _fullReplayRateBps;
    uint16 private immutable _fullReplayFeeBps;

    /// @inheritdoc IJobMarket
    address public disputeGame;
    /// @inheritdoc IJobMarket
    bool public wired;
    /// @inheritdoc IJobMarket
    uint256 public jobCount;
    /// @inheritdoc IJobMarket
    uint256 public jackpot;

    mapping(uint256 jobId => Job) private _jobs;
    /// The seal of each job's last draw (and report): its own slot, so the packed Job stays 4 slots.
    mapping(uint256 jobId => bytes32 seal) private _seals;
    mapping(address verifier => ForcedSeed) private _forcedSeeds;
    /// The committed manifest CID digest: what an availability answer for the manifest must hash to.
    mapping(uint256 jobId => bytes32 manifestCid) private _manifestCids;
    mapping(uint256 jobId => AvailabilityChallenge) private _availability;
    /// Items published on chain, keyed by content: keccak256(abi.encode(traceRoot, index)) for a
    /// checkpoint, keccak256(abi.encode(manifestCid, MANIFEST_ITEM)) for the manifest.
    mapping(bytes32 key => bool) private _published;
    /// Full replay per job: CHOSEN when a draw of the current commit chose it (FullReplayChosen), cleared
    /// on reopen; POSTED when postJob asked for it (JobPosted's fullReplay), every draw's, kept for good.
    /// Written only when chosen or posted.
    mapping(uint256 jobId => uint8 mark) private _fullReplay;

    /// @param token_ the ERC20 of rewards, fees and bonds (the StakeManager's token)
    /// @param stakeManager_ the StakeManager; its wiring must authorize this contract
    /// @param p the deployment parameters (see MarketParams and docs/contracts.md)
    constructor(IERC20 token_, IStakeManager stakeManager_, MarketParams memory p) {
        if (address(token_) == address(0) || address(stakeManager_.token()) != address(token_)) {
            revert InvalidParameter("token");
        }
        // solverBondBps may exceed 1e4: a bond above the reward is what makes a cheat that saves the
        // whole job lose at a full-replay rate below 1 (docs/incentives.md, "Full replay").
        if (p.verifierBondBps > BPS) revert InvalidParameter("verifierBondBps");
        if (p.timeoutSlashBps > BPS) revert InvalidParameter("timeoutSlashBps");
        if (p.openWindow == 0 || p.openWindow > MAX_WINDOW) revert InvalidParameter("openWindow");
        if (p.maxCommitWindow == 0 || p.maxCommitWindow > type(uint24).max) {
            revert InvalidParameter("maxCommitWindow");
        }
        if (p.reportWindow == 0 || p.reportWindow > MAX_WINDOW) revert InvalidParameter("reportWindow");
        if (p.challengeWindow == 0 || p.challengeWindow > MAX_WINDOW) revert InvalidParameter("challengeWindow");
        if (p.disputeWindow == 0 || p.disputeWindow > MAX_WINDOW) revert InvalidParameter("disputeWindow");
        if (p.maxVerifierDraws == 0) revert InvalidParameter("maxVerifierDraws");
        if (p.jackpotTaxBps > BPS) revert InvalidParameter("jackpotTaxBps");
        // INVARIANT: one payout never takes more than a third of the jackpot (Truebit's bound).
        if (p.jackpotShareBps > MAX_JACKPOT_SHARE_BPS) revert InvalidParameter("jackpotShareBps");
        if (p.forcedErrorRateBps > BPS) revert InvalidParameter("forcedErrorRateBps");
        if (p.probeCount == 0 || p.probeCount > ProbeLib.MAX_PROBES) revert InvalidParameter("probeCount");
        if (p.availabilityWindow == 0 || p.availabilityWindow > MAX_WINDOW) {
            revert InvalidParameter("availabilityWindow");
        }
        if (p.fullReplayRateBps > BPS) revert InvalidParameter("fullReplayRateBps");
        token = token_;
        stakeManager = stakeManager_;
        wiringAdmin = msg.sender;
        _minSolverBond = p.minSolverBond;
        _solverBondBps = p.solverBondBps;
        _minVerifierBond = p.minVerifierBond;
        _verifierBondBps = p.verifierBondBps;
        _timeoutSlashBps = p.timeoutSlashBps;
        _openWindow = p.openWindow;
        _maxCommitWindow = p.maxCommitWindow;
        _reportWindow = p.reportWindow;
        _challengeWindow = p.challengeWindow;
        _disputeWindow = p.disputeWindow;
        _maxVerifierDraws = p.maxVerifierDraws;
        _jackpotTaxBps = p.jackpotTaxBps;
        _jackpotShareBps = p.jackpotShareBps;
        _forcedErrorRateBps = p.forcedErrorRateBps;
        _probeCount = p.probeCount;
        _availabilityWindow = p.availabilityWindow;
        _availabilityDeposit = p.availabilityDeposit;
        _fullReplayRateBps = p.fullReplayRateBps;
        _fullReplayFeeBps = p.fullReplayFeeBps;
    }

    // ------------------------------------------------------------------ views

    /// @inheritdoc IJobMarket
    function params() external view returns (MarketParams memory) {
        return MarketParams({
            minSolverBond: _minSolverBond,
            solverBondBps: _solverBondBps,
            minVerifierBond: _minVerifierBond,
            verifierBondBps: _verifierBondBps,
            timeoutSlashBps: _timeoutSlashBps,
            openWindow: _openWindow,
            maxCommitWindow: _maxCommitWindow,
            reportWindow: _reportWindow,
            challengeWindow: _challengeWindow,
            disputeWindow: _disputeWindow,
            maxVerifierDraws: _maxVerifierDraws,
            jackpotTaxBps: _jackpotTaxBps,
            jackpotShareBps: _jackpotShareBps,
            forcedErrorRateBps: _forcedErrorRateBps,
            probeCount: _probeCount,
            availabilityWindow: _availabilityWindow,
            availabilityDeposit: _availabilityDeposit,
            fullReplayRateBps: _fullReplayRateBps,
            fullReplayFeeBps: _fullReplayFeeBps
        });
    }

    /// @inheritdoc IJobMarket
    function getJob(uint256 jobId) external view returns (Job memory) {
        return _job(jobId);
    }

    /// @inheritdoc IJobMarket
    function solverBond(uint256 reward) public view returns (uint256) {
        uint256 scaled = reward * _solverBondBps / BPS;
        return scaled > _minSolverBond ? scaled : _minSolverBond;
    }

    /// @inheritdoc IJobMarket
    function verifierBond(uint256 reward) public view returns (uint256) {
        uint256 scaled = reward * _verifierBondBps / BPS;
        return scaled > _minVerifierBond ? scaled : _minVerifierBond;
    }

    /// @inheritdoc IJobMarket
    function jackpotTax(uint256 reward, uint256 fee) public view returns (uint256) {
        return (reward + fee) * _jackpotTaxBps / BPS;
    }

    /// @inheritdoc IJobMarket
    function replayFee(uint256 reward) public view returns (uint256) {
        return reward * _fullReplayFeeBps / BPS;
    }

    /// @inheritdoc IJobMarket
    function isFullReplay(uint256 jobId) external view returns (bool) {
        _job(jobId);
        return _fullReplay[jobId] != 0;
    }

    /// @inheritdoc IJobMarket
    function isFullReplayDraw(bytes32 assignSeed) public view returns (bool) {
        return uint256(keccak256(abi.encode(assignSeed, FULL_REPLAY_TAG))) % BPS < _fullReplayRateBps;
    }

    /// @inheritdoc IJobMarket
    function forcedSeedOf(address verifier) external view returns (ForcedSeed memory) {
        return _forcedSeeds[verifier];
    }

    /// @inheritdoc IJobMarket
    function reportSeal(uint256 jobId) external view returns (bytes32) {
        _job(jobId);
        return _seals[jobId];
    }

    /// @inheritdoc IJobMarket
    function probeSegment(bytes32 assignSeed, uint256 index, uint256 checkpointCount)
        external
        pure
        returns (uint256)
    {
        if (checkpointCount < 2) revert InvalidTrace(bytes32(0), checkpointCount);
        return ProbeLib.segmentOf(assignSeed, index, checkpointCount);
    }

    /// @inheritdoc IJobMarket
    function isForced(bytes32 secret, address verifier, ReportSeal calldata seal) public view returns (bool) {
        // INVARIANT: only the committed secret proves a forced draw, and only a commitment snapshotted
        // at the draw counts (forcedCommitment 0: the verifier had no seed by the anchor block).
        if (seal.forcedCommitment == bytes32(0)) return false;
        if (keccak256(abi.encode(secret, verifier)) != seal.forcedCommitment) return false;
        return uint256(keccak256(abi.encode(secret, seal.assignSeed))) % BPS < _forcedErrorRateBps;
    }

    /// @inheritdoc IJobMarket
    function verifyProbe(
        uint256 jobId,
        ReportSeal calldata seal,
        uint256 index,
        uint256 segment,
        uint256 step,
        bytes32 stateHash,
        bytes32[] calldata proof
    ) external view returns (bool) {
        Job storage job = _job(jobId);
        uint256 checkpointCount = job.checkpointCount;
        if (checkpointCount < 2 || _sealHash(seal) != _seals[jobId] || index >= _probeCount) return false;
        if (segment != ProbeLib.segmentOf(seal.assignSeed, index, checkpointCount)) return false;
        return ProbeLib.verify(seal.probeRoot, index, segment, step, stateHash, proof);
    }

    /// @inheritdoc IJobMarket
    function manifestOf(uint256 jobId) external view returns (bytes32) {
        _job(jobId);
        return _manifestCids[jobId];
    }

    /// @inheritdoc IJobMarket
    function availabilityChallenge(uint256 jobId) external view returns (AvailabilityChallenge memory) {
        _job(jobId);
        return _availability[jobId];
    }

    /// @inheritdoc IJobMarket
    function isPublished(uint256 jobId, uint256 item) external view returns (bool) {
        return _published[_publishedKey(jobId, _job(jobId), item)];
    }

    // ------------------------------------------------------------------ lifecycle

    /// @inheritdoc IJobMarket
    function postJob(bytes32 specCid, uint96 reward, uint96 verifierFee, uint32 commitWindow, bool fullReplay)
        external
        nonReentrant
        returns (uint256 jobId)
    {
        if (specCid == bytes32(0)) revert ZeroCid();
        if (reward == 0) revert ZeroReward();
        if (verifierFee == 0) revert ZeroVerifierFee();
        if (commitWindow == 0 || commitWindow > _maxCommitWindow) {
            revert InvalidCommitWindow(commitWindow, _maxCommitWindow);
        }
        jobId = ++jobCount;
        uint32 claimDeadline = _after(_openWindow);
        Job storage job = _jobs[jobId];
        job.submitter = msg.sender;
        job.reward = reward;
        job.verifierFee = verifierFee;
        job.state = JobState.Open;
        job.deadline = claimDeadline;
        // commitWindow <= maxCommitWindow < 2**24 (constructor): fits
        // forge-lint: disable-next-line(unsafe-typecast)
        job.commitWindow = uint24(commitWindow);
        // INVARIANT: a job posted for full replay is fully replayed at every draw, after a reopen too.
        if (fullReplay) _fullReplay[jobId] = POSTED;
        emit JobPosted(jobId, msg.sender, specCid, reward, verifierFee, commitWindow, claimDeadline, fullReplay);
        token.safeTransferFrom(msg.sender, address(this), _escrow(reward, verifierFee));
    }

    /// @inheritdoc IJobMarket
    function claim(uint256 jobId) external {
        _claim(jobId, msg.sender);
    }

    /// @inheritdoc IJobMarket
    function claimFor(uint256 jobId, address solver) external {
        // INVARIANT: only a protocol contract that posted the job hands it to a solver, in the solver's
        // own transaction to that contract (its consent to the bond).
        _onlyProtocol();
        if (msg.sender != _job(jobId).submitter) revert NotAuthorized(msg.sender);
        _claim(jobId, solver);
    }

    function _claim(uint256 jobId, address solver) private {
        Job storage job = _jobIn(jobId, JobState.Open);
        if (block.timestamp > job.deadline) revert DeadlinePassed(jobId, job.deadline);
        uint256 bond = solverBond(job.reward);
        uint32 deadline = _after(job.commitWindow);
        job.state = JobState.Claimed;
        job.deadline = deadline;
        job.solver = solver;
        emit JobClaimed(jobId, solver, bond, deadline);
        stakeManager.lock(solver, Role.Solver, bond);
    }

    /// @inheritdoc IJobMarket
    function commit(
        uint256 jobId,
        bytes32 traceRoot,
        uint32 checkpointCount,
        bytes32 finalModelCid,
        bytes32 manifestCid
    ) external {
        Job storage job = _jobIn(jobId, JobState.Claimed);
        if (msg.sender != job.solver) revert NotAuthorized(msg.sender);
        if (block.timestamp > job.deadline) revert DeadlinePassed(jobId, job.deadline);
        if (traceRoot == bytes32(0) || checkpointCount < 2 || checkpointCount > type(uint24).max) {
            revert InvalidTrace(traceRoot, checkpointCount);
        }
        job.state = JobState.Committed;
        job.deadline = 0; // Committed has no deadline: anyone may draw once the anchor's successor is mined
        job.anchorBlock = _blockNumber();
        // checkpointCount < 2**24, checked above: fits
        // forge-lint: disable-next-line(unsafe-typecast)
        job.checkpointCount = uint24(checkpointCount);
        job.traceRoot = traceRoot;
        _manifestCids[jobId] = manifestCid;
        emit TraceCommitted(jobId, msg.sender, traceRoot, checkpointCount, finalModelCid, manifestCid);
    }

    /// @inheritdoc IJobMarket
    function assignVerifier(uint256 jobId) external nonReentrant {
        Job storage job = _jobIn(jobId, JobState.Committed);
        uint256 anchor = job.anchorBlock;
        // INVARIANT: the draw uses a block hash that did not exist when the trace was committed.
        if (block.number <= anchor + 1) revert RandomnessNotReady(jobId, anchor + 2);
        bytes32 entropy = blockhash(anchor + 1);
        if (entropy == bytes32(0)) {
            // More than 256 blocks old. A fresh draw would let whoever waited choose between the
            // outcome it saw and a new one; instead the solver, who alone gains from a draw not
            // made, loses its whole bond (what a draw that catches a cheat costs it) and the job
            // reopens. Anyone may draw for 256 blocks; the solver's own daemon does.
            _expireDraw(jobId, job);
            return;
        }
        uint8 draws = job.draws;
        address previous = job.verifier; // the verifier that just timed out, or address(0)
        address[] memory exclude = new address[](previous == address(0) ? 2 : 3);
        exclude[0] = job.solver;
        exclude[1] = job.submitter;
        if (previous != address(0)) exclude[2] = previous;
        uint256 bond = verifierBond(job.reward);
        bytes32 drawSeed = keccak256(abi.encode(entropy, jobId, draws));
        // INVARIANT: the draw reads stakes as of the anchor block, fixed before its entropy existed.
        (address verifier, bool locked) = stakeManager.drawVerifier(drawSeed, anchor, exclude, bond);
        if (verifier == address(0)) {
            _refund(jobId, job, RefundReason.NoEligibleVerifier);
            return;
        }
        if (!locked) {
            // Other draws locked the drawn verifier's stake since the anchor: draw again from a
            // block hash nobody knows yet (no caller can pick a known second candidate). The
            // full-replay coin of this entropy still counts: a re-anchor cannot undo a full replay.
            _drawFullReplay(jobId, drawSeed);
            job.anchorBlock = _blockNumber();
            emit DrawReanchored(jobId, block.number);
            return;
        }
        // INVARIANT: a full replay's verifier has the solver's own training time on top of the report window.
        uint32 deadline =
            _after(_drawFullReplay(jobId, drawSeed) ? uint256(_reportWindow) + job.commitWindow : _reportWindow);
        job.state = JobState.Verifying;
        job.deadline = deadline;
        job.draws = draws + 1; // draws < maxVerifierDraws <= 255: the timeouts refund at the maximum
        job.verifier = verifier;
        (bytes32 assignSeed, bytes32 forcedCommitment) = _sealDraw(jobId, drawSeed, verifier, anchor);
        emit VerifierAssigned(jobId, verifier, bond, deadline, assignSeed, forcedCommitment);
    }

    /// @inheritdoc IJobMarket
    function report(
        uint256 jobId,
        bool passed,
        bytes32 reportCid,
        bytes32 assignSeed,
        bytes32 forcedCommitment,
        Probe[] calldata probes
    ) external {
        Job storage job = _jobIn(jobId, JobState.Verifying);
        if (msg.sender != job.verifier) revert NotAuthorized(msg.sender);
        if (block.timestamp > job.deadline) revert DeadlinePassed(jobId, job.deadline);
        if (keccak256(abi.encode(assignSeed, forcedCommitment)) != _seals[jobId]) revert InvalidSeal(jobId);
        // INVARIANT: a passing report publishes its probes on the drawn segments (report games prove
        // against the root computed here); a failing one publishes none.
        bytes32 probeRoot = passed ? _probeRoot(jobId, assignSeed, job.checkpointCount, probes) : bytes32(0);
        if (!passed && probes.length != 0) revert InvalidProbe(jobId, 0);
        uint32 deadline = _after(passed ? _challengeWindow : _disputeWindow);
        job.deadline = deadline;
        _seals[jobId] = keccak256(abi.encode(_seals[jobId], probeRoot));
        if (passed) {
            job.state = JobState.Verified;
            emit ReportSubmitted(jobId, msg.sender, true, reportCid, probeRoot, probes, deadline);
        } else {
            job.state = JobState.Disputed;
            job.challenger = msg.sender;
            emit ReportSubmitted(jobId, msg.sender, false, reportCid, probeRoot, probes, deadline);
            emit DisputeOpened(jobId, msg.sender, deadline);
        }
    }

    /// @inheritdoc IJobMarket
    function finalize(uint256 jobId) external nonReentrant {
        Job storage job = _jobIn(jobId, JobState.Verified);
        if (block.timestamp <= job.deadline) revert DeadlineNotReached(jobId, job.deadline);
        _finalize(jobId, job, true);
    }

    /// @inheritdoc IJobMarket
    function cancel(uint256 jobId) external nonReentrant {
        Job storage job = _jobIn(jobId, JobState.Open);
        if (msg.sender != job.submitter) revert NotAuthorized(msg.sender);
        uint256 refund = _escrow(job.reward, job.verifierFee);
        job.state = JobState.Cancelled;
        emit JobCancelled(jobId, refund);
        token.safeTransfer(msg.sender, refund);
    }

    /// @inheritdoc IJobMarket
    function fundJackpot(uint256 amount) external nonReentrant {
        uint256 funded = jackpot + amount;
        jackpot = funded;
        emit JackpotFunded(msg.sender, amount, funded);
        token.safeTransferFrom(msg.sender, address(this), amount);
    }

    /// @inheritdoc IJobMarket
    function commitForcedSeed(bytes32 commitment) external {
        if (commitment == bytes32(0)) revert ZeroCommitment();
        _forcedSeeds[msg.sender] = ForcedSeed({commitment: commitment, setAtBlock: SafeCast.toUint64(block.number)});
        emit ForcedSeedCommitted(msg.sender, commitment, block.number);
    }

    // ------------------------------------------------------------------ timeouts (anyone)

    /// @inheritdoc IJobMarket
    function expire(uint256 jobId) external nonReentrant {
        Job storage job = _jobIn(jobId, JobState.Open);
        if (block.timestamp <= job.deadline) revert DeadlineNotReached(jobId, job.deadline);
        _refund(jobId, job, RefundReason.Expired);
    }

    /// @inheritdoc IJobMarket
    function timeoutSolver(uint256 jobId) external nonReentrant {
        Job storage job = _jobIn(jobId, JobState.Claimed);
        if (block.timestamp <= job.deadline) revert DeadlineNotReached(jobId, job.deadline);
        address solver = job.solver;
        uint256 bond = solverBond(job.reward);
        uint256 slashed = bond * _timeoutSlashBps / BPS;
        emit SolverTimedOut(jobId, solver, slashed);
        _releaseBond(solver, Role.Solver, bond, slashed, job.submitter);
        job.solver = address(0);
        _reopen(jobId, job);
    }

    /// @inheritdoc IJobMarket
    function timeoutVerifier(uint256 jobId) external nonReentrant {
        Job storage job = _jobIn(jobId, JobState.Verifying);
        if (block.timestamp <= job.deadline) revert DeadlineNotReached(jobId, job.deadline);
        address verifier = job.verifier;
        uint256 bond = verifierBond(job.reward);
        uint256 slashed = bond * _timeoutSlashBps / BPS;
        emit VerifierTimedOut(jobId, verifier, slashed);
        _releaseBond(verifier, Role.Verifier, bond, slashed, job.solver);
        _redraw(jobId, job);
    }

    /// @inheritdoc IJobMarket
    function timeoutDispute(uint256 jobId) external nonReentrant {
        Job storage job = _jobIn(jobId, JobState.Disputed);
        if (block.timestamp <= job.deadline) revert DeadlineNotReached(jobId, job.deadline);
        // No verdict, no slashing: both bonds are released in full.
        _refund(jobId, job, RefundReason.DisputeTimedOut);
    }

    // ------------------------------------------------------------------ data availability

    /// @inheritdoc IJobMarket
    function challengeAvailability(uint256 jobId, uint256 item) external nonReentrant {
        Job storage job = _job(jobId);
        JobState state = job.state;
        if (state == JobState.Verifying) {
            if (msg.sender != job.verifier) revert NotAuthorized(msg.sender);
        } else if (state == JobState.Verified) {
            // INVARIANT: a whistleblower is owed the data it audits, as the verifier is; no party
            // challenges the availability of a trace it made or passed.
            if (
                msg.sender == job.solver || msg.sender == job.verifier
                    || !stakeManager.isEligible(msg.sender, Role.Whistleblower)
            ) revert NotAuthorized(msg.sender);
        } else {
            revert WrongState(jobId, state, JobState.Verifying);
        }
        uint32 pausedDeadline = job.deadline; // the report deadline, or the end of the challenge window
        if (block.timestamp > pausedDeadline) revert DeadlinePassed(jobId, pausedDeadline);
        if (item >= job.checkpointCount && item != MANIFEST_ITEM) revert InvalidItem(jobId, item);
        // INVARIANT: an item is challenged at most once per content: what was published stays readable
        // (AvailabilityAnswered), so a verifier cannot stall a serving solver by asking again.
        if (_published[_publishedKey(jobId, job, item)]) revert AlreadyPublished(jobId, item);
        uint32 deadline = _after(_availabilityWindow);
        job.state = JobState.DataChallenged;
        job.deadline = deadline;
        // INVARIANT: the challenger's clock pauses while the solver owes data: an honest verifier loses no
        // report time, a whistleblower no challenge window, to a solver that does not serve.
        // item <= MANIFEST_ITEM < 2**24, checked above; pausedDeadline >= now, checked above.
        _availability[jobId] =
            // forge-lint: disable-next-line(unsafe-typecast)
            AvailabilityChallenge(uint24(item), uint32(pausedDeadline - block.timestamp), msg.sender);
        uint256 deposit = _availabilityDeposit;
        emit AvailabilityChallenged(jobId, msg.sender, item, deposit, deadline);
        if (deposit != 0) token.safeTransferFrom(msg.sender, address(this), deposit);
    }

    /// @inheritdoc IJobMarket
    function answerAvailability(uint256 jobId, bytes calldata content, bytes32[] calldata proof)
        external
        nonReentrant
    {
        Job storage job = _jobIn(jobId, JobState.DataChallenged);
        if (block.timestamp > job.deadline) revert DeadlinePassed(jobId, job.deadline);
        AvailabilityChallenge memory c = _availability[jobId];
        uint256 item = c.item;
        // INVARIANT: only the committed bytes answer: the checkpoint whose keccak256 is the committed leaf,
        // or the manifest whose CIDv0 is the committed manifest CID.
        bool matches = item == MANIFEST_ITEM
            ? proof.length == 0 && content.length <= CidLib.CHUNK_SIZE
                && CidLib.fileDigest(content) == _manifestCids[jobId]
            : TraceLib.verify(job.traceRoot, item, keccak256(content), proof);
        if (!matches) revert ContentMismatch(jobId, item);
        _published[_publishedKey(jobId, job, item)] = true;
        uint32 deadline = _after(c.timeLeft);
        delete _availability[jobId];
        job.state = c.challenger == job.verifier ? JobState.Verifying : JobState.Verified;
        job.deadline = deadline;
        emit AvailabilityAnswered(jobId, c.challenger, msg.sender, item, content, deadline);
        if (_availabilityDeposit != 0) token.safeTransfer(msg.sender, _availabilityDeposit);
    }

    /// @inheritdoc IJobMarket
    function timeoutAvailability(uint256 jobId) external nonReentrant {
        Job storage job = _jobIn(jobId, JobState.DataChallenged);
        if (block.timestamp <= job.deadline) revert DeadlineNotReached(jobId, job.deadline);
        address solver = job.solver;
        uint256 sBond = solverBond(job.reward);
        AvailabilityChallenge memory c = _availability[jobId];
        delete _availability[jobId];
        emit AvailabilityTimedOut(jobId, solver, c.challenger, c.item, sBond);
        // INVARIANT: a verifier is never slashed for data it could not get; a solver whose committed
        // data was not published in time is not paid and loses its whole bond (as on a lost trace game).
        stakeManager.slash(solver, Role.Solver, sBond, c.challenger);
        stakeManager.unlock(job.verifier, Role.Verifier, verifierBond(job.reward));
        job.solver = address(0);
        job.verifier = address(0);
        _reopen(jobId, job);
        if (_availabilityDeposit != 0) token.safeTransfer(c.challenger, _availabilityDeposit);
    }

    // ------------------------------------------------------------------ availability court only

    /// @inheritdoc IJobMarket
    function holdForCourt(uint256 jobId, address challenger) external {
        // INVARIANT: only a protocol contract of the StakeManager's one-shot wiring holds a job; they
        // may already slash any bond, so this widens no trust.
        _onlyProtocol();
        Job storage job = _job(jobId);
        JobState state = job.state;
        if (state != JobState.Verifying && state != JobState.Verified) revert WrongState(jobId, state, JobState.Verifying);
        uint32 paused = job.deadline;
        if (block.timestamp > paused) revert DeadlinePassed(jobId, paused);
        // INVARIANT: the challenger's clock pauses while the court runs (as on challengeAvailability).
        job.state = JobState.DataVote;
        job.challenger = challenger;
        // paused >= now, checked above
        // forge-lint: disable-next-line(unsafe-typecast)
        job.challengeLeft = uint32(paused - block.timestamp);
    }

    /// @inheritdoc IJobMarket
    function releaseFromCourt(uint256 jobId, bool withheld) external {
        _onlyProtocol();
        Job storage job = _jobIn(jobId, JobState.DataVote);
        if (withheld) {
            // The court settled both bonds (the solver's slashed to the challenger, the verifier's released).
            job.solver = address(0);
            job.verifier = address(0);
            _reopen(jobId, job);
            return;
        }
        job.state = job.challenger == job.verifier ? JobState.Verifying : JobState.Verified;
        job.deadline = _after(job.challengeLeft);
        delete job.challenger;
        delete job.challengeLeft;
    }

    // ------------------------------------------------------------------ dispute game only

    /// @inheritdoc IJobMarket
    function openDispute(uint256 jobId, address challenger) external {
        if (msg.sender != disputeGame) revert NotAuthorized(msg.sender);
        Job storage job = _jobIn(jobId, JobState.Verified);
        if (block.timestamp > job.deadline) revert DeadlinePassed(jobId, job.deadline);
        // The challenge window pauses while the game runs (resumed by resolveDispute if the solver
        // wins): an accomplice cannot run out an honest whistleblower's window by opening and
        // stalling a game it means to lose. job.deadline >= now, checked above.
        // forge-lint: disable-next-line(unsafe-typecast)
        uint32 left = uint32(job.deadline - block.timestamp);
        uint32 deadline = _after(_disputeWindow);
        job.state = JobState.Disputed;
        job.deadline = deadline;
        job.challenger = challenger;
        job.challengeLeft = left;
        emit DisputeOpened(jobId, challenger, deadline);
    }

    /// @inheritdoc IJobMarket
    function resolveDispute(uint256 jobId, bool solverWon, bool verifierSlashed, address slashRecipient)
        external
        nonReentrant
        returns (uint256 slashed)
    {
        if (msg.sender != disputeGame) revert NotAuthorized(msg.sender);
        Job storage job = _jobIn(jobId, JobState.Disputed);
        emit DisputeResolved(jobId, solverWon, verifierSlashed);
        uint256 vBond = verifierBond(job.reward);
        if (solverWon) {
            if (verifierSlashed) {
                slashed = vBond;
                stakeManager.slash(job.verifier, Role.Verifier, vBond, slashRecipient);
            } else if (job.challenger != job.verifier) {
                // INVARIANT: a whistleblower's lost challenge does not end the challenge window.
                _resumeChallengeWindow(jobId, job);
                return 0;
            }
            _finalize(jobId, job, !verifierSlashed);
            return slashed;
        }
        if (verifierSlashed) {
            slashed = vBond;
            stakeManager.slash(job.verifier, Role.Verifier, vBond, slashRecipient);
        } else {
            stakeManager.unlock(job.verifier, Role.Verifier, vBond);
        }
        uint256 sBond = solverBond(job.reward);
        slashed += sBond;
        stakeManager.slash(job.solver, Role.Solver, sBond, slashRecipient);
        job.solver = address(0);
        job.verifier = address(0);
        _reopen(jobId, job);
    }

    /// @inheritdoc IJobMarket
    function resolveReportDispute(uint256 jobId, bool verifierWon, address slashRecipient)
        external
        nonReentrant
        returns (uint256 slashed)
    {
        if (msg.sender != disputeGame) revert NotAuthorized(msg.sender);
        Job storage job = _jobIn(jobId, JobState.Disputed);
        if (verifierWon) {
            // INVARIANT: a whistleblower's lost challenge does not end the challenge window.
            _resumeChallengeWindow(jobId, job);
            return 0;
        }
        // An unforced verifier stated a wrong probe: it did not replay. Its whole bond goes to the
        // game's winner; the trace itself was not judged, so the solver keeps its claim and bond.
        address verifier = job.verifier;
        slashed = verifierBond(job.reward);
        emit ReportOverturned(jobId, verifier, slashed);
        stakeManager.slash(verifier, Role.Verifier, slashed, slashRecipient);
        delete job.challenger;
        delete job.challengeLeft;
        _redraw(jobId, job);
    }

    /// @inheritdoc IJobMarket
    function payForcedError(uint256 jobId, ReportSeal calldata seal, bytes32 secret, address whistleblower)
        external
        nonReentrant
        returns (uint256 payout)
    {
        if (msg.sender != disputeGame) revert NotAuthorized(msg.sender);
        Job storage job = _jobIn(jobId, JobState.Disputed);
        if (_sealHash(seal) != _seals[jobId]) revert InvalidSeal(jobId);
        address verifier = job.verifier;
        if (!isForced(secret, verifier, seal)) revert NotForced(jobId);
        // INVARIANT: the jackpot never pays more than it holds: share <= 1/3 (constructor).
        uint256 pool = jackpot;
        payout = pool * _jackpotShareBps / BPS;
        pool -= payout;
        jackpot = pool;
        // The secret is public now: the verifier must commit a new one to be forced again.
        if (_forcedSeeds[verifier].commitment == seal.forcedCommitment) delete _forcedSeeds[verifier];
        emit ForcedErrorCaught(jobId, verifier, whistleblower, payout, pool);
        // INVARIANT: a forced error never changes a verdict: the job continues as if unchallenged.
        _resumeChallengeWindow(jobId, job);
        if (payout != 0) token.safeTransfer(whistleblower, payout);
    }

    // ------------------------------------------------------------------ wiring

    /// @inheritdoc IJobMarket
    function setDisputeGame(address game) external {
        if (msg.sender != wiringAdmin) revert NotAuthorized(msg.sender);
        // INVARIANT: the dispute game is fixed once.
        if (wired) revert AlreadyWired();
        wired = true;
        disputeGame = game;
        emit DisputeGameSet(game);
    }

    // ------------------------------------------------------------------ internals

    function _job(uint256 jobId) private view returns (Job storage job) {
        job = _jobs[jobId];
        if (job.state == JobState.None) revert UnknownJob(jobId);
    }

    function _jobIn(uint256 jobId, JobState want) private view returns (Job storage job) {
        job = _job(jobId);
        if (job.state != want) revert WrongState(jobId, job.state, want);
    }

    /// Now plus a window (<= 365 days), as a uint32 timestamp (reverts after 2106).
    function _after(uint256 window) private view returns (uint32) {
        return SafeCast.toUint32(block.timestamp + window);
    }

    function _blockNumber() private view returns (uint32) {
        return SafeCast.toUint32(block.number);
    }

    /// Pays the solver the reward and the verifier its fee (or the submitter, when `payVerifier` is
    /// false because the verifier's bond was slashed), releases the bonds still locked, ends Finalized.
    function _finalize(uint256 jobId, Job storage job, bool payVerifier) private {
        // INVARIANT: a job settles once (callers require Verified or Disputed, both non-final).
        job.state = JobState.Finalized;
        address solver = job.solver;
        address verifier = job.verifier;
        uint256 reward = job.reward;
        uint256 fee = job.verifierFee;
        uint256 tax = jackpotTax(reward, fee);
        uint256 pool = jackpot + tax;
        jackpot = pool;
        emit JobFinalized(jobId, solver, verifier, reward, payVerifier ? fee : 0);
        emit JackpotTaxed(jobId, tax, pool);
        stakeManager.unlock(solver, Role.Solver, solverBond(reward));
        if (payVerifier) stakeManager.unlock(verifier, Role.Verifier, verifierBond(reward));
        token.safeTransfer(solver, reward);
        token.safeTransfer(payVerifier ? verifier : job.submitter, fee);
        _payReplayFee(jobId, job, payVerifier);
    }

    /// At finalize: the replay fee to the verifier of a full replay that is paid its fee, else back to
    /// the submitter (nothing when the fee is 0).
    /// @dev Only a contract the StakeManager wires in (the court) may hold or release a job.
    function _onlyProtocol() private view {
        if (!stakeManager.isProtocol(msg.sender)) revert NotAuthorized(msg.sender);
    }

    function _payReplayFee(uint256 jobId, Job storage job, bool payVerifier) private {
        uint256 extra = replayFee(job.reward);
        if (extra == 0) return;
        // INVARIANT: the replay fee pays only a full replay's verifier that earned its fee.
        bool full = _fullReplay[jobId] != 0;
        address to = payVerifier && full ? job.verifier : job.submitter;
        emit ReplayFeePaid(jobId, to, extra, full);
        token.safeTransfer(to, extra);
    }

    /// Back to Verified after a whistleblower lost its dispute: the challenge window resumes with the
    /// time it had left when the dispute opened; both bonds stay locked.
    function _resumeChallengeWindow(uint256 jobId, Job storage job) private {
        uint32 deadline = _after(job.challengeLeft);
        job.state = JobState.Verified;
        job.deadline = deadline;
        delete job.challenger;
        delete job.challengeLeft;
        emit ChallengeWindowResumed(jobId, deadline);
    }

    /// Ends the job Refunded: escrow back to the submitter, every bond still locked released.
    function _refund(uint256 jobId, Job storage job, RefundReason reason) private {
        JobState state = job.state;
        // INVARIANT: a job settles once (callers pass a non-final job).
        job.state = JobState.Refunded;
        uint256 refund = _escrow(job.reward, job.verifierFee);
        emit JobRefunded(jobId, reason, refund);
        // The solver's bond is locked from claim until settlement (every non-final state but Open).
        if (state != JobState.Open) {
            stakeManager.unlock(job.solver, Role.Solver, solverBond(job.reward));
        }
        // The verifier's bond is locked while Verifying, Verified and Disputed.
        if (state == JobState.Verifying || state == JobState.Verified || state == JobState.Disputed) {
            stakeManager.unlock(job.verifier, Role.Verifier, verifierBond(job.reward));
        }
        token.safeTransfer(job.submitter, refund);
    }

    /// Back to Committed for a new verifier draw after the verifier's bond was settled (a report
    /// timeout or a lost report game); job.verifier stays set so the next draw excludes it. Ends
    /// refunded once maxVerifierDraws draws were made.
    function _redraw(uint256 jobId, Job storage job) private {
        job.state = JobState.Committed;
        if (job.draws >= _maxVerifierDraws) {
            _refund(jobId, job, RefundReason.VerifierDrawsExhausted);
            return;
        }
        job.deadline = 0;
        job.anchorBlock = _blockNumber();
        emit DrawReanchored(jobId, block.number);
    }

    /// Stores the seal of a draw: assignSeed = keccak256(abi.encode(drawSeed)) and the verifier's
    /// forced commitment if it was set at or before the anchor block, else 0.
    function _sealDraw(uint256 jobId, bytes32 drawSeed, address verifier, uint256 anchor)
        private
        returns (bytes32 assignSeed, bytes32 forcedCommitment)
    {
        // INVARIANT: the sampling seed depends on the entropy and the job only, never on who was
        // drawn (a solver cannot grind the segments sampled by steering the draw).
        assignSeed = keccak256(abi.encode(drawSeed));
        ForcedSeed storage seed = _forcedSeeds[verifier];
        // INVARIANT: a forced seed counts only if it was set before the draw entropy existed, so a
        // verifier cannot grind its secret against the draw (a later replacement snapshots nothing).
        if (seed.setAtBlock <= anchor) forcedCommitment = seed.commitment;
        _seals[jobId] = keccak256(abi.encode(assignSeed, forcedCommitment));
    }

    /// The draw's block hash expired unused: the solver's whole bond goes to the submitter and the
    /// job reopens (a verifier that timed out was settled already).
    function _expireDraw(uint256 jobId, Job storage job) private {
        address solver = job.solver;
        uint256 bond = solverBond(job.reward);
        emit DrawExpired(jobId, solver, bond);
        stakeManager.slash(solver, Role.Solver, bond, job.submitter);
        job.solver = address(0);
        job.verifier = address(0);
        _reopen(jobId, job);
    }

    /// What a job escrows: reward + fee + jackpotTax(reward, fee) + replayFee(reward).
    function _escrow(uint256 reward, uint256 fee) private view returns (uint256) {
        return reward + fee + jackpotTax(reward, fee) + replayFee(reward);
    }

    /// Whether the job's current commit is fully replayed: posted for full replay, chosen already, or
    /// chosen now by the coin of this attempt's assignSeed. Sticky until the job reopens (for good when
    /// posted), so neither a re-anchor nor a redraw can take a full replay back; each attempt can only add one.
    function _drawFullReplay(uint256 jobId, bytes32 drawSeed) private returns (bool) {
        if (_fullReplay[jobId] != 0) return true; // POSTED, or CHOSEN by an earlier attempt
        if (_fullReplayRateBps == 0) return false;
        bytes32 assignSeed = keccak256(abi.encode(drawSeed));
        // INVARIANT: the full-replay coin reads only the draw's entropy and job, fixed after the commit.
        if (!isFullReplayDraw(assignSeed)) return false;
        _fullReplay[jobId] = CHOSEN;
        emit FullReplayChosen(jobId, assignSeed);
        return true;
    }

    /// The probe root of a passing report: exactly probeCount probes, slot i on segment
    /// probeSegment(assignSeed, i, checkpointCount), none with a zero state hash (else InvalidProbe).
    function _probeRoot(uint256 jobId, bytes32 assignSeed, uint256 checkpointCount, Probe[] calldata probes)
        private
        view
        returns (bytes32)
    {
        uint256 count = _probeCount;
        if (probes.length != count) revert InvalidProbe(jobId, probes.length < count ? probes.length : count);
        for (uint256 i = 0; i < count; ++i) {
            if (
                probes[i].stateHash == bytes32(0)
                    || probes[i].segment != ProbeLib.segmentOf(assignSeed, i, checkpointCount)
            ) {
                revert InvalidProbe(jobId, i);
            }
        }
        return ProbeLib.root(probes);
    }

    /// The stored form of a ReportSeal (see Types.sol).
    function _sealHash(ReportSeal calldata seal) private pure returns (bytes32) {
        return keccak256(abi.encode(keccak256(abi.encode(seal.assignSeed, seal.forcedCommitment)), seal.probeRoot));
    }

    /// Back to Open for another solver with a fresh claim window; the trace and any dispute are
    /// cleared. Callers have settled the solver (and verifier) bonds and cleared those addresses.
    function _reopen(uint256 jobId, Job storage job) private {
        uint32 claimDeadline = _after(_openWindow);
        job.state = JobState.Open;
        job.deadline = claimDeadline;
        job.draws = 0;
        job.checkpointCount = 0;
        delete job.traceRoot;
        // CHOSEN exists only at a rate above 0; POSTED stays: the redo is fully replayed too.
        if (_fullReplayRateBps != 0 && _fullReplay[jobId] == CHOSEN) delete _fullReplay[jobId];
        delete job.challenger;
        delete job.challengeLeft;
        emit JobReopened(jobId, claimDeadline);
    }

    /// Where the publication of `item` of the job's current trace is recorded (see _published).
    function _publishedKey(uint256 jobId, Job storage job, uint256 item) private view returns (bytes32) {
        return item == MANIFEST_ITEM
            ? keccak256(abi.encode(_manifestCids[jobId], item))
            : keccak256(abi.encode(job.traceRoot, item));
    }

    /// Slashes `slashed` of a locked `bond` to `recipient` and unlocks the rest.
    function _releaseBond(address account, Role role, uint256 bond, uint256 slashed, address recipient) private {
        if (slashed != 0) stakeManager.slash(account, role, slashed, recipient);
        if (bond != slashed) stakeManager.unlock(account, role, bond - slashed);
    }
}
