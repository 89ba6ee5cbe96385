// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {ICredits} from "./ICredits.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IJobMarket} from "./IJobMarket.sol";
import {IStakeManager} from "./IStakeManager.sol";
import {Ballot} from "./IDisputeGame.sol";

/// @notice AvailabilityCourt deployment parameters, all immutable. Amounts in token base units, windows
///         in seconds (each at most 365 days).
struct CourtParams {
    uint96 refereeBond; // locked from each drawn member's free verifier stake while it sits
    uint96 refereeFee; // paid to each member of the majority, from the challenger's deposit
    uint96 itemFee; // per named item, to the solver when everything is served: its uploads to the committee
    uint32 drawWindow; // anyone may draw the committee for this long after the case opens
    uint32 fetchWindow; // the members fetch every named item and commit their vote within it
    uint32 revealWindow; // then reveal within it
    uint8 committeeSize; // odd, 1..12
}

/// @notice Where a case stands.
enum CaseStatus {
    None,
    Drawing, // waiting for the committee draw (deadline: the anchor block)
    Voting, // seated: commit until deadline, then reveal for revealWindow
    Served, // the majority fetched every named item: the job's clock resumed
    Withheld, // the majority could not: the solver lost its bond to the challenger
    Undecided // no committee, or a tie: the job's clock resumed, the deposit went back
}

/// @notice One availability case: `items` items of job `jobId` (a bitmap in CaseOpened) that
///         `challenger` could not fetch, for the trace `traceRoot`.
/// @dev Two slots and the root.
struct Case {
    uint256 jobId;
    address challenger;
    CaseStatus status;
    uint8 commits;
    uint8 votesServed;
    uint8 votesWithheld;
    uint32 deadline; // Voting: end of the commit phase
    uint32 anchorBlock; // Drawing: the block whose successor's hash seeds the committee draw
    // slot 2
    uint32 openedAt;
    uint32 items;
    uint96 deposit;
    bytes32 traceRoot;
}

/// @title Availability court: content of any size proven available by a drawn committee.
/// @notice A job's verifier (while Verifying) or an eligible whistleblower (while Verified) names, in one
///         call and one deposit, every item it could not fetch: a bitmap over checkpoints 0..count-1 and,
///         at bit `count`, the manifest. The job is held (its clock paused) while a committee drawn by
///         stake, as for one-step arbitration, fetches each item by its CID from the announced gateways,
///         checks it, and votes by commit-reveal whether everything was served. Served: the clock
///         resumes and every member that voted so owes the items to anyone for the rest of the game
///         (the challenger fetches from them). Withheld: the solver loses its whole bond to the
///         challenger and the job reopens. The chain's cost does not depend on the items' sizes.
interface IAvailabilityCourt is ICredits {
    /// @notice `challenger` named `items` items of `jobId` (`lacking`: bit i checkpoint i, bit count the
    ///         manifest) and escrowed `deposit`; the committee is drawn from blockhash(anchorBlock + 1).
    event CaseOpened(
        uint256 indexed caseId,
        uint256 indexed jobId,
        address indexed challenger,
        bytes lacking,
        uint256 items,
        uint256 deposit,
        uint256 anchorBlock
    );
    /// @notice The committee is seated: commit by `commitDeadline`, reveal by `revealDeadline`.
    event CommitteeDrawn(uint256 indexed caseId, address[] members, uint32 commitDeadline, uint256 revealDeadline);
    /// @notice The drawn member's stake was locked by other draws since the anchor: draw again from
    ///         blockhash(anchorBlock + 1).
    event CaseReanchored(uint256 indexed caseId, uint256 anchorBlock);
    event VoteCommitted(uint256 indexed caseId, address indexed member, bytes32 commitment);
    event VoteRevealed(uint256 indexed caseId, address indexed member, bool served);
    /// @notice A seated member did not reveal: its bond went to the case's winner.
    event MemberSlashed(uint256 indexed caseId, address indexed member, uint256 amount);
    /// @notice The committee found an item withheld: the solver's whole bond (`slashed`) went to
    ///         `challenger`; the job's verifier bond was released and the job reopened.
    event SolverSlashed(
        uint256 indexed caseId, uint256 indexed jobId, address indexed solver, address challenger, uint256 slashed
    );
    /// @notice The case ended. `custodians` (Served only) voted the items served and owe them until the
    ///         job is final; `resumedDeadline` is the job's deadline once its clock resumed (0 on
    ///         Withheld: reopened); `toSolver` and `toChallenger` are what each got from the deposit and
    ///         the slashed member bonds, `fees` what the majority got.
    event CaseSettled(
        uint256 indexed caseId,
        uint256 indexed jobId,
        address indexed challenger,
        CaseStatus outcome,
        uint32 resumedDeadline,
        address[] custodians,
        uint256 toSolver,
        uint256 toChallenger,
        uint256 fees
    );

