// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {ICredits} from "./ICredits.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IJobMarket} from "./IJobMarket.sol";
import {IStakeManager} from "./IStakeManager.sol";
import {ReportSeal} from "../Types.sol";

/// @notice Where a dispute game stands (docs/dispute.md has the state machine).
/// @dev None: unknown id. DefenderToMove / ChallengerToMove: bisection, the named side's clock runs.
///      Isolated: one step left, the committee draw is pending. Arbitrating: referees commit and reveal.
///      Final: DefenderWon, ChallengerWon, Undecided (no verdict: the challenge bond goes to the
///      jackpot; a whistleblower's challenge counts as lost, a failed report's job times out in the
///      JobMarket).
enum GameStatus {
    None,
    DefenderToMove,
    ChallengerToMove,
    Isolated,
    Arbitrating,
    DefenderWon,
    ChallengerWon,
    Undecided
}

/// @notice A referee's ballot. Vacant: not on the committee.
enum Ballot {
    Vacant,
    Seated,
    Committed,
    RevealedDefenderRight,
    RevealedDefenderWrong,
    Declined // released before committing by a protocol contract (a sealed job's referee that cannot read it)
}

/// @notice How a game ended.
enum SettleReason {
    Verdict, // the committee's majority decided
    DefenderClock, // the defender's clock ran out
    ChallengerClock, // the challenger's clock ran out
    NoCommittee, // a committee could not be drawn (or was not drawn in time)
    NoMajority, // the revealed votes tied (zero reveals included)
    JobGone, // the job left Disputed before settlement (the JobMarket's dispute timeout ran)
    ForcedError // a report game's defender conceded a forced error (concedeForced)
}

/// @notice One dispute game, packed into 8 storage slots.
/// @dev In a REPORT game (`onReport`) the defender is the job's verifier: `defender` holds the verifier,
///      the bisection runs from checkpoint `segment` (agreed) to the verifier's probe state at inner
///      step `steps` (disputed), and the referees judge the verifier's step.
///      Positions and clocks are uint32 (steps per segment and seconds). `deadline` means: the
///      draw anchor BLOCK while Isolated (seed = blockhash(deadline + 1)); the end of the commit
///      phase while Arbitrating (the reveal phase ends revealWindow later).
struct Game {
    // slot 0: written once at opening
    address defender; // the job's solver, or its verifier in a report game
    uint64 jobId;
    uint24 segment; // j: the game bisects checkpoint j -> j + 1
    bool byVerifier; // the challenger is the job's verifier (failing report), not a whistleblower
    // slot 1: challenger and steps at opening; the vote counters while Arbitrating
    address challenger;
    uint32 steps; // steps in the segment (the spec's checkpoint interval k, or the last segment's rest); 0: a manifest game
    uint8 commits; // referees that committed
    uint8 votesDefenderRight;
    uint8 votesDefenderWrong;
    bool onReport; // a report game: a whistleblower disputes a probe of the verifier's passing report
    // slot 2: every move
    GameStatus status;
    uint32 lo; // the agreed step
    uint32 hi; // the disputed step
    uint32 defenderClock; // seconds left to the defender when its turn began
    uint32 challengerClock; // seconds left to the challenger when its turn began
    uint32 lastMoveAt; // when the running clock started (Isolated: when the step was isolated)
    uint32 deadline; // Arbitrating: end of the commit phase
    uint8 moves; // midpoints answered so far
    uint32 anchorBlock; // Isolated: the block whose successor's hash seeds the committee draw
    // slots 3-7
    bytes32 agreedHash; // state hash at lo
    bytes32 agreedCid; // CID of the state at lo (0 at lo == 0: checkpoint j's CID from the manifest)
    bytes32 disputedHash; // the defender's state hash at hi
    bytes32 midHash; // the defender's last posted midpoint state hash
    bytes32 midCid; // ... and its CID
}

