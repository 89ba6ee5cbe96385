// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Fixture} from "./utils/Fixture.sol";
import {StakeManager} from "../../contracts/StakeManager.sol";
import {IStakeManager} from "../../contracts/interfaces/IStakeManager.sol";
import {VeriToken} from "../../contracts/VeriToken.sol";
import {Capabilities, Device, Role, StakeInfo} from "../../contracts/Types.sol";
import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";

contract StakeManagerTest is Fixture {
    address internal alice = address(0xA11CE);
    address internal bob = address(0xB0B);

    function setUp() public {
        _deploy();
        _fund(alice);
        _fund(bob);
        _fund(game);
    }

    // ------------------------------------------------------------------ construction and wiring

    function test_constructor_rejects_zero_minimum() public {
        vm.expectRevert(_withName(IStakeManager.InvalidParameter.selector, "minStake"));
        new StakeManager(token, [uint96(1), 0, 1], 1);
    }

    function test_constructor_rejects_zero_token() public {
        vm.expectRevert(IStakeManager.ZeroAddress.selector);
        new StakeManager(IERC20(address(0)), [uint96(1), 1, 1], 1);
    }

    function test_parameters_are_readable() public view {
        assertEq(stakes.minStake(Role.Solver), MIN_SOLVER_STAKE, "solver min");
        assertEq(stakes.minStake(Role.Verifier), MIN_VERIFIER_STAKE, "verifier min");
        assertEq(stakes.minStake(Role.Whistleblower), MIN_WHISTLEBLOWER_STAKE, "whistleblower min");
        assertEq(stakes.unbondingDelay(), UNBONDING, "unbonding");
        assertEq(address(stakes.token()), address(token), "token");
        assertEq(stakes.wiringAdmin(), address(this), "admin");
        assertTrue(stakes.wired(), "wired");
        assertTrue(stakes.isProtocol(address(market)) && stakes.isProtocol(game), "protocols");
        assertTrue(!stakes.isProtocol(alice), "alice is no protocol");
    }

    function test_authorize_twice_reverts() public {
        address[] memory protocols = new address[](1);
        protocols[0] = alice;
        vm.expectRevert(IStakeManager.AlreadyWired.selector);
        stakes.authorize(protocols);
    }

    function test_authorize_by_stranger_reverts() public {
        StakeManager fresh = new StakeManager(token, [uint96(1), 1, 1], 1);
        address[] memory protocols = new address[](1);
        protocols[0] = alice;
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(IStakeManager.NotAuthorized.selector, alice));
        fresh.authorize(protocols);
    }

    function test_authorize_rejects_empty_and_zero() public {
        StakeManager fresh = new StakeManager(token, [uint96(1), 1, 1], 1);
        vm.expectRevert(IStakeManager.ZeroAmount.selector);
        fresh.authorize(new address[](0));
        vm.expectRevert(IStakeManager.ZeroAddress.selector);
        fresh.authorize(new address[](1));
    }

    // ------------------------------------------------------------------ stake

    function test_stake_moves_tokens_and_emits() public {
        vm.expectEmit(true, true, false, true, address(stakes));
        emit IStakeManager.Staked(alice, Role.Solver, 150 ether, 150 ether);
        _stake(alice, Role.Solver, 150 ether);
        assertEq(_staked(alice, Role.Solver), 150 ether, "staked");
        assertEq(_bal(address(stakes)), 150 ether, "held");
        assertEq(_bal(alice), FUND - 150 ether, "paid");
        assertTrue(stakes.isEligible(alice, Role.Solver), "eligible");
        assertTrue(!stakes.isEligible(alice, Role.Verifier), "roles are separate");
    }

    function testFuzz_stake_below_minimum_reverts_and_moves_nothing(uint96 amount) public {
        amount = uint96(bound(amount, 1, MIN_SOLVER_STAKE - 1));
        vm.prank(alice);
        vm.expectRevert(
            abi.encodeWithSelector(
                IStakeManager.StakeBelowMinimum.selector, alice, Role.Solver, amount, MIN_SOLVER_STAKE
            )
        );
        stakes.stake(Role.Solver, amount);
        assertEq(_bal(alice), FUND, "balance unchanged");
    }

    function test_stake_zero_reverts() public {
        vm.prank(alice);
        vm.expectRevert(IStakeManager.ZeroAmount.selector);
        stakes.stake(Role.Solver, 0);
    }

    function test_top_up_below_minimum_is_allowed_once_above() public {
        _stake(alice, Role.Whistleblower, 50 ether);
        _stake(alice, Role.Whistleblower, 1);
        assertEq(_staked(alice, Role.Whistleblower), 50 ether + 1, "topped up");
    }

    // ------------------------------------------------------------------ unstake and withdraw

    function test_unstake_then_withdraw_after_delay() public {
        _stake(alice, Role.Solver, 300 ether);
        vm.prank(alice);
        stakes.requestUnstake(Role.Solver, 100 ether);
        StakeInfo memory s = stakes.stakeOf(alice, Role.Solver);
        assertEq(s.staked, 200 ether, "staked");
        assertEq(s.unbonding, 100 ether, "unbonding");
        assertEq(s.releaseAt, block.timestamp + UNBONDING, "release");

        vm.warp(block.timestamp + UNBONDING - 1);
        vm.prank(alice);
        vm.expectRevert(
            abi.encodeWithSelector(IStakeManager.UnbondingNotElapsed.selector, alice, Role.Solver, s.releaseAt)
        );
        stakes.withdraw(Role.Solver);

        vm.warp(block.timestamp + 1);
        vm.prank(alice);
        assertEq(stakes.withdraw(Role.Solver), 100 ether, "withdrawn");
        assertEq(_bal(alice), FUND - 200 ether, "paid back");
        assertEq(_bal(address(stakes)), 200 ether, "held");

        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(IStakeManager.NothingToWithdraw.selector, alice, Role.Solver));
        stakes.withdraw(Role.Solver);
    }

    function test_unstake_leaving_dust_reverts() public {
        _stake(alice, Role.Solver, 150 ether);
        vm.prank(alice);
        vm.expectRevert(
            abi.encodeWithSelector(
                IStakeManager.StakeBelowMinimum.selector, alice, Role.Solver, 99 ether, MIN_SOLVER_STAKE
            )
        );
        stakes.requestUnstake(Role.Solver, 51 ether);
        vm.prank(alice);
        stakes.requestUnstake(Role.Solver, 150 ether); // all of it is fine
        assertEq(_staked(alice, Role.Solver), 0, "all unbonding");
    }

    function testFuzz_locked_stake_never_unbonds(uint96 lockAmount, uint96 unstakeAmount) public {
        _stake(alice, Role.Solver, 1000 ether);
        lockAmount = uint96(bound(lockAmount, 1, 1000 ether));
        unstakeAmount = uint96(bound(unstakeAmount, 1000 ether - lockAmount + 1, 1000 ether));
        vm.prank(game);
        stakes.lock(alice, Role.Solver, lockAmount);
        vm.prank(alice);
        vm.expectRevert(
            abi.encodeWithSelector(
                IStakeManager.InsufficientStake.selector, alice, Role.Solver, 1000 ether - lockAmount, unstakeAmount
            )
        );
        stakes.requestUnstake(Role.Solver, unstakeAmount);
        assertEq(stakes.freeStake(alice, Role.Solver), 1000 ether - lockAmount, "free");
    }

    function test_unstake_restarts_the_unbonding_clock() public {
        _stake(alice, Role.Solver, 400 ether);
        vm.prank(alice);
        stakes.requestUnstake(Role.Solver, 100 ether);
        vm.warp(block.timestamp + UNBONDING / 2);
        vm.prank(alice);
        stakes.requestUnstake(Role.Solver, 100 ether);
        StakeInfo memory s = stakes.stakeOf(alice, Role.Solver);
        assertEq(s.unbonding, 200 ether, "both pending");
        assertEq(s.releaseAt, block.timestamp + UNBONDING, "clock restarted");
    }

    // ------------------------------------------------------------------ lock / unlock / slash

    function test_protocol_functions_reject_strangers() public {
        _stake(alice, Role.Solver, 100 ether);
        vm.startPrank(bob);
        vm.expectRevert(abi.encodeWithSelector(IStakeManager.NotAuthorized.selector, bob));
        stakes.lock(alice, Role.Solver, 1);
        vm.expectRevert(abi.encodeWithSelector(IStakeManager.NotAuthorized.selector, bob));
        stakes.unlock(alice, Role.Solver, 1);
        vm.expectRevert(abi.encodeWithSelector(IStakeManager.NotAuthorized.selector, bob));
        stakes.slash(alice, Role.Solver, 1, bob);
        vm.expectRevert(abi.encodeWithSelector(IStakeManager.NotAuthorized.selector, bob));
        stakes.drawVerifier(bytes32(0), 0, new address[](0), 0);
        vm.stopPrank();
    }

    function test_lock_requires_minimum_and_free_stake() public {
        vm.prank(game);
        vm.expectRevert(
            abi.encodeWithSelector(IStakeManager.InsufficientStake.selector, alice, Role.Solver, 0, MIN_SOLVER_STAKE)
        );
        stakes.lock(alice, Role.Solver, 1);
        _stake(alice, Role.Solver, 100 ether);
        vm.prank(game);
        vm.expectRevert(
            abi.encodeWithSelector(IStakeManager.InsufficientStake.selector, alice, Role.Solver, 100 ether, 101 ether)
        );
        stakes.lock(alice, Role.Solver, 101 ether);
    }

    function test_unlock_and_slash_beyond_locked_revert() public {
        _stake(alice, Role.Solver, 100 ether);
        vm.startPrank(game);
        stakes.lock(alice, Role.Solver, 10 ether);
        vm.expectRevert(
            abi.encodeWithSelector(IStakeManager.InsufficientLocked.selector, alice, Role.Solver, 10 ether, 11 ether)
        );
        stakes.unlock(alice, Role.Solver, 11 ether);
        vm.expectRevert(
            abi.encodeWithSelector(IStakeManager.InsufficientLocked.selector, alice, Role.Solver, 10 ether, 11 ether)
        );
        stakes.slash(alice, Role.Solver, 11 ether, bob);
        vm.expectRevert(IStakeManager.ZeroAddress.selector);
        stakes.slash(alice, Role.Solver, 1 ether, address(0));
        vm.stopPrank();
    }

    function test_slash_pays_recipient_from_locked() public {
        _stake(alice, Role.Solver, 100 ether);
        vm.startPrank(game);
        stakes.lock(alice, Role.Solver, 10 ether);
        vm.expectEmit(true, true, true, true, address(stakes));
        emit IStakeManager.StakeSlashed(alice, Role.Solver, 4 ether, bob);
        stakes.slash(alice, Role.Solver, 4 ether, bob);
        stakes.unlock(alice, Role.Solver, 6 ether);
        vm.stopPrank();
        StakeInfo memory s = stakes.stakeOf(alice, Role.Solver);
        assertEq(s.staked, 96 ether, "staked");
        assertEq(s.locked, 0, "locked");
        assertEq(_bal(bob), FUND + 4 ether, "recipient paid");
        assertEq(_bal(address(stakes)), 96 ether, "held");
        assertTrue(!stakes.isEligible(alice, Role.Solver), "below minimum after slash");
    }

    // ------------------------------------------------------------------ verifier draw

    function test_draw_with_no_verifiers_returns_zero() public {
        assertEq(_draw(keccak256("s"), new address[](0), 0), address(0), "none");
    }

    function test_draw_locks_bond_and_respects_exclusion() public {
        _stake(alice, Role.Verifier, 100 ether);
        _stake(bob, Role.Verifier, 900 ether);
        address[] memory exclude = new address[](1);
        exclude[0] = bob;
        for (uint256 i; i < 20; ++i) {
            address drawn = _draw(keccak256(abi.encode(i)), exclude, 1 ether);
            assertEq(drawn, alice, "only alice is eligible");
        }
        assertEq(_locked(alice, Role.Verifier), 20 ether, "bonds locked");
        assertEq(_locked(bob, Role.Verifier), 0, "bob untouched");
    }

    function test_draw_skips_verifier_without_free_stake() public {
        _stake(alice, Role.Verifier, 100 ether);
        _stake(bob, Role.Verifier, 100 ether);
        vm.prank(game);
        stakes.lock(bob, Role.Verifier, 95 ether);
        for (uint256 i; i < 10; ++i) {
            address drawn = _draw(keccak256(abi.encode(i)), new address[](0), 6 ether);
            assertEq(drawn, alice, "bob lacks free stake");
        }
        vm.prank(game);
        vm.expectRevert(abi.encodeWithSelector(IStakeManager.TooManyExcluded.selector, 17, 16));
        stakes.drawVerifier(bytes32(0), block.number - 1, new address[](17), 0);
    }

    function test_draw_returns_zero_when_all_excluded_or_busy() public {
        _stake(alice, Role.Verifier, 100 ether);
        address[] memory exclude = new address[](2);
        exclude[0] = alice;
        exclude[1] = alice;
        assertEq(_draw(keccak256("x"), exclude, 0), address(0), "excluded");
        assertEq(_draw(keccak256("x"), new address[](0), 101 ether), address(0), "busy");
    }

    function test_draw_frequency_follows_stake() public {
        address[4] memory vs = [address(0x1001), address(0x1002), address(0x1003), address(0x1004)];
        uint96[4] memory weights = [uint96(100 ether), 200 ether, 300 ether, 400 ether];
        for (uint256 i; i < 4; ++i) {
            _fund(vs[i]);
            _stake(vs[i], Role.Verifier, weights[i]);
        }
        uint256[4] memory hits;
        uint256 n = 2000;
        for (uint256 i; i < n; ++i) {
            address drawn = _draw(keccak256(abi.encode("freq", i)), new address[](0), 0);
            for (uint256 j; j < 4; ++j) {
                if (drawn == vs[j]) ++hits[j];
            }
        }
        for (uint256 j; j < 4; ++j) {
            uint256 expected = n * (j + 1) / 10; // weight share (j+1)/10
            // 2000 draws: one binomial standard deviation is at most ~22, allow ~5.
            assertTrue(hits[j] + 110 > expected && hits[j] < expected + 110, "frequency within 5 sigma");
        }
    }

    function testFuzz_draw_never_returns_excluded(uint256 seed, uint8 excludeMask, uint96[6] memory amounts) public {
        address[] memory vs = new address[](6);
        for (uint256 i; i < 6; ++i) {
            // forge-lint: disable-next-line(unsafe-typecast)
            vs[i] = address(uint160(0x2000 + i)); // small constants
            _fund(vs[i]);
            _stake(vs[i], Role.Verifier, uint96(bound(amounts[i], MIN_VERIFIER_STAKE, 10_000 ether)));
        }
        address[] memory exclude = new address[](6);
        uint256 excluded;
        for (uint256 i; i < 6; ++i) {
            if ((excludeMask >> i) & 1 == 1) exclude[excluded++] = vs[i];
        }
        address drawn = _draw(bytes32(seed), exclude, 0);
        if (excluded == 6) {
            assertEq(drawn, address(0), "all excluded");
            return;
        }
        assertTrue(drawn != address(0), "someone drawn");
        for (uint256 i; i < excluded; ++i) {
            assertTrue(drawn != exclude[i], "excluded account drawn");
        }
    }

    function test_verifier_slots_are_reused_and_weights_track_stake() public {
        _stake(alice, Role.Verifier, 100 ether);
        _stake(bob, Role.Verifier, 300 ether);
        assertEq(stakes.totalVerifierWeight(), 400 ether, "total");
        assertEq(stakes.verifierSlotCount(), 2, "slots");
        vm.prank(alice);
        stakes.requestUnstake(Role.Verifier, 100 ether);
        assertEq(stakes.totalVerifierWeight(), 300 ether, "alice left");
        address carol = address(0xCA401);
        _fund(carol);
        _stake(carol, Role.Verifier, 150 ether);
        assertEq(stakes.verifierSlotCount(), 2, "slot reused");
        assertEq(stakes.totalVerifierWeight(), 450 ether, "carol in");
        // A slash below the minimum zeroes the weight but keeps the slot.
        vm.startPrank(game);
        stakes.lock(carol, Role.Verifier, 100 ether);
        stakes.slash(carol, Role.Verifier, 100 ether, game);
        vm.stopPrank();
        assertEq(stakes.verifierWeight(carol), 0, "below minimum");
        assertEq(stakes.totalVerifierWeight(), 300 ether, "carol weightless");
        _stake(carol, Role.Verifier, 50 ether);
        assertEq(stakes.verifierWeight(carol), 100 ether, "back at minimum");
        assertEq(stakes.totalVerifierWeight(), 400 ether, "carol back");
    }

    function test_too_many_verifiers_reverts() public {
        VeriToken big = token;
        for (uint256 i; i < stakes.MAX_VERIFIERS(); ++i) {
            // forge-lint: disable-next-line(unsafe-typecast)
            address v = address(uint160(0x10000 + i)); // small constants
            assertTrue(big.transfer(v, MIN_VERIFIER_STAKE), "funded");
            vm.startPrank(v);
            big.approve(address(stakes), MIN_VERIFIER_STAKE);
            stakes.stake(Role.Verifier, MIN_VERIFIER_STAKE);
            vm.stopPrank();
        }
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(IStakeManager.TooManyVerifiers.selector, 1024));
        stakes.stake(Role.Verifier, MIN_VERIFIER_STAKE);
        // Solvers are not limited.
        _stake(alice, Role.Solver, MIN_SOLVER_STAKE);
    }

    // ------------------------------------------------------------------ draws anchored in the past

    function test_draw_reads_stakes_as_of_the_anchor() public {
        _stake(alice, Role.Verifier, 100 ether);
        _stake(bob, Role.Verifier, 300 ether);
        address carol = address(0xCA401);
        _fund(carol);
        vm.roll(block.number + 1);
        uint256 anchor = block.number - 1;
        address[] memory before = new address[](40);
        for (uint256 i; i < 40; ++i) {
            before[i] = _drawAt(keccak256(abi.encode(i)), anchor, 0);
        }
        // After the anchor: bob tops up, alice leaves (her slot goes to carol), carol stakes big.
        _stake(bob, Role.Verifier, 10_000 ether);
        vm.prank(alice);
        stakes.requestUnstake(Role.Verifier, 100 ether);
        _stake(carol, Role.Verifier, 50_000 ether);
        vm.roll(block.number + 5);
        uint256 aliceDraws;
        uint256 carolDraws;
        for (uint256 i; i < 40; ++i) {
            address drawn = _drawAt(keccak256(abi.encode(i)), anchor, 0);
            assertEq(drawn, before[i], "same draw whatever changed after the anchor");
            if (drawn == alice) ++aliceDraws;
            if (_drawAt(keccak256(abi.encode(i)), block.number - 1, 0) == carol) ++carolDraws;
        }
        assertEq(stakes.totalVerifierWeightAt(anchor), 400 ether, "anchored total");
        assertTrue(aliceDraws > 0 && carolDraws > 30, "both stake sets were drawn from");
    }

    function test_draw_rejects_an_anchor_not_in_the_past() public {
        vm.prank(game);
        vm.expectRevert(abi.encodeWithSelector(IStakeManager.AnchorNotPast.selector, block.number, block.number));
        stakes.drawVerifier(bytes32(0), block.number, new address[](0), 0);
    }

    function test_unstaking_after_the_anchor_does_not_dodge_the_draw() public {
        _stake(alice, Role.Verifier, 100 ether);
        vm.roll(block.number + 1);
        uint256 anchor = block.number - 1;
        vm.prank(alice);
        stakes.requestUnstake(Role.Verifier, 100 ether);
        vm.roll(block.number + 1);
        vm.expectEmit(true, true, true, true, address(stakes));
        emit IStakeManager.UnstakeReclaimed(alice, 10 ether);
        vm.prank(game);
        (address drawn, bool locked) = stakes.drawVerifier(keccak256("d"), anchor, new address[](0), 10 ether);
        assertTrue(drawn == alice && locked, "alice drawn and bonded");
        StakeInfo memory s = stakes.stakeOf(alice, Role.Verifier);
        assertEq(s.staked, 10 ether, "bond taken back");
        assertEq(s.locked, 10 ether, "and locked");
        assertEq(s.unbonding, 90 ether, "the rest still leaves");
    }

    function test_draw_whose_bond_other_draws_took_reports_it_unlocked() public {
        _stake(alice, Role.Verifier, 100 ether);
        vm.roll(block.number + 1);
        uint256 anchor = block.number - 1;
        assertEq(_drawAt(keccak256("first"), anchor, 60 ether), alice, "first draw bonds alice");
        vm.roll(block.number + 1);
        vm.prank(game);
        (address drawn, bool locked) = stakes.drawVerifier(keccak256("second"), anchor, new address[](0), 60 ether);
        assertTrue(drawn == alice && !locked, "drawn at the anchor, bond not lockable now");
        assertEq(_locked(alice, Role.Verifier), 60 ether, "only the first bond");
        // Anchored after the first lock, alice has 40 free: nobody is acceptable.
        assertEq(_draw(keccak256("third"), new address[](0), 60 ether), address(0), "busy at the new anchor");
    }

    /// Draws anchored at the previous block (rolling one first) and checks a drawn bond was locked.
    function _draw(bytes32 seed, address[] memory exclude, uint256 bond) internal returns (address drawn) {
        vm.roll(block.number + 1);
        bool locked;
        vm.prank(game);
        (drawn, locked) = stakes.drawVerifier(seed, block.number - 1, exclude, bond);
        assertTrue(drawn == address(0) || locked, "bond locked");
    }

    function _drawAt(bytes32 seed, uint256 anchor, uint256 bond) internal returns (address drawn) {
        bool locked;
        vm.prank(game);
        (drawn, locked) = stakes.drawVerifier(seed, anchor, new address[](0), bond);
        assertTrue(drawn == address(0) || locked, "bond locked");
    }

    // ------------------------------------------------------------------ solver capabilities

    function test_advertise_stores_one_slot_and_emits() public {
        _stake(alice, Role.Solver, MIN_SOLVER_STAKE);
        vm.expectEmit(true, false, false, true, address(stakes));
        emit IStakeManager.CapabilitiesAdvertised(alice, 10_000_000, 256 << 20, 1_000_000, 2e9, Device.Cpu);
        vm.prank(alice);
        stakes.advertise(10_000_000, 256 << 20, 1_000_000, 2e9, Device.Cpu);
        Capabilities memory c = stakes.capabilitiesOf(alice);
        assertEq(c.maxParams, 10_000_000, "params");
        assertEq(c.maxDatasetBytes, 256 << 20, "dataset");
        assertEq(c.maxSteps, 1_000_000, "steps");
        assertEq(c.flops, 2e9, "flops");
        assertEq(uint8(c.device), uint8(Device.Cpu), "device");
        assertEq(c.advertisedAt, block.timestamp, "when");

        vm.warp(block.timestamp + 60);
        vm.prank(alice);
        stakes.advertise(1000, 1024, 10, 5e12, Device.Cuda); // the latest advert replaces the previous one
        c = stakes.capabilitiesOf(alice);
        assertEq(c.maxParams, 1000, "replaced");
        assertEq(c.flops, 5e12, "new speed");
        assertEq(uint8(c.device), uint8(Device.Cuda), "new device");
        assertEq(c.advertisedAt, block.timestamp, "new time");
        assertEq(stakes.capabilitiesOf(bob).advertisedAt, 0, "never advertised: all zero");
    }

    function test_advertise_needs_an_eligible_solver_stake() public {
        vm.prank(bob);
        vm.expectRevert(abi.encodeWithSelector(IStakeManager.NotEligible.selector, bob, Role.Solver, 0, MIN_SOLVER_STAKE));
        stakes.advertise(1, 1, 1, 1, Device.Cpu);
        _stake(bob, Role.Verifier, MIN_VERIFIER_STAKE); // another role's stake does not count
        vm.prank(bob);
        vm.expectRevert(abi.encodeWithSelector(IStakeManager.NotEligible.selector, bob, Role.Solver, 0, MIN_SOLVER_STAKE));
        stakes.advertise(1, 1, 1, 1, Device.Cpu);
        assertEq(stakes.capabilitiesOf(bob).maxParams, 0, "nothing stored");
    }

    function test_advertise_rejects_a_zero_capability() public {
        _stake(alice, Role.Solver, MIN_SOLVER_STAKE);
        vm.startPrank(alice);
        vm.expectRevert(_withName(IStakeManager.ZeroCapability.selector, "maxParams"));
        stakes.advertise(0, 1, 1, 1, Device.Cpu);
        vm.expectRevert(_withName(IStakeManager.ZeroCapability.selector, "maxDatasetBytes"));
        stakes.advertise(1, 0, 1, 1, Device.Cpu);
        vm.expectRevert(_withName(IStakeManager.ZeroCapability.selector, "maxSteps"));
        stakes.advertise(1, 1, 0, 1, Device.Cpu);
        vm.expectRevert(_withName(IStakeManager.ZeroCapability.selector, "flops"));
        stakes.advertise(1, 1, 1, 0, Device.Cpu);
        vm.stopPrank();
    }

    // ------------------------------------------------------------------ gateways

    function _gateway(address account) internal view returns (bytes32) {
        return keccak256(bytes(stakes.gatewayOf(account)));
    }

    function test_announce_stores_the_latest_url_per_account_and_emits() public {
        assertEq(_gateway(alice), keccak256(""), "never announced");
        vm.expectEmit(true, false, false, true, address(stakes));
        emit IStakeManager.GatewayAnnounced(alice, "http://10.0.0.3:8080");
        vm.prank(alice); // no stake needed: a submitter announces too
        stakes.announce("http://10.0.0.3:8080");
        assertEq(_gateway(alice), keccak256("http://10.0.0.3:8080"), "stored");
        vm.prank(alice);
        stakes.announce("https://gw.example.org");
        assertEq(_gateway(alice), keccak256("https://gw.example.org"), "replaced");
        assertEq(_gateway(bob), keccak256(""), "per account");
        vm.prank(alice);
        stakes.announce("");
        assertEq(_gateway(alice), keccak256(""), "withdrawn");
    }

    function test_announce_bounds_the_url() public {
        uint256 max = stakes.MAX_GATEWAY_URL_BYTES();
        bytes memory longest = new bytes(max);
        vm.prank(alice);
        stakes.announce(string(longest));
        assertEq(bytes(stakes.gatewayOf(alice)).length, max, "the longest fits");
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(IStakeManager.GatewayUrlTooLong.selector, max + 1, max));
        stakes.announce(string(new bytes(max + 1)));
        assertEq(bytes(stakes.gatewayOf(alice)).length, max, "unchanged");
    }

    function test_an_advert_outlives_its_stake_but_not_its_eligibility() public {
        _stake(alice, Role.Solver, MIN_SOLVER_STAKE);
        vm.prank(alice);
        stakes.advertise(1000, 1024, 10, 1e9, Device.Cpu);
        vm.prank(alice);
        stakes.requestUnstake(Role.Solver, MIN_SOLVER_STAKE);
        assertEq(stakes.capabilitiesOf(alice).maxParams, 1000, "still stored");
        assertTrue(!stakes.isEligible(alice, Role.Solver), "readers skip it: not eligible");
        vm.prank(alice);
        vm.expectRevert(abi.encodeWithSelector(IStakeManager.NotEligible.selector, alice, Role.Solver, 0, MIN_SOLVER_STAKE));
        stakes.advertise(1000, 1024, 10, 1e9, Device.Cpu);
    }
}
