// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IStakeManager} from "./IStakeManager.sol";
import {Job, JobState, MarketParams, RefundReason} from "../Types.sol";

/// @title Job escrow, lifecycle with a deadline for every party, and settlement.
/// @notice Open -> Claimed -> Committed -> Verifying -> Verified -> Finalized, with
///         Cancelled / Refunded / Disputed exits; docs/contracts.md has the full table.
///         Every transition emits an event; every deadline has a timeout anyone can call.
interface IJobMarket {
    // ------------------------------------------------------------------ events

    /// @notice A job was posted and `reward + verifierFee` escrowed.
    event JobPosted(
        uint256 indexed jobId,
        address indexed submitter,
        bytes32 specCid,
        uint96 reward,
        uint96 verifierFee,
        uint32 commitWindow,
        uint32 claimDeadline
    );
    /// @notice `solver` claimed the job; its `bond` is locked until settlement.
    event JobClaimed(uint256 indexed jobId, address indexed solver, uint256 bond, uint32 commitDeadline);
    /// @notice The solver committed its trace. The CIDs are only in this event.
    event TraceCommitted(
        uint256 indexed jobId,
        address indexed solver,
        bytes32 traceRoot,
        uint32 checkpointCount,
        bytes32 finalModelCid,
        bytes32 manifestCid
    );
    /// @notice The verifier draw is (again) seeded by blockhash(anchorBlock + 1): after a verifier
    ///         timeout, or when the previous seed block was more than 256 blocks old. Call
    ///         assignVerifier from block anchorBlock + 2.
    event DrawReanchored(uint256 indexed jobId, uint256 anchorBlock);
    /// @notice `verifier` was drawn; its `bond` is locked; it must report by `reportDeadline`.
    event VerifierAssigned(uint256 indexed jobId, address indexed verifier, uint256 bond, uint32 reportDeadline);
    /// @notice The verifier reported. A pass opens the challenge window, a fail opens a dispute;
    ///         `deadline` ends whichever opened. The report CID is only in this event.
    event ReportSubmitted(
        uint256 indexed jobId, address indexed verifier, bool passed, bytes32 reportCid, uint32 deadline
    );
    /// @notice The job entered Disputed, opened by `challenger` (the verifier on a failing report,
    ///         or the one the dispute game names); the game must resolve it by `deadline`.
    event DisputeOpened(uint256 indexed jobId, address indexed challenger, uint32 deadline);
    /// @notice The dispute game settled the dispute.
    event DisputeResolved(uint256 indexed jobId, bool solverWon, bool verifierSlashed);
    /// @notice A whistleblower's dispute ended with the solver winning and no verdict against the
    ///         verifier: the job is Verified again and its challenge window, paused while the game
    ///         ran, resumes until `deadline` (the time it had left when the dispute opened).
    event ChallengeWindowResumed(uint256 indexed jobId, uint32 deadline);
    /// @notice The solver was paid `reward`, the verifier `verifierFee`, and both bonds released.
    event JobFinalized(uint256 indexed jobId, address indexed solver, address indexed verifier, uint256 reward, uint256 verifierFee);
    /// @notice The job went back to Open for another solver (escrow kept), claimable until claimDeadline.
    event JobReopened(uint256 indexed jobId, uint32 claimDeadline);
    /// @notice The submitter cancelled an Open job and got `refund` back.
    event JobCancelled(uint256 indexed jobId, uint256 refund);
    /// @notice The job ended with `refund` back to the submitter and bonds released.
    event JobRefunded(uint256 indexed jobId, RefundReason reason, uint256 refund);
    /// @notice The solver missed its commit deadline; `slashed` of its bond went to the submitter.
    event SolverTimedOut(uint256 indexed jobId, address indexed solver, uint256 slashed);
    /// @notice The verifier missed its report deadline; `slashed` of its bond went to the solver.
    event VerifierTimedOut(uint256 indexed jobId, address indexed verifier, uint256 slashed);
    /// @notice The one-shot wiring set the dispute game (address(0): none; disputes then only time out).
    event DisputeGameSet(address indexed disputeGame);

    // ------------------------------------------------------------------ errors

    /// @notice The caller may not do this.
    error NotAuthorized(address caller);
    /// @notice setDisputeGame was already called.
    error AlreadyWired();
    /// @notice No job has this id (ids start at 1).
    error UnknownJob(uint256 jobId);
    /// @notice The job is in state `have`; the call needs `want`.
    error WrongState(uint256 jobId, JobState have, JobState want);
    /// @notice The deadline of this step passed.
    error DeadlinePassed(uint256 jobId, uint256 deadline);
    /// @notice A timeout or finalize before its deadline.
    error DeadlineNotReached(uint256 jobId, uint256 deadline);
    /// @notice postJob with a zero reward.
    error ZeroReward();
    /// @notice postJob with a zero verifier fee.
    error ZeroVerifierFee();
    /// @notice postJob with a zero spec CID.
    error ZeroCid();
    /// @notice postJob with a commit window of 0 or above the maximum.
    error InvalidCommitWindow(uint256 commitWindow, uint256 maxCommitWindow);
    /// @notice commit with a zero root, fewer than 2 checkpoints (one segment) or 2**24 or more.
    error InvalidTrace(bytes32 traceRoot, uint256 checkpointCount);
    /// @notice assignVerifier before blockhash(anchor + 1) exists (callable from `readyBlock`).
    error RandomnessNotReady(uint256 jobId, uint256 readyBlock);
    /// @notice A constructor parameter is out of range.
    error InvalidParameter(bytes32 name);