/// @notice DisputeGame deployment parameters, all immutable. Amounts in token base units, times in seconds.
struct GameParams {
    uint96 challengeBond; // tokens a challenger escrows in the game at opening
    uint96 refereeBond; // verifier stake each referee has locked while seated
    uint96 refereeFee; // paid from the loser's side to each referee of the majority; committeeSize * refereeFee
    // must be <= challengeBond and < the market's minVerifierBond (a report game won by verdict pays its winner)
    uint32 clockTime; // chess clock per side for the whole bisection
    uint32 openWindow; // time a failing verifier has, after its report, to open the game
    uint32 drawWindow; // time, after the step is isolated, for anyone to draw the committee
    uint32 commitWindow; // referees' commit phase
    uint32 revealWindow; // referees' reveal phase
    uint32 maxSegmentSteps; // upper bound on the steps of a disputed segment (k)
    uint8 committeeSize; // odd, 1 .. StakeManager.MAX_EXCLUDED() - 3
}

/// @notice One probe of a passing report, as a whistleblower disputes it (ProbeLib leaf + proof
///         under the report's probe root).
struct ProbeClaim {
    uint256 index; // probe slot, < probeCount
    uint256 segment; // JobMarket.probeSegment(assignSeed, index, checkpointCount)
    uint256 step; // the inner step of the segment the verifier stated, 1..maxSegmentSteps
    bytes32 stateHash; // the verifier's state hash at that step
    bytes32[] proof; // proof of the leaf under the seal's probeRoot
}

/// @title Dispute game: bisection of one segment to one training step, then referee arbitration.
/// @notice Opening proves checkpoints j and j + 1 against the job's committed trace root; the solver
///         posts midpoint states and the challenger agrees or disagrees, each on a chess clock, until
///         a single step is isolated; a stake-drawn committee of verifiers re-executes it and votes by
///         commit-reveal; the settlement resolves the job in the JobMarket and pays the winner.
interface IDisputeGame is ICredits {
    // ------------------------------------------------------------------ events

    /// @notice A game opened on segment `segment` (states `startHash` -> `endHash`, `steps` steps).
    event DisputeOpened(
        uint256 indexed gameId,
        uint256 indexed jobId,
        address indexed challenger,
        address defender,
        uint256 segment,
        uint256 steps,
        bytes32 startHash,
        bytes32 endHash,
        bool byVerifier
    );
    /// @notice The defender posted its state at `step` of the segment; `clockLeft` is its time left.
    event MidpointPosted(uint256 indexed gameId, uint256 step, bytes32 stateHash, bytes32 cid, uint256 clockLeft);
    /// @notice The challenger answered the midpoint at `step`; the position is now (lo, hi).
    event MidpointAnswered(
        uint256 indexed gameId, uint256 step, bool agreed, uint256 lo, uint256 hi, uint256 clockLeft
    );
    /// @notice Bisection ended at the single step `step` -> `step + 1` of segment `segment`: from the
    ///         agreed state (`preHash`, `preCid`; preCid 0 = checkpoint j's CID in the manifest) the
    ///         defender claims `postHash`. The committee draw is seeded by blockhash(anchorBlock + 1).
    event StepIsolated(
        uint256 indexed gameId,
        uint256 segment,
        uint256 step,
        bytes32 preHash,
        bytes32 preCid,
        bytes32 postHash,
        uint256 anchorBlock
    );
    /// @notice The committee seed block was older than 256 blocks: the draw is re-anchored.
    event DrawReanchored(uint256 indexed gameId, uint256 anchorBlock);
    /// @notice The committee was drawn (each referee's bond locked); commits until `commitDeadline`,
    ///         reveals until `revealDeadline` (earlier once every referee committed).
    event RefereesDrawn(uint256 indexed gameId, address[] referees, uint256 commitDeadline, uint256 revealDeadline);
    /// @notice A referee committed keccak256(abi.encode(gameId, defenderRight, salt, referee)).
    event VoteCommitted(uint256 indexed gameId, address indexed referee, bytes32 commitment);
    /// @notice A referee revealed: `defenderRight` = the defender's post-state is what the step gives.
    event VoteRevealed(uint256 indexed gameId, address indexed referee, bool defenderRight);
    /// @notice A referee that did not reveal lost its bond `amount` to the game's payout.
    event RefereeSlashed(uint256 indexed gameId, address indexed referee, uint256 amount);
    /// @notice `referee` gave up its seat before committing (released by `by`, a protocol contract): its
    ///         bond came back whole and it earns nothing; the committee votes without it.
    event SeatReleased(uint256 indexed gameId, address indexed referee, address indexed by);
    /// @notice The side to move let its clock run out and lost.
    event ClockExpired(uint256 indexed gameId, address indexed loser, bool defenderLost);
    /// @notice The game ended: `status` (DefenderWon / ChallengerWon / Undecided) for `reason`;
    ///         `winner` (address(0) if Undecided) was paid `payout`; `refereeFees` went to the majority.
    event DisputeSettled(
        uint256 indexed gameId,
        uint256 indexed jobId,
        GameStatus status,
        SettleReason reason,
        address winner,
        uint256 payout,
        uint256 refereeFees
    );
    /// @notice A whistleblower opened report game `gameId` on probe slot `probeIndex` of the job's
    ///         passing report (emitted with DisputeOpened, whose `defender` is the defending verifier,
    ///         `endHash` the disputed probe state and `steps` the probe's step).
    event ReportDisputeOpened(uint256 indexed gameId, uint256 indexed jobId, uint256 probeIndex, bytes32 assignSeed);
    /// @notice Game `gameId` disputes the job's committed manifest itself (emitted with DisputeOpened,
    ///         segment 0, 0 steps, zero hashes): the step is isolated at once and the committee rules
    ///         on the manifest the chain holds (AvailabilityAnswered), with no bisection.
    event ManifestDisputeOpened(uint256 indexed gameId, uint256 indexed jobId);
    /// @notice A failing verifier did not open its game within openWindow: it lost, its verifier bond
    ///         (`amount`) went to the solver, and the job finalized.
    event UnopenedDisputeForfeited(
        uint256 indexed jobId, address indexed verifier, address indexed solver, uint256 amount
    );

