// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {Fixture} from "./utils/Fixture.sol";
import {Vm} from "./utils/Vm.sol";
import {DilocoJobs} from "../../contracts/DilocoJobs.sol";
import {ICredits} from "../../contracts/interfaces/ICredits.sol";
import {Ballot} from "../../contracts/interfaces/IDisputeGame.sol";
import {
    Aggregate,
    Contribution,
    DilocoParams,
    IDilocoJobs,
    JobTerms,
    MultipartyJob,
    Phase
} from "../../contracts/interfaces/IDilocoJobs.sol";
import {IJobMarket} from "../../contracts/interfaces/IJobMarket.sol";
import {IStakeManager} from "../../contracts/interfaces/IStakeManager.sol";
import {Job, JobState, MarketParams, Role} from "../../contracts/Types.sol";

/// A protocol with DilocoJobs wired in: StakeManager.authorize([market, game, dilocoJobs]). Parties are
/// staked solvers; aggregators and committee members are drawn from the verifier stakers (the Fixture's
/// three, plus six more staked here). The setup and helpers every DilocoJobs suite shares.
abstract contract DilocoJobsFixture is Fixture {
    uint96 internal constant AGG_BOND = 20 ether;
    uint96 internal constant REF_BOND = 10 ether;
    uint96 internal constant REF_FEE = 2 ether;
    uint96 internal constant DEPOSIT = 10 ether;
    uint32 internal constant AGG_WINDOW = 1 hours;
    uint32 internal constant CH_WINDOW = 1 hours;
    uint32 internal constant VOTE_WINDOW = 1 hours;
    uint32 internal constant REVEAL_WINDOW = 1 hours;
    uint8 internal constant COMMITTEE = 3;
    uint8 internal constant MAX_PARTIES = 4;

    uint32 internal constant WORK = 2 hours;
    uint32 internal constant VERIFY = 4 hours;
    uint96 internal constant INNER_REWARD = 10 ether;
    uint96 internal constant INNER_FEE = 1 ether;
    /// innerReward + innerFee + 3 % jackpot tax (no replay fee in the Fixture's market).
    uint256 internal constant INNER_ESCROW = 11.33 ether;
    uint96 internal constant CONTRIB = 5 ether;
    uint96 internal constant AGG_FEE = 3 ether;
    uint96 internal constant SLOT_BOND = 20 ether;
    uint96 internal constant PARTY_STAKE = 500 ether;

    bytes32 internal constant DSPEC = keccak256("diloco spec");
    bytes32 internal constant G0 = keccak256("G0");
    bytes32 internal constant G0_CID = keccak256("G0 cid");
    bytes32 internal constant INNER_SPEC = keccak256("party job");
    bytes32 internal constant H1 = keccak256("G1");
    bytes32 internal constant H2 = keccak256("G2");

    DilocoJobs internal dj;
    address internal party3 = address(0x52);
    address internal party4 = address(0x53);
    /// What the happy path's job spent so far (_happyRound).
    uint256 internal paid;

    function _dilocoParams() internal pure returns (DilocoParams memory) {
        return DilocoParams({
            aggregatorBond: AGG_BOND,
            refereeBond: REF_BOND,
            refereeFee: REF_FEE,
            challengeDeposit: DEPOSIT,
            aggregateWindow: AGG_WINDOW,
            challengeWindow: CH_WINDOW,
            voteWindow: VOTE_WINDOW,
            revealWindow: REVEAL_WINDOW,
            committeeSize: COMMITTEE,
            maxParties: MAX_PARTIES
        });
    }

    function _moreProtocols() internal override returns (address[] memory more) {
        dj = new DilocoJobs(market, _dilocoParams());
        more = new address[](1);
        more[0] = address(dj);
    }

    function setUp() public {
        _setUpActors();
        _fund(party3);
        _fund(party4);
        _stake(party3, Role.Solver, PARTY_STAKE);
        _stake(party4, Role.Solver, PARTY_STAKE);
        // verifier1 to 200: every verifier keeps its weight (>= the minimum) after losing one bond, so
        // the redraw's exclusion of the last failed aggregator is what keeps it out.
        _stake(verifier1, Role.Verifier, 100 ether);
        address[6] memory extra =
            [address(0xA0), address(0xA1), address(0xA2), address(0xA3), address(0xA4), address(0xA5)];
        for (uint256 i; i < extra.length; ++i) {
            _fund(extra[i]);
            _stake(extra[i], Role.Verifier, 200 ether);
        }
        vm.prank(submitter);
        token.approve(address(dj), type(uint256).max);
        vm.prank(stranger);
        token.approve(address(dj), type(uint256).max);
    }

    // ------------------------------------------------------------------ helpers

    function _terms() internal pure returns (JobTerms memory) {
        return JobTerms({
            specCid: DSPEC,
            globalHash: G0,
            globalCid: G0_CID,
            parties: 3,
            minParties: 2,
            rounds: 2,
            workWindow: WORK,
            verifyWindow: VERIFY,
            innerReward: INNER_REWARD,
            innerFee: INNER_FEE,
            contributionReward: CONTRIB,
            aggregatorFee: AGG_FEE,
            slotBond: SLOT_BOND
        });
    }

    function _postWith(JobTerms memory t) internal returns (uint256 jobId) {
        vm.prank(submitter);
        jobId = dj.post(t);
    }

    function _postJob() internal returns (uint256) {
        return _postWith(_terms());
    }

    function _join(uint256 jobId, address party, uint8 slot) internal {
        vm.prank(party);
        dj.join(jobId, slot);
    }

    /// A 3-slot job with solver in slot 0 and solver2 in slot 1 (slot 2 vacant).
    function _joined2() internal returns (uint256 jobId) {
        jobId = _postJob();
        _join(jobId, solver, 0);
        _join(jobId, solver2, 1);
    }

    /// A 3-slot job with every slot taken (solver, solver2, party3).
    function _joined3() internal returns (uint256 jobId) {
        jobId = _joined2();
        _join(jobId, party3, 2);
    }

    function _begin(uint256 jobId, address party, uint8 slot) internal returns (uint256 innerId) {
        vm.prank(party);
        dj.begin(jobId, slot, INNER_SPEC);
        innerId = dj.contributionOf(jobId, dj.getJob(jobId).round, slot).innerJobId;
    }

    function _commitTrace(uint256 innerId, address party) internal {
        vm.prank(party);
        market.commit(innerId, ROOT, 11, MODEL, MANIFEST);
    }

    function _cid(address party, uint16 round) internal pure returns (bytes32) {
        return keccak256(abi.encode("pseudo-gradient cid", party, round));
    }

    function _content(address party, uint16 round) internal pure returns (bytes32) {
        return keccak256(abi.encode("pseudo-gradient bytes", party, round));
    }

    function _contribute(uint256 jobId, address party, uint8 slot) internal {
        uint16 round = dj.getJob(jobId).round;
        vm.prank(party);
        dj.contribute(jobId, slot, _cid(party, round), _content(party, round));
    }

    /// The party begins its round, commits its inner trace and contributes.
    function _work(uint256 jobId, address party, uint8 slot) internal returns (uint256 innerId) {
        innerId = _begin(jobId, party, slot);
        _commitTrace(innerId, party);
        _contribute(jobId, party, slot);
    }

    /// Each inner job drawn a verifier that passes it, the market's challenge window waited out, finalized.
    function _verifyInner(uint256[] memory ids) internal {
        for (uint256 i; i < ids.length; ++i) {
            address verifier = _assign(ids[i]);
            _report(ids[i], verifier, true);
        }
        vm.warp(block.timestamp + market.params().challengeWindow + 1);
        for (uint256 i; i < ids.length; ++i) {
            market.finalize(ids[i]);
            assertEq(uint8(_state(ids[i])), uint8(JobState.Finalized), "inner finalized");
        }
    }

    function _close(uint256 jobId) internal {
        vm.warp(uint256(dj.getJob(jobId).deadline) + 1);
        dj.closeRound(jobId);
    }

    function _drawAggregator(uint256 jobId) internal returns (address aggregator) {
        uint256 anchor = dj.getJob(jobId).anchorBlock;
        if (block.number < anchor + 2) vm.roll(anchor + 2);
        dj.drawAggregator(jobId);
        aggregator = dj.aggregateOf(jobId).aggregator;
        assertTrue(aggregator != address(0), "aggregator drawn");
        assertEq(_phase(jobId), uint8(Phase.Aggregating), "aggregating");
    }

    /// solver (slot 0) and solver2 (slot 1) contribute, their inner jobs finalize, the round closes and
    /// the aggregator is drawn.
    function _twoPartyRound(uint256 jobId) internal returns (address aggregator) {
        uint256[] memory ids = new uint256[](2);
        ids[0] = _work(jobId, solver, 0);
        ids[1] = _work(jobId, solver2, 1);
        _verifyInner(ids);
        _close(jobId);
        aggregator = _drawAggregator(jobId);
    }

    function _stateCid(bytes32 stateHash) internal pure returns (bytes32) {
        return stateHash == bytes32(0) ? bytes32(0) : keccak256(abi.encode("state cid", stateHash));
    }

    function _aggregate(uint256 jobId, address aggregator, bytes32 stateHash, uint16 included, uint16 wrong) internal {
        vm.prank(aggregator);
        dj.commitAggregate(jobId, stateHash, _stateCid(stateHash), included, wrong);
    }

    function _finalizeRound(uint256 jobId) internal {
        vm.warp(uint256(dj.getJob(jobId).deadline) + 1);
        dj.finalizeRound(jobId);
    }

    /// Two parties' round 0 aggregated (both included) by the returned aggregator: Proposed.
    function _proposed() internal returns (uint256 jobId, address aggregator) {
        jobId = _joined2();
        aggregator = _twoPartyRound(jobId);
        _aggregate(jobId, aggregator, H1, 3, 0);
    }

    /// The stranger challenges the aggregate, the committee is drawn.
    function _challenged(uint256 jobId) internal returns (uint256 caseId, address[] memory members) {
        vm.prank(stranger);
        caseId = dj.challenge(jobId);
        vm.roll(uint256(dj.getJob(jobId).anchorBlock) + 2);
        members = _drawCommittee(jobId);
    }

    /// Draws the committee and returns its members, as clients read them: from CommitteeDrawn.
    function _drawCommittee(uint256 jobId) internal returns (address[] memory members) {
        vm.recordLogs();
        dj.drawCommittee(jobId);
        Vm.Log[] memory logs = vm.getRecordedLogs();
        for (uint256 i; i < logs.length; ++i) {
            if (logs[i].emitter == address(dj) && logs[i].topics[0] == IDilocoJobs.CommitteeDrawn.selector) {
                (, members,,) = abi.decode(logs[i].data, (uint256, address[], uint32, uint256));
            }
        }
        assertEq(members.length, 3, "a committee was drawn");
    }

    function _salt(address member) internal pure returns (bytes32) {
        return keccak256(abi.encode("salt", member));
    }

    function _commitVote(uint256 jobId, uint256 caseId, address member, bool aggregateRight) internal {
        vm.prank(member);
        dj.commitVote(jobId, keccak256(abi.encode(caseId, aggregateRight, _salt(member), member)));
    }

    function _reveal(uint256 jobId, address member, bool aggregateRight) internal {
        vm.prank(member);
        dj.revealVote(jobId, aggregateRight, _salt(member));
    }

    function _phase(uint256 jobId) internal view returns (uint8) {
        return uint8(dj.getJob(jobId).phase);
    }

    function _deadline(uint256 window) internal view returns (uint32) {
        return SafeCast.toUint32(block.timestamp + window);
    }

    function _shape(JobTerms memory t) internal pure returns (bytes memory) {
        return abi.encodeWithSelector(IDilocoJobs.InvalidShape.selector, t.parties, t.minParties, t.rounds);
    }

    function _windows(JobTerms memory t) internal pure returns (bytes memory) {
        return abi.encodeWithSelector(IDilocoJobs.InvalidWindows.selector, t.workWindow, t.verifyWindow);
    }

    function _pay(JobTerms memory t) internal pure returns (bytes memory) {
        return abi.encodeWithSelector(
            IDilocoJobs.InvalidPay.selector, t.innerReward, t.innerFee, t.contributionReward, t.slotBond
        );
    }

    function _invalidParameter(string memory name) internal pure returns (bytes memory) {
        return abi.encodeWithSelector(IDilocoJobs.InvalidParameter.selector, name);
    }

    /// INVARIANT of DilocoJobs: its tokens are every job's funds, every open challenge's deposit and
    /// every credit, plus `surplus` (what the market paid it as an inner job's submitter).
    function _assertBooks(uint256 surplus) internal view {
        uint256 held;
        for (uint256 id = 1; id <= dj.jobCount(); ++id) {
            MultipartyJob memory job = dj.getJob(id);
            held += job.funds;
            if (job.phase == Phase.Contested) held += DEPOSIT;
        }
        assertEq(token.balanceOf(address(dj)), held + dj.totalCredit() + surplus, "funds + deposits + credits");
    }
}

