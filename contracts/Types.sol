// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @notice The staking roles. A stake is held per (account, role); each role has its own minimum.
enum Role {
    Solver,
    Verifier,
    Whistleblower
}

/// @notice Lifecycle of a job (docs/contracts.md has the transition table).
/// @dev `None` is the zero value of an unknown job id. `Open` is also the state of a reopened job.
///      Final states: Finalized, Cancelled, Refunded. `DataChallenged` (appended last, so the older
///      values keep their numbers) is a Verifying job whose verifier, or a Verified job whose auditing
///      whistleblower, could not fetch one item of the trace: its clock (report or challenge window)
///      is paused until the solver publishes it (JobMarket.answerAvailability).
enum JobState {
    None,
    Open,
    Claimed,
    Committed,
    Verifying,
    Verified,
    Disputed,
    Finalized,
    Cancelled,
    Refunded,
    DataChallenged,
    /// Held by the AvailabilityCourt while its committee checks that the challenged items are served
    /// (JobMarket.holdForCourt / releaseFromCourt); the challenger's clock is paused.
    DataVote
}

/// @notice Why a job ended refunded (the escrow went back to the submitter, bonds were released).
enum RefundReason {
    Expired,
    NoEligibleVerifier,
    VerifierDrawsExhausted,
    DisputeTimedOut
}

/// @notice The device a solver trains on (Capabilities.device). New kinds are appended, so the older
///         values keep their numbers.
enum Device {
    Cpu,
    Cuda
}

/// @notice What a staked solver says it can run (StakeManager.advertise): its limits, its device and
///         its measured speed. Claims, not proofs: the chain cannot check them, and a solver that
///         overstates them claims jobs it cannot finish and loses their bonds.
/// @dev One storage slot (240 bits). `flops` is training FLOP per second counted as clients count a
///      job's compute (6 x parameters x examples per step, per step; rolebase/capabilities.py),
///      measured by the solver on a reference job: a job's FLOP divided by it estimates the job's
///      training time there.
struct Capabilities {
    uint48 maxParams;
    uint48 maxDatasetBytes;
    uint32 maxSteps;
    uint64 flops;
    Device device;
    /// Block timestamp of the latest advert (0: never advertised).
    uint40 advertisedAt;
}

/// @notice One account's stake in one role.
/// @dev `staked` includes `locked`; `free = staked - locked`. `unbonding` left `staked` on
///      requestUnstake and is withdrawable at `releaseAt`; it can no longer be locked or slashed.
///      Slot 0: staked | locked | releaseAt (232 bits); slot 1: unbonding.
struct StakeInfo {
    uint96 staked;
    uint96 locked;
    uint40 releaseAt;
    uint96 unbonding;
}

/// @notice A job, packed into 5 storage slots. postJob creates slots 0-2, commit slots 3 and 4;
///         every other write updates a slot that is already non-zero.
/// @dev specCid, finalModelCid, manifestCid and reportCid are not stored: they are in the JobPosted,
///      TraceCommitted and ReportSubmitted events (jobId is indexed). Bonds are not stored: they are
///      a pure function of `reward` and the immutable parameters (JobMarket.solverBond / verifierBond).
///      Timestamps are uint32 seconds (valid until 2106).
struct Job {
    // slot 0: postJob writes reward, claim writes solver
    address solver;
    uint96 reward;
    // slot 1: postJob writes verifierFee, assignVerifier writes verifier
    /// The drawn verifier; back in Committed after a verifier timeout it still names the verifier
    /// that timed out (excluded from the next draw, its bond already settled).
    address verifier;
    uint96 verifierFee;
    // slot 2: postJob, then every transition
    address submitter;
    JobState state;
    /// Deadline (unix seconds) of the current phase: Open: claim by; Claimed: commit by;
    /// Verifying: report by; Verified: end of the challenge window; Disputed: resolve by;
    /// DataChallenged: publish the challenged item by. Committed has none (0): see anchorBlock.
    uint32 deadline;
    uint8 draws; // verifier draws made since the last commit
    uint24 commitWindow; // seconds a solver has from its claim to its commit
    uint24 checkpointCount; // leaves in the trace tree (checkpoint 0 is the initial state)
    // slot 3: written by commit
    bytes32 traceRoot;
    // slot 4: anchorBlock written by commit (and each re-anchor), the rest when a dispute opens
    address challenger;
    /// Seconds of the challenge window that were left when a whistleblower's dispute opened
    /// (JobMarket.openDispute): the window is paused while the game runs and, if the solver wins
    /// without a verdict against the verifier, resumes with this much time (resolveDispute).
    uint32 challengeLeft;
    /// The block of the latest commit or re-anchor: the verifier draw is seeded by
    /// blockhash(anchorBlock + 1), a hash that did not exist when the trace was committed.
    uint32 anchorBlock;
}

