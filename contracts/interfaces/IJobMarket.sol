// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IStakeManager} from "./IStakeManager.sol";
import {
    AvailabilityChallenge, ForcedSeed, Job, JobState, MarketParams, Probe, RefundReason, ReportSeal
} from "../Types.sol";

/// @title Job escrow, lifecycle with a deadline for every party, and settlement.
/// @notice Open -> Claimed -> Committed -> Verifying -> Verified -> Finalized, with
///         Cancelled / Refunded / Disputed exits; docs/contracts.md has the full table.
///         Every transition emits an event; every deadline has a timeout anyone can call.
interface IJobMarket {
    // ------------------------------------------------------------------ events

    /// @notice A job was posted and `reward + verifierFee + jackpotTax(reward, verifierFee) + replayFee(reward)` escrowed.
    ///         `fullReplay`: posted for full replay (postJob), so every draw of it is a full replay.
    event JobPosted(
        uint256 indexed jobId,
        address indexed submitter,
        bytes32 specCid,
        uint96 reward,
        uint96 verifierFee,
        uint32 commitWindow,
        uint32 claimDeadline,
        bool fullReplay
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
    /// @notice The verifier draw is (again) seeded by blockhash(anchorBlock + 1) and reads stakes as
    ///         of anchorBlock: after a verifier timeout or a lost report game, or when the drawn
    ///         verifier's stake was locked by other draws since the previous anchor. Call
    ///         assignVerifier from block anchorBlock + 2.
    event DrawReanchored(uint256 indexed jobId, uint256 anchorBlock);
    /// @notice Nobody drew the verifier of `jobId` within 256 blocks of its entropy: `solver` lost
    ///         its whole bond `slashed` to the submitter and the job reopened.
    event DrawExpired(uint256 indexed jobId, address indexed solver, uint256 slashed);
    /// @notice `verifier` was drawn; its `bond` is locked; it must report by `deadline`. `assignSeed`
    ///         (keccak256 of the draw seed: entropy, job and draw number, not the verifier) fixes the
    ///         sampled segments and the report's probe segments and steps; `forcedCommitment` is the verifier's forced
    ///         seed snapshotted by this draw (0: not seeded by the anchor block, cannot be forced here).
    event VerifierAssigned(
        uint256 indexed jobId,
        address indexed verifier,
        uint256 bond,
        uint256 deadline,
        bytes32 assignSeed,
        bytes32 forcedCommitment
    );
    /// @notice The commit of `jobId` was chosen for full replay by the draw of `assignSeed`
    ///         (isFullReplayDraw): its verifier replays every segment from the seeded initialization,
    ///         has reportWindow + commitWindow to report, and is paid replayFee(reward) on top of its fee.
    ///         Stays chosen for every later draw of the same commit.
    event FullReplayChosen(uint256 indexed jobId, bytes32 assignSeed);
    /// @notice The job's escrowed replay fee went to `to`: the verifier of a full replay that was
    ///         paid its fee, else back to the submitter (emitted at finalize when the fee is not 0).
    event ReplayFeePaid(uint256 indexed jobId, address indexed to, uint256 amount, bool fullReplay);
    /// @notice The verifier reported. A pass opens the challenge window, a fail opens a dispute;
    ///         `deadline` ends whichever opened. The report CID is only in this event; `probeRoot` (the
    ///         root of the report's probe tree, computed by the chain from `probes`, ProbeLib) completes
    ///         the job's ReportSeal. `probes` (slot i = probes[i]; empty on a fail) are what a
    ///         whistleblower checks and proves in a report game: no off-chain report is needed for that.
    event ReportSubmitted(
        uint256 indexed jobId,
        address indexed verifier,
        bool passed,
        bytes32 reportCid,
        bytes32 probeRoot,
        Probe[] probes,
        uint256 deadline
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
    /// @notice `from` added `amount` to the jackpot, which now holds `jackpot`.
    event JackpotFunded(address indexed from, uint256 amount, uint256 jackpot);
    /// @notice A job finalized and its escrowed jackpot tax `amount` moved into the jackpot (now `jackpot`).
    event JackpotTaxed(uint256 indexed jobId, uint256 amount, uint256 jackpot);
    /// @notice `verifier` committed (or replaced) its forced-error seed at block `blockNumber`.
    event ForcedSeedCommitted(address indexed verifier, bytes32 commitment, uint256 blockNumber);
    /// @notice A forced error of `verifier` on the job was caught by `whistleblower`, who was paid
    ///         `payout` from the jackpot (now `jackpot`); the job's challenge window resumes.
    event ForcedErrorCaught(
        uint256 indexed jobId, address indexed verifier, address indexed whistleblower, uint256 payout, uint256 jackpot
    );
    /// @notice An unforced verifier lost a report game: its whole bond (`slashed`) went to the game, and
    ///         the job went back to Committed for a new verifier draw (or ended refunded after the last).
    event ReportOverturned(uint256 indexed jobId, address indexed verifier, uint256 slashed);
    /// @notice The one-shot wiring set the dispute game (address(0): none; disputes then only time out).
    event DisputeGameSet(address indexed disputeGame);
    /// @notice `challenger` (the job's verifier, or a whistleblower auditing a Verified job) could not fetch
    ///         `item` (a checkpoint index, or MANIFEST_ITEM) and escrowed `deposit`; the solver must publish it
    ///         by `answerDeadline`; the report clock (or the challenge window) is paused.
    event AvailabilityChallenged(
        uint256 indexed jobId, address indexed challenger, uint256 item, uint256 deposit, uint32 answerDeadline
    );
    /// @notice `item` of the job was published on chain by `answerer` (paid the deposit): `content` is the
    ///         checkpoint whose keccak256 is the committed leaf, or the manifest whose CIDv0 digest is the
    ///         committed manifest CID. The paused clock resumes: the job is Verifying (a verifier's
    ///         challenge) or Verified (a whistleblower's) until `deadline`.
    event AvailabilityAnswered(
        uint256 indexed jobId,
        address indexed challenger,
        address indexed answerer,
        uint256 item,
        bytes content,
        uint32 deadline
    );
    /// @notice Nobody published `item` in time: the solver's whole bond (`slashed`) went to `challenger`,
    ///         who got its deposit back; the verifier's bond was released and the job reopened.
    event AvailabilityTimedOut(
        uint256 indexed jobId, address indexed solver, address indexed challenger, uint256 item, uint256 slashed
    );

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
    /// @notice The ReportSeal (or report()'s assignSeed and forcedCommitment) does not hash to the job's stored seal.
    error InvalidSeal(uint256 jobId);
    /// @notice Probe slot `index` of the job's report is not proven (wrong seal, slot, segment or leaf), or
    ///         report() got a probe set that is not exactly the drawn one (count, segment, zero hash).
    error InvalidProbe(uint256 jobId, uint256 index);
    /// @notice The revealed secret does not show the job's verifier was forced.
    error NotForced(uint256 jobId);
    /// @notice commitForcedSeed with a zero commitment.
    error ZeroCommitment();
    /// @notice challengeAvailability of an item that is neither a checkpoint index (< checkpointCount) nor
    ///         MANIFEST_ITEM.
    error InvalidItem(uint256 jobId, uint256 item);
    /// @notice challengeAvailability of an item already published on chain for this trace (read it from
    ///         AvailabilityAnswered).
    error AlreadyPublished(uint256 jobId, uint256 item);
    /// @notice answerAvailability with content that is not the challenged item: a checkpoint whose
    ///         keccak256 and proof are not the committed leaf, or a manifest whose one-block CIDv0 digest is
    ///         not the committed manifest CID (manifests above CidLib.CHUNK_SIZE bytes cannot match).
    error ContentMismatch(uint256 jobId, uint256 item);

    // ------------------------------------------------------------------ views

    /// @notice Truebit's cap on jackpotShareBps (1/3): one payout never takes most of the pool.
    function MAX_JACKPOT_SHARE_BPS() external view returns (uint256);
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
    /// @notice Tokens held for forced-error payouts (funded by finalized jobs' taxes and fundJackpot).
    function jackpot() external view returns (uint256);
    /// @notice The tax a submitter pays on top of a job of `reward` and `fee`: (reward + fee) * jackpotTaxBps / 1e4.
    function jackpotTax(uint256 reward, uint256 fee) external view returns (uint256);
    /// @notice The replay fee a submitter escrows on top for a job of `reward`: reward * fullReplayFeeBps / 1e4,
    ///         paid to the verifier of a full replay at finalize, else refunded to the submitter.
    function replayFee(uint256 reward) external view returns (uint256);
    /// @notice True once a draw of the job's current commit chose it for full replay (cleared when it reopens),
    ///         and always for a job posted for full replay (postJob's `fullReplay`, kept when it reopens).
    function isFullReplay(uint256 jobId) external view returns (bool);
    /// @notice True when the draw of `assignSeed` chooses its job for full replay:
    ///         uint256(keccak256(abi.encode(assignSeed, keccak256("veritrain/full-replay")))) % 1e4 < fullReplayRateBps.
    function isFullReplayDraw(bytes32 assignSeed) external view returns (bool);
    /// @notice The forced-error seed `verifier` committed last (zero if none, or cleared by a payout).
    function forcedSeedOf(address verifier) external view returns (ForcedSeed memory);
    /// @notice The job's stored seal: keccak256(abi.encode(assignSeed, forcedCommitment)) from its last
    ///         verifier draw, then keccak256(abi.encode(that, probeRoot)) once it reported (0 before any draw).
    function reportSeal(uint256 jobId) external view returns (bytes32);
    /// @notice The segment probe slot `index` samples: keccak256(abi.encode(assignSeed, index)) %
    ///         (checkpointCount - 1) (reverts InvalidTrace below 2 checkpoints).
    function probeSegment(bytes32 assignSeed, uint256 index, uint256 checkpointCount) external pure returns (uint256);
    /// @notice True when `secret` shows `verifier` was forced on the job of `seal`: forcedCommitment != 0,
    ///         keccak256(abi.encode(secret, verifier)) == forcedCommitment and
    ///         uint256(keccak256(abi.encode(secret, assignSeed))) % 1e4 < forcedErrorRateBps.
    ///         Does not check `seal` against a job (payForcedError does).
    function isForced(bytes32 secret, address verifier, ReportSeal calldata seal) external view returns (bool);
    /// @notice True when `seal` is the job's stored seal, index < probeCount, segment is
    ///         probeSegment(seal.assignSeed, index, checkpointCount) and (index, segment, step, stateHash)
    ///         is proven under seal.probeRoot (ProbeLib leaf encoding, OpenZeppelin MerkleProof).
    function verifyProbe(
        uint256 jobId,
        ReportSeal calldata seal,
        uint256 index,
        uint256 segment,
        uint256 step,
        bytes32 stateHash,
        bytes32[] calldata proof
    ) external view returns (bool);
    /// @notice The item number of the manifest in availability challenges (checkpoints are their index).
    function MANIFEST_ITEM() external view returns (uint256);
    /// @notice The manifest CID digest the job's solver committed (0 before a commit).
    function manifestOf(uint256 jobId) external view returns (bytes32);
    /// @notice The job's open availability challenge (zero outside DataChallenged).
    function availabilityChallenge(uint256 jobId) external view returns (AvailabilityChallenge memory);
    /// @notice True once `item` of the job's current trace was published on chain (AvailabilityAnswered):
    ///         keyed by content (the trace root for a checkpoint, the manifest CID for the manifest).
    function isPublished(uint256 jobId, uint256 item) external view returns (bool);

    // ------------------------------------------------------------------ lifecycle

    /// @notice Post a job: escrows `reward + verifierFee + jackpotTax(reward, verifierFee) + replayFee(reward)`
    ///         (transferFrom; approve first); the tax moves into the jackpot when the job finalizes
    ///         and is refunded with the rest otherwise.
    ///         Claims are accepted for `openWindow` seconds; the solver has `commitWindow` seconds
    ///         (1..maxCommitWindow) from its claim to commit.
    ///         `fullReplay`: every draw of the job is a full replay whatever the coin (isFullReplay true from
    ///         the post on, kept when the job reopens): its verifier gets reportWindow + commitWindow and
    ///         is paid replayFee(reward). Set for a spec the sample cannot check (torch numerics or tolerance
    ///         mode: proofs.sampling.needs_full_replay), which solvers refuse without it; the chain cannot
    ///         read the spec, so the submitter says it here.
    function postJob(bytes32 specCid, uint96 reward, uint96 verifierFee, uint32 commitWindow, bool fullReplay)
        external
        returns (uint256 jobId);
    /// @notice Claim an Open job before its claim deadline; locks the solver bond from the caller's
    ///         Solver stake (reverts InsufficientStake from the StakeManager).
    function claim(uint256 jobId) external;
    /// @notice A protocol contract of the StakeManager's wiring that posted an Open job claims it for
    ///         `solver` (as `claim` by the solver: the same deadline, bond and event). Only such a
    ///         contract's own jobs, called in the solver's transaction to it (DilocoJobs: a party's round).
    function claimFor(uint256 jobId, address solver) external;
    /// @notice The solver commits its trace before its commit deadline.
    /// @param checkpointCount number of leaves (checkpoints 0..n, so n segments need n + 1), 2..2**24-1
    function commit(uint256 jobId, bytes32 traceRoot, uint32 checkpointCount, bytes32 finalModelCid, bytes32 manifestCid)
        external;
    /// @notice Anyone: draw the verifier from blockhash(anchor + 1) (anchor: the commit block, or the
    ///         block of the last re-anchor), weighted by stake as of the anchor block, excluding the
    ///         solver, the submitter and the verifier that just timed out (or lost a report game), and
    ///         lock its bond. The outcome does not depend on when it is called. Stores the seal of
    ///         (assignSeed, forcedCommitment) (see VerifierAssigned). Too early: reverts
    ///         RandomnessNotReady. Seed block older than 256 blocks: the solver's whole bond is
    ///         slashed to the submitter and the job reopens (DrawExpired). The drawn verifier's stake
    ///         locked by other draws since the anchor: re-anchors (DrawReanchored). No eligible
    ///         verifier: the job ends refunded. Every attempt with entropy (assigned or re-anchored)
    ///         also flips the full-replay coin (isFullReplayDraw of its assignSeed); once heads, the
    ///         commit stays chosen (FullReplayChosen) and its verifiers get reportWindow + commitWindow. A job
    ///         posted for full replay (postJob) is a full replay at every draw, whatever the coin.
    function assignVerifier(uint256 jobId) external;
    /// @notice The drawn verifier reports before its deadline: pass -> Verified (challenge window),
    ///         fail -> Disputed. (assignSeed, forcedCommitment) are its draw's (VerifierAssigned) and must
    ///         hash to the stored seal (else InvalidSeal). A pass takes exactly probeCount `probes`, slot
    ///         i on segment probeSegment(assignSeed, i, checkpointCount) with a non-zero state hash (else
    ///         InvalidProbe(jobId, i)); the chain computes probeRoot = ProbeLib.root(probes). A fail takes
    ///         no probes (else InvalidProbe(jobId, 0)) and probeRoot = 0. The stored seal becomes
    ///         keccak256(abi.encode(seal, probeRoot)); ReportSubmitted carries the probes.
    /// @dev The probe's step is not checked here: its rule needs the spec's k, which is off chain; the
    ///      referees of a report game rule on it.
    function report(
        uint256 jobId,
        bool passed,
        bytes32 reportCid,
        bytes32 assignSeed,
        bytes32 forcedCommitment,
        Probe[] calldata probes
    ) external;
    /// @notice Anyone, after the challenge window: pay the solver and the verifier, release bonds.
    function finalize(uint256 jobId) external;
    /// @notice The submitter cancels an Open job and gets its escrow back (reward, fee and tax).
    function cancel(uint256 jobId) external;
    /// @notice Anyone adds `amount` to the jackpot (transferFrom; approve first).
    function fundJackpot(uint256 amount) external;
    /// @notice The caller commits keccak256(abi.encode(secret, caller)) as its forced-error seed, replacing
    ///         any previous one; it counts for draws anchored at or after this block. Zero reverts
    ///         ZeroCommitment.
    function commitForcedSeed(bytes32 commitment) external;

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

    // ------------------------------------------------------------------ data availability

    /// @notice The job's verifier while Verifying (before its report deadline), or an eligible whistleblower
    ///         other than the solver and the verifier while Verified (inside the challenge window), states
    ///         that it could not fetch `item` (checkpoint index < checkpointCount, or MANIFEST_ITEM) by its
    ///         CID, or got bytes that do not match it. Escrows availabilityDeposit (transferFrom; approve
    ///         first); the job enters DataChallenged with that clock paused and the solver must publish the
    ///         item within availabilityWindow. An item already published for this trace reverts
    ///         AlreadyPublished.
    function challengeAvailability(uint256 jobId, uint256 item) external;
    /// @notice Anyone (normally the solver), before the answer deadline: publish the challenged item on chain.
    ///         A checkpoint: `content` with keccak256(content) the committed leaf `item` (`proof` under the
    ///         trace root); the manifest: `content` whose one-block CIDv0 digest is manifestOf(jobId), `proof`
    ///         empty. Else ContentMismatch. The deposit goes to the caller, the job is Verifying (Verified
    ///         after a whistleblower's challenge) again with the time that was left, and AvailabilityAnswered
    ///         carries the content.
    function answerAvailability(uint256 jobId, bytes calldata content, bytes32[] calldata proof) external;
    /// @notice Anyone, a DataChallenged job past its answer deadline: the solver's bond is slashed in full to
    ///         the challenger, whose deposit is returned; the verifier's bond is released (a verifier that
    ///         passed the trace is not paid its fee: the job reopens with its escrow, the trace never shown
    ///         to be available).
    function timeoutAvailability(uint256 jobId) external;

    // ------------------------------------------------------------------ availability court only

    /// @notice Holds a Verifying or Verified job in DataVote for an AvailabilityCourt case opened by
    ///         `challenger` (the court checked who may challenge), pausing its clock. Only a protocol
    ///         contract the StakeManager's one-shot wiring authorized (the court) may call it.
    function holdForCourt(uint256 jobId, address challenger) external;
    /// @notice Ends the court's hold: `withheld` reopens the job (the court has slashed the solver's whole
    ///         bond to the challenger and released the verifier's, as timeoutAvailability does);
    ///         otherwise the paused clock resumes. Only an authorized protocol contract (the court).
    function releaseFromCourt(uint256 jobId, bool withheld) external;

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
    /// @return slashed the tokens slashed to `slashRecipient` (the bonds above, 0 if none)
    function resolveDispute(uint256 jobId, bool solverWon, bool verifierSlashed, address slashRecipient)
        external
        returns (uint256 slashed);
    /// @notice The dispute game settles a report game (the job's verifier defended a probe).
    ///         verifierWon: the job is Verified again and the challenge window resumes (bonds stay locked).
    ///         Else the verifier bond is slashed in full to `slashRecipient` (ReportOverturned) and the job
    ///         goes back to Committed for a draw that excludes this verifier (the solver is not at fault),
    ///         or ends refunded once maxVerifierDraws draws were made.
    /// @return slashed the tokens slashed to `slashRecipient` (the verifier bond, or 0)
    function resolveReportDispute(uint256 jobId, bool verifierWon, address slashRecipient)
        external
        returns (uint256 slashed);
    /// @notice The dispute game pays a caught forced error: checks `seal` against the stored one
    ///         (InvalidSeal) and isForced(secret, verifier, seal) (NotForced), pays `whistleblower`
    ///         jackpot * jackpotShareBps / 1e4, clears the verifier's forced seed if it is the revealed
    ///         one, and the job is Verified again with its challenge window resumed.
    function payForcedError(uint256 jobId, ReportSeal calldata seal, bytes32 secret, address whistleblower)
        external
        returns (uint256 payout);

    // ------------------------------------------------------------------ wiring

    /// @notice Set the dispute game (address(0) allowed: none). Only the wiring admin, only once.
    function setDisputeGame(address game) external;
}
