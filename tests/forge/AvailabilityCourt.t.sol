// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Fixture} from "./utils/Fixture.sol";
import {IsolatedGas} from "./utils/IsolatedGas.sol";
import {AvailabilityCourt} from "../../contracts/AvailabilityCourt.sol";
import {Case, CaseStatus, CourtParams, IAvailabilityCourt} from "../../contracts/interfaces/IAvailabilityCourt.sol";
import {Ballot} from "../../contracts/interfaces/IDisputeGame.sol";
import {ICredits} from "../../contracts/interfaces/ICredits.sol";
import {IJobMarket} from "../../contracts/interfaces/IJobMarket.sol";
import {Job, JobState, Role} from "../../contracts/Types.sol";

/// A protocol with an AvailabilityCourt wired in (StakeManager.authorize([market, game, court])) and
/// five staked verifiers, so a committee of three is drawn besides the job's verifier.
abstract contract CourtFixture is Fixture {
    uint96 internal constant MEMBER_BOND = 10 ether;
    uint96 internal constant MEMBER_FEE = 2 ether;
    uint96 internal constant ITEM_FEE = 0.1 ether;
    uint32 internal constant DRAW = 1 hours;
    uint32 internal constant FETCH = 2 hours;
    uint32 internal constant REVEAL = 1 hours;
    uint32 internal constant CHECKPOINTS = 11;

    AvailabilityCourt internal court;
    address internal verifier4 = address(0xF4);
    address internal verifier5 = address(0xF5);
    address internal whistleblower = address(0xB1);

    function _courtParams() internal pure returns (CourtParams memory) {
        return CourtParams({
            refereeBond: MEMBER_BOND,
            refereeFee: MEMBER_FEE,
            itemFee: ITEM_FEE,
            drawWindow: DRAW,
            fetchWindow: FETCH,
            revealWindow: REVEAL,
            committeeSize: 3
        });
    }

    function _moreProtocols() internal override returns (address[] memory more) {
        court = new AvailabilityCourt(market, _courtParams());
        more = new address[](1);
        more[0] = address(court);
    }

    function setUp() public virtual {
        _setUpActors();
        address[3] memory more = [verifier4, verifier5, whistleblower];
        for (uint256 i; i < more.length; ++i) {
            _fund(more[i]);
            vm.prank(more[i]);
            token.approve(address(court), type(uint256).max);
        }
        vm.prank(verifier1);
        token.approve(address(court), type(uint256).max);
        vm.prank(verifier2);
        token.approve(address(court), type(uint256).max);
        vm.prank(verifier3);
        token.approve(address(court), type(uint256).max);
        _stake(verifier4, Role.Verifier, 100 ether);
        _stake(verifier5, Role.Verifier, 100 ether);
        _stake(whistleblower, Role.Whistleblower, 50 ether);
    }

    /// Bitmap over `count` checkpoints and the manifest (bit count) naming `items`.
    /// @dev Bit ``item % 8`` of byte ``item / 8`` (the court's layout): ``1 << bit`` is meant, not the
    /// linter's "incorrect shift".
    function _bitmap(uint256 count, uint256[] memory items) internal pure returns (bytes memory map) {
        map = new bytes(count / 8 + 1);
        for (uint256 i; i < items.length; ++i) {
            // forge-lint: disable-next-line(incorrect-shift)
            map[items[i] / 8] = bytes1(uint8(map[items[i] / 8]) | uint8(1 << (items[i] % 8)));
        }
    }

    function _some() internal pure returns (uint256[] memory items) {
        items = new uint256[](3);
        items[0] = 0;
        items[1] = 7;
        items[2] = CHECKPOINTS; // the manifest
    }

    function _open(uint256 jobId, address challenger) internal returns (uint256 caseId) {
        vm.prank(challenger);
        caseId = court.challenge(jobId, _bitmap(CHECKPOINTS, _some()));
    }

    function _seat(uint256 caseId) internal returns (address[] memory members) {
        vm.roll(block.number + 2);
        court.drawCommittee(caseId);
        members = court.committee(caseId);
    }

    function _salt(address member) internal pure returns (bytes32) {
        return keccak256(abi.encode("salt", member));
    }

    function _commit(uint256 caseId, address member, bool served) internal {
        vm.prank(member);
        court.commitVote(caseId, keccak256(abi.encode(caseId, served, _salt(member), member)));
    }

    function _reveal(uint256 caseId, address member, bool served) internal {
        vm.prank(member);
        court.revealVote(caseId, served, _salt(member));
    }

    /// Every member votes `served[i]`; reveals all that committed.
    function _vote(uint256 caseId, address[] memory members, bool[3] memory served) internal {
        for (uint256 i; i < members.length; ++i) {
            _commit(caseId, members[i], served[i]);
        }
        for (uint256 i; i < members.length; ++i) {
            _reveal(caseId, members[i], served[i]);
        }
    }
}

