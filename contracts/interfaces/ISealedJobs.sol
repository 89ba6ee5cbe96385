// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {IJobMarket} from "./IJobMarket.sol";
import {IKeyRegistry} from "./IKeyRegistry.sol";
import {IStakeManager} from "./IStakeManager.sol";

/// What became of a sealed job's key bond.
enum SealingStatus {
    /// Not sealed.
    None,
    /// Sealed; the key bond is held.
    Active,
    /// A demand was answered with the data key itself (KeyRevealed): the job's data is no longer
    /// sealed to anyone; the key bond is still held and returns to the submitter at settlement.
    Revealed,
    /// A demand went unanswered: the key bond was credited to the parties the submitter withheld from.
    Forfeited,
    /// The job settled and the key bond was credited back to the submitter.
    Returned
}

/// A sealed job: the commitment to its data key and the key bond the submitter escrowed.
struct Sealing {
    /// keccak256 of the job's 32-byte data key.
    bytes32 keyHash;
    address submitter;
    uint96 bond;
    SealingStatus status;
}

/// An entitled party's open demand for a sealed job's data key.
struct KeyDemand {
    address party;
    /// Answer by (unix seconds).
    uint32 deadline;
    /// The 1st demand of this party on this job may be answered with a wrap; later ones only with the key.
    bool keyOnly;
    /// The job was Verifying (the demander is its verifier) when held, else Verified (a whistleblower).
    bool verifying;
}

/// @title Sealed jobs: a job's data key, its wraps to the entitled parties, and the key game (issue 30).
/// @notice A submitter seals a posted job (`seal`): it commits to the job's data key by its keccak256
///         and escrows a key bond equal to the job's reward plus verifier fee. The submitter and the
///         job's solver (both hold the key) publish wraps of the key (80-byte SealedBoxes to the
///         recipients' registered encryption keys, IKeyRegistry) in `WrapPublished` events: to a
///         staked solver that asked (`requestWrap`) before it claims, to the drawn verifier, to staked
///         whistleblowers that audit. An entitled party without a wrap that opens to the committed key
///         demands the key (`demandKey`): the job is held (JobMarket.holdForCourt, the party's clock
///         paused) until a wrap to it (first demand only) or the key itself (any demand, checked against
///         the commitment and published) answers; an unanswered demand forfeits the key bond (the verifier
///         fee to the party withheld from, the rest to the jackpot: `timeoutDemand`) and no party loses
///         stake for it. docs/sealing.md has
///         the design and the trust it leaves.
interface ISealedJobs {
    // ------------------------------------------------------------------ events

    /// @notice `submitter` sealed `jobId`: its data key hashes to `keyHash`; `bond` escrowed.
    event JobSealed(uint256 indexed jobId, address indexed submitter, bytes32 keyHash, uint256 bond);
    /// @notice `party` (registered key of version `keyVersion`) asks for a wrap of the job's key: a staked
    ///         solver while the job is Open (to claim it), or a staked whistleblower while it is Verified
    ///         (to audit it).
    event WrapRequested(uint256 indexed jobId, address indexed party, uint64 keyVersion);
    /// @notice `from` (the submitter, the job's solver, or a party of a game on it) wrapped the job's data key to `recipient`'s
    ///         encryption key of version `keyVersion`: `wrap` is the 80-byte SealedBox.
    event WrapPublished(
        uint256 indexed jobId, address indexed recipient, address indexed from, uint64 keyVersion, bytes wrap
    );
    /// @notice `party` demanded the data key of `jobId`; the job is held until `deadline`.
    event KeyDemanded(uint256 indexed jobId, address indexed party, uint256 deadline, bool keyOnly);
    /// @notice The demand of `party` was answered (by a wrap, or by the key); its clock resumed.
    event DemandAnswered(uint256 indexed jobId, address indexed party, address indexed by, bool withKey);
    /// @notice `by` published the job's data key (it hashes to the sealing's keyHash).
    event KeyRevealed(uint256 indexed jobId, address indexed by, bytes32 dataKey);
    /// @notice Nobody answered the demand of `party`: it was credited `toParty` (the job's verifier fee)
    ///         and `toJackpot` (the rest of the key bond) went to the JobMarket's jackpot; a verifier's
    ///         demand also released both bonds and reopened the job, a whistleblower's resumed the
    ///         challenge window.
    event DemandForfeited(uint256 indexed jobId, address indexed party, uint256 toParty, uint256 toJackpot);
    /// @notice The job settled and the key bond went back to its submitter.
    event BondReturned(uint256 indexed jobId, address indexed submitter, uint256 bond);

    // ------------------------------------------------------------------ errors

