// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Fixture} from "./utils/Fixture.sol";
import {KeyRegistry} from "../../contracts/KeyRegistry.sol";
import {IKeyRegistry} from "../../contracts/interfaces/IKeyRegistry.sol";
import {IStakeManager} from "../../contracts/interfaces/IStakeManager.sol";
import {Role} from "../../contracts/Types.sol";

contract KeyRegistryTest is Fixture {
    KeyRegistry internal keys;
    address internal alice = address(0xA11CE);
    bytes32 internal constant KEY1 = keccak256("x25519 public key 1");
    bytes32 internal constant KEY2 = keccak256("x25519 public key 2");

    function setUp() public {
        _deploy();
        keys = new KeyRegistry(stakes);
        _fund(alice);
    }

    function _key(address account) internal view returns (bytes32 key, uint64 version) {
        return keys.keyOf(account);
    }

    // ------------------------------------------------------------------ construction

    function test_constructor_rejects_zero_stake_manager() public {
        vm.expectRevert(IKeyRegistry.ZeroAddress.selector);
        new KeyRegistry(IStakeManager(address(0)));
    }

    function test_stake_manager_is_readable() public view {
        assertEq(address(keys.stakeManager()), address(stakes), "stake manager");
    }

    // ------------------------------------------------------------------ who may register

    function test_unstaked_account_is_refused() public {
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(IKeyRegistry.NotStaked.selector, alice));
        keys.registerKey(KEY1);
        (bytes32 key, uint64 version) = _key(alice);
        assertEq(key, bytes32(0), "no key");
        assertEq(version, 0, "no version");
    }

    function test_each_role_admits_a_registration() public {
        Role[3] memory roles = [Role.Solver, Role.Verifier, Role.Whistleblower];
        uint96[3] memory amounts = [MIN_SOLVER_STAKE, MIN_VERIFIER_STAKE, MIN_WHISTLEBLOWER_STAKE];
        for (uint256 i = 0; i < roles.length; i++) {
            address account = address(uint160(0xC0FFEE + i));
            _fund(account);
            _stake(account, roles[i], amounts[i]);
            vm.prank(account);
            assertEq(keys.registerKey(KEY1), 1, "first version");
            (bytes32 key,) = _key(account);
            assertEq(key, KEY1, "registered");
        }
    }

    function test_zero_key_is_refused_even_when_staked() public {
        _stake(alice, Role.Verifier, MIN_VERIFIER_STAKE);
        vm.prank(alice);
        vm.expectRevert(IKeyRegistry.ZeroKey.selector);
        keys.registerKey(bytes32(0));
    }

    function test_unbonding_stake_does_not_admit() public {
        _stake(alice, Role.Whistleblower, MIN_WHISTLEBLOWER_STAKE);
        vm.prank(alice);
        stakes.requestUnstake(Role.Whistleblower, MIN_WHISTLEBLOWER_STAKE);
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(IKeyRegistry.NotStaked.selector, alice));
        keys.registerKey(KEY1);
    }

    // ------------------------------------------------------------------ registration and rotation

    function test_register_emits_and_reads_back() public {
        _stake(alice, Role.Solver, MIN_SOLVER_STAKE);
        vm.expectEmit(true, false, false, true, address(keys));
        emit IKeyRegistry.KeyRegistered(alice, KEY1, 1);
        vm.prank(alice);
        keys.registerKey(KEY1);
        (bytes32 key, uint64 version) = _key(alice);
        assertEq(key, KEY1, "key");
        assertEq(version, 1, "version");
    }

    function test_rotation_replaces_the_key_and_counts_versions() public {
        _stake(alice, Role.Solver, MIN_SOLVER_STAKE);
        vm.startPrank(alice);
        keys.registerKey(KEY1);
        vm.expectEmit(true, false, false, true, address(keys));
        emit IKeyRegistry.KeyRegistered(alice, KEY2, 2);
        assertEq(keys.registerKey(KEY2), 2, "second version");
        assertEq(keys.registerKey(KEY1), 3, "a key used before is a new version");
        vm.stopPrank();
        (bytes32 key, uint64 version) = _key(alice);
        assertEq(key, KEY1, "latest key");
        assertEq(version, 3, "latest version");
    }

    function test_a_key_outlives_the_stake_that_admitted_it_but_no_rotation_without_stake() public {
        _stake(alice, Role.Solver, MIN_SOLVER_STAKE);
        vm.startPrank(alice);
        keys.registerKey(KEY1);
        stakes.requestUnstake(Role.Solver, MIN_SOLVER_STAKE);
        vm.expectRevert(abi.encodeWithSelector(IKeyRegistry.NotStaked.selector, alice));
        keys.registerKey(KEY2);
        vm.stopPrank();
        (bytes32 key, uint64 version) = _key(alice);
        assertEq(key, KEY1, "kept");
        assertEq(version, 1, "kept version");
    }

    function test_accounts_are_separate() public {
        _stake(alice, Role.Solver, MIN_SOLVER_STAKE);
        vm.prank(alice);
        keys.registerKey(KEY1);
        (bytes32 key, uint64 version) = _key(stranger);
        assertEq(key, bytes32(0), "stranger has no key");
        assertEq(version, 0, "stranger has no version");
    }

    function testFuzz_any_nonzero_key_round_trips(bytes32 key, uint8 rotations) public {
        vm.assume(key != bytes32(0));
        _stake(alice, Role.Verifier, MIN_VERIFIER_STAKE);
        uint256 n = bound(rotations, 1, 8);
        vm.startPrank(alice);
        for (uint256 i = 1; i <= n; i++) {
            assertEq(keys.registerKey(key), i, "version counts registrations");
        }
        vm.stopPrank();
        (bytes32 got, uint64 version) = _key(alice);
        assertEq(got, key, "key");
        assertEq(version, n, "version");
    }
}