    // ------------------------------------------------------------------ views

    /// @notice The ERC20 of rewards, fees and bonds.
    function token() external view returns (IERC20);
    /// @notice The stake manager holding bonds.
    function stakeManager() external view returns (IStakeManager);
    /// @notice The dispute game allowed to open and resolve disputes (address(0): none).
    function disputeGame() external view returns (address);
    /// @notice The deployer, allowed to call setDisputeGame once.
    function wiringAdmin() external view returns (address);
    /// @notice True once setDisputeGame was called.
    function wired() external view returns (bool);
    /// @notice All deployment parameters.
    function params() external view returns (MarketParams memory);
    /// @notice Number of jobs posted; ids are 1..jobCount.
    function jobCount() external view returns (uint256);
    /// @notice The stored job (reverts UnknownJob).
    function getJob(uint256 jobId) external view returns (Job memory);
    /// @notice The solver bond for a job of `reward`: max(minSolverBond, reward * solverBondBps / 1e4).
    function solverBond(uint256 reward) external view returns (uint256);
    /// @notice The verifier bond for a job of `reward`: max(minVerifierBond, reward * verifierBondBps / 1e4).
    function verifierBond(uint256 reward) external view returns (uint256);
    /// @notice True when (index, stateHash) is a leaf of the job's committed trace tree
    ///         (TraceLib leaf encoding, OpenZeppelin MerkleProof) and index < checkpointCount.
    function verifyCheckpoint(uint256 jobId, uint256 index, bytes32 stateHash, bytes32[] calldata proof)
        external
        view
        returns (bool);

    // ------------------------------------------------------------------ lifecycle

    /// @notice Post a job: escrows `reward + verifierFee` (transferFrom; approve first).
    ///         Claims are accepted for `openWindow` seconds; the solver has `commitWindow` seconds
    ///         (1..maxCommitWindow) from its claim to commit.
    function postJob(bytes32 specCid, uint96 reward, uint96 verifierFee, uint32 commitWindow)
        external
        returns (uint256 jobId);
    /// @notice Claim an Open job before its claim deadline; locks the solver bond from the caller's
    ///         Solver stake (reverts InsufficientStake from the StakeManager).
    function claim(uint256 jobId) external;
    /// @notice The solver commits its trace before its commit deadline.
    /// @param checkpointCount number of leaves (checkpoints 0..n, so n segments need n + 1), 2..2**24-1
    function commit(uint256 jobId, bytes32 traceRoot, uint32 checkpointCount, bytes32 finalModelCid, bytes32 manifestCid)
        external;
    /// @notice Anyone: draw the verifier from blockhash(anchor + 1) (anchor: the commit block, or the
    ///         block of the last verifier timeout), stake-weighted, excluding the solver, the submitter
    ///         and the verifier that just timed out, and lock its bond.
    ///         Too early: reverts RandomnessNotReady. Seed block older than 256 blocks: re-anchors
    ///         (DrawReanchored) and returns. No eligible verifier: the job ends refunded.
    function assignVerifier(uint256 jobId) external;
    /// @notice The drawn verifier reports before its deadline: pass -> Verified (challenge window),
    ///         fail -> Disputed.
    function report(uint256 jobId, bool passed, bytes32 reportCid) external;
    /// @notice Anyone, after the challenge window: pay the solver and the verifier, release bonds.
    function finalize(uint256 jobId) external;
    /// @notice The submitter cancels an Open job and gets its escrow back.
    function cancel(uint256 jobId) external;

    // ------------------------------------------------------------------ timeouts (anyone)

    /// @notice An Open job past its claim deadline ends refunded.
    function expire(uint256 jobId) external;
    /// @notice A Claimed job past its commit deadline: the solver's bond is slashed by
    ///         timeoutSlashBps (to the submitter), the rest released, and the job reopens with a
    ///         fresh claim window.
    function timeoutSolver(uint256 jobId) external;
    /// @notice A Verifying job past its report deadline: the verifier's bond is slashed by
    ///         timeoutSlashBps (to the solver), the rest released, and the job goes back to
    ///         Committed for a new draw (or ends refunded after maxVerifierDraws draws).
    function timeoutVerifier(uint256 jobId) external;
    /// @notice A Disputed job past its dispute deadline: ends refunded, both bonds released, no slashing.
    function timeoutDispute(uint256 jobId) external;

    // ------------------------------------------------------------------ dispute game only

    /// @notice The dispute game opens a dispute on a Verified job inside its challenge window; the
    ///         window pauses (the time left is stored in Job.challengeLeft).
    function openDispute(uint256 jobId, address challenger) external;
    /// @notice The dispute game settles a Disputed job.
    ///         solverWon: solver bond released, job Finalized (solver paid the reward; the verifier
    ///         paid its fee unless slashed, else the fee goes back to the submitter); except a
    ///         whistleblower's dispute (challenger != verifier) without verifierSlashed: the job goes
    ///         back to Verified, bonds still locked, and the challenge window resumes with the time
    ///         it had left when the dispute opened (ChallengeWindowResumed).
    ///         !solverWon: solver bond slashed in full to `slashRecipient`; the job reopens with its
    ///         escrow and a fresh claim window.
    ///         verifierSlashed: the verifier bond is slashed in full to `slashRecipient`, else released.
    function resolveDispute(uint256 jobId, bool solverWon, bool verifierSlashed, address slashRecipient) external;

    // ------------------------------------------------------------------ wiring

    /// @notice Set the dispute game (address(0) allowed: none). Only the wiring admin, only once.
    function setDisputeGame(address game) external;
}
