// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {Ballot} from "./IDisputeGame.sol";
import {IJobMarket} from "./IJobMarket.sol";
import {IStakeManager} from "./IStakeManager.sol";

/// Deployment parameters of DilocoJobs (fixed for its life; clients read them with `params()`).
struct DilocoParams {
    /// Verifier stake locked from a drawn aggregator until its aggregate is final (slashed if it is wrong).
    uint96 aggregatorBond;
    /// Verifier stake locked from each seat of a challenge's committee.
    uint96 refereeBond;
    /// Paid from the challenger's deposit to each member of the majority.
    uint96 refereeFee;
    /// What a challenger deposits (at least committeeSize * refereeFee).
    uint96 challengeDeposit;
    /// Seconds a drawn aggregator has to commit its aggregate.
    uint32 aggregateWindow;
    /// Seconds anyone may challenge a committed aggregate.
    uint32 challengeWindow;
    /// Seconds a committee's members have to commit their votes once drawn.
    uint32 voteWindow;
    /// Seconds they then have to reveal them.
    uint32 revealWindow;
    /// Odd; committeeSize + maxParties + 3 <= StakeManager.MAX_EXCLUDED (the committee draw's exclusions).
    uint8 committeeSize;
    /// The most parties a job may have (<= 16: the round's bit masks).
    uint8 maxParties;
}

/// Where a multi-party job stands (the phase of its current round).
enum Phase {
    None,
    /// Parties train their inner jobs and commit contributions until `deadline`.
    Working,
    /// The round is closed; an aggregator is drawn from blockhash(anchorBlock + 1).
    Drawing,
    /// The drawn aggregator commits the next global state by `deadline`.
    Aggregating,
    /// An aggregate is committed; anyone may challenge it until `deadline`.
    Proposed,
    /// A challenge is open: a committee is drawn from blockhash(anchorBlock + 1), then votes.
    Contested,
    /// Every round ran, or a round fell short of the quorum: the job's model is `globalHash`.
    Finished
}

/// A multi-party job (issue 28): `parties` slots, `rounds` rounds, each party's round an inner job on
/// the JobMarket.
struct MultipartyJob {
    address submitter;
    uint8 parties;
    uint8 minParties;
    uint16 rounds;
    /// The current round (0-based); equals `rounds` once every round ran.
    uint16 round;
    Phase phase;
    /// Working: contributions by; Aggregating: aggregate by; Proposed: challenge by; Contested with a
    /// committee: votes committed by (revealed within revealWindow after). 0 otherwise.
    uint32 deadline;
    /// Drawing, and Contested before its committee: the draw reads blockhash(anchorBlock + 1).
    uint32 anchorBlock;
    /// Seconds from a round's opening to its contribution deadline (<= the market's maxCommitWindow).
    uint32 workWindow;
    /// Seconds after the deadline within which a contribution's inner job must be Finalized to count.
    uint32 verifyWindow;
    /// The reward and verifier fee of each party's inner job on the JobMarket (its trace's pay).
    uint96 innerReward;
    uint96 innerFee;
    /// Paid to a party for each of its contributions in a final aggregate.
    uint96 contributionReward;
    /// Paid to the aggregator of each round whose aggregate is final.
    uint96 aggregatorFee;
    /// Solver stake locked from a party while it holds a slot (slashed if its contribution is shown wrong).
    uint96 slotBond;
    /// The job's document: the base spec and the multi-party settings (docs/multiparty.md).
    bytes32 specCid;
    /// State hash and CID of the global model of `round` (G_0: the spec's seeded initialization).
    bytes32 globalHash;
    bytes32 globalCid;
    /// Escrow left (base units): every payment of the job comes out of it; the rest returns at the end.
    uint256 funds;
}

/// What a submitter posts (`post`): the job's document, its G_0, its shape, windows and pay.
struct JobTerms {
    /// The job's document: the base spec and the multi-party settings (docs/multiparty.md).
    bytes32 specCid;
    /// State hash and CID of G_0 (the spec's seeded initialization with a zero outer buffer).
    bytes32 globalHash;
    bytes32 globalCid;
    uint8 parties;
    uint8 minParties;
    uint16 rounds;
    uint32 workWindow;
    uint32 verifyWindow;
    uint96 innerReward;
    uint96 innerFee;
    uint96 contributionReward;
    uint96 aggregatorFee;
    /// At least innerReward + innerFee + contributionReward: a party whose inner job names another spec
    /// than its round's (paid by the JobMarket all the same) loses more than it was paid.
    uint96 slotBond;
}

