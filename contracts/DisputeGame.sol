// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {
    Ballot,
    Game,
    GameParams,
    GameStatus,
    IDisputeGame,
    ProbeClaim,
    SettleReason
} from "./interfaces/IDisputeGame.sol";
import {Credits} from "./Credits.sol";
import {IJobMarket} from "./interfaces/IJobMarket.sol";
import {IStakeManager} from "./interfaces/IStakeManager.sol";
import {Job, JobState, MarketParams, ReportSeal, Role} from "./Types.sol";
import {LibPosition} from "./libraries/LibPosition.sol";
import {TraceLib} from "./libraries/TraceLib.sol";

// Clocks and phases are timestamps by design: they are minutes to days, far above the seconds a
// block producer can shift a timestamp.
// forge-lint: disable-next-item(block-timestamp)
/// @title DisputeGame
/// @notice Settles a JobMarket dispute: bisection of one trace segment down to one training step
///         (chess clocks per side), then arbitration of that step by a stake-drawn committee voting by
///         commit-reveal; the settlement resolves the job in the JobMarket and pays the winner.
///         A report game runs the same machinery with the job's verifier defending one probe of its
///         passing report; a forced verifier concedes it instead (the jackpot pays the whistleblower).
/// @dev Token balance of this contract == challengeBond x (games not yet settled) + totalCredit: every
///      settlement credits (Credits), in the same transaction, the bond it held plus everything
///      slashed to it, and the parties claim their credit.
///      docs/dispute.md has the state machine, the payouts and the fallback rules.
contract DisputeGame is IDisputeGame, Credits {
    using SafeERC20 for IERC20;

    uint256 private constant MAX_WINDOW = 365 days;
    /// JobMarket.MANIFEST_ITEM: the availability item of a job's manifest.
    uint256 private constant _MANIFEST_ITEM = type(uint24).max;

    /// A referee's seat in one game.
    struct Seat {
        Ballot ballot;
        bytes32 commitment;
    }

    /// @inheritdoc IDisputeGame
    IERC20 public immutable token;
    /// @inheritdoc IDisputeGame
    IStakeManager public immutable stakeManager;
    /// @inheritdoc IDisputeGame
    IJobMarket public immutable market;

    uint96 private immutable _challengeBond;
    uint96 private immutable _refereeBond;
    uint96 private immutable _refereeFee;
    uint32 private immutable _clockTime;
    uint32 private immutable _openWindow;
    uint32 private immutable _drawWindow;
    uint32 private immutable _commitWindow;
    uint32 private immutable _revealWindow;
    uint32 private immutable _maxSegmentSteps;
    uint8 private immutable _committeeSize;
    /// The JobMarket's disputeWindow (immutable there): a failed report's dispute deadline minus it
    /// is the report time.
    uint256 private immutable _disputeWindow;

    /// @inheritdoc IDisputeGame
    uint256 public gameCount;
    /// @inheritdoc IDisputeGame
    mapping(uint256 jobId => uint256 gameId) public activeGame;

    mapping(uint256 gameId => Game) private _games;
    mapping(uint256 gameId => address[]) private _committees;
    mapping(uint256 gameId => mapping(address referee => Seat)) private _seats;
    /// keccak256(abi.encode(seal)) of the job's last conceded forced error: a seal pays the jackpot
    /// once, and its probe 0 (the forced one) cannot be disputed again. A new draw has a new seal.
    mapping(uint256 jobId => bytes32 sealKey) private _concededSeal;

    /// @param market_ the JobMarket (its token and StakeManager are this game's); wire it with
    ///        market_.setDisputeGame(game) and stakeManager.authorize([market_, game])
    /// @param p the deployment parameters (see GameParams and docs/dispute.md)
    constructor(IJobMarket market_, GameParams memory p) {
        IStakeManager stakes = market_.stakeManager();
        if (p.challengeBond == 0) revert InvalidParameter("challengeBond");
        if (p.refereeBond == 0) revert InvalidParameter("refereeBond");
        // The exclusion list of a draw: solver, challenger, verifier, submitter + the seats drawn before.
        if (p.committeeSize % 2 == 0 || uint256(p.committeeSize) + 3 > stakes.MAX_EXCLUDED()) {
            revert InvalidParameter("committeeSize");
        }
        // The loser's side always covers the majority's fees: the challenge bond alone does.
        if (uint256(p.refereeFee) * p.committeeSize > p.challengeBond) revert InvalidParameter("refereeFee");
        if (p.clockTime == 0 || p.clockTime > MAX_WINDOW) revert InvalidParameter("clockTime");
        if (p.openWindow == 0 || p.openWindow > MAX_WINDOW) revert InvalidParameter("openWindow");
        if (p.drawWindow == 0 || p.drawWindow > MAX_WINDOW) revert InvalidParameter("drawWindow");
        if (p.commitWindow == 0 || p.commitWindow > MAX_WINDOW) revert InvalidParameter("commitWindow");
        if (p.revealWindow == 0 || p.revealWindow > MAX_WINDOW) revert InvalidParameter("revealWindow");
        if (p.maxSegmentSteps == 0) revert InvalidParameter("maxSegmentSteps");
        MarketParams memory marketParams = market_.params();
        // A whistleblower that wins a report game by verdict gets challengeBond + the verifier bond
        // - the majority's fees: it nets more than nothing only if the fees stay below the smallest bond.
        if (uint256(p.refereeFee) * p.committeeSize >= marketParams.minVerifierBond) {
            revert InvalidParameter("refereeFee");
        }
        uint256 disputeWindow = marketParams.disputeWindow;
        // A game opened at the last moment still ends (and settles) before the JobMarket's
        // dispute timeout can refund the job.
        uint256 longest = 2 * uint256(p.clockTime) + p.drawWindow + p.commitWindow + p.revealWindow;
        if (p.openWindow + longest >= disputeWindow) revert InvalidParameter("disputeWindow");
        market = market_;
        token = market_.token();
        stakeManager = stakes;
        _challengeBond = p.challengeBond;
        _refereeBond = p.refereeBond;
        _refereeFee = p.refereeFee;
        _clockTime = p.clockTime;
        _openWindow = p.openWindow;
        _drawWindow = p.drawWindow;
        _commitWindow = p.commitWindow;
        _revealWindow = p.revealWindow;
        _maxSegmentSteps = p.maxSegmentSteps;
        _committeeSize = p.committeeSize;
        _disputeWindow = disputeWindow;
    }

    // ------------------------------------------------------------------ views

    /// @inheritdoc IDisputeGame
    function params() external view returns (GameParams memory) {
        return GameParams({
            challengeBond: _challengeBond,
            refereeBond: _refereeBond,
            refereeFee: _refereeFee,
            clockTime: _clockTime,
            openWindow: _openWindow,
            drawWindow: _drawWindow,
            commitWindow: _commitWindow,
            revealWindow: _revealWindow,
            maxSegmentSteps: _maxSegmentSteps,
            committeeSize: _committeeSize
        });
    }

    /// @inheritdoc IDisputeGame
    function maxGameDuration() public view returns (uint256) {
        return 2 * uint256(_clockTime) + _drawWindow + _commitWindow + _revealWindow;
    }

    /// @inheritdoc IDisputeGame
    function getGame(uint256 gameId) external view returns (Game memory) {
        return _game(gameId);
    }

    /// @inheritdoc IDisputeGame
    function committee(uint256 gameId) external view returns (address[] memory) {
        return _committees[gameId];
    }

    /// @inheritdoc IDisputeGame
    function ballotOf(uint256 gameId, address referee) external view returns (Ballot, bytes32) {
        Seat storage seat = _seats[gameId][referee];
        return (seat.ballot, seat.commitment);
    }

    /// @inheritdoc IDisputeGame
    function verifyCheckpoint(uint256 jobId, uint256 index, bytes32 stateHash, bytes32[] calldata proof)
        external
        view
        returns (bool)
    {
        Job memory job = market.getJob(jobId);
        if (index >= job.checkpointCount) return false;
        return TraceLib.verify(job.traceRoot, index, stateHash, proof);
    }

    /// @inheritdoc IDisputeGame
    function clocks(uint256 gameId) external view returns (uint256 defenderLeft, uint256 challengerLeft) {
        Game storage g = _game(gameId);
        defenderLeft = g.defenderClock;
        challengerLeft = g.challengerClock;
        uint256 elapsed = block.timestamp - g.lastMoveAt;
        if (g.status == GameStatus.DefenderToMove) defenderLeft = elapsed >= defenderLeft ? 0 : defenderLeft - elapsed;
        if (g.status == GameStatus.ChallengerToMove) {
            challengerLeft = elapsed >= challengerLeft ? 0 : challengerLeft - elapsed;
        }
    }

    /// @inheritdoc IDisputeGame
    function nextMidpoint(uint256 gameId) external view returns (uint256) {
        Game storage g = _game(gameId);
        GameStatus s = g.status;
        if (s != GameStatus.DefenderToMove && s != GameStatus.ChallengerToMove) {
            revert WrongStatus(gameId, s, GameStatus.DefenderToMove);
        }
        return LibPosition.midpoint(g.lo, g.hi);
    }

    /// @inheritdoc IDisputeGame
    function maxMoves(uint256 steps) external pure returns (uint256) {
        return LibPosition.maxMoves(steps);
    }

    /// @inheritdoc IDisputeGame
    function openDeadline(uint256 jobId) external view returns (uint256) {
        Job memory job = market.getJob(jobId);
        if (!_failedUnopened(jobId, job)) return 0;
        return _openDeadline(job);
    }

    // ------------------------------------------------------------------ moves

    /// @inheritdoc IDisputeGame
    function open(
        uint256 jobId,
        uint256 segment,
        uint256 steps,
        bytes32 startHash,
        bytes32[] calldata startProof,
        bytes32 endHash,
        bytes32[] calldata endProof
    ) external nonReentrant returns (uint256 gameId) {
        (address solver, bool byVerifier) = _admit(jobId, segment, steps, startHash, startProof, endHash, endProof);
        gameId = _create(jobId, segment, steps, startHash, endHash, solver, byVerifier, false);
        if (!byVerifier) market.openDispute(jobId, msg.sender);
        token.safeTransferFrom(msg.sender, address(this), _challengeBond);
    }

    /// @inheritdoc IDisputeGame
    function openOnReport(
        uint256 jobId,
        ReportSeal calldata seal,
        ProbeClaim calldata probe,
        bytes32 startHash,
        bytes32[] calldata startProof
    ) external nonReentrant returns (uint256 gameId) {
        address verifier = _admitReport(jobId, seal, probe, startHash, startProof);
        gameId = _create(jobId, probe.segment, probe.step, startHash, probe.stateHash, verifier, false, true);
        emit ReportDisputeOpened(gameId, jobId, probe.index, seal.assignSeed);
        market.openDispute(jobId, msg.sender);
        token.safeTransferFrom(msg.sender, address(this), _challengeBond);
    }

    /// @inheritdoc IDisputeGame
    function openOnManifest(uint256 jobId) external nonReentrant returns (uint256 gameId) {
        (Job memory job, bool byVerifier) = _admitOpener(jobId);
        // INVARIANT: a manifest game is ruled on bytes the chain holds: every referee reads the same manifest.
        if (!market.isPublished(jobId, _MANIFEST_ITEM)) revert ManifestNotPublished(jobId);
        gameId = _create(jobId, 0, 0, bytes32(0), bytes32(0), job.solver, byVerifier, false);
        emit ManifestDisputeOpened(gameId, jobId);
        if (!byVerifier) market.openDispute(jobId, msg.sender);
        token.safeTransferFrom(msg.sender, address(this), _challengeBond);
    }

    /// @inheritdoc IDisputeGame
    function concedeForced(uint256 gameId, bytes32 secret, ReportSeal calldata seal) external nonReentrant {
        Game storage g = _game(gameId);
        GameStatus s = g.status;
        if (msg.sender != g.defender) revert NotAuthorized(msg.sender);
        // INVARIANT: a forced error is conceded before the committee is drawn (no referee does work on it).
        if (
            !g.onReport
                || (s != GameStatus.DefenderToMove && s != GameStatus.ChallengerToMove && s != GameStatus.Isolated)
        ) revert NotConcedable(gameId);
        uint256 jobId = g.jobId;
        bytes32 sealKey = keccak256(abi.encode(seal));
        // INVARIANT: one jackpot payout per seal (a draw); payForcedError checks the seal is the job's.
        if (_concededSeal[jobId] == sealKey) revert NotConcedable(gameId);
        _concededSeal[jobId] = sealKey;
        g.status = GameStatus.ChallengerWon;
        delete activeGame[jobId];
        address challenger = g.challenger;
        uint256 payout = market.payForcedError(jobId, seal, secret, challenger) + _challengeBond;
        emit DisputeSettled(gameId, jobId, GameStatus.ChallengerWon, SettleReason.ForcedError, challenger, payout, 0);
        _credit(challenger, _challengeBond);
    }

    /// @inheritdoc IDisputeGame
    function postMidpoint(uint256 gameId, bytes32 stateHash, bytes32 cid) external {
        Game storage g = _gameIn(gameId, GameStatus.DefenderToMove);
        if (msg.sender != g.defender) revert NotAuthorized(msg.sender);
        if (stateHash == bytes32(0)) revert ZeroHash();
        uint32 left = _spend(gameId, g.lastMoveAt, g.defenderClock);
        g.status = GameStatus.ChallengerToMove;
        g.defenderClock = left;
        g.lastMoveAt = _now();
        g.midHash = stateHash;
        g.midCid = cid;
        emit MidpointPosted(gameId, LibPosition.midpoint(g.lo, g.hi), stateHash, cid, left);
    }

    /// @inheritdoc IDisputeGame
    function answerMidpoint(uint256 gameId, bool agree) external {
        Game storage g = _gameIn(gameId, GameStatus.ChallengerToMove);
        if (msg.sender != g.challenger) revert NotAuthorized(msg.sender);
        uint32 left = _spend(gameId, g.lastMoveAt, g.challengerClock);
        uint256 lo = g.lo;
        uint256 hi = g.hi;
        uint256 mid = LibPosition.midpoint(lo, hi);
        (lo, hi) = LibPosition.next(lo, hi, agree);
        if (agree) {
            g.agreedHash = g.midHash;
            g.agreedCid = g.midCid;
        } else {
            g.disputedHash = g.midHash;
        }
        // lo < hi <= steps < 2**32; moves <= ceilLog2(steps) <= 32 (LibPosition's bound): fit
        // forge-lint: disable-next-line(unsafe-typecast)
        g.lo = uint32(lo);
        // forge-lint: disable-next-line(unsafe-typecast)
        g.hi = uint32(hi);
        ++g.moves;
        g.challengerClock = left;
        g.lastMoveAt = _now();
        emit MidpointAnswered(gameId, mid, agree, lo, hi, left);
        if (LibPosition.isIsolated(lo, hi)) _isolate(gameId, g);
        else g.status = GameStatus.DefenderToMove;
    }

    /// @inheritdoc IDisputeGame
    function timeoutClock(uint256 gameId) external nonReentrant {
        Game storage g = _game(gameId);
        GameStatus s = g.status;
        bool defenderToMove = s == GameStatus.DefenderToMove;
        if (!defenderToMove && s != GameStatus.ChallengerToMove) revert WrongStatus(gameId, s, GameStatus.DefenderToMove);
        uint256 expiresAt = uint256(g.lastMoveAt) + (defenderToMove ? g.defenderClock : g.challengerClock);
        if (block.timestamp <= expiresAt) revert ClockNotExpired(gameId, expiresAt);
        emit ClockExpired(gameId, defenderToMove ? g.defender : g.challenger, defenderToMove);
        if (defenderToMove) _settle(gameId, g, GameStatus.ChallengerWon, SettleReason.DefenderClock);
        else _settle(gameId, g, GameStatus.DefenderWon, SettleReason.ChallengerClock);
    }

    /// @inheritdoc IDisputeGame
    function drawCommittee(uint256 gameId) external nonReentrant {
        Game storage g = _gameIn(gameId, GameStatus.Isolated);
        uint256 drawDeadline = uint256(g.lastMoveAt) + _drawWindow;
        if (block.timestamp > drawDeadline) revert DrawWindowPassed(gameId, drawDeadline);
        uint256 anchor = g.anchorBlock;
        // INVARIANT: the committee is drawn from a block hash that did not exist when the step was isolated.
        if (block.number <= anchor + 1) revert RandomnessNotReady(gameId, anchor + 2);
        bytes32 entropy = blockhash(anchor + 1);
        if (entropy == bytes32(0)) {
            // More than 256 blocks old. A fresh draw would let whoever waited choose between the
            // committee it saw and a new one: the challenger, who must seat its committee, did not,
            // and the game ends Undecided (which costs the challenger its bond).
            _settle(gameId, g, GameStatus.Undecided, SettleReason.NoCommittee);
            return;
        }
        Job memory job = market.getJob(g.jobId);
        uint256 size = _committeeSize;
        // Unfilled entries are address(0), which has no draw weight; 3 + size <= MAX_EXCLUDED (constructor).
        address[] memory exclude = new address[](3 + size);
        exclude[0] = g.defender;
        exclude[1] = g.challenger;
        // A report game's defender is the job's verifier: exclude the job's solver instead.
        exclude[2] = g.onReport ? job.solver : job.verifier;
        exclude[3] = job.submitter;
        address[] memory drawn = new address[](size);
        for (uint256 i; i < size; ++i) {
            // INVARIANT: every seat reads stakes as of the anchor block, fixed before its entropy existed.
            (address referee, bool locked) = stakeManager.drawVerifier(
                keccak256(abi.encode(entropy, gameId, i)), anchor, exclude, _refereeBond
            );
            if (referee == address(0) || !locked) {
                for (uint256 j; j < i; ++j) {
                    stakeManager.unlock(drawn[j], Role.Verifier, _refereeBond);
                }
                if (referee == address(0)) {
                    _settle(gameId, g, GameStatus.Undecided, SettleReason.NoCommittee);
                } else {
                    // Other draws locked a drawn referee's stake since the anchor: the whole
                    // committee is drawn again from a block hash nobody knows yet.
                    g.anchorBlock = _blockNumber();
                    emit DrawReanchored(gameId, block.number);
                }
                return;
            }
            drawn[i] = referee;
            if (i + 1 < size) exclude[4 + i] = referee;
        }
        address[] storage seats = _committees[gameId];
        for (uint256 i; i < size; ++i) {
            seats.push(drawn[i]);
            _seats[gameId][drawn[i]].ballot = Ballot.Seated;
        }
        uint32 commitDeadline = _after(_commitWindow);
        g.status = GameStatus.Arbitrating;
        g.deadline = commitDeadline;
        emit RefereesDrawn(gameId, drawn, commitDeadline, uint256(commitDeadline) + _revealWindow);
    }

    /// @inheritdoc IDisputeGame
    function commitVote(uint256 gameId, bytes32 commitment) external {
        Game storage g = _gameIn(gameId, GameStatus.Arbitrating);
        if (block.timestamp > g.deadline) revert PhaseClosed(gameId, g.deadline);
        if (commitment == bytes32(0)) revert ZeroHash();
        Seat storage seat = _seats[gameId][msg.sender];
        // INVARIANT: one commitment per seated referee.
        if (seat.ballot != Ballot.Seated) revert WrongBallot(gameId, msg.sender, seat.ballot, Ballot.Seated);
        seat.ballot = Ballot.Committed;
        seat.commitment = commitment;
        ++g.commits; // at most committeeSize <= 13
        emit VoteCommitted(gameId, msg.sender, commitment);
    }

    /// @inheritdoc IDisputeGame
    function releaseSeat(uint256 gameId, address referee) external nonReentrant {
        if (!stakeManager.isProtocol(msg.sender)) revert NotAuthorized(msg.sender);
        Game storage g = _gameIn(gameId, GameStatus.Arbitrating);
        if (block.timestamp > g.deadline) revert PhaseClosed(gameId, g.deadline);
        Seat storage seat = _seats[gameId][referee];
        // INVARIANT: only a seat not yet committed is released; its bond comes back whole, unslashed,
        // and it earns nothing (a referee that committed had what it needed to vote).
        if (seat.ballot != Ballot.Seated) revert WrongBallot(gameId, referee, seat.ballot, Ballot.Seated);
        seat.ballot = Ballot.Declined;
        stakeManager.unlock(referee, Role.Verifier, _refereeBond);
        emit SeatReleased(gameId, referee, msg.sender);
    }

    /// @inheritdoc IDisputeGame
    function revealVote(uint256 gameId, bool defenderRight, bytes32 salt) external {
        Game storage g = _gameIn(gameId, GameStatus.Arbitrating);
        uint256 commitEnd = g.deadline;
        // INVARIANT: no vote is revealed while another referee may still commit.
        if (block.timestamp <= commitEnd && g.commits < _committeeSize) revert RevealNotOpen(gameId, commitEnd);
        uint256 revealEnd = commitEnd + _revealWindow;
        if (block.timestamp > revealEnd) revert PhaseClosed(gameId, revealEnd);
        Seat storage seat = _seats[gameId][msg.sender];
        if (seat.ballot != Ballot.Committed) revert WrongBallot(gameId, msg.sender, seat.ballot, Ballot.Committed);
        if (keccak256(abi.encode(gameId, defenderRight, salt, msg.sender)) != seat.commitment) {
            revert CommitmentMismatch(gameId, msg.sender);
        }
        if (defenderRight) {
            seat.ballot = Ballot.RevealedDefenderRight;
            ++g.votesDefenderRight;
        } else {
            seat.ballot = Ballot.RevealedDefenderWrong;
            ++g.votesDefenderWrong;
        }
        emit VoteRevealed(gameId, msg.sender, defenderRight);
    }

    /// @inheritdoc IDisputeGame
    function settle(uint256 gameId) external nonReentrant {
        Game storage g = _game(gameId);
        GameStatus s = g.status;
        if (s == GameStatus.Isolated) {
            uint256 drawDeadline = uint256(g.lastMoveAt) + _drawWindow;
            if (block.timestamp <= drawDeadline) revert NotSettleable(gameId, drawDeadline + 1);
            _settle(gameId, g, GameStatus.Undecided, SettleReason.NoCommittee);
            return;
        }
        if (s != GameStatus.Arbitrating) revert WrongStatus(gameId, s, GameStatus.Arbitrating);
        uint256 revealEnd = uint256(g.deadline) + _revealWindow;
        uint256 right = g.votesDefenderRight;
        uint256 wrong = g.votesDefenderWrong;
        if (block.timestamp <= revealEnd && right + wrong < _committeeSize) {
            revert NotSettleable(gameId, revealEnd + 1);
        }
        if (right == wrong) {
            _settle(gameId, g, GameStatus.Undecided, SettleReason.NoMajority);
        } else {
            _settle(gameId, g, right > wrong ? GameStatus.DefenderWon : GameStatus.ChallengerWon, SettleReason.Verdict);
        }
    }

    /// @inheritdoc IDisputeGame
    function forfeitUnopened(uint256 jobId) external nonReentrant {
        Job memory job = market.getJob(jobId);
        if (!_failedUnopened(jobId, job)) revert NotChallengeable(jobId);
        uint256 deadline = _openDeadline(job);
        if (block.timestamp <= deadline) revert OpenWindowNotPassed(jobId, deadline);
        uint256 amount = market.resolveDispute(jobId, true, true, address(this));
        emit UnopenedDisputeForfeited(jobId, job.verifier, job.solver, amount);
        _credit(job.solver, amount);
    }

    // ------------------------------------------------------------------ internals

    /// The job, if it has no game. INVARIANT: one game per dispute.
    function _jobWithoutGame(uint256 jobId) private view returns (Job memory) {
        uint256 existing = activeGame[jobId];
        if (existing != 0) revert GameExists(jobId, existing);
        return market.getJob(jobId);
    }

    /// Whether the caller may challenge the job as a whistleblower now (the job is `_jobWithoutGame`).
    function _admitWhistleblower(uint256 jobId, Job memory job) private view {
        // INVARIANT: a passed trace (or report) is challenged only inside its challenge window.
        if (job.state != JobState.Verified || block.timestamp > job.deadline) revert NotChallengeable(jobId);
        // INVARIANT: no party challenges the trace it made or passed.
        if (msg.sender == job.solver || msg.sender == job.verifier) revert NotAuthorized(msg.sender);
        if (!stakeManager.isEligible(msg.sender, Role.Whistleblower)) revert NotWhistleblower(msg.sender);
    }

    /// Who may open a trace or manifest game on the job now: its failing verifier inside the open
    /// window (`byVerifier`), else a whistleblower. Returns the job and `byVerifier`.
    function _admitOpener(uint256 jobId) private view returns (Job memory job, bool byVerifier) {
        job = _jobWithoutGame(jobId);
        byVerifier = job.state == JobState.Disputed;
        if (byVerifier) {
            // INVARIANT: only the verifier whose report failed opens the game of a failed report.
            if (msg.sender != job.verifier || job.challenger != job.verifier) revert NotAuthorized(msg.sender);
            uint256 deadline = _openDeadline(job);
            if (block.timestamp > deadline) revert OpenWindowPassed(jobId, deadline);
        } else {
            _admitWhistleblower(jobId, job);
        }
    }

    /// The checks of `open`: who may open on this job now, the segment, and both checkpoint proofs.
    /// Returns the job's solver and whether the opener is the job's failing verifier.
    function _admit(
        uint256 jobId,
        uint256 segment,
        uint256 steps,
        bytes32 startHash,
        bytes32[] calldata startProof,
        bytes32 endHash,
        bytes32[] calldata endProof
    ) private view returns (address solver, bool byVerifier) {
        Job memory job;
        (job, byVerifier) = _admitOpener(jobId);
        if (segment + 1 >= job.checkpointCount) revert InvalidSegment(segment, job.checkpointCount);
        if (steps == 0 || steps > _maxSegmentSteps) revert InvalidSteps(steps, _maxSegmentSteps);
        if (startHash == bytes32(0) || endHash == bytes32(0)) revert ZeroHash();
        // INVARIANT: both ends of the bisection are the solver's committed checkpoints.
        if (!TraceLib.verify(job.traceRoot, segment, startHash, startProof)) {
            revert InvalidCheckpointProof(segment, startHash);
        }
        if (!TraceLib.verify(job.traceRoot, segment + 1, endHash, endProof)) {
            revert InvalidCheckpointProof(segment + 1, endHash);
        }
        solver = job.solver;
    }

    /// The checks of `openOnReport`: the whistleblower rules of `open`, the probe under the job's
    /// report seal, its step, and the start checkpoint. Returns the job's verifier (the defender).
    function _admitReport(
        uint256 jobId,
        ReportSeal calldata seal,
        ProbeClaim calldata probe,
        bytes32 startHash,
        bytes32[] calldata startProof
    ) private view returns (address verifier) {
        Job memory job = _jobWithoutGame(jobId);
        _admitWhistleblower(jobId, job);
        // INVARIANT: the disputed probe is one the verifier committed to under the job's seal, and a
        // conceded forced probe is not disputed again (it is wrong by design, not by laziness).
        if (
            (probe.index == 0 && _concededSeal[jobId] == keccak256(abi.encode(seal)))
                || !market.verifyProbe(
                    jobId, seal, probe.index, probe.segment, probe.step, probe.stateHash, probe.proof
                )
        ) revert InvalidProbe(jobId, probe.index);
        if (probe.step == 0 || probe.step > _maxSegmentSteps) revert InvalidSteps(probe.step, _maxSegmentSteps);
        if (startHash == bytes32(0) || probe.stateHash == bytes32(0)) revert ZeroHash();
        // INVARIANT: the agreed end of the bisection is the solver's committed checkpoint.
        if (!TraceLib.verify(job.traceRoot, probe.segment, startHash, startProof)) {
            revert InvalidCheckpointProof(probe.segment, startHash);
        }
        verifier = job.verifier;
    }

    /// Stores a new game opened by the caller (checked by _admit / _admitReport / _admitOpener) and starts the
    /// defender's clock: the job's solver, or its verifier if `onReport`.
    function _create(
        uint256 jobId,
        uint256 segment,
        uint256 steps,
        bytes32 startHash,
        bytes32 endHash,
        address defender,
        bool byVerifier,
        bool onReport
    ) private returns (uint256 gameId) {
        gameId = ++gameCount;
        activeGame[jobId] = gameId;
        Game storage g = _games[gameId];
        g.defender = defender;
        g.jobId = SafeCast.toUint64(jobId);
        // segment + 1 < checkpointCount < 2**24 and steps <= maxSegmentSteps < 2**32 (_admit, _admitReport): fit
        // forge-lint: disable-next-line(unsafe-typecast)
        g.segment = uint24(segment);
        g.byVerifier = byVerifier;
        g.challenger = msg.sender;
        g.onReport = onReport;
        // forge-lint: disable-next-line(unsafe-typecast)
        g.steps = uint32(steps);
        // forge-lint: disable-next-line(unsafe-typecast)
        g.hi = uint32(steps);
        g.defenderClock = _clockTime;
        g.challengerClock = _clockTime;
        g.lastMoveAt = _now();
        g.agreedHash = startHash;
        g.disputedHash = endHash;
        emit DisputeOpened(gameId, jobId, msg.sender, defender, segment, steps, startHash, endHash, byVerifier);
        // One step (or none: a manifest game) has nothing to bisect.
        if (steps <= 1) _isolate(gameId, g);
        else g.status = GameStatus.DefenderToMove;
    }

    function _game(uint256 gameId) private view returns (Game storage g) {
        g = _games[gameId];
        if (g.status == GameStatus.None) revert UnknownGame(gameId);
    }

    function _gameIn(uint256 gameId, GameStatus want) private view returns (Game storage g) {
        g = _game(gameId);
        if (g.status != want) revert WrongStatus(gameId, g.status, want);
    }

    /// A failed report (the verifier is the JobMarket's challenger) with no game opened on it.
    function _failedUnopened(uint256 jobId, Job memory job) private view returns (bool) {
        return job.state == JobState.Disputed && job.challenger == job.verifier && activeGame[jobId] == 0;
    }

    /// A failed report's dispute deadline is report time + disputeWindow; the verifier opens by
    /// report time + openWindow.
    function _openDeadline(Job memory job) private view returns (uint256) {
        return uint256(job.deadline) + _openWindow - _disputeWindow;
    }

    /// The mover's clock after this move: reverts ClockRanOut if it ran out before now.
    function _spend(uint256 gameId, uint32 since, uint32 clock) private view returns (uint32) {
        uint256 elapsed = block.timestamp - since;
        if (elapsed > clock) revert ClockRanOut(gameId, uint256(since) + clock);
        // elapsed <= clock, checked above
        // forge-lint: disable-next-line(unsafe-typecast)
        return uint32(clock - elapsed);
    }

    function _isolate(uint256 gameId, Game storage g) private {
        uint32 anchor = _blockNumber();
        g.status = GameStatus.Isolated;
        g.anchorBlock = anchor;
        g.lastMoveAt = _now();
        emit StepIsolated(gameId, g.segment, g.lo, g.agreedHash, g.agreedCid, g.disputedHash, anchor);
    }

    /// Ends a game: releases or slashes the committee, resolves the job in the JobMarket, and credits
    /// the challenge bond plus everything slashed to this contract: refereeFee to each referee
    /// of the majority (verdicts only), the rest to the winner. If Undecided, the challenge bond goes
    /// to the JobMarket's jackpot, referee slashes are split between the parties, and a
    /// whistleblower's challenge counts as lost (the challenge window resumes); a failed report's
    /// job waits for its dispute timeout (neither the trace nor the report was judged).
    function _settle(uint256 gameId, Game storage g, GameStatus outcome, SettleReason reason) private {
        uint256 jobId = g.jobId;
        bool live = market.getJob(jobId).state == JobState.Disputed;
        // A job the JobMarket already refunded (its dispute timeout ran) can no longer be resolved.
        if (outcome != GameStatus.Undecided && !live) {
            outcome = GameStatus.Undecided;
            reason = SettleReason.JobGone;
        }
        // INVARIANT: a game settles once (callers require a live status).
        g.status = outcome;

        Ballot majority = reason != SettleReason.Verdict
            ? Ballot.Vacant
            : outcome == GameStatus.DefenderWon ? Ballot.RevealedDefenderRight : Ballot.RevealedDefenderWrong;
        (address[] memory earners, uint256 refereesSlashed) = _closeCommittee(gameId, majority);
        // Slashed referee bonds and job bonds that came in during this settlement.
        uint256 incoming = refereesSlashed + _resolveJob(g, jobId, outcome, reason, live);

        uint256 fees = earners.length * _refereeFee;
        for (uint256 i; i < earners.length; ++i) {
            _credit(earners[i], _refereeFee);
        }
        address winner;
        uint256 payout;
        if (outcome == GameStatus.Undecided) {
            payout = _payUndecided(g, incoming);
        } else {
            winner = outcome == GameStatus.DefenderWon ? g.defender : g.challenger;
            // fees <= committeeSize * refereeFee <= challengeBond (constructor)
            payout = _challengeBond + incoming - fees;
            _credit(winner, payout);
        }
        emit DisputeSettled(gameId, jobId, outcome, reason, winner, payout, fees);
    }

    /// Resolves the job in the JobMarket for a settled game. An undecided whistleblower's game (a
    /// report game included) resolves as the challenger's loss, so the challenged job goes on; an
    /// undecided failed report's game leaves its job to the dispute timeout (and keeps activeGame,
    /// so the solver cannot claim the unopened-game forfeit). Returns the job bonds slashed to this
    /// contract.
    function _resolveJob(Game storage g, uint256 jobId, GameStatus outcome, SettleReason reason, bool live)
        private
        returns (uint256 slashed)
    {
        bool undecided = outcome == GameStatus.Undecided;
        // INVARIANT: an undecided challenge never refunds the job a whistleblower challenged.
        if (undecided && (!live || g.byVerifier)) return 0;
        delete activeGame[jobId];
        bool solverWon = outcome != GameStatus.ChallengerWon;
        if (g.onReport) return market.resolveReportDispute(jobId, solverWon, address(this));
        bool verifierSlashed = !undecided && _verifierSlashed(g, solverWon, reason);
        return market.resolveDispute(jobId, solverWon, verifierSlashed, address(this));
    }

    /// Pays an undecided game: referee slashes split between the parties, the challenge bond to the
    /// JobMarket's jackpot. Returns what the challenger got.
    function _payUndecided(Game storage g, uint256 incoming) private returns (uint256 payout) {
        // INVARIANT: a challenge nobody decided still costs the challenger its bond, and pays it to
        // no party (neither side gains by making a game undecidable).
        uint256 toDefender = incoming / 2;
        payout = incoming - toDefender;
        _credit(g.defender, toDefender);
        _credit(g.challenger, payout);
        token.forceApprove(address(market), _challengeBond);
        market.fundJackpot(_challengeBond);
    }

    /// Releases the bond of every referee that revealed and slashes (to this contract) every one
    /// that did not (a released seat's bond came back at its release); returns the referees whose
    /// revealed ballot is `majority` (none for Vacant) and the referee bonds slashed.
    function _closeCommittee(uint256 gameId, Ballot majority)
        private
        returns (address[] memory earners, uint256 slashed)
    {
        address[] storage seats = _committees[gameId];
        uint256 size = seats.length;
        earners = new address[](size);
        uint256 count;
        for (uint256 i; i < size; ++i) {
            address referee = seats[i];
            Ballot ballot = _seats[gameId][referee].ballot;
            if (ballot == Ballot.RevealedDefenderRight || ballot == Ballot.RevealedDefenderWrong) {
                stakeManager.unlock(referee, Role.Verifier, _refereeBond);
                if (ballot == majority) earners[count++] = referee;
            } else if (ballot != Ballot.Declined) {
                // INVARIANT: a seated referee that did not reveal loses its bond.
                emit RefereeSlashed(gameId, referee, _refereeBond);
                slashed += _refereeBond;
                stakeManager.slash(referee, Role.Verifier, _refereeBond, address(this));
            }
        }
        assembly ("memory-safe") {
            // shrink the array to the referees actually collected (count <= size)
            mstore(earners, count)
        }
    }

    /// Who answers for the job's verifier bond: a failing verifier that lost (any way) failed an
    /// honest trace; a passing verifier is slashed only when the committee found the trace wrong (a
    /// solver that merely went silent proves nothing about the verifier). Report games do not come
    /// here: there the verifier is the defender and loses its bond whenever it loses (a forced one
    /// concedes instead).
    function _verifierSlashed(Game storage g, bool solverWon, SettleReason reason) private view returns (bool) {
        if (g.byVerifier) return solverWon;
        return !solverWon && reason == SettleReason.Verdict;
    }

    function _creditToken() internal view override returns (IERC20) {
        return token;
    }

    function _now() private view returns (uint32) {
        return SafeCast.toUint32(block.timestamp);
    }

    function _after(uint256 window) private view returns (uint32) {
        return SafeCast.toUint32(block.timestamp + window);
    }

    function _blockNumber() private view returns (uint32) {
        return SafeCast.toUint32(block.number);
    }
}