    // ------------------------------------------------------------------ errors

    /// @notice The caller may not make this move.
    error NotAuthorized(address caller);
    /// @notice No game has this id.
    error UnknownGame(uint256 gameId);
    /// @notice The game is in `have`; the call needs `want`.
    error WrongStatus(uint256 gameId, GameStatus have, GameStatus want);
    /// @notice The job already has a game (open, or undecided and waiting for the dispute timeout).
    error GameExists(uint256 jobId, uint256 gameId);
    /// @notice The job cannot be challenged now (state or window).
    error NotChallengeable(uint256 jobId);
    /// @notice A failing verifier opens after its open deadline.
    error OpenWindowPassed(uint256 jobId, uint256 openDeadline);
    /// @notice openOnManifest on a job whose committed manifest is not published on chain.
    error ManifestNotPublished(uint256 jobId);
    /// @notice forfeitUnopened before the failing verifier's open deadline.
    error OpenWindowNotPassed(uint256 jobId, uint256 openDeadline);
    /// @notice The opener is not an eligible whistleblower (stake below the minimum).
    error NotWhistleblower(address caller);
    /// @notice segment + 1 is not a checkpoint of the trace.
    error InvalidSegment(uint256 segment, uint256 checkpointCount);
    /// @notice Steps of the segment outside 1..maxSegmentSteps.
    error InvalidSteps(uint256 steps, uint256 maxSegmentSteps);
    /// @notice A checkpoint proof did not verify against the committed root.
    error InvalidCheckpointProof(uint256 index, bytes32 stateHash);
    /// @notice A zero state hash or commitment.
    error ZeroHash();
    /// @notice The mover's clock ran out at `expiredAt`; the other side may call timeoutClock.
    error ClockRanOut(uint256 gameId, uint256 expiredAt);
    /// @notice timeoutClock before the mover's clock ran out (at `expiresAt`).
    error ClockNotExpired(uint256 gameId, uint256 expiresAt);
    /// @notice drawCommittee before blockhash(anchor + 1) exists (callable from `readyBlock`).
    error RandomnessNotReady(uint256 gameId, uint256 readyBlock);
    /// @notice drawCommittee after the draw window (settle instead: no committee).
    error DrawWindowPassed(uint256 gameId, uint256 drawDeadline);
    /// @notice A commit after the commit phase, or a reveal after the reveal phase.
    error PhaseClosed(uint256 gameId, uint256 deadline);
    /// @notice A reveal before the reveal phase opens (commit phase still running, not all committed).
    error RevealNotOpen(uint256 gameId, uint256 opensAfter);
    /// @notice The caller's ballot is `have`; the call needs `want`.
    error WrongBallot(uint256 gameId, address referee, Ballot have, Ballot want);
    /// @notice The revealed vote and salt do not hash to the commitment.
    error CommitmentMismatch(uint256 gameId, address referee);
    /// @notice settle before the game can end (`readyAt`: when it can, at the latest).
    error NotSettleable(uint256 gameId, uint256 readyAt);
    /// @notice A constructor parameter is out of range.
    error InvalidParameter(bytes32 name);
    /// @notice concedeForced on a game that is not a live report game before its committee draw, or
    ///         whose seal already paid a forced error.
    error NotConcedable(uint256 gameId);
    /// @notice The probe is not proven under the job's report seal (JobMarket.verifyProbe), or it is
    ///         slot 0 of a seal whose forced error was already conceded.
    error InvalidProbe(uint256 jobId, uint256 index);

