// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {Capabilities, Device, Role, StakeInfo} from "../Types.sol";

/// @title Stakes per role, unbonding, and the protocol's lock / unlock / slash / verifier draw.
/// @notice Anyone stakes; only the protocol contracts (authorized once, at deployment wiring) lock,
///         unlock and slash. Locked stake can never leave except by slash.
///         Locks and unlocks emit no event here: the protocol contract's own event names the bond
///         (JobMarket: JobClaimed, VerifierAssigned, JobFinalized, ...); slashes emit StakeSlashed.
///         An eligible solver advertises its capabilities here (limits, device, measured speed): one
///         slot per solver, readable by anyone.
interface IStakeManager {
    // ------------------------------------------------------------------ events

    /// @notice `account` added `amount` to its `role` stake, which is now `total`.
    event Staked(address indexed account, Role indexed role, uint256 amount, uint256 total);
    /// @notice `amount` left the `role` stake of `account` and is withdrawable at `releaseAt`.
    event UnstakeRequested(address indexed account, Role indexed role, uint256 amount, uint256 releaseAt);
    /// @notice `account` withdrew its unbonded `amount`.
    event Withdrawn(address indexed account, Role indexed role, uint256 amount);
    /// @notice A protocol contract slashed `amount` of locked stake, paid to `recipient`.
    event StakeSlashed(address indexed account, Role indexed role, uint256 amount, address indexed recipient);
    /// @notice A draw anchored before `account` asked to unstake took `amount` back from its unbonding
    ///         stake to lock its bond.
    event UnstakeReclaimed(address indexed account, uint256 amount);
    /// @notice The one-shot wiring named the protocol contracts.
    event ProtocolsAuthorized(address[] protocols);
    /// @notice Solver `solver` advertised what it can run (capabilitiesOf has the latest advert).
    event CapabilitiesAdvertised(
        address indexed solver, uint256 maxParams, uint256 maxDatasetBytes, uint256 maxSteps, uint256 flops, Device device
    );
    /// @notice `account` announced the gateway it serves its content from (`url`; empty: none any more).
    event GatewayAnnounced(address indexed account, string url);

    // ------------------------------------------------------------------ errors

    /// @notice The caller may not do this (not the wiring admin, or not a protocol contract).
    error NotAuthorized(address caller);
    /// @notice `authorize` was already called.
    error AlreadyWired();
    /// @notice A zero amount or an empty protocol list.
    error ZeroAmount();
    /// @notice A zero address where a contract is needed.
    error ZeroAddress();
    /// @notice Staking would leave `stake` above zero but below the role's `minimum`.
    error StakeBelowMinimum(address account, Role role, uint256 stake, uint256 minimum);
    /// @notice Not enough stake: lock / unstake beyond free stake (have = free, need = amount), or a
    ///         lock on an account whose total stake is below the role minimum (have = stake, need = minimum).
    error InsufficientStake(address account, Role role, uint256 have, uint256 need);
    /// @notice Unlock or slash of more than is locked.
    error InsufficientLocked(address account, Role role, uint256 locked, uint256 amount);
    /// @notice withdraw with nothing unbonding.
    error NothingToWithdraw(address account, Role role);
    /// @notice withdraw before the unbonding delay elapsed.
    error UnbondingNotElapsed(address account, Role role, uint256 releaseAt);
    /// @notice All verifier slots are taken by staked verifiers.
    error TooManyVerifiers(uint256 max);
    /// @notice A draw was given more excluded accounts than it accepts.
    error TooManyExcluded(uint256 count, uint256 max);
    /// @notice A draw anchored at the current block or later (its state is not final yet).
    error AnchorNotPast(uint256 anchor, uint256 blockNumber);
    /// @notice A constructor parameter is out of range.
    error InvalidParameter(bytes32 name);
    /// @notice Only an account whose `role` stake meets the role minimum may do this (an advert of
    ///         capabilities needs a solver stake): it has `stake`, the minimum is `minimum`.
    error NotEligible(address account, Role role, uint256 stake, uint256 minimum);
    /// @notice An advertised capability (`name`) is zero: a solver that can run nothing should unstake.
    error ZeroCapability(bytes32 name);
    /// @notice An announced gateway URL is `length` bytes, over `maxLength`.
    error GatewayUrlTooLong(uint256 length, uint256 maxLength);

    // ------------------------------------------------------------------ views

