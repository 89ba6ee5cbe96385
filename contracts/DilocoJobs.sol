// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {Credits} from "./Credits.sol";
import {Ballot} from "./interfaces/IDisputeGame.sol";
import {
    Aggregate,
    Contribution,
    DilocoParams,
    IDilocoJobs,
    JobTerms,
    MultipartyJob,
    Phase
} from "./interfaces/IDilocoJobs.sol";
import {IJobMarket} from "./interfaces/IJobMarket.sol";
import {IStakeManager} from "./interfaces/IStakeManager.sol";
import {Job, JobState, Role} from "./Types.sol";

// Windows are timestamps by design: minutes to days, far above the seconds a block producer can shift one.
// forge-lint: disable-next-item(block-timestamp)
/// @title DilocoJobs
/// @notice Multi-party training jobs, DiLoCo-style (IDilocoJobs has the rules, docs/multiparty.md the
///         design and its reasons).
/// @dev Token balance >= _held + totalCredit, where _held is the sum of every job's funds and every open
///      challenge's deposit: each payment moves tokens from a job's funds (or a deposit) into credits in
///      the same transaction. Tokens beyond that (an inner solver's bond the JobMarket slashes to this
///      contract as the inner job's submitter) are swept to the jackpot. Rounds run in lockstep (the
///      design's D = 0): an aggregate can include only contributions whose inner job is already
///      Finalized, so a cut-out contribution never enters a global model and nothing is recomputed.
contract DilocoJobs is IDilocoJobs, Credits {
    using SafeERC20 for IERC20;

    uint256 private constant MAX_WINDOW = 365 days;
    uint256 private constant MAX_PARTIES = 16;

    /// @inheritdoc IDilocoJobs
    IERC20 public immutable token;
    /// @inheritdoc IDilocoJobs
    IJobMarket public immutable market;
    /// @inheritdoc IDilocoJobs
    IStakeManager public immutable stakeManager;

    uint96 private immutable _aggregatorBond;
    uint96 private immutable _refereeBond;
    uint96 private immutable _refereeFee;
    uint96 private immutable _challengeDeposit;
    uint32 private immutable _aggregateWindow;
    uint32 private immutable _challengeWindow;
    uint32 private immutable _voteWindow;
    uint32 private immutable _revealWindow;
    uint8 private immutable _committeeSize;
    uint8 private immutable _maxParties;
    /// The JobMarket's maxCommitWindow (fixed at its deployment): an inner job's commit window is at most this.
    uint32 private immutable _maxWorkWindow;

    /// @inheritdoc IDilocoJobs
    uint256 public jobCount;
    uint256 private _caseCount;
    /// Sum of every job's funds and every open challenge's deposit.
    uint256 private _held;
    /// Sum of the escrows of inner jobs not yet settled (reclaimInner): what the JobMarket may still return.
    uint256 private _outstanding;

    mapping(uint256 jobId => MultipartyJob) private _jobs;
    mapping(uint256 jobId => address[MAX_PARTIES]) private _slots;
    mapping(uint256 jobId => mapping(uint256 round => Contribution[MAX_PARTIES])) private _contributions;
    mapping(uint256 jobId => mapping(uint256 round => uint256 mask)) private _reclaimed;
    mapping(uint256 jobId => Aggregate) private _aggregates;
    mapping(uint256 caseId => address[]) private _committees;
    mapping(uint256 caseId => mapping(address member => Ballot)) private _ballots;
    mapping(uint256 caseId => mapping(address member => bytes32)) private _commitments;

    /// @param market_ the JobMarket (its token and StakeManager are this contract's); the StakeManager's
    ///        wiring must authorize this contract (it claims inner jobs for parties, locks and slashes bonds)
    /// @param p the deployment parameters (DilocoParams)
    constructor(IJobMarket market_, DilocoParams memory p) {
        if (address(market_) == address(0)) revert ZeroAddress();
        IStakeManager stakes = market_.stakeManager();
        if (p.aggregatorBond == 0) revert InvalidParameter("aggregatorBond");
        if (p.refereeBond == 0) revert InvalidParameter("refereeBond");
        if (p.maxParties < 2 || p.maxParties > MAX_PARTIES) revert InvalidParameter("maxParties");
        // The committee draw excludes the parties, the submitter, the aggregator, the challenger and the seats.
        if (p.committeeSize % 2 == 0 || uint256(p.committeeSize) + p.maxParties + 3 > stakes.MAX_EXCLUDED()) {
            revert InvalidParameter("committeeSize");
        }
        if (uint256(p.challengeDeposit) < uint256(p.committeeSize) * p.refereeFee) {
            revert InvalidParameter("challengeDeposit");
        }
        if (p.aggregateWindow == 0 || p.aggregateWindow > MAX_WINDOW) revert InvalidParameter("aggregateWindow");
        if (p.challengeWindow == 0 || p.challengeWindow > MAX_WINDOW) revert InvalidParameter("challengeWindow");
        if (p.voteWindow == 0 || p.voteWindow > MAX_WINDOW) revert InvalidParameter("voteWindow");
        if (p.revealWindow == 0 || p.revealWindow > MAX_WINDOW) revert InvalidParameter("revealWindow");
        market = market_;
        stakeManager = stakes;
        token = market_.token();
        _aggregatorBond = p.aggregatorBond;
        _refereeBond = p.refereeBond;
        _refereeFee = p.refereeFee;
        _challengeDeposit = p.challengeDeposit;
        _aggregateWindow = p.aggregateWindow;
        _challengeWindow = p.challengeWindow;
        _voteWindow = p.voteWindow;
        _revealWindow = p.revealWindow;
        _committeeSize = p.committeeSize;
        _maxParties = p.maxParties;
        _maxWorkWindow = market_.params().maxCommitWindow;
    }

    // ------------------------------------------------------------------ views

    /// @inheritdoc IDilocoJobs
    function params() external view returns (DilocoParams memory) {
        return DilocoParams({
            aggregatorBond: _aggregatorBond,
            refereeBond: _refereeBond,
            refereeFee: _refereeFee,
            challengeDeposit: _challengeDeposit,
            aggregateWindow: _aggregateWindow,
            challengeWindow: _challengeWindow,
            voteWindow: _voteWindow,
            revealWindow: _revealWindow,
            committeeSize: _committeeSize,
            maxParties: _maxParties
        });
    }

    /// @inheritdoc IDilocoJobs
    function getJob(uint256 jobId) external view returns (MultipartyJob memory) {
        return _job(jobId);
    }

    /// @inheritdoc IDilocoJobs
    function partyOf(uint256 jobId, uint256 slot) external view returns (address) {
        return _slots[jobId][slot]; // a slot past 15 reverts (an array index out of bounds)
    }

    /// @inheritdoc IDilocoJobs
    function contributionOf(uint256 jobId, uint16 round, uint256 slot) external view returns (Contribution memory) {
        return _contributions[jobId][round][slot];
    }

    /// @inheritdoc IDilocoJobs
    function aggregateOf(uint256 jobId) external view returns (Aggregate memory) {
        return _aggregates[jobId];
    }

    /// @inheritdoc IDilocoJobs
    function ballotOf(uint256 caseId, address member) external view returns (Ballot, bytes32) {
        return (_ballots[caseId][member], _commitments[caseId][member]);
    }

    /// @inheritdoc IDilocoJobs
    function innerEscrow(uint96 innerReward, uint96 innerFee) public view returns (uint256) {
        return
            uint256(innerReward) + innerFee + market.jackpotTax(innerReward, innerFee) + market.replayFee(innerReward);
    }

    /// @inheritdoc IDilocoJobs
    function escrowFor(JobTerms calldata t) public view returns (uint256) {
        uint256 perRound = uint256(t.parties) * (innerEscrow(t.innerReward, t.innerFee) + t.contributionReward);
        return uint256(t.rounds) * (perRound + t.aggregatorFee);
    }

    // ------------------------------------------------------------------ the parties

    /// @inheritdoc IDilocoJobs
    function post(JobTerms calldata t) external nonReentrant returns (uint256 jobId) {
        _checkTerms(t);
        uint256 escrow = escrowFor(t);
        jobId = ++jobCount;
        MultipartyJob storage job = _jobs[jobId];
        job.submitter = msg.sender;
        job.parties = t.parties;
        job.minParties = t.minParties;
        job.rounds = t.rounds;
        job.workWindow = t.workWindow;
        job.verifyWindow = t.verifyWindow;
        job.innerReward = t.innerReward;
        job.innerFee = t.innerFee;
        job.contributionReward = t.contributionReward;
        job.aggregatorFee = t.aggregatorFee;
        job.slotBond = t.slotBond;
        job.specCid = t.specCid;
        job.globalHash = t.globalHash;
        job.globalCid = t.globalCid;
        job.funds = escrow;
        _held += escrow;
        emit MultipartyJobPosted(
            jobId, msg.sender, t.specCid, t.parties, t.minParties, t.rounds, t.globalHash, t.globalCid, escrow
        );
        _openRound(jobId, job);
        token.safeTransferFrom(msg.sender, address(this), escrow);
    }

    /// @inheritdoc IDilocoJobs
    function join(uint256 jobId, uint8 slot) external {
        MultipartyJob storage job = _working(jobId);
        if (slot >= job.parties) revert InvalidSlot(jobId, slot);
        address[MAX_PARTIES] storage slots = _slots[jobId];
        if (slots[slot] != address(0)) revert SlotTaken(jobId, slot, slots[slot]);
        // INVARIANT: one slot per account, and never the submitter's (its own contribution pays itself).
        if (msg.sender == job.submitter) revert NotAuthorized(msg.sender);
        for (uint256 i; i < job.parties; ++i) {
            if (slots[i] == msg.sender) revert AlreadyParty(jobId, msg.sender);
        }
        slots[slot] = msg.sender;
        emit SlotJoined(jobId, slot, msg.sender, job.slotBond);
        stakeManager.lock(msg.sender, Role.Solver, job.slotBond);
    }

    /// @inheritdoc IDilocoJobs
    function begin(uint256 jobId, uint8 slot, bytes32 innerSpecCid) external nonReentrant {
        MultipartyJob storage job = _working(jobId);
        _onlyParty(jobId, job, slot);
        uint16 round = job.round;
        Contribution storage c = _contributions[jobId][round][slot];
        if (c.innerJobId != 0) revert AlreadyBegun(jobId, round, slot);
        uint256 escrow = innerEscrow(job.innerReward, job.innerFee);
        // INVARIANT: a round's inner jobs spend only what post escrowed for them (parties per round).
        job.funds -= escrow;
        _held -= escrow;
        _outstanding += escrow;
        token.forceApprove(address(market), escrow);
        // The inner job's commit deadline is the round's: a straggler times out when the round closes.
        // deadline >= now (_working)
        // forge-lint: disable-next-line(unsafe-typecast)
        uint32 commitWindow = uint32(job.deadline - block.timestamp);
        if (commitWindow == 0) revert DeadlinePassed(jobId, job.deadline);
        uint256 innerJobId = market.postJob(innerSpecCid, job.innerReward, job.innerFee, commitWindow, false);
        c.innerJobId = innerJobId;
        emit InnerJobBegun(jobId, round, slot, innerJobId, innerSpecCid);
        // INVARIANT: the inner job goes to the slot's party in the party's own transaction, before
        // anyone else can claim it.
        market.claimFor(innerJobId, msg.sender);
    }

    /// @inheritdoc IDilocoJobs
    function contribute(uint256 jobId, uint8 slot, bytes32 cid, bytes32 contentHash) external {
        MultipartyJob storage job = _working(jobId);
        _onlyParty(jobId, job, slot);
        if (cid == bytes32(0) || contentHash == bytes32(0)) revert ZeroCid();
        uint16 round = job.round;
        Contribution storage c = _contributions[jobId][round][slot];
        if (c.innerJobId == 0) revert NotBegun(jobId, round, slot);
        if (c.cid != bytes32(0)) revert AlreadyContributed(jobId, round, slot);
        Job memory inner = _inner(c.innerJobId);
        // INVARIANT: a contribution follows its party's committed trace (it is a function of its last checkpoint).
        if (inner.solver != msg.sender || inner.state == JobState.Open || inner.state == JobState.Claimed) {
            revert TraceNotCommitted(jobId, c.innerJobId);
        }
        c.cid = cid;
        c.contentHash = contentHash;
        emit ContributionCommitted(jobId, round, slot, cid, contentHash);
    }

    // ------------------------------------------------------------------ the round's close and aggregate

    /// @inheritdoc IDilocoJobs
    function closeRound(uint256 jobId) external nonReentrant {
        MultipartyJob storage job = _jobIn(jobId, Phase.Working);
        uint256 deadline = job.deadline;
        bool early = block.timestamp <= deadline;
        uint16 round = job.round;
        bool waited = block.timestamp > deadline + job.verifyWindow;
        uint16 eligible;
        for (uint256 slot; slot < job.parties; ++slot) {
            Contribution storage c = _contributions[jobId][round][slot];
            bool contributed = c.cid != bytes32(0);
            // INVARIANT: a round closes before its deadline only once every slot has contributed.
            if (early && !contributed) revert DeadlineNotReached(jobId, deadline);
            if (contributed) {
                JobState state = _inner(c.innerJobId).state;
                if (_innerPaid(jobId, c, slot)) {
                    eligible |= _bit(slot);
                } else if (
                    !waited && state != JobState.Finalized && state != JobState.Refunded && state != JobState.Open
                ) {
                    // INVARIANT: the round waits for every contribution's verification, up to verifyWindow
                    // (an inner job Open again was taken from its party: it waits for nothing).
                    revert RoundNotSettled(jobId, deadline + job.verifyWindow + 1);
                }
            }
            _closeInner(jobId, job, round, slot, c.innerJobId, !contributed);
            // A party that did not contribute leaves its slot with its slot bond (the JobMarket's timeout
            // slashed its inner bond): a busy party loses the slot, never the stake it holds it with.
            if (!contributed) _vacate(jobId, job, slot, 0);
        }
        emit RoundClosed(jobId, round, eligible, block.number);
        if (_popcount(eligible) < job.minParties) {
            _finish(jobId, job, false);
            return;
        }
        job.phase = Phase.Drawing;
        job.deadline = 0;
        job.anchorBlock = _blockNumber();
    }

    /// @inheritdoc IDilocoJobs
    function drawAggregator(uint256 jobId) external nonReentrant {
        MultipartyJob storage job = _jobIn(jobId, Phase.Drawing);
        (bytes32 entropy, uint256 anchor) = _entropy(jobId, job);
        if (entropy == bytes32(0)) return;
        Aggregate storage a = _aggregates[jobId];
        address[] memory exclude = _excluded(jobId, job, 2);
        exclude[job.parties] = job.submitter;
        exclude[job.parties + 1] = a.lastFailed;
        // INVARIANT: the aggregator is drawn by stake as of the anchor, never a party of the round or the submitter.
        (address aggregator, bool locked) = stakeManager.drawVerifier(
            keccak256(abi.encode(entropy, "aggregator", jobId, job.round)), anchor, exclude, _aggregatorBond
        );
        if (aggregator == address(0)) {
            _finish(jobId, job, false);
            return;
        }
        if (!locked) {
            _reanchor(jobId, job);
            return;
        }
        uint32 deadline = _after(_aggregateWindow);
        job.phase = Phase.Aggregating;
        job.deadline = deadline;
        a.aggregator = aggregator;
        emit AggregatorDrawn(jobId, job.round, aggregator, deadline);
    }

    /// @inheritdoc IDilocoJobs
    function commitAggregate(uint256 jobId, bytes32 stateHash, bytes32 stateCid, uint16 included, uint16 wrong)
        external
    {
        MultipartyJob storage job = _jobIn(jobId, Phase.Aggregating);
        Aggregate storage a = _aggregates[jobId];
        if (msg.sender != a.aggregator) revert NotAuthorized(msg.sender);
        if (block.timestamp > job.deadline) revert DeadlinePassed(jobId, job.deadline);
        if (included & wrong != 0 || (uint256(included) | wrong) >> job.parties != 0) {
            revert InvalidMasks(included, wrong);
        }
        uint16 round = job.round;
        for (uint256 slot; slot < job.parties; ++slot) {
            Contribution storage c = _contributions[jobId][round][slot];
            // INVARIANT: only a committed contribution whose trace was verified (its inner job Finalized,
            // its party paid) can enter the mean; only a committed one can be called wrong.
            if (_has(included, slot) && !_innerPaid(jobId, c, slot)) revert NotEligible(jobId, slot);
            if (_has(wrong, slot) && c.cid == bytes32(0)) revert NotEligible(jobId, slot);
        }
        uint256 count = _popcount(included);
        bool void_ = count < job.minParties;
        if (void_ != (stateHash == bytes32(0)) || (!void_ && stateCid == bytes32(0))) {
            revert InvalidAggregate(jobId, count, job.minParties);
        }
        uint32 deadline = _after(_challengeWindow);
        job.phase = Phase.Proposed;
        job.deadline = deadline;
        a.stateHash = stateHash;
        a.stateCid = stateCid;
        a.included = included;
        a.wrong = wrong;
        emit AggregateCommitted(jobId, round, msg.sender, stateHash, stateCid, included, wrong, deadline);
    }

    /// @inheritdoc IDilocoJobs
    function timeoutAggregator(uint256 jobId) external nonReentrant {
        MultipartyJob storage job = _jobIn(jobId, Phase.Aggregating);
        if (block.timestamp <= job.deadline) revert DeadlineNotReached(jobId, job.deadline);
        Aggregate storage a = _aggregates[jobId];
        address aggregator = a.aggregator;
        emit AggregatorTimedOut(jobId, job.round, aggregator, _aggregatorBond);
        // INVARIANT: an aggregator that does not commit loses its bond to the job (the submitter's refund).
        job.funds += _aggregatorBond;
        _held += _aggregatorBond;
        stakeManager.slash(aggregator, Role.Verifier, _aggregatorBond, address(this));
        _redrawAggregator(jobId, job, a);
    }

    /// @inheritdoc IDilocoJobs
    function finalizeRound(uint256 jobId) external nonReentrant {
        MultipartyJob storage job = _jobIn(jobId, Phase.Proposed);
        if (block.timestamp <= job.deadline) revert DeadlineNotReached(jobId, job.deadline);
        _acceptAggregate(jobId, job);
    }

    // ------------------------------------------------------------------ the one-step challenge

    /// @inheritdoc IDilocoJobs
    function challenge(uint256 jobId) external nonReentrant returns (uint256 caseId) {
        MultipartyJob storage job = _jobIn(jobId, Phase.Proposed);
        if (block.timestamp > job.deadline) revert DeadlinePassed(jobId, job.deadline);
        Aggregate storage a = _aggregates[jobId];
        if (msg.sender == a.aggregator) revert NotAuthorized(msg.sender);
        caseId = ++_caseCount;
        a.caseId = caseId;
        a.challenger = msg.sender;
        job.phase = Phase.Contested;
        job.deadline = 0;
        job.anchorBlock = _blockNumber();
        _held += _challengeDeposit;
        emit AggregateChallenged(jobId, job.round, caseId, msg.sender, _challengeDeposit);
        token.safeTransferFrom(msg.sender, address(this), _challengeDeposit);
    }

    /// @inheritdoc IDilocoJobs
    function drawCommittee(uint256 jobId) external nonReentrant {
        MultipartyJob storage job = _jobIn(jobId, Phase.Contested);
        Aggregate storage a = _aggregates[jobId];
        uint256 caseId = a.caseId;
        // Contested has no deadline until its committee is drawn.
        if (job.deadline != 0) revert WrongPhase(jobId, Phase.Contested, Phase.Contested);
        (bytes32 entropy, uint256 anchor) = _entropy(jobId, job);
        if (entropy == bytes32(0)) return;
        uint256 size = _committeeSize;
        uint256 base = job.parties + 3;
        address[] memory exclude = _excluded(jobId, job, 3 + size);
        exclude[job.parties] = job.submitter;
        exclude[job.parties + 1] = a.aggregator;
        exclude[job.parties + 2] = a.challenger;
        for (uint256 i; i < size; ++i) {
            // INVARIANT: every seat reads stakes as of the anchor block, fixed before its entropy existed.
            (address member, bool locked) = stakeManager.drawVerifier(
                keccak256(abi.encode(entropy, "aggregate", caseId, i)), anchor, exclude, _refereeBond
            );
            if (member == address(0) || !locked) {
                for (uint256 j; j < i; ++j) {
                    stakeManager.unlock(exclude[base + j], Role.Verifier, _refereeBond);
                }
                if (member == address(0)) _settleChallenge(jobId, job, a, false, false);
                else _reanchor(jobId, job);
                return;
            }
            exclude[base + i] = member;
        }
        address[] storage seats = _committees[caseId];
        address[] memory drawn = new address[](size);
        for (uint256 i; i < size; ++i) {
            drawn[i] = exclude[base + i];
            seats.push(drawn[i]);
            _ballots[caseId][drawn[i]] = Ballot.Seated;
        }
        uint32 commitDeadline = _after(_voteWindow);
        job.deadline = commitDeadline;
        emit CommitteeDrawn(jobId, caseId, drawn, commitDeadline, uint256(commitDeadline) + _revealWindow);
    }

    /// @inheritdoc IDilocoJobs
    function commitVote(uint256 jobId, bytes32 commitment) external {
        (MultipartyJob storage job, Aggregate storage a, uint256 caseId) = _voting(jobId);
        if (block.timestamp > job.deadline) revert DeadlinePassed(jobId, job.deadline);
        if (commitment == bytes32(0)) revert ZeroCommitment();
        Ballot ballot = _ballots[caseId][msg.sender];
        // INVARIANT: one commitment per seated member.
        if (ballot != Ballot.Seated) revert WrongBallot(caseId, msg.sender, ballot, Ballot.Seated);
        _ballots[caseId][msg.sender] = Ballot.Committed;
        _commitments[caseId][msg.sender] = commitment;
        ++a.commits; // at most committeeSize
        emit VoteCommitted(jobId, caseId, msg.sender, commitment);
    }

    /// @inheritdoc IDilocoJobs
    function revealVote(uint256 jobId, bool aggregateRight, bytes32 salt) external {
        (MultipartyJob storage job, Aggregate storage a, uint256 caseId) = _voting(jobId);
        uint256 commitEnd = job.deadline;
        // INVARIANT: no vote is revealed while another member may still commit.
        if (block.timestamp <= commitEnd && a.commits < _committeeSize) revert RevealNotOpen(caseId, commitEnd);
        uint256 revealEnd = commitEnd + _revealWindow;
        if (block.timestamp > revealEnd) revert DeadlinePassed(jobId, revealEnd);
        Ballot ballot = _ballots[caseId][msg.sender];
        if (ballot != Ballot.Committed) revert WrongBallot(caseId, msg.sender, ballot, Ballot.Committed);
        if (keccak256(abi.encode(caseId, aggregateRight, salt, msg.sender)) != _commitments[caseId][msg.sender]) {
            revert CommitmentMismatch(caseId, msg.sender);
        }
        if (aggregateRight) {
            _ballots[caseId][msg.sender] = Ballot.RevealedDefenderRight;
            ++a.votesRight;
        } else {
            _ballots[caseId][msg.sender] = Ballot.RevealedDefenderWrong;
            ++a.votesWrong;
        }
        emit VoteRevealed(jobId, caseId, msg.sender, aggregateRight);
    }

    /// @inheritdoc IDilocoJobs
    function settleChallenge(uint256 jobId) external nonReentrant {
        (MultipartyJob storage job, Aggregate storage a,) = _voting(jobId);
        uint256 revealEnd = uint256(job.deadline) + _revealWindow;
        uint256 right = a.votesRight;
        uint256 wrong = a.votesWrong;
        if (block.timestamp <= revealEnd && right + wrong < _committeeSize) revert NotSettleable(jobId, revealEnd + 1);
        _settleChallenge(jobId, job, a, right != wrong, wrong > right);
    }

    // ------------------------------------------------------------------ money

    /// @inheritdoc IDilocoJobs
    function reclaim(uint256 jobId, uint16 round, uint8 slot) external nonReentrant {
        MultipartyJob storage job = _job(jobId);
        if (slot >= job.parties) revert InvalidSlot(jobId, slot);
        if (!_reclaimInner(jobId, job, round, slot)) revert NothingToReclaim(jobId, round, slot);
    }

    /// @inheritdoc IDilocoJobs
    function sweep() external nonReentrant returns (uint256 amount) {
        uint256 owed = _held + _outstanding + _totalCredit();
        uint256 balance = token.balanceOf(address(this));
        amount = balance > owed ? balance - owed : 0;
        if (amount == 0) return 0;
        emit SurplusSwept(amount);
        token.forceApprove(address(market), amount);
        market.fundJackpot(amount);
    }

    // ------------------------------------------------------------------ internals

    function _checkTerms(JobTerms calldata t) private view {
        if (t.specCid == bytes32(0) || t.globalHash == bytes32(0) || t.globalCid == bytes32(0)) revert ZeroCid();
        if (t.parties < 2 || t.parties > _maxParties || t.minParties == 0 || t.minParties > t.parties || t.rounds == 0)
        {
            revert InvalidShape(t.parties, t.minParties, t.rounds);
        }
        if (t.workWindow == 0 || t.workWindow > _maxWorkWindow || t.verifyWindow > MAX_WINDOW) {
            revert InvalidWindows(t.workWindow, t.verifyWindow);
        }
        // INVARIANT: a wrong contribution costs its party more than its round pays: its contribution
        // reward, and the inner job it may have had paid for another (cheaper) spec than its round's.
        if (t.innerReward == 0 || t.innerFee == 0 || t.slotBond < uint256(t.innerReward) + t.innerFee + t.contributionReward) {
            revert InvalidPay(t.innerReward, t.innerFee, t.contributionReward, t.slotBond);
        }
    }

    function _job(uint256 jobId) private view returns (MultipartyJob storage job) {
        job = _jobs[jobId];
        if (job.phase == Phase.None) revert UnknownJob(jobId);
    }

    function _jobIn(uint256 jobId, Phase want) private view returns (MultipartyJob storage job) {
        job = _job(jobId);
        if (job.phase != want) revert WrongPhase(jobId, job.phase, want);
    }

    function _working(uint256 jobId) private view returns (MultipartyJob storage job) {
        job = _jobIn(jobId, Phase.Working);
        if (block.timestamp > job.deadline) revert DeadlinePassed(jobId, job.deadline);
    }

    function _voting(uint256 jobId)
        private
        view
        returns (MultipartyJob storage job, Aggregate storage a, uint256 caseId)
    {
        job = _jobIn(jobId, Phase.Contested);
        a = _aggregates[jobId];
        caseId = a.caseId;
        if (job.deadline == 0) revert WrongPhase(jobId, Phase.Contested, Phase.Contested); // no committee yet
    }

    function _onlyParty(uint256 jobId, MultipartyJob storage job, uint8 slot) private view {
        if (slot >= job.parties) revert InvalidSlot(jobId, slot);
        if (_slots[jobId][slot] != msg.sender) revert NotAuthorized(msg.sender);
    }

    function _inner(uint256 innerJobId) private view returns (Job memory) {
        return market.getJob(innerJobId);
    }

    /// Whether the slot's contribution is committed and its inner job Finalized with its party paid.
    function _innerPaid(uint256 jobId, Contribution storage c, uint256 slot) private view returns (bool) {
        if (c.cid == bytes32(0)) return false;
        Job memory inner = _inner(c.innerJobId);
        return inner.state == JobState.Finalized && inner.solver == _slots[jobId][slot];
    }

    /// The block hash of anchorBlock + 1 for a draw, or 0 after a re-anchor (older than 256 blocks).
    function _entropy(uint256 jobId, MultipartyJob storage job) private returns (bytes32 entropy, uint256 anchor) {
        anchor = job.anchorBlock;
        // INVARIANT: a draw uses a block hash that did not exist when its inputs were fixed.
        if (block.number <= anchor + 1) revert RandomnessNotReady(jobId, anchor + 2);
        entropy = blockhash(anchor + 1);
        if (entropy == bytes32(0)) _reanchor(jobId, job);
    }

    function _reanchor(uint256 jobId, MultipartyJob storage job) private {
        job.anchorBlock = _blockNumber();
        emit DrawReanchored(jobId, job.round, block.number);
    }

    /// The round's parties in the first `parties` entries, room for `extra` more.
    function _excluded(uint256 jobId, MultipartyJob storage job, uint256 extra)
        private
        view
        returns (address[] memory exclude)
    {
        uint256 n = job.parties;
        exclude = new address[](n + extra);
        for (uint256 i; i < n; ++i) {
            exclude[i] = _slots[jobId][i];
        }
    }

    /// At the close: a straggler's inner job still claimed is timed out, and an inner job Open (timed out,
    /// or taken from its party and reopened) is cancelled, so nobody else can claim it; then what the
    /// JobMarket returned of it is taken back.
    function _closeInner(
        uint256 jobId,
        MultipartyJob storage job,
        uint16 round,
        uint256 slot,
        uint256 innerJobId,
        bool straggler
    ) private {
        if (innerJobId == 0) return;
        Job memory inner = _inner(innerJobId);
        JobState state = inner.state;
        // A stranger that claimed a reopened inner job keeps it (its own deadline): the close never waits for it.
        if (straggler && state == JobState.Claimed && block.timestamp > inner.deadline) {
            market.timeoutSolver(innerJobId);
            state = JobState.Open;
        }
        if (state == JobState.Open) market.cancel(innerJobId);
        _reclaimInner(jobId, job, round, slot);
    }

    /// Settles an inner job's escrow once the JobMarket settled it: all of it back when cancelled or
    /// refunded, its replay fee back when finalized without a full replay; true if it did.
    function _reclaimInner(uint256 jobId, MultipartyJob storage job, uint16 round, uint256 slot)
        private
        returns (bool)
    {
        uint256 innerJobId = _contributions[jobId][round][slot].innerJobId;
        if (innerJobId == 0 || _has(_reclaimed[jobId][round], slot)) return false;
        JobState state = _inner(innerJobId).state;
        uint256 escrow = innerEscrow(job.innerReward, job.innerFee);
        uint256 amount = escrow;
        if (state == JobState.Finalized) {
            amount = market.isFullReplay(innerJobId) ? 0 : market.replayFee(job.innerReward);
        } else if (state != JobState.Cancelled && state != JobState.Refunded) {
            return false;
        }
        // INVARIANT: an inner job's escrow is settled once; until then it counts as owed (sweep).
        _reclaimed[jobId][round] |= _bit(slot);
        _outstanding -= escrow;
        // slot < 16
        // forge-lint: disable-next-line(unsafe-typecast)
        emit InnerEscrowReclaimed(jobId, round, uint8(slot), innerJobId, amount);
        if (job.phase == Phase.Finished) {
            _credit(job.submitter, amount);
        } else {
            job.funds += amount;
            _held += amount;
        }
        return true;
    }

    function _vacate(uint256 jobId, MultipartyJob storage job, uint256 slot, uint256 slashed) private {
        address party = _slots[jobId][slot];
        if (party == address(0)) return;
        delete _slots[jobId][slot];
        // slot < 16
        // forge-lint: disable-next-line(unsafe-typecast)
        emit SlotVacated(jobId, uint8(slot), party, slashed);
        if (slashed != 0) {
            job.funds += slashed;
            _held += slashed;
            stakeManager.slash(party, Role.Solver, slashed, address(this));
        }
        uint256 left = job.slotBond - slashed;
        if (left != 0) stakeManager.unlock(party, Role.Solver, left);
    }

    function _redrawAggregator(uint256 jobId, MultipartyJob storage job, Aggregate storage a) private {
        address failed = a.aggregator;
        delete _aggregates[jobId];
        a.lastFailed = failed;
        job.phase = Phase.Drawing;
        job.deadline = 0;
        _reanchor(jobId, job);
    }

    /// Ends a challenge: members that revealed get their bond back (the majority its fee from the
    /// deposit), the others lose it to the winner. Upheld: the aggregator's bond to the challenger and
    /// another aggregator drawn; not decided: another aggregator drawn, nobody else slashed; else the
    /// aggregate is final and the deposit's rest pays the aggregator.
    function _settleChallenge(uint256 jobId, MultipartyJob storage job, Aggregate storage a, bool decided, bool upheld)
        private
    {
        uint256 caseId = a.caseId;
        Ballot majority =
            !decided ? Ballot.Vacant : upheld ? Ballot.RevealedDefenderWrong : Ballot.RevealedDefenderRight;
        (uint256 earners, uint256 slashed) = _closeCommittee(jobId, caseId, majority);
        uint256 fees = earners * _refereeFee;
        // fees <= committeeSize * refereeFee <= challengeDeposit (constructor)
        uint256 rest = _challengeDeposit - fees + slashed;
        _held -= _challengeDeposit;
        address challenger = a.challenger;
        address aggregator = a.aggregator;
        bool final_ = decided && !upheld;
        emit ChallengeSettled(jobId, caseId, decided, upheld, final_ ? 0 : rest, final_ ? rest : 0, fees);
        if (final_) {
            _credit(aggregator, rest);
            _acceptAggregate(jobId, job);
            return;
        }
        _credit(challenger, rest);
        if (upheld) {
            // INVARIANT: a wrong aggregate costs its aggregator its whole bond, to the challenger.
            stakeManager.slash(aggregator, Role.Verifier, _aggregatorBond, challenger);
        } else {
            stakeManager.unlock(aggregator, Role.Verifier, _aggregatorBond);
        }
        _redrawAggregator(jobId, job, a);
    }

    /// Releases every member that revealed (counting those that voted `majority`) and slashes, to this
    /// contract, every one that did not.
    function _closeCommittee(uint256 jobId, uint256 caseId, Ballot majority)
        private
        returns (uint256 earners, uint256 slashed)
    {
        address[] storage seats = _committees[caseId];
        for (uint256 i; i < seats.length; ++i) {
            address member = seats[i];
            Ballot ballot = _ballots[caseId][member];
            if (ballot == Ballot.RevealedDefenderRight || ballot == Ballot.RevealedDefenderWrong) {
                stakeManager.unlock(member, Role.Verifier, _refereeBond);
                if (ballot == majority) {
                    ++earners;
                    _credit(member, _refereeFee);
                }
            } else {
                // INVARIANT: a seated member that did not reveal loses its bond.
                emit MemberSlashed(jobId, caseId, member, _refereeBond);
                slashed += _refereeBond;
                stakeManager.slash(member, Role.Verifier, _refereeBond, address(this));
            }
        }
    }

    /// The round's aggregate is final: the included parties and the aggregator are paid, the wrong
    /// parties' slot bonds slashed into the funds (and their slots vacated); a void round ends the job,
    /// else the next global model is the aggregate's and the next round opens (or the job is complete).
    function _acceptAggregate(uint256 jobId, MultipartyJob storage job) private {
        Aggregate storage a = _aggregates[jobId];
        uint16 included = a.included;
        uint16 wrong = a.wrong;
        uint256 reward = job.contributionReward;
        uint256 paid = _popcount(included) * reward + job.aggregatorFee;
        job.funds -= paid;
        _held -= paid;
        for (uint256 slot; slot < job.parties; ++slot) {
            if (_has(included, slot)) _credit(_slots[jobId][slot], reward);
            // INVARIANT: a contribution shown wrong costs its party its slot bond (>= contributionReward).
            if (_has(wrong, slot)) _vacate(jobId, job, slot, job.slotBond);
        }
        address aggregator = a.aggregator;
        stakeManager.unlock(aggregator, Role.Verifier, _aggregatorBond);
        _credit(aggregator, job.aggregatorFee);
        bytes32 stateHash = a.stateHash;
        bytes32 stateCid = a.stateCid;
        uint16 round = job.round;
        emit RoundFinalized(jobId, round, stateHash, stateCid, included, wrong);
        delete _aggregates[jobId];
        if (stateHash == bytes32(0)) {
            _finish(jobId, job, false);
            return;
        }
        job.globalHash = stateHash;
        job.globalCid = stateCid;
        job.round = round + 1;
        if (round + 1 == job.rounds) _finish(jobId, job, true);
        else _openRound(jobId, job);
    }

    function _openRound(uint256 jobId, MultipartyJob storage job) private {
        uint32 deadline = _after(job.workWindow);
        job.phase = Phase.Working;
        job.deadline = deadline;
        emit RoundOpened(jobId, job.round, job.globalHash, job.globalCid, deadline);
    }

    /// Ends the job: every slot released, the funds left credited to the submitter.
    function _finish(uint256 jobId, MultipartyJob storage job, bool complete) private {
        // INVARIANT: a job finishes once (callers require a live phase).
        job.phase = Phase.Finished;
        job.deadline = 0;
        for (uint256 slot; slot < job.parties; ++slot) {
            _vacate(jobId, job, slot, 0);
        }
        uint256 refund = job.funds;
        job.funds = 0;
        _held -= refund;
        emit MultipartyJobFinished(jobId, job.round, job.globalHash, complete, refund);
        _credit(job.submitter, refund);
    }

    /// The bit of `slot` (< 16) in a round's mask.
    function _bit(uint256 slot) private pure returns (uint16) {
        // slot < 16: fits
        // forge-lint: disable-next-line(unsafe-typecast,incorrect-shift)
        return uint16(1 << slot);
    }

    function _has(uint256 mask, uint256 slot) private pure returns (bool) {
        return (mask >> slot) & 1 != 0;
    }

    function _popcount(uint256 x) private pure returns (uint256 n) {
        for (; x != 0; x &= x - 1) {
            ++n;
        }
    }

    function _creditToken() internal view override returns (IERC20) {
        return token;
    }

    function _blockNumber() private view returns (uint32) {
        return SafeCast.toUint32(block.number);
    }

    function _after(uint256 window) private view returns (uint32) {
        return SafeCast.toUint32(block.timestamp + window);
    }
}