/// DilocoJobs on the Fixture's market (no replay fee).
contract DilocoJobsTest is DilocoJobsFixture {
    // ------------------------------------------------------------------ construction

    function test_constructor_rejectsBadParameters() public {
        DilocoParams memory p = _dilocoParams();
        vm.expectRevert(IDilocoJobs.ZeroAddress.selector);
        new DilocoJobs(IJobMarket(address(0)), p);
        p.aggregatorBond = 0;
        vm.expectRevert(_invalidParameter("aggregatorBond"));
        new DilocoJobs(market, p);
        p = _dilocoParams();
        p.refereeBond = 0;
        vm.expectRevert(_invalidParameter("refereeBond"));
        new DilocoJobs(market, p);
        p = _dilocoParams();
        p.maxParties = 1;
        vm.expectRevert(_invalidParameter("maxParties"));
        new DilocoJobs(market, p);
        p.maxParties = 17;
        vm.expectRevert(_invalidParameter("maxParties"));
        new DilocoJobs(market, p);
        p = _dilocoParams();
        p.committeeSize = 2;
        vm.expectRevert(_invalidParameter("committeeSize"));
        new DilocoJobs(market, p);
        p.committeeSize = 11; // 11 + 4 + 3 > MAX_EXCLUDED
        vm.expectRevert(_invalidParameter("committeeSize"));
        new DilocoJobs(market, p);
        p = _dilocoParams();
        p.challengeDeposit = 3 * REF_FEE - 1;
        vm.expectRevert(_invalidParameter("challengeDeposit"));
        new DilocoJobs(market, p);
        p = _dilocoParams();
        p.aggregateWindow = 0;
        vm.expectRevert(_invalidParameter("aggregateWindow"));
        new DilocoJobs(market, p);
        p = _dilocoParams();
        p.revealWindow = 366 days;
        vm.expectRevert(_invalidParameter("revealWindow"));
        new DilocoJobs(market, p);
    }

    function test_readsItsWiringAndParams() public view {
        assertEq(address(dj.market()), address(market), "market");
        assertEq(address(dj.stakeManager()), address(stakes), "stakes");
        assertEq(address(dj.token()), address(token), "token");
        assertTrue(stakes.isProtocol(address(dj)), "authorized");
        DilocoParams memory p = dj.params();
        assertEq(p.aggregatorBond, AGG_BOND, "aggregatorBond");
        assertEq(p.refereeBond, REF_BOND, "refereeBond");
        assertEq(p.refereeFee, REF_FEE, "refereeFee");
        assertEq(p.challengeDeposit, DEPOSIT, "challengeDeposit");
        assertEq(p.aggregateWindow, AGG_WINDOW, "aggregateWindow");
        assertEq(p.challengeWindow, CH_WINDOW, "challengeWindow");
        assertEq(p.voteWindow, VOTE_WINDOW, "voteWindow");
        assertEq(p.revealWindow, REVEAL_WINDOW, "revealWindow");
        assertEq(p.committeeSize, COMMITTEE, "committeeSize");
        assertEq(p.maxParties, MAX_PARTIES, "maxParties");
    }

    // ------------------------------------------------------------------ post

    function test_post_escrowsExactlyEscrowFor_opensRoundZero() public {
        JobTerms memory t = _terms();
        uint256 inner = dj.innerEscrow(INNER_REWARD, INNER_FEE);
        assertEq(
            inner,
            INNER_REWARD + INNER_FEE + market.jackpotTax(INNER_REWARD, INNER_FEE) + market.replayFee(INNER_REWARD),
            "inner escrow = the market's"
        );
        assertEq(inner, INNER_ESCROW, "inner escrow");
        uint256 escrow = dj.escrowFor(t);
        assertEq(escrow, 2 * (3 * (INNER_ESCROW + CONTRIB) + AGG_FEE), "rounds * (parties * (inner + reward) + fee)");
        uint256 before = token.balanceOf(submitter);
        uint32 deadline = _deadline(WORK);
        vm.expectEmit(true, true, false, true, address(dj));
        emit IDilocoJobs.MultipartyJobPosted(1, submitter, DSPEC, 3, 2, 2, G0, G0_CID, escrow);
        vm.expectEmit(true, false, false, true, address(dj));
        emit IDilocoJobs.RoundOpened(1, 0, G0, G0_CID, deadline);
        uint256 jobId = _postJob();
        assertEq(jobId, 1, "first job");
        assertEq(dj.jobCount(), 1, "job count");
        assertEq(before - token.balanceOf(submitter), escrow, "escrow paid");
        assertEq(token.balanceOf(address(dj)), escrow, "escrow held");
        MultipartyJob memory job = dj.getJob(jobId);
        assertEq(job.submitter, submitter, "submitter");
        assertEq(job.parties, 3, "parties");
        assertEq(job.minParties, 2, "minParties");
        assertEq(job.rounds, 2, "rounds");
        assertEq(job.round, 0, "round 0");
        assertEq(uint8(job.phase), uint8(Phase.Working), "working");
        assertEq(job.deadline, deadline, "deadline");
        assertEq(job.workWindow, WORK, "workWindow");
        assertEq(job.verifyWindow, VERIFY, "verifyWindow");
        assertEq(job.innerReward, INNER_REWARD, "innerReward");
        assertEq(job.innerFee, INNER_FEE, "innerFee");
        assertEq(job.contributionReward, CONTRIB, "contributionReward");
        assertEq(job.aggregatorFee, AGG_FEE, "aggregatorFee");
        assertEq(job.slotBond, SLOT_BOND, "slotBond");
        assertEq(job.specCid, DSPEC, "spec");
        assertEq(job.globalHash, G0, "G0");
        assertEq(job.globalCid, G0_CID, "G0 cid");
        assertEq(job.funds, escrow, "funds");
        _assertBooks(0);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.UnknownJob.selector, 2));
        dj.getJob(2);
    }

    function _expectBadTerms(JobTerms memory t, bytes memory err) internal {
        vm.prank(submitter);
        vm.expectRevert(err);
        dj.post(t);
    }

    function test_post_rejectsBadTerms() public {
        JobTerms memory t = _terms();
        t.parties = 1;
        _expectBadTerms(t, _shape(t));
        t.parties = MAX_PARTIES + 1;
        _expectBadTerms(t, _shape(t));
        t = _terms();
        t.minParties = 0;
        _expectBadTerms(t, _shape(t));
        t.minParties = 4;
        _expectBadTerms(t, _shape(t));
        t = _terms();
        t.rounds = 0;
        _expectBadTerms(t, _shape(t));
        t = _terms();
        t.workWindow = 0;
        _expectBadTerms(t, _windows(t));
        t.workWindow = market.params().maxCommitWindow + 1;
        _expectBadTerms(t, _windows(t));
        t = _terms();
        t.verifyWindow = 366 days;
        _expectBadTerms(t, _windows(t));
        t = _terms();
        t.innerFee = 0;
        _expectBadTerms(t, _pay(t));
        t = _terms();
        t.slotBond = INNER_REWARD + INNER_FEE + CONTRIB - 1; // a wrong party must lose more than its round pays
        _expectBadTerms(t, _pay(t));
        t.slotBond = 0;
        t.contributionReward = 0;
        _expectBadTerms(t, _pay(t));
        t = _terms();
        t.specCid = bytes32(0);
        _expectBadTerms(t, abi.encodeWithSelector(IDilocoJobs.ZeroCid.selector));
        t = _terms();
        t.globalHash = bytes32(0);
        _expectBadTerms(t, abi.encodeWithSelector(IDilocoJobs.ZeroCid.selector));
        t = _terms();
        t.globalCid = bytes32(0);
        _expectBadTerms(t, abi.encodeWithSelector(IDilocoJobs.ZeroCid.selector));
        // the limits themselves are accepted
        t = _terms();
        t.parties = MAX_PARTIES;
        t.minParties = MAX_PARTIES;
        t.workWindow = market.params().maxCommitWindow;
        t.slotBond = INNER_REWARD + INNER_FEE + CONTRIB;
        assertEq(_postWith(t), 1, "posted at the limits");
        assertEq(dj.jobCount(), 1, "only the good one");
    }

    // ------------------------------------------------------------------ join

    function test_join_locksTheSlotBond_oneSlotPerAccount_notTheSubmitter() public {
        uint256 jobId = _postJob();
        vm.expectEmit(true, true, false, true, address(dj));
        emit IDilocoJobs.SlotJoined(jobId, 0, solver, SLOT_BOND);
        _join(jobId, solver, 0);
        assertEq(dj.partyOf(jobId, 0), solver, "party");
        assertEq(_locked(solver, Role.Solver), SLOT_BOND, "slot bond locked");
        assertEq(_staked(solver, Role.Solver), PARTY_STAKE, "nothing taken");
        vm.prank(solver);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.AlreadyParty.selector, jobId, solver));
        dj.join(jobId, 1);
        vm.prank(solver2);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.SlotTaken.selector, jobId, 0, solver));
        dj.join(jobId, 0);
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.NotAuthorized.selector, submitter));
        dj.join(jobId, 1);
        vm.prank(solver2);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.InvalidSlot.selector, jobId, 3));
        dj.join(jobId, 3);
        vm.expectRevert(abi.encodeWithSignature("Panic(uint256)", 0x32)); // past the 16 slots: an index out of bounds
        dj.partyOf(jobId, 16);
        // an account without solver stake cannot put up the bond
        vm.prank(stranger);
        vm.expectRevert(
            abi.encodeWithSelector(IStakeManager.InsufficientStake.selector, stranger, Role.Solver, 0, MIN_SOLVER_STAKE)
        );
        dj.join(jobId, 1);
        vm.prank(solver2);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.UnknownJob.selector, 7));
        dj.join(7, 1);
        uint32 deadline = dj.getJob(jobId).deadline;
        vm.warp(uint256(deadline) + 1);
        vm.prank(solver2);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.DeadlinePassed.selector, jobId, deadline));
        dj.join(jobId, 1);
        assertEq(dj.partyOf(jobId, 1), address(0), "slot 1 still vacant");
        assertEq(_locked(solver2, Role.Solver), 0, "nothing locked");
    }

    // ------------------------------------------------------------------ begin and JobMarket.claimFor

    function test_begin_postsTheInnerJobOnTheMarket_claimedForTheParty() public {
        uint256 jobId = _postJob();
        _join(jobId, solver, 0);
        MultipartyJob memory before = dj.getJob(jobId);
        uint256 held = token.balanceOf(address(dj));
        uint256 expected = market.jobCount() + 1;
        uint256 innerBond = market.solverBond(INNER_REWARD);
        vm.expectEmit(true, false, false, true, address(dj));
        emit IDilocoJobs.InnerJobBegun(jobId, 0, 0, expected, INNER_SPEC);
        vm.expectEmit(true, true, false, true, address(market));
        emit IJobMarket.JobClaimed(expected, solver, innerBond, before.deadline);
        uint256 innerId = _begin(jobId, solver, 0);
        assertEq(innerId, expected, "inner job id");
        Job memory inner = market.getJob(innerId);
        assertEq(inner.submitter, address(dj), "posted by DilocoJobs");
        assertEq(inner.solver, solver, "claimed for the party");
        assertEq(uint8(inner.state), uint8(JobState.Claimed), "claimed");
        assertEq(inner.deadline, before.deadline, "commit deadline = the round's");
        assertEq(inner.reward, INNER_REWARD, "inner reward");
        assertEq(inner.verifierFee, INNER_FEE, "inner fee");
        assertEq(_locked(solver, Role.Solver), SLOT_BOND + innerBond, "slot bond + inner solver bond");
        assertEq(dj.getJob(jobId).funds, before.funds - INNER_ESCROW, "inner escrow out of the funds");
        assertEq(held - token.balanceOf(address(dj)), INNER_ESCROW, "inner escrow to the market");
        _assertBooks(0);

        // nobody else can take the inner job: it is not Open, and only its posting protocol claims for others
        vm.prank(stranger);
        vm.expectRevert(
            abi.encodeWithSelector(IJobMarket.WrongState.selector, innerId, JobState.Claimed, JobState.Open)
        );
        market.claim(innerId);
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.NotAuthorized.selector, stranger));
        market.claimFor(innerId, stranger);
        // once only per round and slot
        vm.prank(solver);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.AlreadyBegun.selector, jobId, 0, 0));
        dj.begin(jobId, 0, INNER_SPEC);
        // only the slot's party
        vm.prank(solver2);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.NotAuthorized.selector, solver2));
        dj.begin(jobId, 0, INNER_SPEC);
        vm.prank(solver2);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.NotAuthorized.selector, solver2));
        dj.begin(jobId, 1, INNER_SPEC);
        vm.prank(solver);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.InvalidSlot.selector, jobId, 3));
        dj.begin(jobId, 3, INNER_SPEC);
        // not after the round's deadline
        _join(jobId, solver2, 1);
        vm.warp(uint256(before.deadline) + 1);
        vm.prank(solver2);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.DeadlinePassed.selector, jobId, before.deadline));
        dj.begin(jobId, 1, INNER_SPEC);
    }

    function test_claimFor_onlyTheProtocolThatPostedTheJob() public {
        uint256 jobId = _post(); // an ordinary job of the submitter
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.NotAuthorized.selector, stranger));
        market.claimFor(jobId, solver);
        // its submitter is no protocol contract
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.NotAuthorized.selector, submitter));
        market.claimFor(jobId, solver);
        // a protocol contract, but not the job's submitter
        vm.prank(address(dj));
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.NotAuthorized.selector, address(dj)));
        market.claimFor(jobId, solver);
        vm.prank(game);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.NotAuthorized.selector, game));
        market.claimFor(jobId, solver);
        assertEq(uint8(_state(jobId)), uint8(JobState.Open), "still open");
        assertEq(_locked(solver, Role.Solver), 0, "no bond locked");
        vm.prank(game);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.UnknownJob.selector, 99));
        market.claimFor(99, solver);
    }

    function test_claimFor_byItsProtocolSubmitter_claimsAsTheSolverWould() public {
        // `game` is a protocol contract of the wiring (an account here): it posts and claims for a solver
        vm.prank(game);
        uint256 jobId = market.postJob(SPEC, REWARD, FEE, COMMIT_WINDOW, false);
        uint256 bond = market.solverBond(REWARD);
        uint32 deadline = _deadline(COMMIT_WINDOW);
        vm.expectEmit(true, true, false, true, address(market));
        emit IJobMarket.JobClaimed(jobId, solver, bond, deadline);
        vm.prank(game);
        market.claimFor(jobId, solver);
        Job memory job = market.getJob(jobId);
        assertEq(uint8(job.state), uint8(JobState.Claimed), "claimed");
        assertEq(job.solver, solver, "for the solver");
        assertEq(job.deadline, deadline, "commit deadline");
        assertEq(_locked(solver, Role.Solver), bond, "solver bond locked from the solver");
        assertEq(_locked(game, Role.Solver), 0, "not from the caller");
        vm.prank(game);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.WrongState.selector, jobId, JobState.Claimed, JobState.Open));
        market.claimFor(jobId, solver2);
        // the solver goes on as after its own claim
        vm.prank(solver);
        market.commit(jobId, ROOT, 11, MODEL, MANIFEST);
        assertEq(uint8(_state(jobId)), uint8(JobState.Committed), "committed");
        // an unstaked solver cannot be handed a job
        vm.prank(game);
        uint256 other = market.postJob(SPEC, REWARD, FEE, COMMIT_WINDOW, false);
        vm.prank(game);
        vm.expectRevert(
            abi.encodeWithSelector(IStakeManager.InsufficientStake.selector, stranger, Role.Solver, 0, MIN_SOLVER_STAKE)
        );
        market.claimFor(other, stranger);
        // nor past the claim deadline
        uint32 claimBy = market.getJob(other).deadline;
        vm.warp(uint256(claimBy) + 1);
        vm.prank(game);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.DeadlinePassed.selector, other, claimBy));
        market.claimFor(other, solver2);
    }

    // ------------------------------------------------------------------ contribute

    function test_contribute_onlyOnceTheTraceIsCommitted_once() public {
        uint256 jobId = _joined2();
        bytes32 cid = _cid(solver, 0);
        bytes32 content = _content(solver, 0);
        vm.prank(solver);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.NotBegun.selector, jobId, 0, 0));
        dj.contribute(jobId, 0, cid, content);
        uint256 innerId = _begin(jobId, solver, 0);
        vm.prank(solver);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.TraceNotCommitted.selector, jobId, innerId));
        dj.contribute(jobId, 0, cid, content);
        _commitTrace(innerId, solver);
        vm.prank(solver);
        vm.expectRevert(IDilocoJobs.ZeroCid.selector);
        dj.contribute(jobId, 0, bytes32(0), content);
        vm.prank(solver);
        vm.expectRevert(IDilocoJobs.ZeroCid.selector);
        dj.contribute(jobId, 0, cid, bytes32(0));
        vm.prank(solver2);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.NotAuthorized.selector, solver2));
        dj.contribute(jobId, 0, cid, content);
        vm.expectEmit(true, false, false, true, address(dj));
        emit IDilocoJobs.ContributionCommitted(jobId, 0, 0, cid, content);
        vm.prank(solver);
        dj.contribute(jobId, 0, cid, content);
        Contribution memory c = dj.contributionOf(jobId, 0, 0);
        assertEq(c.innerJobId, innerId, "inner job");
        assertEq(c.cid, cid, "cid");
        assertEq(c.contentHash, content, "content hash");
        vm.prank(solver);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.AlreadyContributed.selector, jobId, 0, 0));
        dj.contribute(jobId, 0, _cid(solver, 1), content);
        // and only before the round's deadline
        uint256 inner2 = _begin(jobId, solver2, 1);
        _commitTrace(inner2, solver2);
        uint32 deadline = dj.getJob(jobId).deadline;
        vm.warp(uint256(deadline) + 1);
        vm.prank(solver2);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.DeadlinePassed.selector, jobId, deadline));
        dj.contribute(jobId, 1, _cid(solver2, 0), _content(solver2, 0));
    }

    // ------------------------------------------------------------------ a full job

    /// One round of the happy path: solver and solver2 included in the aggregate `stateHash`, final
    /// unchallenged. `paid` (what the job spent before) grows by what this round spent.
    function _happyRound(uint256 jobId, uint16 r, bytes32 stateHash) internal returns (address aggregator) {
        MultipartyJob memory start = dj.getJob(jobId);
        assertEq(start.round, r, "round");
        assertEq(uint8(start.phase), uint8(Phase.Working), "working");
        aggregator = _twoPartyRound(jobId);
        MultipartyJob memory drawn = dj.getJob(jobId);
        assertEq(drawn.funds, start.funds - 2 * INNER_ESCROW, "two inner escrows spent");
        paid += 2 * INNER_ESCROW;
        // the aggregator: a staked verifier, neither a party nor the submitter, its bond locked
        assertTrue(aggregator != solver && aggregator != solver2 && aggregator != submitter, "outsider");
        assertTrue(stakes.isEligible(aggregator, Role.Verifier), "staked verifier");
        assertEq(_locked(aggregator, Role.Verifier), AGG_BOND, "aggregator bond locked");
        assertEq(drawn.deadline, block.timestamp + AGG_WINDOW, "aggregate by");

        uint32 challengeBy = _deadline(CH_WINDOW);
        vm.expectEmit(true, true, false, true, address(dj));
        emit IDilocoJobs.AggregateCommitted(jobId, r, aggregator, stateHash, _stateCid(stateHash), 3, 0, challengeBy);
        _aggregate(jobId, aggregator, stateHash, 3, 0);
        assertEq(_phase(jobId), uint8(Phase.Proposed), "proposed");
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.DeadlineNotReached.selector, jobId, challengeBy));
        dj.finalizeRound(jobId);

        uint256[3] memory credits = [dj.credit(solver), dj.credit(solver2), dj.credit(aggregator)];
        vm.warp(uint256(challengeBy) + 1);
        vm.expectEmit(true, false, false, true, address(dj));
        emit IDilocoJobs.RoundFinalized(jobId, r, stateHash, _stateCid(stateHash), 3, 0);
        if (r + 1 < start.rounds) {
            vm.expectEmit(true, false, false, true, address(dj));
            emit IDilocoJobs.RoundOpened(jobId, r + 1, stateHash, _stateCid(stateHash), _deadline(WORK));
        } else {
            vm.expectEmit(true, false, false, true, address(dj));
            emit IDilocoJobs.MultipartyJobFinished(jobId, r + 1, stateHash, true, drawn.funds - 2 * CONTRIB - AGG_FEE);
        }
        dj.finalizeRound(jobId);
        paid += 2 * CONTRIB + AGG_FEE;
        assertEq(dj.credit(solver) - credits[0], CONTRIB, "party 0 paid");
        assertEq(dj.credit(solver2) - credits[1], CONTRIB, "party 1 paid");
        assertEq(dj.credit(aggregator) - credits[2], AGG_FEE, "aggregator paid");
        assertEq(_locked(aggregator, Role.Verifier), 0, "aggregator bond released");
        MultipartyJob memory end = dj.getJob(jobId);
        assertEq(end.globalHash, stateHash, "new global model");
        assertEq(end.globalCid, _stateCid(stateHash), "new global cid");
        assertEq(end.round, r + 1, "next round");
        if (r + 1 < start.rounds) {
            assertEq(uint8(end.phase), uint8(Phase.Working), "next round working");
            assertEq(end.deadline, block.timestamp + WORK, "next round's deadline");
            assertEq(end.funds, drawn.funds - 2 * CONTRIB - AGG_FEE, "funds less exactly what was paid");
            assertEq(dj.partyOf(jobId, 0), solver, "slots kept");
            assertEq(_locked(solver, Role.Solver), SLOT_BOND, "only the slot bond locked");
        }
        _assertBooks(0);
    }

    function test_happyPath_twoRounds_paysPartiesAndAggregators_refundsTheRest_claims() public {
        uint256 jobId = _joined2();
        uint256 escrow = dj.escrowFor(_terms());
        uint256 solverTokens = token.balanceOf(solver);
        uint256 solver2Tokens = token.balanceOf(solver2);
        address agg0 = _happyRound(jobId, 0, H1);
        address agg1 = _happyRound(jobId, 1, H2);
        MultipartyJob memory job = dj.getJob(jobId);
        uint256 refund = escrow - paid;
        assertEq(paid, 2 * (2 * (INNER_ESCROW + CONTRIB) + AGG_FEE), "two rounds of two parties");
        assertEq(refund, 2 * (INNER_ESCROW + CONTRIB), "the vacant slot's share comes back");
        assertEq(uint8(job.phase), uint8(Phase.Finished), "finished");
        assertEq(job.funds, 0, "no funds left");
        assertEq(job.deadline, 0, "no deadline");
        assertEq(dj.credit(submitter), refund, "submitter refunded");
        assertEq(dj.partyOf(jobId, 0), address(0), "slot 0 released");
        assertEq(dj.partyOf(jobId, 1), address(0), "slot 1 released");
        assertEq(_locked(solver, Role.Solver), 0, "slot bond unlocked");
        assertEq(_locked(solver2, Role.Solver), 0, "slot bond unlocked");
        assertEq(_staked(solver, Role.Solver), PARTY_STAKE, "nothing slashed");
        assertTrue(token.balanceOf(address(dj)) >= dj.totalCredit(), "solvent");
        _assertBooks(0);
        vm.prank(solver);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.WrongPhase.selector, jobId, Phase.Finished, Phase.Working));
        dj.begin(jobId, 0, INNER_SPEC);

        // every credit is claimed in tokens
        uint256 before = token.balanceOf(submitter);
        assertEq(dj.claimCredit(submitter), refund, "refund claimed");
        assertEq(token.balanceOf(submitter) - before, refund, "refund paid");
        assertEq(dj.claimCredit(solver), 2 * CONTRIB, "party claims");
        assertEq(dj.claimCredit(solver2), 2 * CONTRIB, "party claims");
        assertEq(token.balanceOf(solver) - solverTokens, 2 * (INNER_REWARD + CONTRIB), "inner rewards + contributions");
        assertEq(
            token.balanceOf(solver2) - solver2Tokens, 2 * (INNER_REWARD + CONTRIB), "inner rewards + contributions"
        );
        dj.claimCredit(agg0);
        if (agg1 != agg0) dj.claimCredit(agg1);
        vm.expectRevert(abi.encodeWithSelector(ICredits.NoCredit.selector, solver));
        dj.claimCredit(solver);
        assertEq(dj.totalCredit(), 0, "nothing owed");
        assertEq(token.balanceOf(address(dj)), 0, "every token paid out");
        assertEq(dj.sweep(), 0, "no surplus");
    }

    // ------------------------------------------------------------------ commitAggregate

    function test_commitAggregate_rejectsBadAggregates() public {
        uint256 jobId = _joined2();
        address aggregator = _twoPartyRound(jobId);
        bytes32 cid = _stateCid(H1);
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.NotAuthorized.selector, stranger));
        dj.commitAggregate(jobId, H1, cid, 3, 0);
        vm.prank(solver);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.NotAuthorized.selector, solver));
        dj.commitAggregate(jobId, H1, cid, 3, 0);
        vm.startPrank(aggregator);
        // slot 2 contributed nothing: it can be neither included nor wrong
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.NotEligible.selector, jobId, 2));
        dj.commitAggregate(jobId, H1, cid, 7, 0);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.NotEligible.selector, jobId, 2));
        dj.commitAggregate(jobId, H1, cid, 3, 4);
        // overlapping masks, and bits past the job's parties
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.InvalidMasks.selector, 3, 2));
        dj.commitAggregate(jobId, H1, cid, 3, 2);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.InvalidMasks.selector, 11, 0));
        dj.commitAggregate(jobId, H1, cid, 11, 0);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.InvalidMasks.selector, 1, 8));
        dj.commitAggregate(jobId, H1, cid, 1, 8);
        // void (fewer than minParties included) with a state, and a non-void one without
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.InvalidAggregate.selector, jobId, 1, 2));
        dj.commitAggregate(jobId, H1, cid, 1, 0);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.InvalidAggregate.selector, jobId, 0, 2));
        dj.commitAggregate(jobId, H1, cid, 0, 0);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.InvalidAggregate.selector, jobId, 2, 2));
        dj.commitAggregate(jobId, bytes32(0), bytes32(0), 3, 0);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.InvalidAggregate.selector, jobId, 2, 2));
        dj.commitAggregate(jobId, H1, bytes32(0), 3, 0);
        vm.stopPrank();
        assertEq(_phase(jobId), uint8(Phase.Aggregating), "still aggregating");
        // and not after its deadline
        uint32 deadline = dj.getJob(jobId).deadline;
        vm.warp(uint256(deadline) + 1);
        vm.prank(aggregator);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.DeadlinePassed.selector, jobId, deadline));
        dj.commitAggregate(jobId, H1, cid, 3, 0);
    }

    function test_voidRound_paysTheIncluded_andEndsTheJobWithTheLastModel() public {
        uint256 jobId = _joined2();
        address aggregator = _twoPartyRound(jobId);
        // one right contribution of two: below minParties, the round is void
        _aggregate(jobId, aggregator, bytes32(0), 1, 0);
        uint256 funds = dj.getJob(jobId).funds;
        vm.warp(uint256(dj.getJob(jobId).deadline) + 1);
        vm.expectEmit(true, false, false, true, address(dj));
        emit IDilocoJobs.MultipartyJobFinished(jobId, 0, G0, false, funds - CONTRIB - AGG_FEE);
        dj.finalizeRound(jobId);
        MultipartyJob memory job = dj.getJob(jobId);
        assertEq(uint8(job.phase), uint8(Phase.Finished), "finished");
        assertEq(job.globalHash, G0, "the last global model");
        assertEq(job.round, 0, "round 0");
        assertEq(dj.credit(solver), CONTRIB, "included party paid");
        assertEq(dj.credit(solver2), 0, "not included");
        assertEq(dj.credit(aggregator), AGG_FEE, "aggregator paid");
        assertEq(dj.credit(submitter), funds - CONTRIB - AGG_FEE, "the rest refunded");
        assertEq(_locked(solver2, Role.Solver), 0, "slot bond released");
        assertEq(_staked(solver2, Role.Solver), PARTY_STAKE, "not slashed");
        _assertBooks(0);
    }

    function test_wrongContribution_slashesTheSlotBondIntoTheFunds_vacatesTheSlot() public {
        uint256 jobId = _joined3();
        vm.expectRevert(
            abi.encodeWithSelector(IDilocoJobs.DeadlineNotReached.selector, jobId, dj.getJob(jobId).deadline)
        );
        dj.closeRound(jobId); // nobody contributed yet: every slot may still, until the deadline
        uint256[] memory ids = new uint256[](3);
        ids[0] = _work(jobId, solver, 0);
        ids[1] = _work(jobId, solver2, 1);
        ids[2] = _work(jobId, party3, 2);
        _verifyInner(ids);
        _close(jobId);
        address aggregator = _drawAggregator(jobId);
        _aggregate(jobId, aggregator, H1, 3, 4);
        uint256 funds = dj.getJob(jobId).funds;
        uint256 staked = _staked(party3, Role.Solver);
        assertEq(_locked(party3, Role.Solver), SLOT_BOND, "slot bond locked");
        vm.warp(uint256(dj.getJob(jobId).deadline) + 1);
        vm.expectEmit(true, true, false, true, address(dj));
        emit IDilocoJobs.SlotVacated(jobId, 2, party3, SLOT_BOND);
        vm.expectEmit(true, false, false, true, address(dj));
        emit IDilocoJobs.RoundFinalized(jobId, 0, H1, _stateCid(H1), 3, 4);
        dj.finalizeRound(jobId);
        assertEq(staked - _staked(party3, Role.Solver), SLOT_BOND, "slot bond slashed");
        assertEq(_locked(party3, Role.Solver), 0, "nothing left locked");
        assertEq(dj.partyOf(jobId, 2), address(0), "slot vacated");
        assertEq(dj.credit(party3), 0, "not paid");
        assertEq(dj.credit(solver), CONTRIB, "right party paid");
        assertEq(dj.credit(solver2), CONTRIB, "right party paid");
        assertEq(dj.getJob(jobId).funds, funds - 2 * CONTRIB - AGG_FEE + SLOT_BOND, "the bond joins the funds");
        assertEq(dj.getJob(jobId).round, 1, "next round");
        _assertBooks(0);
        // the vacated slot is open to a new party in the next round
        _join(jobId, party4, 2);
        assertEq(dj.partyOf(jobId, 2), party4, "new party");
    }

    // ------------------------------------------------------------------ closeRound

    function test_closeRound_dropsStragglers_cancelsTheirInnerJobs_noSlotBondSlash() public {
        JobTerms memory t = _terms();
        t.parties = 4;
        uint256 jobId = _postWith(t);
        _join(jobId, solver, 0);
        _join(jobId, solver2, 1);
        _join(jobId, party3, 2);
        _join(jobId, party4, 3);
        uint256[] memory ids = new uint256[](2);
        ids[0] = _work(jobId, solver, 0);
        ids[1] = _work(jobId, solver2, 1);
        uint256 straggler = _begin(jobId, party3, 2); // begins, never commits its trace
        _verifyInner(ids);
        uint256 innerBond = market.solverBond(INNER_REWARD);
        uint256 timeoutSlash = innerBond * market.params().timeoutSlashBps / 10_000;
        assertEq(_locked(party3, Role.Solver), SLOT_BOND + innerBond, "slot + inner bond");
        assertEq(_locked(party4, Role.Solver), SLOT_BOND, "slot bond");
        uint256 funds = dj.getJob(jobId).funds;
        vm.warp(uint256(dj.getJob(jobId).deadline) + 1);
        vm.expectEmit(true, false, false, true, address(dj));
        emit IDilocoJobs.InnerEscrowReclaimed(jobId, 0, 2, straggler, INNER_ESCROW);
        vm.expectEmit(true, true, false, true, address(dj));
        emit IDilocoJobs.SlotVacated(jobId, 2, party3, 0);
        vm.expectEmit(true, true, false, true, address(dj));
        emit IDilocoJobs.SlotVacated(jobId, 3, party4, 0);
        vm.expectEmit(true, false, false, true, address(dj));
        emit IDilocoJobs.RoundClosed(jobId, 0, 3, block.number);
        dj.closeRound(jobId);
        assertEq(uint8(_state(straggler)), uint8(JobState.Cancelled), "inner job timed out and cancelled");
        assertEq(dj.getJob(jobId).funds, funds + INNER_ESCROW, "its escrow back in the funds");
        assertEq(dj.partyOf(jobId, 2), address(0), "straggler's slot vacated");
        assertEq(dj.partyOf(jobId, 3), address(0), "idle party's slot vacated");
        assertEq(dj.partyOf(jobId, 0), solver, "contributor stays");
        assertEq(_locked(party3, Role.Solver), 0, "slot bond unlocked");
        assertEq(PARTY_STAKE - _staked(party3, Role.Solver), timeoutSlash, "only the market's timeout slash");
        assertEq(_locked(party4, Role.Solver), 0, "slot bond unlocked");
        assertEq(_staked(party4, Role.Solver), PARTY_STAKE, "no slash for not beginning");
        assertEq(_phase(jobId), uint8(Phase.Drawing), "drawing");
        assertEq(dj.getJob(jobId).anchorBlock, block.number, "anchored here");
        // the timed-out inner bond came to DilocoJobs as the inner job's submitter: surplus for the jackpot
        _assertBooks(timeoutSlash);
        uint256 jackpot = market.jackpot();
        vm.expectEmit(false, false, false, true, address(dj));
        emit IDilocoJobs.SurplusSwept(timeoutSlash);
        assertEq(dj.sweep(), timeoutSlash, "swept");
        assertEq(market.jackpot() - jackpot, timeoutSlash, "into the jackpot");
        _assertBooks(0);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.WrongPhase.selector, jobId, Phase.Drawing, Phase.Working));
        dj.closeRound(jobId);
    }

    function test_closeRound_beforeTheDeadline_onlyOnceEverySlotContributedAndSettled() public {
        uint256 jobId = _joined3();
        vm.expectRevert(
            abi.encodeWithSelector(IDilocoJobs.DeadlineNotReached.selector, jobId, dj.getJob(jobId).deadline)
        );
        dj.closeRound(jobId); // nobody contributed yet: every slot may still, until the deadline
        uint256[] memory ids = new uint256[](3);
        ids[0] = _work(jobId, solver, 0);
        ids[1] = _work(jobId, solver2, 1);
        uint32 deadline = dj.getJob(jobId).deadline;
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.RoundNotSettled.selector, jobId, deadline + VERIFY + 1));
        dj.closeRound(jobId); // slots 0 and 1 not verified yet (and slot 2 may still contribute)
        ids[2] = _work(jobId, party3, 2);
        _verifyInner(ids); // one challenge window (1 hour) of the work window's 2
        // forge-lint: disable-next-line(block-timestamp)
        assertTrue(block.timestamp <= deadline, "before the deadline");
        vm.expectEmit(true, false, false, true, address(dj));
        emit IDilocoJobs.RoundClosed(jobId, 0, 7, block.number);
        dj.closeRound(jobId);
        assertEq(_phase(jobId), uint8(Phase.Drawing), "drawing");
    }

    function test_closeRound_waitsForTheDeadline_andForVerificationUpToTheVerifyWindow() public {
        uint256 jobId = _joined3();
        uint256[] memory ids = new uint256[](2);
        ids[0] = _work(jobId, solver, 0);
        ids[1] = _work(jobId, solver2, 1);
        uint256 late = _work(jobId, party3, 2);
        _verifyInner(ids);
        uint32 deadline = dj.getJob(jobId).deadline;
        // every slot contributed: the round may close before its deadline, once every inner job settled
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.RoundNotSettled.selector, jobId, deadline + VERIFY + 1));
        dj.closeRound(jobId);
        _assign(late); // its verifier never reports
        assertEq(uint8(_state(late)), uint8(JobState.Verifying), "verifying");
        vm.warp(uint256(deadline) + 1);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.RoundNotSettled.selector, jobId, deadline + VERIFY + 1));
        dj.closeRound(jobId);
        vm.warp(uint256(deadline) + VERIFY);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.RoundNotSettled.selector, jobId, deadline + VERIFY + 1));
        dj.closeRound(jobId);
        vm.warp(uint256(deadline) + VERIFY + 1);
        vm.expectEmit(true, false, false, true, address(dj));
        emit IDilocoJobs.RoundClosed(jobId, 0, 3, block.number);
        dj.closeRound(jobId);
        assertEq(_phase(jobId), uint8(Phase.Drawing), "drawing");
        assertEq(dj.partyOf(jobId, 2), party3, "a contributor keeps its slot");
        assertEq(_locked(party3, Role.Solver), SLOT_BOND + market.solverBond(INNER_REWARD), "bonds still locked");
        // the unverified contribution cannot enter the aggregate
        address aggregator = _drawAggregator(jobId);
        assertTrue(aggregator != party3, "not a party");
        vm.prank(aggregator);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.NotEligible.selector, jobId, 2));
        dj.commitAggregate(jobId, H1, _stateCid(H1), 7, 0);
        _aggregate(jobId, aggregator, H1, 3, 0);
        assertEq(dj.aggregateOf(jobId).included, 3, "the eligible two");
    }

    function test_closeRound_belowMinParties_finishesAndRefunds() public {
        uint256 jobId = _joined2();
        uint256[] memory ids = new uint256[](1);
        ids[0] = _work(jobId, solver, 0); // solver2 never begins
        _verifyInner(ids);
        uint256 refund = dj.escrowFor(_terms()) - INNER_ESCROW;
        assertEq(dj.getJob(jobId).funds, refund, "funds");
        vm.warp(uint256(dj.getJob(jobId).deadline) + 1);
        vm.expectEmit(true, true, false, true, address(dj));
        emit IDilocoJobs.SlotVacated(jobId, 1, solver2, 0);
        vm.expectEmit(true, false, false, true, address(dj));
        emit IDilocoJobs.RoundClosed(jobId, 0, 1, block.number);
        vm.expectEmit(true, true, false, true, address(dj));
        emit IDilocoJobs.SlotVacated(jobId, 0, solver, 0);
        vm.expectEmit(true, false, false, true, address(dj));
        emit IDilocoJobs.MultipartyJobFinished(jobId, 0, G0, false, refund);
        dj.closeRound(jobId);
        MultipartyJob memory job = dj.getJob(jobId);
        assertEq(uint8(job.phase), uint8(Phase.Finished), "finished");
        assertEq(job.funds, 0, "funds paid out");
        assertEq(dj.credit(submitter), refund, "submitter credited");
        assertEq(dj.credit(solver), 0, "no contribution reward");
        assertEq(_locked(solver, Role.Solver), 0, "slot bond released");
        assertEq(_locked(solver2, Role.Solver), 0, "slot bond released");
        assertEq(_staked(solver, Role.Solver), PARTY_STAKE, "not slashed");
        assertEq(_staked(solver2, Role.Solver), PARTY_STAKE, "not slashed");
        _assertBooks(0);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.WrongPhase.selector, jobId, Phase.Finished, Phase.Drawing));
        dj.drawAggregator(jobId);
        uint256 before = token.balanceOf(submitter);
        dj.claimCredit(submitter);
        assertEq(token.balanceOf(submitter) - before, refund, "refund paid");
        _assertBooks(0);
    }

    function test_reclaim_anInnerJobRefundedAfterTheJobFinished_creditsTheSubmitter() public {
        uint256 jobId = _joined2();
        uint256[] memory ids = new uint256[](1);
        ids[0] = _work(jobId, solver, 0);
        uint256 disputed = _work(jobId, solver2, 1);
        _verifyInner(ids);
        _report(disputed, _assign(disputed), false); // its verifier fails it: Disputed
        assertEq(uint8(_state(disputed)), uint8(JobState.Disputed), "disputed");
        uint32 deadline = dj.getJob(jobId).deadline;
        vm.warp(uint256(deadline) + VERIFY + 1);
        dj.closeRound(jobId); // one eligible of minParties 2: finished
        uint256 refund = dj.escrowFor(_terms()) - 2 * INNER_ESCROW;
        assertEq(_phase(jobId), uint8(Phase.Finished), "finished");
        assertEq(dj.credit(submitter), refund, "refund");
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.NothingToReclaim.selector, jobId, 0, 1));
        dj.reclaim(jobId, 0, 1);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.InvalidSlot.selector, jobId, 3));
        dj.reclaim(jobId, 0, 3);
        // the dispute times out on the market: the inner escrow comes back to DilocoJobs
        vm.warp(uint256(market.getJob(disputed).deadline) + 1);
        market.timeoutDispute(disputed);
        assertEq(uint8(_state(disputed)), uint8(JobState.Refunded), "refunded");
        _assertBooks(INNER_ESCROW);
        assertEq(dj.sweep(), 0, "an inner escrow not reclaimed yet is owed, not surplus: a sweep takes none of it");
        vm.expectEmit(true, false, false, true, address(dj));
        emit IDilocoJobs.InnerEscrowReclaimed(jobId, 0, 1, disputed, INNER_ESCROW);
        dj.reclaim(jobId, 0, 1);
        assertEq(dj.credit(submitter), refund + INNER_ESCROW, "to the submitter once finished");
        _assertBooks(0);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.NothingToReclaim.selector, jobId, 0, 1));
        dj.reclaim(jobId, 0, 1);
    }

    // ------------------------------------------------------------------ the aggregator's timeout

    function test_timeoutAggregator_slashesItsBondIntoTheFunds_andItIsNotRedrawn() public {
        // verifier3 holds nearly all the verifier stake: it is drawn unless excluded
        _stake(verifier3, Role.Verifier, 900_000 ether);
        uint256 jobId = _joined2();
        address aggregator = _twoPartyRound(jobId);
        assertEq(aggregator, verifier3, "the heavy verifier is drawn");
        uint32 deadline = dj.getJob(jobId).deadline;
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.DeadlineNotReached.selector, jobId, deadline));
        dj.timeoutAggregator(jobId);
        vm.warp(uint256(deadline) + 1);
        vm.prank(aggregator);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.DeadlinePassed.selector, jobId, deadline));
        dj.commitAggregate(jobId, H1, _stateCid(H1), 3, 0);
        uint256 funds = dj.getJob(jobId).funds;
        uint256 staked = _staked(aggregator, Role.Verifier);
        vm.expectEmit(true, true, false, true, address(dj));
        emit IDilocoJobs.AggregatorTimedOut(jobId, 0, aggregator, AGG_BOND);
        dj.timeoutAggregator(jobId);
        assertEq(staked - _staked(aggregator, Role.Verifier), AGG_BOND, "bond slashed");
        assertEq(_locked(aggregator, Role.Verifier), 0, "nothing locked");
        assertEq(dj.getJob(jobId).funds, funds + AGG_BOND, "into the job's funds");
        assertEq(_phase(jobId), uint8(Phase.Drawing), "drawing again");
        Aggregate memory a = dj.aggregateOf(jobId);
        assertEq(a.lastFailed, aggregator, "last failed");
        assertEq(a.aggregator, address(0), "no aggregator");
        _assertBooks(0);
        assertTrue(stakes.isEligible(aggregator, Role.Verifier), "still a heavy verifier");
        address next = _drawAggregator(jobId);
        assertTrue(next != aggregator, "the failed aggregator is not redrawn");
        assertTrue(next != solver && next != solver2 && next != submitter, "outsider");
        _aggregate(jobId, next, H1, 3, 0);
        _finalizeRound(jobId);
        assertEq(dj.credit(next), AGG_FEE, "the next one is paid");
        assertEq(dj.credit(aggregator), 0, "the failed one is not");
        assertEq(dj.getJob(jobId).round, 1, "round advanced");
    }

    // ------------------------------------------------------------------ challenges

    function _assertCommittee(uint256 caseId, address[] memory members, address aggregator) internal view {
        assertEq(members.length, COMMITTEE, "committee size");
        for (uint256 i; i < members.length; ++i) {
            address m = members[i];
            assertTrue(m != solver && m != solver2 && m != submitter, "no party or submitter");
            assertTrue(m != aggregator && m != stranger, "neither side");
            assertTrue(stakes.isEligible(m, Role.Verifier), "a verifier");
            assertEq(_locked(m, Role.Verifier), REF_BOND, "referee bond locked");
            (Ballot ballot,) = dj.ballotOf(caseId, m);
            assertEq(uint8(ballot), uint8(Ballot.Seated), "seated");
            for (uint256 j; j < i; ++j) {
                assertTrue(members[j] != m, "distinct");
            }
        }
    }

    function test_challenge_upheld_slashesTheAggregatorToTheChallenger_redraws() public {
        (uint256 jobId, address aggregator) = _proposed();
        vm.prank(aggregator);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.NotAuthorized.selector, aggregator));
        dj.challenge(jobId);
        uint256 funds = dj.getJob(jobId).funds;
        uint256 tokens = token.balanceOf(stranger);
        vm.expectEmit(true, true, false, true, address(dj));
        emit IDilocoJobs.AggregateChallenged(jobId, 0, 1, stranger, DEPOSIT);
        vm.prank(stranger);
        uint256 caseId = dj.challenge(jobId);
        assertEq(caseId, 1, "case id");
        assertEq(tokens - token.balanceOf(stranger), DEPOSIT, "deposit taken");
        assertEq(_phase(jobId), uint8(Phase.Contested), "contested");
        _assertBooks(0);
        uint256 anchor = dj.getJob(jobId).anchorBlock;
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.RandomnessNotReady.selector, jobId, anchor + 2));
        dj.drawCommittee(jobId);
        vm.roll(anchor + 2);
        address[] memory members = _drawCommittee(jobId);
        _assertCommittee(caseId, members, aggregator);
        vm.expectRevert(
            abi.encodeWithSelector(IDilocoJobs.WrongPhase.selector, jobId, Phase.Contested, Phase.Contested)
        );
        dj.drawCommittee(jobId);

        // two find the aggregate wrong, one right
        uint32 commitEnd = dj.getJob(jobId).deadline;
        _commitVote(jobId, caseId, members[0], false);
        vm.prank(members[0]);
        vm.expectRevert(
            abi.encodeWithSelector(
                IDilocoJobs.WrongBallot.selector, caseId, members[0], Ballot.Committed, Ballot.Seated
            )
        );
        dj.commitVote(jobId, keccak256("again"));
        vm.prank(stranger);
        vm.expectRevert(
            abi.encodeWithSelector(IDilocoJobs.WrongBallot.selector, caseId, stranger, Ballot.Vacant, Ballot.Seated)
        );
        dj.commitVote(jobId, keccak256("not seated"));
        vm.prank(members[1]);
        vm.expectRevert(IDilocoJobs.ZeroCommitment.selector);
        dj.commitVote(jobId, bytes32(0));
        vm.prank(members[0]);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.RevealNotOpen.selector, caseId, commitEnd));
        dj.revealVote(jobId, false, _salt(members[0]));
        _commitVote(jobId, caseId, members[1], false);
        _commitVote(jobId, caseId, members[2], true);
        vm.prank(members[0]);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.CommitmentMismatch.selector, caseId, members[0]));
        dj.revealVote(jobId, true, _salt(members[0]));
        _reveal(jobId, members[0], false);
        _reveal(jobId, members[1], false);
        vm.expectRevert(
            abi.encodeWithSelector(IDilocoJobs.NotSettleable.selector, jobId, uint256(commitEnd) + REVEAL_WINDOW + 1)
        );
        dj.settleChallenge(jobId);
        _reveal(jobId, members[2], true);

        uint256 aggStaked = _staked(aggregator, Role.Verifier);
        tokens = token.balanceOf(stranger);
        uint256 rest = DEPOSIT - 2 * REF_FEE;
        vm.expectEmit(true, false, false, true, address(dj));
        emit IDilocoJobs.ChallengeSettled(jobId, caseId, true, true, rest, 0, 2 * REF_FEE);
        dj.settleChallenge(jobId);
        assertEq(token.balanceOf(stranger) - tokens, AGG_BOND, "the aggregator's bond to the challenger");
        assertEq(dj.credit(stranger), rest, "the deposit less the fees back");
        assertEq(aggStaked - _staked(aggregator, Role.Verifier), AGG_BOND, "aggregator slashed");
        assertEq(_locked(aggregator, Role.Verifier), 0, "nothing left locked");
        assertEq(dj.credit(aggregator), 0, "aggregator unpaid");
        assertEq(dj.credit(members[0]), REF_FEE, "majority paid");
        assertEq(dj.credit(members[1]), REF_FEE, "majority paid");
        assertEq(dj.credit(members[2]), 0, "minority unpaid");
        for (uint256 i; i < members.length; ++i) {
            assertEq(_locked(members[i], Role.Verifier), 0, "referee bond released");
        }
        assertEq(dj.credit(solver), 0, "no round paid");
        assertEq(dj.getJob(jobId).funds, funds, "funds untouched");
        assertEq(_phase(jobId), uint8(Phase.Drawing), "drawing");
        Aggregate memory a = dj.aggregateOf(jobId);
        assertEq(a.lastFailed, aggregator, "last failed");
        assertEq(a.caseId, 0, "case cleared");
        _assertBooks(0);
        assertTrue(stakes.isEligible(aggregator, Role.Verifier), "still eligible by stake");
        address next = _drawAggregator(jobId);
        assertTrue(next != aggregator, "the failed aggregator is not redrawn");
        _aggregate(jobId, next, H1, 3, 0);
        _finalizeRound(jobId);
        assertEq(dj.getJob(jobId).round, 1, "round advanced with the new aggregate");
        _assertBooks(0);
    }

    function test_challenge_rejected_theAggregateIsFinal_theAggregatorTakesTheDeposit() public {
        (uint256 jobId, address aggregator) = _proposed();
        uint256 tokens = token.balanceOf(stranger);
        (uint256 caseId, address[] memory members) = _challenged(jobId);
        _assertCommittee(caseId, members, aggregator);
        for (uint256 i; i < members.length; ++i) {
            _commitVote(jobId, caseId, members[i], true);
        }
        for (uint256 i; i < members.length; ++i) {
            _reveal(jobId, members[i], true);
        }
        uint256 funds = dj.getJob(jobId).funds;
        uint256 rest = DEPOSIT - 3 * REF_FEE;
        vm.expectEmit(true, false, false, true, address(dj));
        emit IDilocoJobs.ChallengeSettled(jobId, caseId, true, false, 0, rest, 3 * REF_FEE);
        vm.expectEmit(true, false, false, true, address(dj));
        emit IDilocoJobs.RoundFinalized(jobId, 0, H1, _stateCid(H1), 3, 0);
        dj.settleChallenge(jobId);
        assertEq(dj.credit(aggregator), rest + AGG_FEE, "deposit rest + aggregator fee");
        assertEq(_locked(aggregator, Role.Verifier), 0, "aggregator bond released");
        assertEq(dj.credit(stranger), 0, "challenger loses its deposit");
        assertEq(tokens - token.balanceOf(stranger), DEPOSIT, "deposit gone");
        for (uint256 i; i < members.length; ++i) {
            assertEq(dj.credit(members[i]), REF_FEE, "majority paid");
            assertEq(_locked(members[i], Role.Verifier), 0, "referee bond released");
        }
        assertEq(dj.credit(solver), CONTRIB, "party paid");
        assertEq(dj.credit(solver2), CONTRIB, "party paid");
        MultipartyJob memory job = dj.getJob(jobId);
        assertEq(job.round, 1, "round advanced");
        assertEq(job.globalHash, H1, "aggregate accepted");
        assertEq(uint8(job.phase), uint8(Phase.Working), "working");
        assertEq(job.funds, funds - 2 * CONTRIB - AGG_FEE, "funds less what was paid");
        _assertBooks(0);
    }

    function test_challenge_aMemberThatDoesNotReveal_losesItsRefereeBond() public {
        (uint256 jobId, address aggregator) = _proposed();
        (uint256 caseId, address[] memory members) = _challenged(jobId);
        for (uint256 i; i < members.length; ++i) {
            _commitVote(jobId, caseId, members[i], false);
        }
        _reveal(jobId, members[0], false);
        _reveal(jobId, members[1], false);
        uint256 revealEnd = uint256(dj.getJob(jobId).deadline) + REVEAL_WINDOW;
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.NotSettleable.selector, jobId, revealEnd + 1));
        dj.settleChallenge(jobId);
        vm.warp(revealEnd + 1);
        vm.prank(members[2]);
        vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.DeadlinePassed.selector, jobId, revealEnd));
        dj.revealVote(jobId, false, _salt(members[2]));
        uint256 silentStake = _staked(members[2], Role.Verifier);
        uint256 rest = DEPOSIT - 2 * REF_FEE + REF_BOND;
        vm.expectEmit(true, true, false, true, address(dj));
        emit IDilocoJobs.MemberSlashed(jobId, caseId, members[2], REF_BOND);
        vm.expectEmit(true, false, false, true, address(dj));
        emit IDilocoJobs.ChallengeSettled(jobId, caseId, true, true, rest, 0, 2 * REF_FEE);
        dj.settleChallenge(jobId);
        assertEq(silentStake - _staked(members[2], Role.Verifier), REF_BOND, "referee bond slashed");
        assertEq(_locked(members[2], Role.Verifier), 0, "nothing left locked");
        assertEq(dj.credit(members[2]), 0, "unpaid");
        assertEq(dj.credit(members[0]), REF_FEE, "majority paid");
        assertEq(dj.credit(stranger), rest, "the silent member's bond to the winner");
        assertEq(_locked(aggregator, Role.Verifier), 0, "aggregator settled");
        assertEq(_phase(jobId), uint8(Phase.Drawing), "drawing");
        _assertBooks(0);
    }

    // ------------------------------------------------------------------ sweep

    function test_sweep_sendsTokensBeyondTheBooksToTheJackpot() public {
        assertEq(dj.sweep(), 0, "nothing held");
        _joined2();
        assertEq(dj.sweep(), 0, "funds are no surplus");
        uint256 jackpot = market.jackpot();
        vm.prank(stranger);
        assertTrue(token.transfer(address(dj), 7 ether), "sent");
        _assertBooks(7 ether);
        vm.expectEmit(false, false, false, true, address(dj));
        emit IDilocoJobs.SurplusSwept(7 ether);
        assertEq(dj.sweep(), 7 ether, "swept");
        assertEq(market.jackpot() - jackpot, 7 ether, "jackpot funded");
        assertEq(dj.sweep(), 0, "nothing left");
        _assertBooks(0);
    }
}

