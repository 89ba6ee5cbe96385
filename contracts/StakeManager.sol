// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";
import {IStakeManager} from "./interfaces/IStakeManager.sol";
import {Role, StakeInfo} from "./Types.sol";
import {SumTree} from "./libraries/SumTree.sol";

// Deadlines are timestamps by design: windows are minutes to days, far above the seconds a
// block producer can shift a timestamp.
// forge-lint: disable-next-item(block-timestamp)
/// @title StakeManager
/// @notice Stakes per (account, role), an unbonding delay, and the protocol contracts' bonds:
///         lock / unlock / slash, and a stake-weighted verifier draw over a Fenwick sum tree.
/// @dev Authorization: the deployer is the wiring admin and names the protocol contracts once with
///      `authorize`; the set is fixed from then on. Token balance of this contract ==
///      sum over (account, role) of staked + unbonding (tests/forge/invariant checks it).
contract StakeManager is IStakeManager, ReentrancyGuardTransient {
    using SafeERC20 for IERC20;
    using SumTree for SumTree.Tree;

    /// @inheritdoc IStakeManager
    uint256 public constant MAX_VERIFIERS = 1024;
    /// @inheritdoc IStakeManager
    uint256 public constant MAX_DRAW_TRIES = 4;
    /// @inheritdoc IStakeManager
    uint256 public constant MAX_EXCLUDED = 16;

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

    /// Verifier draw tree: slot i (1-based) holds the weight of _slotAccount[i].
    SumTree.Tree private _tree;
    mapping(address account => uint256 slot) private _slotOf;
    mapping(uint256 slot => address account) private _slotAccount;
    uint256[] private _freeSlots;

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
        return _tree.total;
    }

    /// @inheritdoc IStakeManager
    function verifierSlotCount() external view returns (uint256) {
        return _tree.size;
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
        if (role == Role.Verifier) _reweigh(msg.sender, oldWeight, total);
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
        if (role == Role.Verifier) _reweigh(msg.sender, oldWeight, remaining);
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
        if (role == Role.Verifier) _reweigh(account, oldWeight, remaining);
        emit StakeSlashed(account, role, amount, recipient);
        token.safeTransfer(recipient, amount);
    }

    /// @inheritdoc IStakeManager
    /// @dev The first try draws over all verifiers and is accepted unless the candidate is excluded or
    ///      short of free stake (the common case costs no exclusion lookups). After a rejection, each
    ///      further try draws over the tree with the rejected and excluded weight removed, so every
    ///      acceptable verifier v is drawn with probability w(v) / (acceptable weight), as by
    ///      rejection sampling.
    function drawVerifier(bytes32 seed, address[] calldata exclude, uint256 bond)
        external
        onlyProtocol
        returns (address verifier)
    {
        if (exclude.length > MAX_EXCLUDED) revert TooManyExcluded(exclude.length, MAX_EXCLUDED);
        uint256 total = _tree.total;
        if (total == 0) return address(0);
        address candidate = _slotAccount[_tree.find(uint256(keccak256(abi.encode(seed, 0))) % total)];
        if (!_listed(exclude, candidate) && _tryLock(candidate, bond)) return candidate;

        // Excluded slots with their weights, sorted by slot (at most MAX_EXCLUDED + MAX_DRAW_TRIES).
        uint256[] memory slots = new uint256[](exclude.length + MAX_DRAW_TRIES);
        uint256[] memory weights = new uint256[](slots.length);
        uint256 count;
        uint256 excludedWeight;
        (count, excludedWeight) = _exclude(slots, weights, count, excludedWeight, candidate);
        for (uint256 i; i < exclude.length; ++i) {
            (count, excludedWeight) = _exclude(slots, weights, count, excludedWeight, exclude[i]);
        }
        for (uint256 t = 1; t < MAX_DRAW_TRIES; ++t) {
            if (total <= excludedWeight) return address(0);
            uint256 target = uint256(keccak256(abi.encode(seed, t))) % (total - excludedWeight);
            // Map the target from the reduced range (excluded blocks removed) to the full range:
            // walking the excluded slots in ascending order, skip each block that starts at or
            // before the target.
            for (uint256 j; j < count; ++j) {
                if (_tree.prefix(slots[j] - 1) <= target) target += weights[j];
            }
            candidate = _slotAccount[_tree.find(target)];
            if (_tryLock(candidate, bond)) return candidate;
            (count, excludedWeight) = _exclude(slots, weights, count, excludedWeight, candidate);
        }
        return address(0);
    }

    // ------------------------------------------------------------------ internals

    /// Locks `bond` of a drawn verifier's stake if it has that much free; drawn verifiers have
    /// weight, so they meet the minimum.
    function _tryLock(address candidate, uint256 bond) private returns (bool) {
        StakeInfo storage s = _stakes[candidate][Role.Verifier];
        uint256 locked = s.locked;
        if (s.staked - locked < bond) return false;
        // locked + bond <= staked: fits
        // forge-lint: disable-next-line(unsafe-typecast)
        s.locked = uint96(locked + bond);
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
    }

    /// Adds `account`'s slot to the sorted exclusion list (skips accounts without weight and duplicates).
    function _exclude(
        uint256[] memory slots,
        uint256[] memory weights,
        uint256 count,
        uint256 excludedWeight,
        address account
    ) private view returns (uint256, uint256) {
        uint256 slot = _slotOf[account];
        uint256 weight = slot == 0 ? 0 : verifierWeight(account);
        if (weight == 0) return (count, excludedWeight);
        uint256 i = count;
        while (i > 0 && slots[i - 1] >= slot) {
            if (slots[i - 1] == slot) return (count, excludedWeight);
            --i;
        }
        for (uint256 j = count; j > i; --j) {
            slots[j] = slots[j - 1];
            weights[j] = weights[j - 1];
        }
        slots[i] = slot;
        weights[i] = weight;
        return (count + 1, excludedWeight + weight);
    }

    /// Moves a verifier's draw weight from `oldWeight` to the weight of a stake of `staked`;
    /// takes a slot on first stake and frees it when the stake reaches zero.
    function _reweigh(address account, uint256 oldWeight, uint256 staked) private {
        uint256 newWeight = staked >= _minVerifierStake ? staked : 0;
        uint256 slot = _slotOf[account];
        if (slot == 0) {
            if (staked == 0) return;
            uint256 free = _freeSlots.length;
            if (free != 0) {
                slot = _freeSlots[free - 1];
                _freeSlots.pop();
            } else {
                if (_tree.size == MAX_VERIFIERS) revert TooManyVerifiers(MAX_VERIFIERS);
                slot = _tree.append();
            }
            _slotOf[account] = slot;
            _slotAccount[slot] = account;
        }
        if (newWeight > oldWeight) _tree.add(slot, newWeight - oldWeight);
        else if (newWeight < oldWeight) _tree.sub(slot, oldWeight - newWeight);
        if (staked == 0) {
            delete _slotOf[account];
            delete _slotAccount[slot];
            _freeSlots.push(slot);
        }
    }
}
