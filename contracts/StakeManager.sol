// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";
import {Checkpoints} from "@openzeppelin/contracts/utils/structs/Checkpoints.sol";
import {IStakeManager} from "./interfaces/IStakeManager.sol";
import {Capabilities, Device, Role, StakeInfo} from "./Types.sol";
import {SumTree} from "./libraries/SumTree.sol";

// Deadlines are timestamps by design: windows are minutes to days, far above the seconds a
// block producer can shift a timestamp.
// forge-lint: disable-next-item(block-timestamp)
/// @title StakeManager
/// @notice Stakes per (account, role), an unbonding delay, and the protocol contracts' bonds:
///         lock / unlock / slash, and a stake-weighted verifier draw over a Fenwick sum tree that
///         reads every input as of the draw's anchor block (see drawVerifier).
///         Staked solvers also advertise here what they can run (advertise / capabilitiesOf), so
///         that a submitter can see whether any solver fits its job before posting it; and every
///         party may announce the gateway its content is served from (announce / gatewayOf).
/// @dev Authorization: the deployer is the wiring admin and names the protocol contracts once with
///      `authorize`; the set is fixed from then on. Token balance of this contract ==
///      sum over (account, role) of staked + unbonding (tests/forge/invariant checks it).
contract StakeManager is IStakeManager, ReentrancyGuardTransient {
    using SafeERC20 for IERC20;
    using SumTree for SumTree.Tree;
    using Checkpoints for Checkpoints.Trace224;

    /// @inheritdoc IStakeManager
    uint256 public constant MAX_VERIFIERS = 1024;
    /// @inheritdoc IStakeManager
    uint256 public constant MAX_DRAW_TRIES = 4;
    /// @inheritdoc IStakeManager
    uint256 public constant MAX_EXCLUDED = 16;
    /// @inheritdoc IStakeManager
    uint256 public constant MAX_GATEWAY_URL_BYTES = 256;

    /// @inheritdoc IStakeManager
    IERC20 public immutable token;
    /// @inheritdoc IStakeManager
    address public immutable wiringAdmin;
    /// @inheritdoc IStakeManager
    uint256 public immutable unbondingDelay;
    uint256 private immutable _minSolverStake;
    uint256 private immutable _minVerifierStake;
    uint256 private immutable _minWhistleblowerStake;

    /// @inheritdoc IStakeManager
    bool public wired;
    /// @inheritdoc IStakeManager
    mapping(address account => bool) public isProtocol;

    mapping(address account => mapping(Role role => StakeInfo)) private _stakes;
    mapping(address solver => Capabilities) private _capabilities;
    mapping(address account => string url) private _gateways;

    /// Verifier draw tree: slot i (1-based) holds the weight of the account _slotAccount[i] names
    /// (both with history by block, so a draw reads them as of its anchor).
    SumTree.Tree private _tree;
    mapping(address account => uint256 slot) private _slotOf;
    mapping(uint256 slot => Checkpoints.Trace224 account) private _slotAccount;
    uint256[] private _freeSlots;
    /// Free verifier stake (staked - locked) by block: a draw accepts a candidate on its free stake
    /// at the anchor block.
    mapping(address account => Checkpoints.Trace224 free) private _freeAt;
    /// Block of the account's latest verifier requestUnstake: a draw anchored before it may take its
    /// bond back from unbonding (leaving after the anchor does not dodge a draw).
    mapping(address account => uint256 blockNumber) private _unstakedAt;

    /// The slots a draw skips, sorted by slot, with their weights at the anchor and their sum.
    struct Excluded {
        uint256[] slots;
        uint256[] weights;
        uint256 count;
        uint256 weight;
    }

    modifier onlyProtocol() {
        if (!isProtocol[msg.sender]) revert NotAuthorized(msg.sender);
        _;
    }

    /// @param token_ the staked ERC20
    /// @param minStakes minimum stake per role, indexed by Role (Solver, Verifier, Whistleblower); each > 0
    /// @param unbondingDelay_ seconds between requestUnstake and withdraw
    constructor(IERC20 token_, uint96[3] memory minStakes, uint32 unbondingDelay_) {
        if (address(token_) == address(0)) revert ZeroAddress();
        for (uint256 r; r < 3; ++r) {
            if (minStakes[r] == 0) revert InvalidParameter("minStake");
        }
        token = token_;
        wiringAdmin = msg.sender;
        unbondingDelay = unbondingDelay_;
        _minSolverStake = minStakes[uint8(Role.Solver)];
        _minVerifierStake = minStakes[uint8(Role.Verifier)];
        _minWhistleblowerStake = minStakes[uint8(Role.Whistleblower)];
    }

    // ------------------------------------------------------------------ views

    /// @inheritdoc IStakeManager
    function minStake(Role role) public view returns (uint256) {
        if (role == Role.Solver) return _minSolverStake;
        if (role == Role.Verifier) return _minVerifierStake;
        return _minWhistleblowerStake;
    }

    /// @inheritdoc IStakeManager
    function stakeOf(address account, Role role) external view returns (StakeInfo memory) {
        return _stakes[account][role];
    }

    /// @inheritdoc IStakeManager
    function freeStake(address account, Role role) external view returns (uint256) {
        StakeInfo storage s = _stakes[account][role];
        return s.staked - s.locked;
    }

    /// @inheritdoc IStakeManager
    function isEligible(address account, Role role) external view returns (bool) {
        return _stakes[account][role].staked >= minStake(role);
    }

    /// @inheritdoc IStakeManager
    function verifierWeight(address account) public view returns (uint256) {
        uint256 staked = _stakes[account][Role.Verifier].staked;
        return staked >= _minVerifierStake ? staked : 0;
    }

    /// @inheritdoc IStakeManager
    function totalVerifierWeight() external view returns (uint256) {
        return _tree.total();
    }

    /// @inheritdoc IStakeManager
    function verifierSlotCount() external view returns (uint256) {
        return _tree.size();
    }

    /// @inheritdoc IStakeManager
    function totalVerifierWeightAt(uint256 blockNumber) external view returns (uint256 total) {
        (, total) = _tree.headAt(SafeCast.toUint32(blockNumber));
    }

    /// @inheritdoc IStakeManager
    function capabilitiesOf(address solver) external view returns (Capabilities memory) {
        return _capabilities[solver];
    }

    /// @inheritdoc IStakeManager
    function gatewayOf(address account) external view returns (string memory) {
        return _gateways[account];
    }

    // ------------------------------------------------------------------ anyone

    /// @inheritdoc IStakeManager
    function stake(Role role, uint96 amount) external nonReentrant {
        if (amount == 0) revert ZeroAmount();
        StakeInfo storage s = _stakes[msg.sender][role];
        uint256 oldWeight = role == Role.Verifier ? verifierWeight(msg.sender) : 0;
        uint256 total = uint256(s.staked) + amount;
        uint256 minimum = minStake(role);
        if (total < minimum) revert StakeBelowMinimum(msg.sender, role, total, minimum);
        s.staked = SafeCast.toUint96(total);
        if (role == Role.Verifier) _reweigh(msg.sender, oldWeight, s);
        emit Staked(msg.sender, role, amount, total);
        token.safeTransferFrom(msg.sender, address(this), amount);
    }

    /// @inheritdoc IStakeManager
    function requestUnstake(Role role, uint96 amount) external {
        if (amount == 0) revert ZeroAmount();
        StakeInfo storage s = _stakes[msg.sender][role];
        uint256 free = s.staked - s.locked;
        // INVARIANT: locked stake never starts unbonding.
        if (amount > free) revert InsufficientStake(msg.sender, role, free, amount);
        uint256 oldWeight = role == Role.Verifier ? verifierWeight(msg.sender) : 0;
        uint256 remaining = s.staked - amount;
        uint256 minimum = minStake(role);
        if (remaining != 0 && remaining < minimum) revert StakeBelowMinimum(msg.sender, role, remaining, minimum);
        uint256 releaseAt = block.timestamp + unbondingDelay;
        // remaining <= staked: fits
        // forge-lint: disable-next-line(unsafe-typecast)
        s.staked = uint96(remaining);
        s.releaseAt = SafeCast.toUint40(releaseAt);
        s.unbonding += amount; // checked: unbonding + staked never exceeds the token supply held here
        if (role == Role.Verifier) {
            _unstakedAt[msg.sender] = block.number;
            _reweigh(msg.sender, oldWeight, s);
        }
        emit UnstakeRequested(msg.sender, role, amount, releaseAt);
    }

    /// @inheritdoc IStakeManager
    function withdraw(Role role) external nonReentrant returns (uint256 amount) {
        StakeInfo storage s = _stakes[msg.sender][role];
        amount = s.unbonding;
        if (amount == 0) revert NothingToWithdraw(msg.sender, role);
        if (block.timestamp < s.releaseAt) revert UnbondingNotElapsed(msg.sender, role, s.releaseAt);
        s.unbonding = 0;
        emit Withdrawn(msg.sender, role, amount);
        token.safeTransfer(msg.sender, amount);
    }

    /// @inheritdoc IStakeManager
    function advertise(uint48 maxParams, uint48 maxDatasetBytes, uint32 maxSteps, uint64 flops, Device device) external {
        uint256 staked = _stakes[msg.sender][Role.Solver].staked;
        // INVARIANT: only a solver eligible when it advertises writes capabilities (readers also
        // check eligibility now: the stake may have left since).
        if (staked < _minSolverStake) revert NotEligible(msg.sender, Role.Solver, staked, _minSolverStake);
        if (maxParams == 0) revert ZeroCapability("maxParams");
        if (maxDatasetBytes == 0) revert ZeroCapability("maxDatasetBytes");
        if (maxSteps == 0) revert ZeroCapability("maxSteps");
        if (flops == 0) revert ZeroCapability("flops");
        _capabilities[msg.sender] =
            Capabilities(maxParams, maxDatasetBytes, maxSteps, flops, device, SafeCast.toUint40(block.timestamp));
        emit CapabilitiesAdvertised(msg.sender, maxParams, maxDatasetBytes, maxSteps, flops, device);
    }

    /// @inheritdoc IStakeManager
    function announce(string calldata url) external {
        // INVARIANT: a stored gateway URL is at most MAX_GATEWAY_URL_BYTES long (readers bound what they read).
        if (bytes(url).length > MAX_GATEWAY_URL_BYTES) {
            revert GatewayUrlTooLong(bytes(url).length, MAX_GATEWAY_URL_BYTES);
        }
        _gateways[msg.sender] = url;
        emit GatewayAnnounced(msg.sender, url);
    }

    // ------------------------------------------------------------------ wiring

    /// @inheritdoc IStakeManager
    function authorize(address[] calldata protocols) external {
        if (msg.sender != wiringAdmin) revert NotAuthorized(msg.sender);
        // INVARIANT: the protocol set is fixed once.
        if (wired) revert AlreadyWired();
        if (protocols.length == 0) revert ZeroAmount();
        wired = true;
        for (uint256 i; i < protocols.length; ++i) {
            if (protocols[i] == address(0)) revert ZeroAddress();
            isProtocol[protocols[i]] = true;
        }
        emit ProtocolsAuthorized(protocols);
    }

    // ------------------------------------------------------------------ protocol contracts only

    /// @inheritdoc IStakeManager
    function lock(address account, Role role, uint256 amount) external onlyProtocol {
        _lock(account, role, amount);
    }

    /// @inheritdoc IStakeManager
    function unlock(address account, Role role, uint256 amount) external onlyProtocol {
        StakeInfo storage s = _stakes[account][role];
        uint256 locked = s.locked;
        if (amount > locked) revert InsufficientLocked(account, role, locked, amount);
        unchecked {
            // amount <= locked, checked above
            // forge-lint: disable-next-line(unsafe-typecast)
            s.locked = uint96(locked - amount);
        }
        if (role == Role.Verifier) _recordFree(account, s);
    }

    /// @inheritdoc IStakeManager
    function slash(address account, Role role, uint256 amount, address recipient)
        external
        onlyProtocol
        nonReentrant
    {
        if (recipient == address(0)) revert ZeroAddress();
        StakeInfo storage s = _stakes[account][role];
        uint256 locked = s.locked;
        // INVARIANT: only locked stake (a bond) is ever slashed.
        if (amount > locked) revert InsufficientLocked(account, role, locked, amount);
        uint256 oldWeight = role == Role.Verifier ? verifierWeight(account) : 0;
        uint256 remaining;
        unchecked {
            // amount <= locked <= staked, checked above
            // forge-lint: disable-next-line(unsafe-typecast)
            s.locked = uint96(locked - amount);
            remaining = s.staked - amount;
        }
        // remaining < staked: fits
        // forge-lint: disable-next-line(unsafe-typecast)
        s.staked = uint96(remaining);
        if (role == Role.Verifier) _reweigh(account, oldWeight, s);
        emit StakeSlashed(account, role, amount, recipient);
        token.safeTransfer(recipient, amount);
    }

    /// @inheritdoc IStakeManager
    /// @dev Every input is read as of the end of block `anchor` (weights, slot owners, free stake),
    ///      so the candidate is a function of the seed and of state fixed before the seed's entropy
    ///      existed: a stake, unstake, lock or slash after the anchor, or the time of the call, does
    ///      not change who is drawn. The first try draws over all verifiers and is accepted unless the
    ///      candidate is excluded or had less than `bond` free at the anchor (the common case costs no
    ///      exclusion lookups). After a rejection, each further try draws over the tree with the
    ///      rejected and excluded weight removed, so every acceptable verifier v is drawn with
    ///      probability w(v) / (acceptable weight), as by rejection sampling.
    function drawVerifier(bytes32 seed, uint256 anchor, address[] calldata exclude, uint256 bond)
        external
        onlyProtocol
        returns (address verifier, bool locked)
    {
        if (exclude.length > MAX_EXCLUDED) revert TooManyExcluded(exclude.length, MAX_EXCLUDED);
        // INVARIANT: a draw reads only finished blocks, never state its caller can still change.
        if (anchor >= block.number) revert AnchorNotPast(anchor, block.number);
        // anchor < block.number < 2**32 (SafeCast in every checkpoint write): fits
        // forge-lint: disable-next-line(unsafe-typecast)
        uint32 key = uint32(anchor);
        (uint256 size, uint256 total) = _tree.headAt(key);
        if (total == 0) return (address(0), false);
        uint256 slot = _tree.findAt(uint256(keccak256(abi.encode(seed, 0))) % total, size, key);
        verifier = _accountAt(slot, key);
        if (!_acceptable(verifier, exclude, bond, key)) {
            verifier = _drawAgain(seed, key, slot, exclude, bond);
            if (verifier == address(0)) return (address(0), false);
        }
        return (verifier, _lockDrawn(verifier, bond, anchor));
    }

    // ------------------------------------------------------------------ internals

    /// Tries 1..MAX_DRAW_TRIES-1 of a draw whose first candidate (in `rejected`) was not acceptable:
    /// each draws over the anchored tree with the rejected and excluded weight removed.
    function _drawAgain(bytes32 seed, uint32 key, uint256 rejected, address[] calldata exclude, uint256 bond)
        private
        view
        returns (address)
    {
        Excluded memory ex = _excluded(rejected, exclude, key);
        for (uint256 t = 1; t < MAX_DRAW_TRIES; ++t) {
            uint256 slot = _pick(ex, seed, t, key);
            if (slot == 0) return address(0);
            address candidate = _accountAt(slot, key);
            if (_acceptable(candidate, exclude, bond, key)) return candidate;
            _exclude(ex, slot, key);
        }
        return address(0);
    }

    /// Try `t` of a redraw: the slot drawn over the anchored tree less the excluded weight (0 when
    /// nothing is left).
    function _pick(Excluded memory ex, bytes32 seed, uint256 t, uint32 key) private view returns (uint256) {
        (uint256 size, uint256 total) = _tree.headAt(key);
        if (total <= ex.weight) return 0;
        uint256 target = uint256(keccak256(abi.encode(seed, t))) % (total - ex.weight);
        return _tree.findAt(_unexcluded(ex, target, key), size, key);
    }

    /// The exclusion list of a redraw: the rejected slot and the excluded accounts' slots at the
    /// anchor (sorted, at most MAX_EXCLUDED + MAX_DRAW_TRIES).
    function _excluded(uint256 rejected, address[] calldata exclude, uint32 key)
        private
        view
        returns (Excluded memory ex)
    {
        uint256 room = exclude.length + MAX_DRAW_TRIES;
        ex = Excluded(new uint256[](room), new uint256[](room), 0, 0);
        _exclude(ex, rejected, key);
        for (uint256 i; i < exclude.length; ++i) {
            // An excluded account that held another slot at the anchor is rejected when drawn.
            uint256 own = _slotOf[exclude[i]];
            if (own != 0 && _accountAt(own, key) == exclude[i]) _exclude(ex, own, key);
        }
    }

    /// Maps a target from the reduced range (excluded blocks removed) to the full range: walking the
    /// excluded slots in ascending order, skips each block that starts at or before the target.
    function _unexcluded(Excluded memory ex, uint256 target, uint32 key) private view returns (uint256) {
        for (uint256 j; j < ex.count; ++j) {
            if (_tree.prefixAt(ex.slots[j] - 1, key) <= target) target += ex.weights[j];
        }
        return target;
    }

    /// Whether a drawn account may serve: not excluded, and `bond` of free stake at the anchor.
    function _acceptable(address candidate, address[] calldata exclude, uint256 bond, uint32 key)
        private
        view
        returns (bool)
    {
        return !_listed(exclude, candidate) && _freeAt[candidate].upperLookupRecent(key) >= bond;
    }

    /// Locks the bond of a drawn verifier, accepted on its free stake at the anchor. A verifier that
    /// asked to unstake after the anchor has the shortfall taken back from unbonding (leaving after
    /// seeing the entropy does not dodge the draw). Returns false only if the stake was locked by
    /// other draws since the anchor (or the unbonding already withdrawn): the caller draws again
    /// from fresh entropy.
    function _lockDrawn(address candidate, uint256 bond, uint256 anchor) private returns (bool) {
        StakeInfo storage s = _stakes[candidate][Role.Verifier];
        uint256 free = s.staked - s.locked;
        if (free < bond && _unstakedAt[candidate] > anchor) {
            uint256 back = bond - free;
            if (back > s.unbonding) back = s.unbonding;
            uint256 oldWeight = verifierWeight(candidate);
            // back <= unbonding, and staked + unbonding fits (both were staked amounts)
            // forge-lint: disable-next-line(unsafe-typecast)
            s.unbonding -= uint96(back);
            s.staked = SafeCast.toUint96(s.staked + back);
            _reweigh(candidate, oldWeight, s);
            emit UnstakeReclaimed(candidate, back);
            free += back;
        }
        if (free < bond) return false;
        // locked + bond <= staked: fits
        // forge-lint: disable-next-line(unsafe-typecast)
        s.locked = uint96(s.locked + bond);
        _recordFree(candidate, s);
        return true;
    }

    function _listed(address[] calldata list, address account) private pure returns (bool) {
        for (uint256 i; i < list.length; ++i) {
            if (list[i] == account) return true;
        }
        return false;
    }

    function _lock(address account, Role role, uint256 amount) private {
        StakeInfo storage s = _stakes[account][role];
        uint256 staked = s.staked;
        uint256 minimum = minStake(role);
        if (staked < minimum) revert InsufficientStake(account, role, staked, minimum);
        uint256 locked = s.locked;
        // INVARIANT: locked <= staked.
        if (amount > staked - locked) revert InsufficientStake(account, role, staked - locked, amount);
        // locked + amount <= staked: fits
        // forge-lint: disable-next-line(unsafe-typecast)
        s.locked = uint96(locked + amount);
        if (role == Role.Verifier) _recordFree(account, s);
    }

    /// Adds `slot` with its weight at the anchor to the sorted exclusion list (skips weightless
    /// slots and duplicates).
    function _exclude(Excluded memory ex, uint256 slot, uint32 key) private view {
        uint256 weight = _slotWeightAt(slot, key);
        if (weight == 0) return;
        uint256 count = ex.count;
        uint256 i = count;
        while (i > 0 && ex.slots[i - 1] >= slot) {
            if (ex.slots[i - 1] == slot) return;
            --i;
        }
        for (uint256 j = count; j > i; --j) {
            ex.slots[j] = ex.slots[j - 1];
            ex.weights[j] = ex.weights[j - 1];
        }
        ex.slots[i] = slot;
        ex.weights[i] = weight;
        ex.count = count + 1;
        ex.weight += weight;
    }

    function _slotWeightAt(uint256 slot, uint32 key) private view returns (uint256) {
        return _tree.prefixAt(slot, key) - _tree.prefixAt(slot - 1, key);
    }

    function _accountAt(uint256 slot, uint32 key) private view returns (address) {
        return address(uint160(_slotAccount[slot].upperLookupRecent(key)));
    }

    /// Checkpoints the free verifier stake of `account` for this block.
    function _recordFree(address account, StakeInfo storage s) private {
        _freeAt[account].push(SafeCast.toUint32(block.number), s.staked - s.locked);
    }

    /// Moves a verifier's draw weight from `oldWeight` to the weight of its stake `s` and records its
    /// free stake; takes a slot on first stake and frees it when the stake reaches zero.
    function _reweigh(address account, uint256 oldWeight, StakeInfo storage s) private {
        _recordFree(account, s);
        uint256 staked = s.staked;
        uint256 newWeight = staked >= _minVerifierStake ? staked : 0;
        uint256 slot = _slotOf[account];
        if (slot == 0) {
            if (staked == 0) return;
            uint256 free = _freeSlots.length;
            if (free != 0) {
                slot = _freeSlots[free - 1];
                _freeSlots.pop();
            } else {
                if (_tree.size() == MAX_VERIFIERS) revert TooManyVerifiers(MAX_VERIFIERS);
                slot = _tree.append();
            }
            _slotOf[account] = slot;
            _slotAccount[slot].push(SafeCast.toUint32(block.number), uint160(account));
        }
        if (newWeight > oldWeight) _tree.add(slot, newWeight - oldWeight);
        else if (newWeight < oldWeight) _tree.sub(slot, oldWeight - newWeight);
        if (staked == 0) {
            delete _slotOf[account];
            _slotAccount[slot].push(SafeCast.toUint32(block.number), 0);
            _freeSlots.push(slot);
        }
    }
}