    // ------------------------------------------------------------------ views

    /// @notice The ERC20 of bonds and payouts.
    function token() external view returns (IERC20);
    /// @notice The StakeManager (referee draw, referee bonds); must authorize this game.
    function stakeManager() external view returns (IStakeManager);
    /// @notice The JobMarket whose disputes this game settles; must have this game wired.
    function market() external view returns (IJobMarket);
    /// @notice All deployment parameters.
    function params() external view returns (GameParams memory);
    /// @notice 2 * clockTime + drawWindow + commitWindow + revealWindow: the longest a game runs.
    function maxGameDuration() external view returns (uint256);
    /// @notice Number of games opened; ids are 1..gameCount.
    function gameCount() external view returns (uint256);
    /// @notice The stored game (reverts UnknownGame).
    function getGame(uint256 gameId) external view returns (Game memory);
    /// @notice The game of a job: open, or a failed report's game settled Undecided (then the job
    ///         waits for its dispute timeout); 0 if none.
    function activeGame(uint256 jobId) external view returns (uint256);
    /// @notice The committee of a game (empty before the draw).
    function committee(uint256 gameId) external view returns (address[] memory);
    /// @notice A referee's ballot and commitment.
    function ballotOf(uint256 gameId, address referee) external view returns (Ballot ballot, bytes32 commitment);
    /// @notice True when (index, stateHash) is a leaf of the job's committed trace tree (TraceLib leaf
    ///         encoding, OpenZeppelin MerkleProof) and index < checkpointCount: what an opening proves of
    ///         both ends of its segment (reverts UnknownJob).
    function verifyCheckpoint(uint256 jobId, uint256 index, bytes32 stateHash, bytes32[] calldata proof)
        external
        view
        returns (bool);
    /// @notice Seconds left now on the defender's and the challenger's clocks (the running one ticks).
    function clocks(uint256 gameId) external view returns (uint256 defenderLeft, uint256 challengerLeft);
    /// @notice The step whose state the defender must post next (reverts unless DefenderToMove / ChallengerToMove).
    function nextMidpoint(uint256 gameId) external view returns (uint256);
    /// @notice ceil(log2(steps)): the most moves a segment of `steps` steps takes.
    function maxMoves(uint256 steps) external pure returns (uint256);
    /// @notice The deadline by which a failing verifier must open its game (0 if the job is not a
    ///         failed, unopened dispute).
    function openDeadline(uint256 jobId) external view returns (uint256);

    // ------------------------------------------------------------------ moves