/// The court's game: one challenge naming every lacking item, a committee that fetches and votes,
/// and the payouts of each outcome (docs/protocol.md, "Availability court").
contract AvailabilityCourtTest is CourtFixture {
    function _drawn() internal returns (uint256 jobId, address verifier) {
        jobId = _claimed();
        vm.prank(solver);
        market.commit(jobId, ROOT, CHECKPOINTS, MODEL, MANIFEST);
        verifier = _assign(jobId);
    }

    function test_served_resumesReportClock_paysMajorityAndSolverUploads() public {
        (uint256 jobId, address verifier) = _drawn();
        uint256 reportDeadline = market.getJob(jobId).deadline;
        uint256 deposit = court.depositFor(3);
        assertEq(deposit, 3 * MEMBER_FEE + 3 * ITEM_FEE, "deposit: committee fees + items");
        uint256 vBefore = _bal(verifier);
        uint256 sBefore = _bal(solver);
        uint256 opened = block.timestamp + 600; // 10 min of the report window used
        vm.warp(opened);
        uint256 caseId = _open(jobId, verifier);
        assertEq(uint8(_state(jobId)), uint8(JobState.DataVote), "held");
        assertEq(_bal(verifier), vBefore - deposit, "one deposit");
        address[] memory members = _seat(caseId);
        assertEq(members.length, 3, "members.length");
        for (uint256 i; i < 3; ++i) {
            assertTrue(members[i] != verifier && members[i] != solver && members[i] != submitter, "no party sits");
            assertEq(_locked(members[i], Role.Verifier), MEMBER_BOND, "member bond locked");
        }
        vm.warp(block.timestamp + 1 hours); // the court ran longer than the report time left: none of it is lost
        _vote(caseId, members, [true, true, false]);
        uint256[3] memory before = [_bal(members[0]), _bal(members[1]), _bal(members[2])];
        court.settle(caseId);
        Job memory job = market.getJob(jobId);
        assertEq(uint8(job.state), uint8(JobState.Verifying), "back to Verifying");
        assertEq(job.deadline, block.timestamp + (reportDeadline - opened), "report time left kept");
        assertEq(job.challenger, address(0), "job.challenger");
        assertEq(_bal(members[0]), before[0] + MEMBER_FEE, "majority paid");
        assertEq(_bal(members[1]), before[1] + MEMBER_FEE, "majority paid");
        assertEq(_bal(members[2]), before[2], "minority unpaid");
        assertEq(_bal(solver), sBefore + 3 * ITEM_FEE, "solver: its uploads only");
        assertEq(_bal(verifier), vBefore - 2 * MEMBER_FEE - 3 * ITEM_FEE, "verifier: the minority's fee back");
        for (uint256 i; i < 3; ++i) {
            assertEq(_locked(members[i], Role.Verifier), 0, "bonds released");
        }
        assertEq(_bal(address(court)), 0, "court holds nothing");
        assertEq(uint8(court.getCase(caseId).status), uint8(CaseStatus.Served), "uint8(court.getCase(caseId).status)");
        assertEq(court.activeCase(jobId), 0, "court.activeCase(jobId)");
    }

    function test_withheld_slashesSolverToVerifier_reopens_depositBackLessFees() public {
        (uint256 jobId, address verifier) = _drawn();
        uint256 sBond = market.solverBond(REWARD);
        uint256 vBefore = _bal(verifier);
        uint256 staked = _staked(solver, Role.Solver);
        uint256 caseId = _open(jobId, verifier);
        address[] memory members = _seat(caseId);
        _vote(caseId, members, [false, true, false]);
        court.settle(caseId);
        assertEq(uint8(_state(jobId)), uint8(JobState.Open), "reopened");
        assertEq(_staked(solver, Role.Solver), staked - sBond, "whole bond");
        assertEq(_locked(solver, Role.Solver), 0, "_locked(solver");
        assertEq(_locked(verifier, Role.Verifier), 0, "verifier bond released, not slashed");
        assertEq(_bal(verifier), vBefore - 2 * MEMBER_FEE + sBond, "bond in, two fees out");
        assertEq(court.totalCredit(), 2 * MEMBER_FEE, "the majority's fees wait to be claimed");
        assertEq(_bal(address(court)), court.totalCredit(), "the court holds only the members' credits");
        assertEq(uint8(court.getCase(caseId).status), uint8(CaseStatus.Withheld), "uint8(court.getCase(caseId).status)");
    }

    /// Pull payments: a settled case credits the majority's fees and the rest; each payee claims once.
    function test_settle_creditsEveryPayee_eachClaimsOnce() public {
        (uint256 jobId, address verifier) = _drawn();
        uint256 caseId = _open(jobId, verifier);
        address[] memory members = _seat(caseId);
        _vote(caseId, members, [true, true, true]);
        uint256 wallet = token.balanceOf(members[0]);
        court.settle(caseId);
        assertEq(token.balanceOf(members[0]), wallet, "nothing transferred by the settlement");
        assertEq(court.credit(members[0]), MEMBER_FEE, "the member's fee, credited");
        assertEq(court.credit(solver), 3 * ITEM_FEE, "the solver's uploads, credited");
        assertEq(court.totalCredit(), token.balanceOf(address(court)), "the court holds only the credits");
        vm.prank(stranger);
        assertEq(court.claimCredit(members[0]), MEMBER_FEE, "claimed for the member");
        assertEq(token.balanceOf(members[0]), wallet + MEMBER_FEE, "paid to the member");
        vm.expectRevert(abi.encodeWithSelector(ICredits.NoCredit.selector, members[0]));
        court.claimCredit(members[0]);
    }

    function test_silentMember_slashedToWinner() public {
        (uint256 jobId, address verifier) = _drawn();
        uint256 caseId = _open(jobId, verifier);
        address[] memory members = _seat(caseId);
        _commit(caseId, members[0], true);
        _commit(caseId, members[1], true);
        vm.warp(block.timestamp + FETCH + 1);
        _reveal(caseId, members[0], true);
        _reveal(caseId, members[1], true);
        vm.expectRevert(abi.encodeWithSelector(IAvailabilityCourt.NotSettleable.selector, caseId, block.timestamp + REVEAL));
        court.settle(caseId);
        vm.warp(block.timestamp + REVEAL);
        uint256 sBefore = _bal(solver);
        uint256 staked = _staked(members[2], Role.Verifier);
        court.settle(caseId);
        assertEq(_staked(members[2], Role.Verifier), staked - MEMBER_BOND, "silent member slashed");
        assertEq(_bal(solver), sBefore + 3 * ITEM_FEE + MEMBER_BOND, "to the winner");
        assertEq(court.credit(verifier), MEMBER_FEE, "the silent member's fee back to the challenger");
        assertEq(court.totalCredit(), 3 * MEMBER_FEE, "it and the majority's fees wait to be claimed");
        assertEq(_bal(address(court)), court.totalCredit(), "the court holds only the members' credits");
    }

    function test_noCommittee_undecided_depositBack_clockResumes() public {
        (uint256 jobId, address verifier) = _drawn();
        uint256 vBefore = _bal(verifier);
        uint256 caseId = _open(jobId, verifier);
        vm.warp(block.timestamp + DRAW);
        vm.expectRevert(abi.encodeWithSelector(IAvailabilityCourt.NotSettleable.selector, caseId, block.timestamp + 1));
        court.settle(caseId);
        vm.warp(block.timestamp + 1);
        court.settle(caseId);
        assertEq(uint8(_state(jobId)), uint8(JobState.Verifying), "uint8(_state(jobId))");
        assertEq(_bal(verifier), vBefore, "deposit back");
        assertEq(uint8(court.getCase(caseId).status), uint8(CaseStatus.Undecided), "uint8(court.getCase(caseId).status)");
    }

    function test_oneCaseOfEachKindPerTraceAndChallenger_andGuards() public {
        (uint256 jobId, address verifier) = _drawn();
        vm.expectRevert(abi.encodeWithSelector(IAvailabilityCourt.NotAuthorized.selector, stranger));
        vm.prank(stranger);
        court.challenge(jobId, _bitmap(CHECKPOINTS, _some()));
        // wrong length, a bit past the manifest's, nothing named
        vm.expectRevert(abi.encodeWithSelector(IAvailabilityCourt.InvalidItems.selector, jobId, 1, 2));
        vm.prank(verifier);
        court.challenge(jobId, hex"01");
        vm.expectRevert(abi.encodeWithSelector(IAvailabilityCourt.InvalidItems.selector, jobId, 2, 2));
        vm.prank(verifier);
        court.challenge(jobId, hex"0010");
        vm.expectRevert(abi.encodeWithSelector(IAvailabilityCourt.InvalidItems.selector, jobId, 2, 2));
        vm.prank(verifier);
        court.challenge(jobId, hex"0000");
        uint256 caseId = _open(jobId, verifier);
        // the JobMarket's own paths cannot touch a held job
        vm.expectRevert(
            abi.encodeWithSelector(IJobMarket.WrongState.selector, jobId, JobState.DataVote, JobState.Verifying)
        );
        vm.prank(verifier);
        market.challengeAvailability(jobId, 1);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.NotAuthorized.selector, stranger));
        vm.prank(stranger);
        market.releaseFromCourt(jobId, true);
        vm.warp(block.timestamp + DRAW + 1);
        court.settle(caseId);
        vm.expectRevert(abi.encodeWithSelector(IAvailabilityCourt.AlreadyHeard.selector, jobId, verifier));
        _open(jobId, verifier);
        // the checkpoints it needs once the manifest is served: one more case, then no more
        uint256[] memory checkpoints = new uint256[](2);
        checkpoints[0] = 3;
        checkpoints[1] = 4;
        vm.prank(verifier);
        caseId = court.challenge(jobId, _bitmap(CHECKPOINTS, checkpoints));
        assertEq(court.getCase(caseId).items, 2, "items");
        vm.warp(block.timestamp + DRAW + 1);
        court.settle(caseId);
        vm.expectRevert(abi.encodeWithSelector(IAvailabilityCourt.AlreadyHeard.selector, jobId, verifier));
        vm.prank(verifier);
        court.challenge(jobId, _bitmap(CHECKPOINTS, checkpoints));
    }

    function test_whistleblower_withheldPaysIt_verifierMayNotChallengeAPassedTrace() public {
        (uint256 jobId, address verifier) = _drawn();
        _report(jobId, verifier, true);
        vm.expectRevert(abi.encodeWithSelector(IAvailabilityCourt.NotAuthorized.selector, verifier));
        _open(jobId, verifier);
        uint256 caseId = _open(jobId, whistleblower);
        address[] memory members = _seat(caseId);
        for (uint256 i; i < 3; ++i) {
            assertTrue(members[i] != verifier, "the verifier does not sit");
        }
        uint256 wBefore = _bal(whistleblower);
        _vote(caseId, members, [false, false, false]);
        court.settle(caseId);
        assertEq(uint8(_state(jobId)), uint8(JobState.Open), "uint8(_state(jobId))");
        assertEq(_bal(whistleblower), wBefore + 3 * ITEM_FEE + market.solverBond(REWARD), "bond + items back");
        assertEq(_locked(verifier, Role.Verifier), 0, "verifier released");
    }

    /// A bitmap over 10,000 checkpoints: its items are counted word by word (the deposit shows it).
    /// forge-config: default.fuzz.runs = 64
    function testFuzz_itemCount(uint256 seed) public {
        jobIdForCount = _claimed();
        vm.prank(solver);
        market.commit(jobIdForCount, ROOT, 10_000, MODEL, MANIFEST);
        address verifier = _assign(jobIdForCount);
        uint256 n = seed % 200 + 1;
        uint256[] memory items = new uint256[](n);
        uint256 distinct;
        bytes memory map = new bytes(10_000 / 8 + 1);
        for (uint256 i; i < n; ++i) {
            uint256 item = uint256(keccak256(abi.encode(seed, i))) % 10_001;
            items[i] = item;
            // forge-lint: disable-next-line(incorrect-shift)
            if (uint8(map[item / 8]) & (1 << (item % 8)) == 0) ++distinct;
            // forge-lint: disable-next-line(incorrect-shift)
            map[item / 8] = bytes1(uint8(map[item / 8]) | uint8(1 << (item % 8)));
        }
        uint256 before = _bal(verifier);
        vm.prank(verifier);
        court.challenge(jobIdForCount, map);
        assertEq(before - _bal(verifier), court.depositFor(distinct), "every distinct item counted");
        assertEq(court.getCase(court.caseCount()).items, distinct, "court.getCase(court.caseCount()).items");
    }

    uint256 internal jobIdForCount;

    /// Any ballots (each member served, withheld or silent): every token the case took in (the deposit,
    /// the silent members' bonds) goes out at settlement, to the majority, the solver and the challenger
    /// as IAvailabilityCourt says; the solver gets from the deposit only the items' fee, and only when served.
    /// forge-config: default.fuzz.runs = 128
    function testFuzz_settlementPaysOutExactlyWhatCameIn(uint8 pattern) public {
        (uint256 jobId, address verifier) = _drawn();
        uint256 caseId = _open(jobId, verifier);
        address[] memory members = _seat(caseId);
        // tally: served, withheld, silent
        uint256[3] memory tally = _ballots(caseId, members, pattern);
        uint256 inflow = court.depositFor(3) + tally[2] * MEMBER_BOND;
        uint256[3] memory before = [_bal(solver), _bal(verifier), _sum(members)];
        court.settle(caseId);
        uint256 toSolver = _bal(solver) - before[0];
        uint256 toMembers = _sum(members) - before[2];
        CaseStatus outcome = court.getCase(caseId).status;
        uint256 bond = outcome == CaseStatus.Withheld ? market.solverBond(REWARD) : 0;
        assertEq(toMembers + toSolver + _bal(verifier) - before[1], inflow + bond, "what came in goes out");
        assertEq(_bal(address(court)), 0, "the court keeps nothing");
        if (tally[0] > tally[1]) {
            assertEq(uint8(outcome), uint8(CaseStatus.Served), "served");
            assertEq(toSolver, 3 * ITEM_FEE + tally[2] * MEMBER_BOND, "items' fee and the silent bonds");
            assertEq(toMembers, tally[0] * MEMBER_FEE, "the majority's fees");
        } else {
            assertEq(toSolver, 0, "no deposit to a solver not found serving");
            assertEq(toMembers, tally[0] == tally[1] ? 0 : tally[1] * MEMBER_FEE, "the majority's fees, none on a tie");
        }
    }

    /// Member i serves (0), withholds (1) or stays silent (2) by the base-3 digit i of `pattern`; the
    /// phases run out; returns (served, withheld, silent).
    /// The account's tokens once it has claimed what the court owes it (the court pays by credit).
    function _bal(address account) internal override returns (uint256) {
        if (court.credit(account) != 0) court.claimCredit(account);
        return token.balanceOf(account);
    }

    function _ballots(uint256 caseId, address[] memory members, uint8 pattern) internal returns (uint256[3] memory tally) {
        uint256[3] memory choice = [uint256(pattern % 3), uint256(pattern / 3 % 3), uint256(pattern / 9 % 3)];
        for (uint256 i; i < 3; ++i) {
            if (choice[i] < 2) _commit(caseId, members[i], choice[i] == 0);
        }
        vm.warp(block.timestamp + FETCH + 1);
        for (uint256 i; i < 3; ++i) {
            if (choice[i] < 2) _reveal(caseId, members[i], choice[i] == 0);
            ++tally[choice[i]];
        }
        vm.warp(block.timestamp + REVEAL + 1);
    }

    function _sum(address[] memory accounts) internal returns (uint256 total) {
        for (uint256 i; i < accounts.length; ++i) {
            total += _bal(accounts[i]);
        }
    }
}