/// A party's round.
struct Contribution {
    /// The party's inner job on the JobMarket (0: not begun).
    uint256 innerJobId;
    /// CID and keccak256 of the compressed pseudo-gradient's bytes (0: none committed).
    bytes32 cid;
    bytes32 contentHash;
}

/// The current round's aggregate and its challenge.
struct Aggregate {
    address aggregator;
    /// An aggregator that timed out or lost a challenge this round: excluded from the next draw.
    address lastFailed;
    /// The next global state's hash (0: the round is void, fewer than minParties contributions were right).
    bytes32 stateHash;
    bytes32 stateCid;
    /// Bit p: slot p's contribution is in the mean.
    uint16 included;
    /// Bit p: slot p committed a contribution that is not what its trace gives (or does not decode or fit).
    uint16 wrong;
    address challenger;
    uint8 commits;
    uint8 votesRight;
    uint8 votesWrong;
    /// The challenge's id (committee and ballots are stored under it); 0: none yet this round.
    uint256 caseId;
}

/// @title DilocoJobs: verified multi-party training, DiLoCo-style (issue 28, docs/multiparty.md).
/// @notice A submitter posts a job of `parties` slots and `rounds` rounds and escrows every round's pay.
///         Staked solvers take slots (`join`, locking a slot bond). Each round, a party begins its inner
///         job (`begin`: this contract posts it on the JobMarket and claims it for the party, so today's
///         commitment, verifier, whistleblowers and dispute game check its trace) and commits its
///         compressed pseudo-gradient by CID (`contribute`) before the round's deadline. Once the round
///         closes (`closeRound`: stragglers' inner jobs timed out and cancelled, their slots vacated), an
///         aggregator is drawn by stake (`drawAggregator`, excluding the parties and the submitter) and
///         commits the next global state with the included and the wrong contributions
///         (`commitAggregate`); only a contribution whose inner job is Finalized with its party as the
///         paid solver can be included. Anyone may challenge the aggregate in one step: a committee
///         recomputes it (`check_aggregate`) and votes. A final aggregate pays each included party and the
///         aggregator, slashes the slot bond of every wrong one and opens the next round; fewer than
///         `minParties` right contributions end the job with the last global model.
interface IDilocoJobs {
    // ------------------------------------------------------------------ events

    /// @notice `submitter` posted `jobId`; `escrow` taken.
    event MultipartyJobPosted(
        uint256 indexed jobId,
        address indexed submitter,
        bytes32 specCid,
        uint8 parties,
        uint8 minParties,
        uint16 rounds,
        bytes32 globalHash,
        bytes32 globalCid,
        uint256 escrow
    );
    /// @notice `party` holds `slot` of `jobId` (its slot bond locked).
    event SlotJoined(uint256 indexed jobId, uint8 slot, address indexed party, uint256 bond);
    /// @notice `party` left `slot` (its slot bond released, less `slashed`).
    event SlotVacated(uint256 indexed jobId, uint8 slot, address indexed party, uint256 slashed);
    /// @notice Round `round` opened from the global state `globalHash`; contributions by `deadline`.
    event RoundOpened(uint256 indexed jobId, uint16 round, bytes32 globalHash, bytes32 globalCid, uint32 deadline);
    /// @notice The party of `slot` began its round: inner job `innerJobId` posted with `innerSpecCid` and claimed for it.
    event InnerJobBegun(uint256 indexed jobId, uint16 round, uint8 slot, uint256 innerJobId, bytes32 innerSpecCid);
    /// @notice The party of `slot` committed its contribution.
    event ContributionCommitted(uint256 indexed jobId, uint16 round, uint8 slot, bytes32 cid, bytes32 contentHash);
    /// @notice The round closed; `eligible`: the contributions whose inner job was Finalized for its party.
    event RoundClosed(uint256 indexed jobId, uint16 round, uint16 eligible, uint256 anchorBlock);
    /// @notice The aggregator draw's block hash expired, or its candidate's stake was locked since: drawn again from a new anchor.
    event DrawReanchored(uint256 indexed jobId, uint16 round, uint256 anchorBlock);
    /// @notice `aggregator` was drawn for the round; it commits by `deadline`.
    event AggregatorDrawn(uint256 indexed jobId, uint16 round, address indexed aggregator, uint32 deadline);
    /// @notice The aggregator committed; anyone may challenge until `deadline`.
    event AggregateCommitted(
        uint256 indexed jobId,
        uint16 round,
        address indexed aggregator,
        bytes32 stateHash,
        bytes32 stateCid,
        uint16 included,
        uint16 wrong,
        uint32 deadline
    );
    /// @notice The aggregator did not commit in time: `slashed` of its bond into the job's funds.
    event AggregatorTimedOut(uint256 indexed jobId, uint16 round, address indexed aggregator, uint256 slashed);
    /// @notice `challenger` challenged the aggregate (case `caseId`), depositing `deposit`.
    event AggregateChallenged(
        uint256 indexed jobId, uint16 round, uint256 caseId, address indexed challenger, uint256 deposit
    );
    /// @notice The challenge's committee (its members are read from this event); votes committed by
    ///         `commitDeadline`, revealed by `revealDeadline`.
    event CommitteeDrawn(
        uint256 indexed jobId, uint256 caseId, address[] members, uint32 commitDeadline, uint256 revealDeadline
    );
    event VoteCommitted(uint256 indexed jobId, uint256 caseId, address indexed member, bytes32 commitment);
    event VoteRevealed(uint256 indexed jobId, uint256 caseId, address indexed member, bool aggregateRight);
    /// @notice A seated member did not reveal: its bond is slashed.
    event MemberSlashed(uint256 indexed jobId, uint256 caseId, address indexed member, uint256 amount);
    /// @notice The challenge ended (`upheld`: the aggregate was wrong; `decided`: a majority voted).
    event ChallengeSettled(
        uint256 indexed jobId,
        uint256 caseId,
        bool decided,
        bool upheld,
        uint256 toChallenger,
        uint256 toAggregator,
        uint256 fees
    );
    /// @notice The round's aggregate is final: `paid` parties paid `contributionReward` each, the aggregator its fee.
    event RoundFinalized(
        uint256 indexed jobId, uint16 round, bytes32 globalHash, bytes32 globalCid, uint16 paid, uint16 slashed
    );
    /// @notice The job ended at `round` with the global model `globalHash`; `refund` to the submitter.
    event MultipartyJobFinished(uint256 indexed jobId, uint16 round, bytes32 globalHash, bool complete, uint256 refund);
    /// @notice An inner job's escrow came back from the JobMarket (cancelled or refunded) into the job's funds (or the submitter's credit).
    event InnerEscrowReclaimed(uint256 indexed jobId, uint16 round, uint8 slot, uint256 innerJobId, uint256 amount);
    /// @notice Tokens sent to this contract outside any job's accounts (an inner solver's slashed bond) went to the jackpot.
    event SurplusSwept(uint256 amount);