    /// @notice Open a game on segment `segment` (checkpoint j -> j + 1) of a job, escrowing
    ///         challengeBond (transferFrom; approve first). Callers: the job's verifier after its
    ///         failing report (within openWindow), or any eligible whistleblower but the solver and
    ///         the verifier while a passing report's challenge window runs (this calls
    ///         JobMarket.openDispute). Both checkpoints are proven against the committed root.
    /// @param steps steps in the segment: the spec's checkpoint interval k (the last segment's rest
    ///        if shorter), 1..maxSegmentSteps; referees rule for the solver if it is not the spec's
    function open(
        uint256 jobId,
        uint256 segment,
        uint256 steps,
        bytes32 startHash,
        bytes32[] calldata startProof,
        bytes32 endHash,
        bytes32[] calldata endProof
    ) external returns (uint256 gameId);
    /// @notice A whistleblower disputes probe `probe` of the job's passing report, escrowing
    ///         challengeBond: the whistleblower rules of `open` (eligible, not the solver or the
    ///         verifier, inside the challenge window, which pauses); the probe must verify under `seal`
    ///         (JobMarket.verifyProbe, else InvalidProbe) with 1 <= step <= maxSegmentSteps; `startHash`
    ///         is checkpoint `probe.segment`, proven against the trace root. The job's verifier defends:
    ///         the game bisects `probe.step` steps from `startHash` (agreed) to `probe.stateHash` (disputed).
    function openOnReport(
        uint256 jobId,
        ReportSeal calldata seal,
        ProbeClaim calldata probe,
        bytes32 startHash,
        bytes32[] calldata startProof
    ) external returns (uint256 gameId);
    /// @notice Dispute the job's committed manifest itself, escrowing challengeBond: for a manifest that
    ///         does not parse, or whose root is not the committed trace root, no checkpoint leaf can be
    ///         proven for `open`. Callers as for `open` (the failing verifier in its open window, or an
    ///         eligible whistleblower in a passing report's challenge window). The manifest must be
    ///         published on chain (JobMarket.isPublished(jobId, MANIFEST_ITEM), through an availability
    ///         challenge; else ManifestNotPublished), so that every referee reads the same bytes. The
    ///         game is isolated at once (0 steps); the referees vote whether the manifest is the
    ///         committed trace of the spec, and the payouts are those of a trace game on segment 0.
    function openOnManifest(uint256 jobId) external returns (uint256 gameId);
    /// @notice The defender of a report game concedes a forced error by revealing its `secret`, before
    ///         the committee draw (DefenderToMove, ChallengerToMove or Isolated; else NotConcedable):
    ///         JobMarket.payForcedError pays the whistleblower jackpot * jackpotShareBps / 1e4, the game
    ///         returns its challenge bond, and the job's challenge window resumes (the verifier keeps
    ///         its bond and fee). Settles ChallengerWon / ForcedError. One concession per seal.
    function concedeForced(uint256 gameId, bytes32 secret, ReportSeal calldata seal) external;
    /// @notice The defender posts its state hash (and checkpoint CID) at nextMidpoint, on its clock.
    function postMidpoint(uint256 gameId, bytes32 stateHash, bytes32 cid) external;
    /// @notice The challenger agrees (its state at the midpoint is the same) or disagrees, on its clock.
    function answerMidpoint(uint256 gameId, bool agree) external;
    /// @notice Anyone: the side to move ran out of time; the other side wins.
    function timeoutClock(uint256 gameId) external;
    /// @notice Anyone, from the block after anchor + 1 and within drawWindow of the isolation:
    ///         draw committeeSize referees by verifier stake, excluding the solver, the challenger,
    ///         the job's verifier and submitter and each other (a report game: the defending verifier,
    ///         the challenger, the job's solver and submitter), locking refereeBond of each. Every
    ///         seat is drawn by stake as of the anchor block: the outcome does not depend on when it
    ///         is called. Seed older than 256 blocks: settles Undecided (NoCommittee). A seat that
    ///         cannot be filled releases the seats drawn and settles Undecided (NoCommittee); a drawn
    ///         referee whose stake other draws locked since the anchor releases them and re-anchors.
    function drawCommittee(uint256 gameId) external;
    /// @notice A seated referee commits keccak256(abi.encode(gameId, defenderRight, salt, referee)).
    function commitVote(uint256 gameId, bytes32 commitment) external;
    /// @notice A protocol contract of the StakeManager's wiring releases `referee`'s seat while the
    ///         commit phase runs and before it committed (SealedJobs, for a sealed job's referee that
    ///         was given no key that opens): its bond is unlocked, it is not slashed and earns nothing.
    function releaseSeat(uint256 gameId, address referee) external;
    /// @notice A referee reveals its vote once the commit phase ended (or everyone committed).
    function revealVote(uint256 gameId, bool defenderRight, bytes32 salt) external;
    /// @notice Anyone: end an arbitration (after the reveal phase, or once every referee revealed),
    ///         or a game whose committee was not drawn within drawWindow. A report game resolves through
    ///         JobMarket.resolveReportDispute, any other through JobMarket.resolveDispute.
    function settle(uint256 gameId) external;
    /// @notice Anyone: a failing verifier that did not open its game within openWindow loses; its
    ///         verifier bond goes to the solver and the job finalizes.
    function forfeitUnopened(uint256 jobId) external;
}