    /// @notice A zero address where a contract is needed.
    error ZeroAddress();
    /// @notice A deployment parameter out of range (`name`).
    error InvalidParameter(bytes32 name);
    /// @notice Only `expected` may do this; `caller` called.
    error NotAuthorized(address caller);
    /// @notice A zero key hash: it would read as "not sealed".
    error ZeroKeyHash();
    /// @notice `jobId` is already sealed.
    error AlreadySealed(uint256 jobId);
    /// @notice `jobId` is not sealed, or its sealing is no longer `Active` / `Revealed` as the call needs.
    error NotSealed(uint256 jobId, SealingStatus status);
    /// @notice The call needs the job in another state.
    error WrongJobState(uint256 jobId, uint8 state);
    /// @notice A wrap is exactly 80 bytes (a SealedBox of a 32-byte key); it had `length`.
    error InvalidWrap(uint256 length);
    /// @notice `wraps` and `recipients` differ in length, or are empty.
    error LengthMismatch(uint256 recipients, uint256 wraps);
    /// @notice `account` registered no encryption key (IKeyRegistry).
    error NoEncryptionKey(address account);
    /// @notice `account` is not eligible in the role the call needs.
    error NotEligible(address account);
    /// @notice `jobId` has a demand open (by `party`).
    error DemandOpen(uint256 jobId, address party);
    /// @notice `jobId` has no demand open.
    error NoDemand(uint256 jobId);
    /// @notice The open demand's deadline `deadline` has passed (answer) or not (timeout).
    error DeadlinePassed(uint256 jobId, uint256 deadline);
    /// @notice The open demand runs until `deadline`.
    error DeadlineNotReached(uint256 jobId, uint256 deadline);
    /// @notice `dataKey` does not hash to the sealing's keyHash.
    error WrongKey(uint256 jobId);
    /// @notice The key of `jobId` is public already (KeyRevealed): nothing to demand.
    error KeyPublic(uint256 jobId);
    /// @notice `account` holds no seat in the committee of game `gameId`.
    error NotSeated(uint256 gameId, address account);
    /// @notice The job has not settled (Finalized, Refunded or Cancelled) yet.
    error NotSettled(uint256 jobId, uint8 state);

    // ------------------------------------------------------------------ views

    /// @notice The JobMarket whose jobs are sealed here (its token is the bonds' token).
    function market() external view returns (IJobMarket);
    /// @notice The StakeManager (it must authorize this contract: it holds jobs and releases bonds).
    function stakeManager() external view returns (IStakeManager);
    /// @notice The registry of the encryption keys wraps are made to.
    function keys() external view returns (IKeyRegistry);
    /// @notice The token of the key bonds.
    function token() external view returns (IERC20);
    /// @notice Seconds a demand may stay unanswered.
    function keyWindow() external view returns (uint32);
    /// @notice The sealing of `jobId` (status None: not sealed).
    function sealingOf(uint256 jobId) external view returns (Sealing memory);
    /// @notice The open demand on `jobId` (party 0: none).
    function demandOf(uint256 jobId) external view returns (KeyDemand memory);
    /// @notice How many times `party` demanded the key of `jobId`.
    function demandsBy(uint256 jobId, address party) external view returns (uint256);

    // ------------------------------------------------------------------ the submitter

    /// @notice Seal the caller's Open job: commit to its data key (`keyHash` = keccak256 of the 32 bytes)
    ///         and escrow the key bond (the job's reward + verifier fee; approve it first).
    function seal(uint256 jobId, bytes32 keyHash) external;

    /// @notice Credit the key bond back to the submitter once the job settled (Finalized, Refunded or
    ///         Cancelled) without a forfeit. Anyone may call.
    function returnBond(uint256 jobId) external;

    // ------------------------------------------------------------------ wraps

    /// @notice The caller, with a registered key, asks for a wrap of a sealed job's key (an event): an
    ///         eligible solver while the job is Open, or an eligible whistleblower (neither its solver nor
    ///         its verifier) while it is Verified. Before a whistleblower demands, it asks.
    function requestWrap(uint256 jobId) external;

    /// @notice The submitter, or the job's solver from its claim on, publishes wraps of the data key to
    ///         `recipients` (each with a registered key; each wrap 80 bytes). A wrap to the party of an
    ///         open first demand answers it.
    function publishWraps(uint256 jobId, address[] calldata recipients, bytes[] calldata wraps) external;

    /// @notice A party of dispute game `gameId` (its defender or challenger: each read the job's data to
    ///         play it) publishes wraps of the job's key to `referees` seated in the game's committee
    ///         (each with a registered key; each wrap 80 bytes), so a referee can re-execute the step
    ///         whichever party withholds.
    function wrapForReferees(uint256 gameId, address[] calldata referees, bytes[] calldata wraps) external;

    /// @notice A referee seated in dispute game `gameId` on a sealed job whose key is not public gives up
    ///         its seat before committing (`DisputeGame.releaseSeat`): its bond comes back whole and it
    ///         earns nothing. For the referee that no wrap that opens reached: it cannot re-execute the
    ///         step, and a seat that does not vote is slashed.
    function declineSeat(uint256 gameId) external;

    // ------------------------------------------------------------------ the key game

    /// @notice The caller, entitled and without a wrap that opens to the committed key, demands it: the
    ///         job's verifier while it is Verifying, or an eligible whistleblower (neither its solver nor
    ///         its verifier) while it is Verified. The job is held and the caller's clock paused for keyWindow.
    function demandKey(uint256 jobId) external;

    /// @notice Anyone answers the open demand with the data key itself (checked against the commitment and
    ///         published in KeyRevealed); the sealing becomes Revealed and the job's clock resumes.
    function revealKey(uint256 jobId, bytes32 dataKey) external;

    /// @notice After an unanswered demand's deadline, anyone forfeits the key bond: the demander is
    ///         credited the job's verifier fee and the rest goes to the jackpot (never to the solver: a
    ///         forfeit pays no training it could not check). A verifier's demand also releases the
    ///         solver's and the verifier's bonds and reopens the job; a whistleblower's resumes the
    ///         challenge window.
    function timeoutDemand(uint256 jobId) external;
}