    // ------------------------------------------------------------------ errors

    error ZeroAddress();
    error InvalidParameter(string name);
    /// @notice parties in 2..maxParties, minParties in 1..parties, rounds >= 1.
    error InvalidShape(uint8 parties, uint8 minParties, uint16 rounds);
    /// @notice workWindow in 1..the JobMarket's maxCommitWindow, verifyWindow <= 365 days.
    error InvalidWindows(uint32 workWindow, uint32 verifyWindow);
    /// @notice innerReward, innerFee > 0; slotBond >= innerReward + innerFee + contributionReward.
    error InvalidPay(uint96 innerReward, uint96 innerFee, uint96 contributionReward, uint96 slotBond);
    error UnknownJob(uint256 jobId);
    error WrongPhase(uint256 jobId, Phase have, Phase want);
    error NotAuthorized(address caller);
    error InvalidSlot(uint256 jobId, uint256 slot);
    error SlotTaken(uint256 jobId, uint256 slot, address party);
    error AlreadyParty(uint256 jobId, address party);
    error DeadlinePassed(uint256 jobId, uint256 deadline);
    error DeadlineNotReached(uint256 jobId, uint256 deadline);
    error AlreadyBegun(uint256 jobId, uint16 round, uint256 slot);
    error NotBegun(uint256 jobId, uint16 round, uint256 slot);
    error TraceNotCommitted(uint256 jobId, uint256 innerJobId);
    error AlreadyContributed(uint256 jobId, uint16 round, uint256 slot);
    error ZeroCid();
    error RoundNotSettled(uint256 jobId, uint256 opensAt);
    error RandomnessNotReady(uint256 jobId, uint256 block_);
    error NotEligible(uint256 jobId, uint256 slot);
    error InvalidMasks(uint16 included, uint16 wrong);
    error InvalidAggregate(uint256 jobId, uint256 included, uint256 minParties);
    error WrongBallot(uint256 caseId, address member, Ballot have, Ballot want);
    error ZeroCommitment();
    error RevealNotOpen(uint256 caseId, uint256 opensAfter);
    error CommitmentMismatch(uint256 caseId, address member);
    error NotSettleable(uint256 jobId, uint256 after_);
    error NothingToReclaim(uint256 jobId, uint16 round, uint256 slot);

    // ------------------------------------------------------------------ views