    /// @notice The staked ERC20.
    function token() external view returns (IERC20);
    /// @notice The deployer, allowed to call `authorize` once.
    function wiringAdmin() external view returns (address);
    /// @notice True once `authorize` has been called.
    function wired() external view returns (bool);
    /// @notice True for the protocol contracts named at wiring.
    function isProtocol(address account) external view returns (bool);
    /// @notice Minimum total stake for `role` to be locked against (eligible).
    function minStake(Role role) external view returns (uint256);
    /// @notice Seconds between requestUnstake and withdraw.
    function unbondingDelay() external view returns (uint256);
    /// @notice Maximum number of verifiers staked at once (slots of the draw tree).
    function MAX_VERIFIERS() external view returns (uint256);
    /// @notice Maximum candidates a draw tries before giving up (a drawn verifier that had no free
    ///         stake for the bond at the anchor is excluded and the draw repeats).
    function MAX_DRAW_TRIES() external view returns (uint256);
    /// @notice Maximum length of the `exclude` list of a draw.
    function MAX_EXCLUDED() external view returns (uint256);
    /// @notice Longest gateway URL `announce` takes, in bytes.
    function MAX_GATEWAY_URL_BYTES() external view returns (uint256);
    /// @notice The full stake record of `account` in `role`.
    function stakeOf(address account, Role role) external view returns (StakeInfo memory);
    /// @notice staked - locked.
    function freeStake(address account, Role role) external view returns (uint256);
    /// @notice True when the total `role` stake of `account` meets the role minimum.
    function isEligible(address account, Role role) external view returns (bool);
    /// @notice Draw weight of a verifier: its verifier stake if eligible, else 0.
    function verifierWeight(address account) external view returns (uint256);
    /// @notice Sum of all verifier weights.
    function totalVerifierWeight() external view returns (uint256);
    /// @notice Number of verifier slots ever used (the tree size; free slots are reused).
    function verifierSlotCount() external view returns (uint256);
    /// @notice Sum of all verifier weights at the end of block `blockNumber` (what a draw anchored
    ///         there reads).
    function totalVerifierWeightAt(uint256 blockNumber) external view returns (uint256);
    /// @notice The latest capabilities `solver` advertised (all zero if it never did). An advert
    ///         outlives the stake it was made with: readers count it only while
    ///         `isEligible(solver, Role.Solver)`.
    function capabilitiesOf(address solver) external view returns (Capabilities memory);

    /// @notice The gateway `account` last announced ("" if none): the base URL of an IPFS trustless
    ///         gateway serving the content it must keep available (docs/storage.md). Not checked by
    ///         the chain: readers verify every byte they fetch against its CID.
    function gatewayOf(address account) external view returns (string memory);

    // ------------------------------------------------------------------ anyone

    /// @notice Add `amount` (pulled with transferFrom) to the caller's `role` stake; the result must
    ///         meet the role minimum.
    function stake(Role role, uint96 amount) external;
    /// @notice Move `amount` of free stake to unbonding (withdrawable after `unbondingDelay`; the
    ///         release time of anything already unbonding moves too). The stake left must be 0 or
    ///         at least the minimum.
    function requestUnstake(Role role, uint96 amount) external;
    /// @notice Pay out the unbonded amount after its release time.
    function withdraw(Role role) external returns (uint256 amount);
    /// @notice Publish what the caller, an eligible solver, can run: the largest model (parameters),
    ///         dataset (bytes) and step count it takes, the device it trains on and its measured
    ///         training speed (FLOP/s, see Capabilities), replacing its previous advert. Every
    ///         number must be above zero. Emits CapabilitiesAdvertised.
    function advertise(uint48 maxParams, uint48 maxDatasetBytes, uint32 maxSteps, uint64 flops, Device device) external;

    /// @notice Announce where the caller serves its content: an IPFS trustless gateway base URL, at
    ///         most MAX_GATEWAY_URL_BYTES; "" withdraws it. Anyone may announce (a submitter holds no
    ///         stake): readers ask only the gateways of accounts that hold stake or posted jobs, and a
    ///         false URL costs them one failed request. Emits GatewayAnnounced.
    function announce(string calldata url) external;

    // ------------------------------------------------------------------ wiring

    /// @notice Name the protocol contracts. Only the wiring admin, only once.
    function authorize(address[] calldata protocols) external;

    // ------------------------------------------------------------------ protocol contracts only

    /// @notice Lock `amount` of free stake of an eligible `account`.
    function lock(address account, Role role, uint256 amount) external;
    /// @notice Release `amount` of locked stake.
    function unlock(address account, Role role, uint256 amount) external;
    /// @notice Take `amount` of locked stake and transfer it to `recipient`.
    function slash(address account, Role role, uint256 amount, address recipient) external;
    /// @notice Draw an eligible verifier with probability proportional to its weight at the end of
    ///         block `anchor` (< block.number), never one in `exclude` nor one that had less than
    ///         `bond` free stake at the anchor, and lock its bond (taken back from unbonding if it
    ///         asked to unstake after the anchor). Returns (address(0), false) when no candidate is
    ///         found within MAX_DRAW_TRIES, and (candidate, false) when the candidate's stake was since
    ///         locked by other draws so its bond cannot be locked now (the caller re-anchors).
    ///         O(log n) checkpoint lookups per try.
    function drawVerifier(bytes32 seed, uint256 anchor, address[] calldata exclude, uint256 bond)
        external
        returns (address verifier, bool locked);
}
