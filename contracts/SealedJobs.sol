// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {Credits} from "./Credits.sol";
import {Game, IDisputeGame} from "./interfaces/IDisputeGame.sol";
import {IJobMarket} from "./interfaces/IJobMarket.sol";
import {IKeyRegistry} from "./interfaces/IKeyRegistry.sol";
import {ISealedJobs, KeyDemand, Sealing, SealingStatus} from "./interfaces/ISealedJobs.sol";
import {IStakeManager} from "./interfaces/IStakeManager.sol";
import {Job, JobState, Role} from "./Types.sol";

// Demands are timestamps by design: minutes to hours, far above the seconds a block producer can shift one.
// forge-lint: disable-next-item(block-timestamp)
/// @title SealedJobs
/// @notice A sealed job's data-key commitment, key bond and wraps, and the key game (ISealedJobs has the
///         rules, docs/sealing.md the design).
/// @dev Token balance == the sum of `bond` over sealings Active or Revealed + totalCredit: a forfeit or a
///      return moves a bond into credits (Credits) in the same transaction and the parties claim them.
///      A contract of its own beside the JobMarket (which has no code room left): it reaches the job's
///      clock through the JobMarket's hold (holdForCourt / releaseFromCourt) and its bonds through the
///      StakeManager, both as a protocol contract of the StakeManager's one-shot wiring.
contract SealedJobs is ISealedJobs, Credits {
    using SafeERC20 for IERC20;

    uint256 private constant MAX_WINDOW = 365 days;
    uint256 private constant WRAP_BYTES = 80;

    /// @inheritdoc ISealedJobs
    IJobMarket public immutable market;
    /// @inheritdoc ISealedJobs
    IStakeManager public immutable stakeManager;
    /// @inheritdoc ISealedJobs
    IKeyRegistry public immutable keys;
    /// @inheritdoc ISealedJobs
    IERC20 public immutable token;
    /// @inheritdoc ISealedJobs
    uint32 public immutable keyWindow;

    mapping(uint256 jobId => Sealing) private _sealings;
    mapping(uint256 jobId => KeyDemand) private _demands;
    mapping(uint256 jobId => mapping(address party => uint256)) private _demandCount;

    /// @param market_ the JobMarket (its token and StakeManager are this contract's); the StakeManager's
    ///        wiring must authorize this contract (it holds jobs and releases bonds)
    /// @param keys_ the registry of encryption keys, on the same StakeManager
    /// @param keyWindow_ seconds an entitled party's demand for the key may stay unanswered
    constructor(IJobMarket market_, IKeyRegistry keys_, uint32 keyWindow_) {
        if (address(market_) == address(0) || address(keys_) == address(0)) revert ZeroAddress();
        IStakeManager stakes = market_.stakeManager();
        if (address(keys_.stakeManager()) != address(stakes)) revert InvalidParameter("keys");
        if (keyWindow_ == 0 || keyWindow_ > MAX_WINDOW) revert InvalidParameter("keyWindow");
        market = market_;
        stakeManager = stakes;
        keys = keys_;
        token = market_.token();
        keyWindow = keyWindow_;
    }

    // ------------------------------------------------------------------ views

    /// @inheritdoc ISealedJobs
    function sealingOf(uint256 jobId) external view returns (Sealing memory) {
        return _sealings[jobId];
    }

    /// @inheritdoc ISealedJobs
    function demandOf(uint256 jobId) external view returns (KeyDemand memory) {
        return _demands[jobId];
    }

    /// @inheritdoc ISealedJobs
    function demandsBy(uint256 jobId, address party) external view returns (uint256) {
        return _demandCount[jobId][party];
    }

    // ------------------------------------------------------------------ the submitter

    /// @inheritdoc ISealedJobs
    function seal(uint256 jobId, bytes32 keyHash) external nonReentrant {
        if (keyHash == bytes32(0)) revert ZeroKeyHash();
        Job memory job = market.getJob(jobId);
        if (msg.sender != job.submitter) revert NotAuthorized(msg.sender);
        // INVARIANT: a job is sealed before anyone claims it, and once.
        if (job.state != JobState.Open) revert WrongJobState(jobId, uint8(job.state));
        Sealing storage s = _sealings[jobId];
        if (s.status != SealingStatus.None) revert AlreadySealed(jobId);
        // INVARIANT: the key bond equals what the job pays its solver and verifier, so a submitter that
        // withholds the key loses as much as its escrow.
        uint96 bond = job.reward + job.verifierFee;
        s.keyHash = keyHash;
        s.submitter = msg.sender;
        s.bond = bond;
        s.status = SealingStatus.Active;
        emit JobSealed(jobId, msg.sender, keyHash, bond);
        token.safeTransferFrom(msg.sender, address(this), bond);
    }

    /// @inheritdoc ISealedJobs
    function returnBond(uint256 jobId) external nonReentrant {
        Sealing storage s = _sealings[jobId];
        SealingStatus status = s.status;
        if (status != SealingStatus.Active && status != SealingStatus.Revealed) revert NotSealed(jobId, status);
        JobState state = market.getJob(jobId).state;
        if (state != JobState.Finalized && state != JobState.Refunded && state != JobState.Cancelled) {
            revert NotSettled(jobId, uint8(state));
        }
        // INVARIANT: a bond leaves once: returned here, or forfeited (never both).
        s.status = SealingStatus.Returned;
        emit BondReturned(jobId, s.submitter, s.bond);
        _credit(s.submitter, s.bond);
    }

    // ------------------------------------------------------------------ wraps

    /// @inheritdoc ISealedJobs
    function requestWrap(uint256 jobId) external {
        _live(jobId);
        Job memory job = market.getJob(jobId);
        if (job.state == JobState.Open) {
            if (!stakeManager.isEligible(msg.sender, Role.Solver)) revert NotEligible(msg.sender);
        } else if (job.state == JobState.Verified) {
            _auditor(job);
        } else {
            revert WrongJobState(jobId, uint8(job.state));
        }
        emit WrapRequested(jobId, msg.sender, _keyVersion(msg.sender));
    }

    /// @inheritdoc ISealedJobs
    function publishWraps(uint256 jobId, address[] calldata recipients, bytes[] calldata wraps) external {
        _live(jobId);
        if (recipients.length == 0 || recipients.length != wraps.length) {
            revert LengthMismatch(recipients.length, wraps.length);
        }
        // INVARIANT: only a holder of the key wraps it: the submitter, or the job's solver once claimed.
        if (msg.sender != _sealings[jobId].submitter && msg.sender != market.getJob(jobId).solver) {
            revert NotAuthorized(msg.sender);
        }
        KeyDemand storage d = _demands[jobId];
        address party = d.party;
        bool answers;
        for (uint256 i; i < recipients.length; ++i) {
            if (wraps[i].length != WRAP_BYTES) revert InvalidWrap(wraps[i].length);
            address recipient = recipients[i];
            emit WrapPublished(jobId, recipient, msg.sender, _keyVersion(recipient), wraps[i]);
            if (recipient == party && party != address(0) && !d.keyOnly) answers = true;
        }
        // An answer after the deadline is too late: the demand is forfeited (timeoutDemand).
        if (answers && block.timestamp > d.deadline) revert DeadlinePassed(jobId, d.deadline);
        // INVARIANT: a wrap answers only a first demand (the chain cannot open it): a party whose wrap
        // still does not open demands again, and only the key answers that.
        if (answers) _answer(jobId, d, false);
    }

    /// @inheritdoc ISealedJobs
    function wrapForReferees(uint256 gameId, address[] calldata referees, bytes[] calldata wraps) external {
        IDisputeGame game = IDisputeGame(market.disputeGame());
        Game memory g = game.getGame(gameId);
        uint256 jobId = g.jobId;
        _live(jobId);
        if (referees.length == 0 || referees.length != wraps.length) {
            revert LengthMismatch(referees.length, wraps.length);
        }
        // INVARIANT: only a party of the game wraps for it, and only to the referees it seated: each
        // party replayed the job's data to play, so a referee's key never hangs on one party alone.
        if (msg.sender != g.defender && msg.sender != g.challenger) revert NotAuthorized(msg.sender);
        address[] memory seats = game.committee(gameId);
        for (uint256 i; i < referees.length; ++i) {
            if (wraps[i].length != WRAP_BYTES) revert InvalidWrap(wraps[i].length);
            address referee = referees[i];
            bool seated;
            for (uint256 j; j < seats.length && !seated; ++j) {
                seated = seats[j] == referee;
            }
            if (!seated) revert NotSeated(gameId, referee);
            emit WrapPublished(jobId, referee, msg.sender, _keyVersion(referee), wraps[i]);
        }
    }

    /// @inheritdoc ISealedJobs
    function declineSeat(uint256 gameId) external nonReentrant {
        IDisputeGame game = IDisputeGame(market.disputeGame());
        // INVARIANT: a seat is released here only on a sealed job whose key is not public: a referee of
        // any other job was given everything it needs to vote.
        _live(game.getGame(gameId).jobId);
        game.releaseSeat(gameId, msg.sender);
    }

    // ------------------------------------------------------------------ the key game

    /// @inheritdoc ISealedJobs
    function demandKey(uint256 jobId) external nonReentrant {
        SealingStatus status = _sealings[jobId].status;
        if (status == SealingStatus.Revealed) revert KeyPublic(jobId);
        _live(jobId);
        address open = _demands[jobId].party;
        if (open != address(0)) revert DemandOpen(jobId, open);
        Job memory job = market.getJob(jobId);
        bool verifying = job.state == JobState.Verifying;
        if (verifying) {
            if (msg.sender != job.verifier) revert NotAuthorized(msg.sender);
        } else if (job.state == JobState.Verified) {
            _auditor(job);
        } else {
            revert WrongJobState(jobId, uint8(job.state));
        }
        _keyVersion(msg.sender);
        uint256 count = ++_demandCount[jobId][msg.sender];
        uint32 deadline = SafeCast.toUint32(block.timestamp + keyWindow);
        bool keyOnly = count > 1;
        _demands[jobId] = KeyDemand(msg.sender, deadline, keyOnly, verifying);
        emit KeyDemanded(jobId, msg.sender, deadline, keyOnly);
        // INVARIANT: the demander's clock (report deadline or challenge window) pauses while the key is
        // owed; the JobMarket refuses the hold once that clock ran out, and while another hold runs.
        market.holdForCourt(jobId, msg.sender);
    }

    /// @inheritdoc ISealedJobs
    function revealKey(uint256 jobId, bytes32 dataKey) external nonReentrant {
        Sealing storage s = _sealings[jobId];
        KeyDemand storage d = _demands[jobId];
        if (d.party == address(0)) revert NoDemand(jobId);
        if (block.timestamp > d.deadline) revert DeadlinePassed(jobId, d.deadline);
        // INVARIANT: only the committed key answers with the key.
        if (keccak256(abi.encodePacked(dataKey)) != s.keyHash) revert WrongKey(jobId);
        s.status = SealingStatus.Revealed;
        emit KeyRevealed(jobId, msg.sender, dataKey);
        _answer(jobId, d, true);
    }

    /// @inheritdoc ISealedJobs
    function timeoutDemand(uint256 jobId) external nonReentrant {
        KeyDemand memory d = _demands[jobId];
        if (d.party == address(0)) revert NoDemand(jobId);
        if (block.timestamp <= d.deadline) revert DeadlineNotReached(jobId, d.deadline);
        delete _demands[jobId];
        Sealing storage s = _sealings[jobId];
        // INVARIANT: a bond leaves once (an open demand implies an Active sealing: Revealed ends demands).
        s.status = SealingStatus.Forfeited;
        Job memory job = market.getJob(jobId);
        // INVARIANT: a forfeit pays the party withheld from its time (the verifier's fee) and sends the
        // rest to the jackpot, never to the solver: a solver that trained nothing gains nothing from a
        // submitter that did not answer, and no sybil of it is paid more than a verifier's fee.
        uint256 toParty = job.verifierFee;
        uint256 toJackpot = s.bond - toParty;
        if (d.verifying) {
            // INVARIANT: no party loses stake for a key it was not given: both bonds are released and
            // the job reopens.
            stakeManager.unlock(job.solver, Role.Solver, market.solverBond(job.reward));
            stakeManager.unlock(job.verifier, Role.Verifier, market.verifierBond(job.reward));
        }
        emit DemandForfeited(jobId, d.party, toParty, toJackpot);
        _credit(d.party, toParty);
        token.forceApprove(address(market), toJackpot);
        market.fundJackpot(toJackpot);
        market.releaseFromCourt(jobId, d.verifying);
    }

    // ------------------------------------------------------------------ internals

    /// Ends the open demand `d` of `jobId`: the held clock resumes.
    function _answer(uint256 jobId, KeyDemand storage d, bool withKey) private {
        address party = d.party;
        delete _demands[jobId];
        emit DemandAnswered(jobId, party, msg.sender, withKey);
        market.releaseFromCourt(jobId, false);
    }

    /// Reverts unless the caller may audit the Verified `job`.
    function _auditor(Job memory job) private view {
        // INVARIANT: staked whistleblowers that audit are entitled, as on challengeAvailability; the
        // solver and the verifier of the job hold the key already.
        if (msg.sender == job.solver || msg.sender == job.verifier) revert NotAuthorized(msg.sender);
        if (!stakeManager.isEligible(msg.sender, Role.Whistleblower)) revert NotEligible(msg.sender);
    }

    /// Reverts unless `jobId` is sealed with its bond held and its key not public.
    function _live(uint256 jobId) private view {
        SealingStatus status = _sealings[jobId].status;
        if (status != SealingStatus.Active) revert NotSealed(jobId, status);
    }

    /// The version of `account`'s registered encryption key (reverts NoEncryptionKey without one).
    function _keyVersion(address account) private view returns (uint64 version) {
        (, version) = keys.keyOf(account);
        if (version == 0) revert NoEncryptionKey(account);
    }

    function _creditToken() internal view override returns (IERC20) {
        return token;
    }
}