    function token() external view returns (IERC20);
    function market() external view returns (IJobMarket);
    function stakeManager() external view returns (IStakeManager);
    function params() external view returns (DilocoParams memory);
    function jobCount() external view returns (uint256);
    function getJob(uint256 jobId) external view returns (MultipartyJob memory);
    /// @notice The party holding `slot` (address(0): vacant).
    function partyOf(uint256 jobId, uint256 slot) external view returns (address);
    function contributionOf(uint256 jobId, uint16 round, uint256 slot) external view returns (Contribution memory);
    function aggregateOf(uint256 jobId) external view returns (Aggregate memory);
    function ballotOf(uint256 caseId, address member) external view returns (Ballot, bytes32);
    /// @notice What one inner job escrows on the JobMarket (reward + fee + jackpot tax + replay fee).
    function innerEscrow(uint96 innerReward, uint96 innerFee) external view returns (uint256);
    /// @notice What `post` takes: rounds * (parties * (innerEscrow + contributionReward) + aggregatorFee).
    function escrowFor(JobTerms calldata terms) external view returns (uint256);

    // ------------------------------------------------------------------ the job

    /// @notice Post a job and escrow its pay (approve `escrowFor(...)` first). `globalHash`/`globalCid`
    ///         name G_0 (the spec's seeded initialization with a zero outer buffer: parties check it before
    ///         they join). Round 0 opens now, its deadline `workWindow` from now.
    function post(JobTerms calldata terms) external returns (uint256 jobId);
    /// @notice A staked solver takes a vacant slot while a round is Working, before its deadline.
    function join(uint256 jobId, uint8 slot) external;
    /// @notice The slot's party begins the round: its inner job (reward, fee from the job) is posted on
    ///         the JobMarket with `innerSpecCid` (proofs.diloco.party_job: the shard and G_round by CID,
    ///         which the aggregator and any challenger recompute) and claimed for the party, its commit
    ///         deadline the round's.
    function begin(uint256 jobId, uint8 slot, bytes32 innerSpecCid) external;
    /// @notice The slot's party commits its compressed pseudo-gradient once its inner trace is committed.
    function contribute(uint256 jobId, uint8 slot, bytes32 cid, bytes32 contentHash) external;
    /// @notice Anyone, once every contribution's inner job settled (or the verify window after the
    ///         deadline passed), after the deadline or before it when every slot contributed: a party that did not contribute leaves its slot (its inner job timed out and
    ///         cancelled); fewer than minParties eligible contributions end the job, else the aggregator draw
    ///         is anchored here.
    function closeRound(uint256 jobId) external;
    /// @notice Anyone: draw the aggregator from blockhash(anchorBlock + 1), by Verifier stake as of the
    ///         anchor, excluding the parties, the submitter and the last failed aggregator; none eligible
    ///         ends the job.
    function drawAggregator(uint256 jobId) external;
    /// @notice The aggregator commits the next global state (stateHash 0 and fewer than minParties
    ///         included: the round is void), the included contributions (each eligible) and the wrong ones.
    function commitAggregate(uint256 jobId, bytes32 stateHash, bytes32 stateCid, uint16 included, uint16 wrong) external;
    /// @notice Anyone, once the aggregator's deadline passed: its bond is slashed into the job's funds and another is drawn.
    function timeoutAggregator(uint256 jobId) external;
    /// @notice Anyone but the aggregator challenges the aggregate within its window (approve challengeDeposit first).
    function challenge(uint256 jobId) external returns (uint256 caseId);
    /// @notice Anyone: draw the challenge's committee from blockhash(anchorBlock + 1).
    function drawCommittee(uint256 jobId) external;
    /// @notice A seated member commits keccak256(abi.encode(caseId, aggregateRight, salt, member)).
    function commitVote(uint256 jobId, bytes32 commitment) external;
    function revealVote(uint256 jobId, bool aggregateRight, bytes32 salt) external;
    /// @notice Anyone, once every member revealed or the reveal window closed: a majority for the
    ///         aggregate finalizes the round; against it, the aggregator's bond goes to the challenger and
    ///         another aggregator is drawn; a tie, or no vote, draws another aggregator without slashing.
    function settleChallenge(uint256 jobId) external;
    /// @notice Anyone, once the challenge window closed unchallenged: the round's aggregate is final.
    function finalizeRound(uint256 jobId) external;
    /// @notice Anyone: an inner job that was cancelled or refunded on the JobMarket returns its escrow
    ///         (to the job's funds, or to the submitter's credit once the job finished).
    function reclaim(uint256 jobId, uint16 round, uint8 slot) external;
    /// @notice Anyone: tokens held beyond every job's funds, open deposits and credits go to the jackpot.
    function sweep() external returns (uint256 amount);
}