/// DilocoJobs on a market with a 10 % full-replay fee: each inner job escrows it on top, and the market
/// hands it back to DilocoJobs (the inner job's submitter) at a finalize without a full replay.
contract DilocoJobsReplayFeeTest is DilocoJobsFixture {
    uint16 internal constant REPLAY_FEE_BPS = 1000;

    function _params() internal pure override returns (MarketParams memory p) {
        p = super._params();
        p.fullReplayFeeBps = REPLAY_FEE_BPS;
    }

    function test_closeRound_takesTheReplayFeesBackIntoTheFunds_andASweepTakesNoneOfThem() public {
        uint256 fee = market.replayFee(INNER_REWARD);
        assertEq(fee, 1 ether, "10 % of the inner reward");
        uint256 escrow = dj.innerEscrow(INNER_REWARD, INNER_FEE);
        assertEq(escrow, INNER_ESCROW + fee, "the inner escrow carries the replay fee");
        uint256 jobId = _joined2();
        uint256[] memory ids = new uint256[](2);
        ids[0] = _work(jobId, solver, 0);
        ids[1] = _work(jobId, solver2, 1);
        uint256 funds = dj.getJob(jobId).funds;
        assertEq(funds, dj.escrowFor(_terms()) - 2 * escrow, "both inner escrows out of the funds");
        _assertBooks(0);

        _verifyInner(ids); // both finalized by a sampled verification: the replay fees come back
        for (uint256 i; i < ids.length; ++i) {
            assertTrue(!market.isFullReplay(ids[i]), "not fully replayed");
        }
        _assertBooks(2 * fee);
        assertEq(dj.getJob(jobId).funds, funds, "not in the funds until the inner escrows are settled");
        uint256 jackpot = market.jackpot();
        assertEq(dj.sweep(), 0, "inner escrows not settled yet are owed: a sweep takes none of the fees");
        assertEq(market.jackpot(), jackpot, "jackpot untouched");
        _assertBooks(2 * fee);

        vm.expectEmit(true, false, false, true, address(dj));
        emit IDilocoJobs.InnerEscrowReclaimed(jobId, 0, 0, ids[0], fee);
        vm.expectEmit(true, false, false, true, address(dj));
        emit IDilocoJobs.InnerEscrowReclaimed(jobId, 0, 1, ids[1], fee);
        _close(jobId);
        assertEq(_phase(jobId), uint8(Phase.Drawing), "drawing");
        assertEq(dj.getJob(jobId).funds, funds + 2 * fee, "both replay fees back in the funds");
        _assertBooks(0);
        for (uint8 slot; slot < 2; ++slot) {
            vm.expectRevert(abi.encodeWithSelector(IDilocoJobs.NothingToReclaim.selector, jobId, 0, slot));
            dj.reclaim(jobId, 0, slot);
        }
        jackpot = market.jackpot();
        assertEq(dj.sweep(), 0, "no surplus");
        assertEq(market.jackpot(), jackpot, "jackpot untouched");
        assertEq(token.balanceOf(address(dj)), dj.getJob(jobId).funds + dj.totalCredit(), "tokens == funds + credits");
    }
}