/// @notice JobMarket deployment parameters, all immutable. Amounts in token base units,
///         windows in seconds (each at most 365 days), shares in basis points (1e4 = 100%).
struct MarketParams {
    uint96 minSolverBond; // solver bond = max(minSolverBond, reward * solverBondBps / 1e4)
    uint16 solverBondBps;
    uint96 minVerifierBond; // verifier bond = max(minVerifierBond, reward * verifierBondBps / 1e4)
    uint16 verifierBondBps;
    uint16 timeoutSlashBps; // share of a silent party's bond slashed by a timeout
    uint32 openWindow; // a job accepts claims for this long after it is posted or reopened
    uint32 maxCommitWindow; // upper bound on the commit window a submitter asks for (< 2**24)
    uint32 reportWindow; // time a drawn verifier has to report
    uint32 challengeWindow; // time after a passing report during which a dispute may open
    uint32 disputeWindow; // time the dispute game has to resolve; then the job ends refunded
    uint8 maxVerifierDraws; // verifier draws per job before it ends refunded
    uint16 jackpotTaxBps; // share of reward + fee the submitter pays on top, into the jackpot at finalize
    uint16 jackpotShareBps; // share of the jackpot paid per caught forced error; <= MAX_JACKPOT_SHARE_BPS (3333)
    uint16 forcedErrorRateBps; // chance, in bps, that a seeded verifier is forced on a job (<= 10000)
    uint8 probeCount; // probe slots of a passing report, 1..32
    uint32 availabilityWindow; // time a solver has to publish an item its verifier could not fetch
    uint96 availabilityDeposit; // tokens a verifier escrows per availability challenge (to the answerer)
    uint16 fullReplayRateBps; // chance, in bps, that a commit's draw chooses it for full replay (<= 10000)
    uint16 fullReplayFeeBps; // replay fee = reward * fullReplayFeeBps / 1e4, escrowed; paid to a full replay's verifier
}

/// @notice An open availability challenge (JobMarket.challengeAvailability): the item its challenger could
///         not fetch (a checkpoint index, or JobMarket.MANIFEST_ITEM), the seconds that were left of the
///         window it paused (the verifier's report window, or a whistleblower's challenge window: they
///         resume once the item is published), and the challenger (the job's verifier, or a whistleblower).
/// @dev One slot, written at the challenge and deleted when it ends.
struct AvailabilityChallenge {
    uint24 item;
    uint32 timeLeft;
    address challenger;
}

/// @notice A verifier's forced-error seed: `commitment` = keccak256(abi.encode(secret, verifier)),
///         committed on chain at block `setAtBlock`.
/// @dev A draw snapshots the commitment only if it was set at or before the draw's anchor block, i.e.
///      before the draw entropy blockhash(anchor + 1) existed: a verifier cannot pick its secret after
///      seeing whether it would be forced. One slot: commitment; the next: setAtBlock.
struct ForcedSeed {
    bytes32 commitment;
    uint64 setAtBlock;
}

/// @notice What a passing report is bound to. Stored on chain only as its hash (JobMarket.reportSeal):
///         keccak256(abi.encode(keccak256(abi.encode(assignSeed, forcedCommitment)), probeRoot)); the
///         values are in the VerifierAssigned and ReportSubmitted events.
/// @dev assignSeed = keccak256(abi.encode(drawSeed, verifier)) fixes the probe segments and steps;
///      forcedCommitment is the verifier's ForcedSeed snapshotted at the draw (0: it cannot be forced);
///      probeRoot is the root of the report's probe tree (ProbeLib).
struct ReportSeal {
    bytes32 assignSeed;
    bytes32 forcedCommitment;
    bytes32 probeRoot;
}

/// @notice One probe of a passing report, as JobMarket.report takes and ReportSubmitted emits it; the
///         probe slot (index) is its position in the array.
/// @dev `segment` must be ProbeLib.segmentOf(assignSeed, slot, checkpointCount) (checked at report);
///      `stateHash` is the model state hash after `step` steps of that segment. The step rule
///      (1 + keccak256(abi.encode(assignSeed, slot, 1)) % max(k - 1, 1)) needs the spec's k, which the
///      chain does not know: the referees enforce it (a report game's shape), the chain does not.
struct Probe {
    uint256 segment;
    uint256 step;
    bytes32 stateHash;
}