/// Transaction gas of the court's calls (under --isolate) for snapshots/AvailabilityCourtGas.json:
/// the same at any content size; the bitmap grows with the checkpoint count (one bit each).
contract AvailabilityCourtGasTest is CourtFixture, IsolatedGas {
    string internal constant GROUP = "AvailabilityCourtGas";

    /// Steady state: every actor was paid by the court and claimed before.
    function setUp() public override {
        super.setUp();
        address[9] memory named = [submitter, solver, solver2, verifier1, verifier2, verifier3, verifier4, verifier5, whistleblower];
        address[] memory actors = new address[](named.length);
        for (uint256 i; i < named.length; ++i) {
            actors[i] = named[i];
        }
        _paidBefore(court, actors);
    }

    function _case(uint32 checkpoints, uint256 named) internal returns (uint256[6] memory used) {
        uint256 jobId = _claimed();
        vm.prank(solver);
        market.commit(jobId, ROOT, checkpoints, MODEL, MANIFEST);
        address verifier = _assign(jobId);
        uint256[] memory items = new uint256[](named);
        for (uint256 i; i < named; ++i) {
            items[i] = i * ((checkpoints + 1) / named);
        }
        bytes memory map = _bitmap(checkpoints, items);
        vm.prank(verifier);
        uint256 caseId = court.challenge(jobId, map);
        used[0] = _gas();
        vm.roll(block.number + 2);
        court.drawCommittee(caseId);
        used[1] = _gas();
        address[] memory members = court.committee(caseId);
        for (uint256 i; i < 3; ++i) {
            _commit(caseId, members[i], true);
            used[2] = _gas() > used[2] ? _gas() : used[2];
        }
        for (uint256 i; i < 3; ++i) {
            _reveal(caseId, members[i], true);
            used[3] = _gas() > used[3] ? _gas() : used[3];
        }
        court.settle(caseId);
        used[4] = _gas();
        used[5] = used[0] + used[1] + 3 * used[2] + 3 * used[3] + used[4];
    }

    function test_court_gas() public {
        if (!_isolated()) return;
        string[6] memory names = ["challenge", "drawCommittee3", "commitVoteMax", "revealVoteMax", "settleServed", "wholeCase"];
        // 21 checkpoints (the GPT-2-small bench's job) naming all of them; 10,000 naming 1,000
        uint256[6] memory small = _case(20, 21);
        uint256[6] memory large = _case(10_000, 1000);
        for (uint256 i; i < names.length; ++i) {
            vm.snapshotValue(GROUP, string.concat("c21_", names[i]), small[i]);
            vm.snapshotValue(GROUP, string.concat("c10000_", names[i]), large[i]);
        }
    }
}