    /// @notice A constructor parameter is out of range.
    error InvalidParameter(bytes32 name);
    /// @notice The caller may not do this.
    error NotAuthorized(address caller);
    /// @notice No case has this id.
    error UnknownCase(uint256 caseId);
    /// @notice The case is `have`; the call needs `want`.
    error WrongStatus(uint256 caseId, CaseStatus have, CaseStatus want);
    /// @notice The bitmap is not ceil((checkpointCount + 1) / 8) bytes, sets a bit past the manifest's,
    ///         or names nothing.
    error InvalidItems(uint256 jobId, uint256 length, uint256 expected);
    /// @notice `challenger` already opened a case of this kind on this trace (one naming the manifest and
    ///         one naming only checkpoints, per trace and challenger).
    error AlreadyHeard(uint256 jobId, address challenger);
    /// @notice drawCommittee before blockhash(anchor + 1) exists.
    error RandomnessNotReady(uint256 caseId, uint256 readyBlock);
    /// @notice drawCommittee after the draw window (settle ends the case Undecided).
    error DrawWindowPassed(uint256 caseId, uint256 deadline);
    /// @notice A commit or reveal outside its phase.
    error PhaseClosed(uint256 caseId, uint256 deadline);
    /// @notice A reveal while members may still commit.
    error RevealNotOpen(uint256 caseId, uint256 commitDeadline);
    /// @notice settle before the case can end.
    error NotSettleable(uint256 caseId, uint256 from);
    /// @notice The member's ballot is `have`; the call needs `want`.
    error WrongBallot(uint256 caseId, address member, Ballot have, Ballot want);
    /// @notice The revealed vote does not match the commitment.
    error CommitmentMismatch(uint256 caseId, address member);
    /// @notice commitVote with a zero commitment.
    error ZeroCommitment();

    /// @notice The ERC20 of deposits, fees and bonds.
    function token() external view returns (IERC20);
    /// @notice The stake manager that draws and holds member bonds.
    function stakeManager() external view returns (IStakeManager);
    /// @notice The job market whose jobs the court holds.
    function market() external view returns (IJobMarket);
    /// @notice All deployment parameters.
    function params() external view returns (CourtParams memory);
    /// @notice Cases opened; ids are 1..caseCount.
    function caseCount() external view returns (uint256);
    /// @notice The case of a job held now (0: none).
    function activeCase(uint256 jobId) external view returns (uint256);
    /// @notice The stored case (reverts UnknownCase).
    function getCase(uint256 caseId) external view returns (Case memory);
    /// @notice The seated members of a case.
    function committee(uint256 caseId) external view returns (address[] memory);
    /// @notice A member's ballot and commitment.
    function ballotOf(uint256 caseId, address member) external view returns (Ballot, bytes32);
    /// @notice What a case naming `items` items escrows: committeeSize * refereeFee + items * itemFee.
    function depositFor(uint256 items) external view returns (uint256);

    /// @notice Opens a case on every item of `jobId` the caller could not fetch (see the contract notes),
    ///         escrowing depositFor(items); holds the job. One case naming the manifest and one naming
    ///         only checkpoints per trace and challenger.
    function challenge(uint256 jobId, bytes calldata lacking) external returns (uint256 caseId);
    /// @notice Anyone: seats the committee, drawn by verifier stake as of the anchor block, excluding
    ///         the job's parties and the challenger.
    function drawCommittee(uint256 caseId) external;
    /// @notice A seated member commits keccak256(abi.encode(caseId, served, salt, member)).
    function commitVote(uint256 caseId, bytes32 commitment) external;
    /// @notice A member reveals: `served` is true iff it fetched every named item, each checked against
    ///         its CID and the committed trace.
    function revealVote(uint256 caseId, bool served, bytes32 salt) external;
    /// @notice Anyone: ends a case after its reveal phase (or once every member revealed), or Undecided
    ///         after its draw window with no committee.
    function settle(uint256 caseId) external;
}
