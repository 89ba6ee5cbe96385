// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {Fixture} from "./utils/Fixture.sol";
import {KeyRegistry} from "../../contracts/KeyRegistry.sol";
import {SealedJobs} from "../../contracts/SealedJobs.sol";
import {Game, IDisputeGame} from "../../contracts/interfaces/IDisputeGame.sol";
import {IJobMarket} from "../../contracts/interfaces/IJobMarket.sol";
import {IKeyRegistry} from "../../contracts/interfaces/IKeyRegistry.sol";
import {ISealedJobs, KeyDemand, Sealing, SealingStatus} from "../../contracts/interfaces/ISealedJobs.sol";
import {IStakeManager} from "../../contracts/interfaces/IStakeManager.sol";
import {JobState, Role} from "../../contracts/Types.sol";

/// A protocol with SealedJobs (and its KeyRegistry) wired in: StakeManager.authorize([market, game, sealedJobs]).
contract SealedJobsTest is Fixture {
    uint32 internal constant KEY_WINDOW = 10 minutes;
    bytes32 internal constant DATA_KEY = keccak256("the job's data key");
    bytes32 internal constant KEY_HASH = keccak256(abi.encodePacked(DATA_KEY));
    uint256 internal constant BOND = REWARD + FEE;

    KeyRegistry internal keys;
    SealedJobs internal sj;
    address internal whistleblower = address(0xB1);
    address internal whistleblower2 = address(0xB2);

    function _moreProtocols() internal override returns (address[] memory more) {
        keys = new KeyRegistry(stakes);
        sj = new SealedJobs(market, keys, KEY_WINDOW);
        more = new address[](1);
        more[0] = address(sj);
    }

    function setUp() public {
        _setUpActors();
        _fund(whistleblower);
        _fund(whistleblower2);
        _stake(whistleblower, Role.Whistleblower, MIN_WHISTLEBLOWER_STAKE);
        _stake(whistleblower2, Role.Whistleblower, MIN_WHISTLEBLOWER_STAKE);
        vm.prank(submitter);
        token.approve(address(sj), type(uint256).max);
        address[7] memory parties = [solver, solver2, verifier1, verifier2, verifier3, whistleblower, whistleblower2];
        for (uint256 i; i < parties.length; ++i) {
            vm.prank(parties[i]);
            keys.registerKey(keccak256(abi.encode("x25519", parties[i])));
        }
    }

    // ------------------------------------------------------------------ helpers

    function _sealedPost() internal returns (uint256 jobId) {
        jobId = _post();
        vm.prank(submitter);
        sj.seal(jobId, KEY_HASH);
    }

    function _sealedVerifying() internal returns (uint256 jobId, address verifier) {
        jobId = _sealedPost();
        vm.prank(solver);
        market.claim(jobId);
        vm.prank(solver);
        market.commit(jobId, ROOT, 11, MODEL, MANIFEST);
        verifier = _assign(jobId);
    }

    function _sealedVerified() internal returns (uint256 jobId, address verifier) {
        (jobId, verifier) = _sealedVerifying();
        _report(jobId, verifier, true);
    }

    /// publishWraps' arguments for one 80-byte wrap to `to` (the chain cannot open a wrap: zeros do).
    function _oneWrap(address to) internal pure returns (address[] memory recipients, bytes[] memory wraps) {
        recipients = new address[](1);
        recipients[0] = to;
        wraps = new bytes[](1);
        wraps[0] = new bytes(80);
    }

    function _wrap(address from, uint256 jobId, address to) internal {
        (address[] memory recipients, bytes[] memory wraps) = _oneWrap(to);
        vm.prank(from);
        sj.publishWraps(jobId, recipients, wraps);
    }

    function _demand(uint256 jobId, address party) internal {
        vm.prank(party);
        sj.demandKey(jobId);
    }

    function _status(uint256 jobId) internal view returns (SealingStatus) {
        return sj.sealingOf(jobId).status;
    }

    /// INVARIANT of SealedJobs: its tokens are the bonds it holds plus what it owes by credit.
    function _assertBalanced(uint256 held) internal view {
        assertEq(token.balanceOf(address(sj)), held + sj.totalCredit(), "bonds held + credits");
    }

    // ------------------------------------------------------------------ construction

    function test_constructor_rejectsBadArguments() public {
        vm.expectRevert(ISealedJobs.ZeroAddress.selector);
        new SealedJobs(IJobMarket(address(0)), keys, KEY_WINDOW);
        vm.expectRevert(ISealedJobs.ZeroAddress.selector);
        new SealedJobs(market, IKeyRegistry(address(0)), KEY_WINDOW);
        vm.expectRevert(_withName(ISealedJobs.InvalidParameter.selector, "keyWindow"));
        new SealedJobs(market, keys, 0);
        vm.expectRevert(_withName(ISealedJobs.InvalidParameter.selector, "keyWindow"));
        new SealedJobs(market, keys, 366 days);
        KeyRegistry elsewhere = new KeyRegistry(IStakeManager(address(0x1234)));
        vm.expectRevert(_withName(ISealedJobs.InvalidParameter.selector, "keys"));
        new SealedJobs(market, elsewhere, KEY_WINDOW);
    }

    function test_readsItsWiring() public view {
        assertEq(address(sj.market()), address(market), "market");
        assertEq(address(sj.stakeManager()), address(stakes), "stakes");
        assertEq(address(sj.keys()), address(keys), "keys");
        assertEq(address(sj.token()), address(token), "token");
        assertEq(sj.keyWindow(), KEY_WINDOW, "key window");
    }

    // ------------------------------------------------------------------ seal

    function test_seal_escrowsTheBondAndCommits() public {
        uint256 jobId = _post();
        uint256 before = token.balanceOf(submitter);
        vm.expectEmit(true, true, false, true, address(sj));
        emit ISealedJobs.JobSealed(jobId, submitter, KEY_HASH, BOND);
        vm.prank(submitter);
        sj.seal(jobId, KEY_HASH);
        assertEq(before - token.balanceOf(submitter), BOND, "bond paid");
        Sealing memory s = sj.sealingOf(jobId);
        assertEq(s.keyHash, KEY_HASH, "key hash");
        assertEq(s.submitter, submitter, "submitter");
        assertEq(s.bond, BOND, "bond");
        assertEq(uint8(s.status), uint8(SealingStatus.Active), "active");
        _assertBalanced(BOND);
    }

    function test_seal_onlyTheSubmitter_onlyOpen_once_nonZero() public {
        uint256 jobId = _post();
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.NotAuthorized.selector, stranger));
        sj.seal(jobId, KEY_HASH);
        vm.prank(submitter);
        vm.expectRevert(ISealedJobs.ZeroKeyHash.selector);
        sj.seal(jobId, bytes32(0));
        vm.prank(submitter);
        sj.seal(jobId, KEY_HASH);
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.AlreadySealed.selector, jobId));
        sj.seal(jobId, KEY_HASH);
        uint256 claimedId = _claimed();
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.WrongJobState.selector, claimedId, uint8(JobState.Claimed)));
        sj.seal(claimedId, KEY_HASH);
    }

    // ------------------------------------------------------------------ wraps

    function test_requestWrap_staked_keyed_solverOnOpenJob() public {
        uint256 jobId = _sealedPost();
        vm.expectEmit(true, true, false, true, address(sj));
        emit ISealedJobs.WrapRequested(jobId, solver, 1);
        vm.prank(solver);
        sj.requestWrap(jobId);
        // A whistleblower is not a solver: it asks once the job is Verified.
        vm.prank(whistleblower);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.NotEligible.selector, whistleblower));
        sj.requestWrap(jobId);
        // A staked solver without an encryption key has nothing to be wrapped to.
        address keyless = address(0x5E);
        _fund(keyless);
        _stake(keyless, Role.Solver, MIN_SOLVER_STAKE);
        vm.prank(keyless);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.NoEncryptionKey.selector, keyless));
        sj.requestWrap(jobId);
        // An unsealed job has no key to ask for.
        uint256 plain = _post();
        vm.prank(solver);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.NotSealed.selector, plain, SealingStatus.None));
        sj.requestWrap(plain);
    }

    function test_requestWrap_whistleblowersOnVerifiedJobs_notTheJobsParties() public {
        (uint256 jobId, address verifier) = _sealedVerified();
        vm.expectEmit(true, true, false, true, address(sj));
        emit ISealedJobs.WrapRequested(jobId, whistleblower, 1);
        vm.prank(whistleblower);
        sj.requestWrap(jobId);
        vm.prank(verifier);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.NotAuthorized.selector, verifier));
        sj.requestWrap(jobId);
        vm.prank(solver2);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.NotEligible.selector, solver2));
        sj.requestWrap(jobId);
        (uint256 verifying,) = _sealedVerifying();
        vm.prank(whistleblower);
        vm.expectRevert(
            abi.encodeWithSelector(ISealedJobs.WrongJobState.selector, verifying, uint8(JobState.Verifying))
        );
        sj.requestWrap(verifying);
    }

    function test_publishWraps_byKeyHoldersOnly_80Bytes_toKeyedRecipients() public {
        uint256 jobId = _sealedPost();
        vm.expectEmit(true, true, true, true, address(sj));
        emit ISealedJobs.WrapPublished(jobId, solver, submitter, 1, new bytes(80));
        _wrap(submitter, jobId, solver);
        // Before its claim the solver holds no key of this job: it may not wrap.
        (address[] memory recipients, bytes[] memory wraps) = _oneWrap(verifier1);
        vm.prank(solver);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.NotAuthorized.selector, solver));
        sj.publishWraps(jobId, recipients, wraps);
        vm.prank(solver);
        market.claim(jobId);
        vm.prank(solver);
        sj.publishWraps(jobId, recipients, wraps);
        wraps[0] = new bytes(79);
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.InvalidWrap.selector, 79));
        sj.publishWraps(jobId, recipients, wraps);
        wraps[0] = new bytes(80);
        recipients[0] = stranger;
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.NoEncryptionKey.selector, stranger));
        sj.publishWraps(jobId, recipients, wraps);
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.LengthMismatch.selector, 1, 0));
        sj.publishWraps(jobId, recipients, new bytes[](0));
    }

    /// The market's dispute game (an account in this fixture) answers that game `gameId` on `jobId` is
    /// between `defender` and `challenger` and seats `seats`.
    function _gameOn(uint256 jobId, uint256 gameId, address defender, address challenger, address[] memory seats)
        internal
    {
        Game memory g;
        g.defender = defender;
        g.jobId = uint64(jobId);
        g.challenger = challenger;
        vm.etch(game, hex"00");
        vm.mockCall(game, abi.encodeWithSelector(IDisputeGame.getGame.selector, gameId), abi.encode(g));
        vm.mockCall(game, abi.encodeWithSelector(IDisputeGame.committee.selector, gameId), abi.encode(seats));
    }

    function _refereeWrap(address from, uint256 gameId, address to) internal {
        (address[] memory referees, bytes[] memory wraps) = _oneWrap(to);
        vm.prank(from);
        sj.wrapForReferees(gameId, referees, wraps);
    }

    function test_wrapForReferees_byTheGamesParties_toItsSeatedReferees_only() public {
        (uint256 jobId, address verifier) = _sealedVerifying();
        address[] memory seats = new address[](2);
        seats[0] = solver2;
        seats[1] = whistleblower2;
        _gameOn(jobId, 7, solver, verifier, seats);
        // the challenger and the defender each wrap to a seated referee
        vm.expectEmit(true, true, true, true, address(sj));
        emit ISealedJobs.WrapPublished(jobId, solver2, verifier, 1, new bytes(80));
        _refereeWrap(verifier, 7, solver2);
        vm.expectEmit(true, true, true, true, address(sj));
        emit ISealedJobs.WrapPublished(jobId, whistleblower2, solver, 1, new bytes(80));
        _refereeWrap(solver, 7, whistleblower2);
        // nobody else wraps for the game (the submitter wraps with publishWraps), and only to its seats
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.NotAuthorized.selector, submitter));
        _refereeWrap(submitter, 7, solver2);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.NotSeated.selector, 7, whistleblower));
        _refereeWrap(verifier, 7, whistleblower);
        (address[] memory referees, bytes[] memory wraps) = _oneWrap(solver2);
        wraps[0] = new bytes(81);
        vm.prank(verifier);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.InvalidWrap.selector, 81));
        sj.wrapForReferees(7, referees, wraps);
        vm.prank(verifier);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.LengthMismatch.selector, 1, 0));
        sj.wrapForReferees(7, referees, new bytes[](0));
        // a game on a job that is not sealed
        uint256 plain = _post();
        _gameOn(plain, 8, solver, verifier, seats);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.NotSealed.selector, plain, SealingStatus.None));
        _refereeWrap(verifier, 8, solver2);
    }

    function test_declineSeat_releasesTheSeatInTheGame_onASealedJobOnly() public {
        (uint256 jobId, address verifier) = _sealedVerifying();
        address[] memory seats = new address[](1);
        seats[0] = solver2;
        _gameOn(jobId, 7, solver, verifier, seats);
        bytes memory release = abi.encodeWithSelector(IDisputeGame.releaseSeat.selector, 7, solver2);
        vm.mockCall(game, release, "");
        vm.expectCall(game, release);
        vm.prank(solver2);
        sj.declineSeat(7);
        // a game on a job that is not sealed, or whose key is public: the referee has what it needs
        uint256 plain = _post();
        _gameOn(plain, 8, solver, verifier, seats);
        vm.prank(solver2);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.NotSealed.selector, plain, SealingStatus.None));
        sj.declineSeat(8);
    }

    // ------------------------------------------------------------------ the verifier's demand

    function test_verifierDemand_pausesItsClock_aWrapAnswers_theClockResumes() public {
        (uint256 jobId, address verifier) = _sealedVerifying();
        uint256 left = market.getJob(jobId).deadline - block.timestamp;
        vm.expectEmit(true, true, false, true, address(sj));
        emit ISealedJobs.KeyDemanded(jobId, verifier, block.timestamp + KEY_WINDOW, false);
        _demand(jobId, verifier);
        assertEq(uint8(_state(jobId)), uint8(JobState.DataVote), "held");
        KeyDemand memory d = sj.demandOf(jobId);
        assertEq(d.party, verifier, "party");
        assertTrue(d.verifying && !d.keyOnly, "first demand of the verifier");
        vm.warp(block.timestamp + KEY_WINDOW - 1); // past the report deadline the verifier had
        // A wrap to someone else does not answer; the solver's wrap to the verifier does.
        _wrap(solver, jobId, whistleblower);
        assertEq(uint8(_state(jobId)), uint8(JobState.DataVote), "still held");
        vm.expectEmit(true, true, true, true, address(sj));
        emit ISealedJobs.DemandAnswered(jobId, verifier, solver, false);
        _wrap(solver, jobId, verifier);
        assertEq(uint8(_state(jobId)), uint8(JobState.Verifying), "released");
        assertEq(market.getJob(jobId).deadline, block.timestamp + left, "the report clock resumed where it paused");
        assertEq(sj.demandOf(jobId).party, address(0), "no demand");
        assertEq(sj.demandsBy(jobId, verifier), 1, "counted");
    }

    function test_secondDemand_isKeyOnly_wrongKeyRefused_keyAnswers_andIsPublic() public {
        (uint256 jobId, address verifier) = _sealedVerifying();
        _demand(jobId, verifier);
        _wrap(submitter, jobId, verifier);
        _demand(jobId, verifier);
        assertTrue(sj.demandOf(jobId).keyOnly, "key only");
        _wrap(submitter, jobId, verifier);
        assertEq(uint8(_state(jobId)), uint8(JobState.DataVote), "a wrap no longer answers");
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.WrongKey.selector, jobId));
        sj.revealKey(jobId, keccak256("not the key"));
        vm.expectEmit(true, true, false, true, address(sj));
        emit ISealedJobs.KeyRevealed(jobId, stranger, DATA_KEY);
        vm.prank(stranger);
        sj.revealKey(jobId, DATA_KEY);
        assertEq(uint8(_state(jobId)), uint8(JobState.Verifying), "released");
        assertEq(uint8(_status(jobId)), uint8(SealingStatus.Revealed), "revealed");
        vm.prank(verifier);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.KeyPublic.selector, jobId));
        sj.demandKey(jobId);
        (address[] memory recipients, bytes[] memory wraps) = _oneWrap(verifier);
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.NotSealed.selector, jobId, SealingStatus.Revealed));
        sj.publishWraps(jobId, recipients, wraps);
    }

    function test_demand_onlyEntitledParties_oneAtATime_withAKey() public {
        (uint256 jobId, address verifier) = _sealedVerifying();
        address other = verifier == verifier1 ? verifier2 : verifier1;
        vm.prank(other);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.NotAuthorized.selector, other));
        sj.demandKey(jobId);
        vm.prank(whistleblower);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.NotAuthorized.selector, whistleblower));
        sj.demandKey(jobId);
        _demand(jobId, verifier);
        vm.prank(verifier);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.DemandOpen.selector, jobId, verifier));
        sj.demandKey(jobId);
        // A Claimed job has no one to demand: the solver is wrapped to before it claims.
        uint256 claimedId = _sealedPost();
        vm.prank(solver2);
        market.claim(claimedId);
        vm.prank(solver2);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.WrongJobState.selector, claimedId, uint8(JobState.Claimed)));
        sj.demandKey(claimedId);
    }

    function test_demandAfterTheReportDeadline_refusedByTheMarket() public {
        (uint256 jobId, address verifier) = _sealedVerifying();
        uint256 deadline = market.getJob(jobId).deadline;
        vm.warp(deadline + 1);
        vm.prank(verifier);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.DeadlinePassed.selector, jobId, deadline));
        sj.demandKey(jobId);
    }

    function test_answers_endAtTheDeadline_timeoutOnlyAfter() public {
        (uint256 jobId, address verifier) = _sealedVerifying();
        _demand(jobId, verifier);
        uint256 deadline = block.timestamp + KEY_WINDOW;
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.DeadlineNotReached.selector, jobId, deadline));
        sj.timeoutDemand(jobId);
        vm.warp(deadline + 1);
        (address[] memory recipients, bytes[] memory wraps) = _oneWrap(verifier);
        vm.prank(submitter);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.DeadlinePassed.selector, jobId, deadline));
        sj.publishWraps(jobId, recipients, wraps);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.DeadlinePassed.selector, jobId, deadline));
        sj.revealKey(jobId, DATA_KEY);
    }

    function test_unansweredVerifierDemand_forfeitsTheBond_noStakeLost_jobReopens() public {
        (uint256 jobId, address verifier) = _sealedVerifying();
        uint256 solverStake = _staked(solver, Role.Solver);
        uint256 verifierStake = _staked(verifier, Role.Verifier);
        _demand(jobId, verifier);
        vm.warp(block.timestamp + KEY_WINDOW + 1);
        uint256 jackpot = market.jackpot();
        vm.expectEmit(true, true, false, true, address(sj));
        emit ISealedJobs.DemandForfeited(jobId, verifier, FEE, REWARD);
        vm.prank(stranger);
        sj.timeoutDemand(jobId);
        assertEq(uint8(_state(jobId)), uint8(JobState.Open), "reopened");
        assertEq(uint8(_status(jobId)), uint8(SealingStatus.Forfeited), "forfeited");
        assertEq(_locked(solver, Role.Solver), 0, "solver bond released");
        assertEq(_locked(verifier, Role.Verifier), 0, "verifier bond released");
        assertEq(_staked(solver, Role.Solver), solverStake, "solver lost no stake");
        assertEq(_staked(verifier, Role.Verifier), verifierStake, "verifier lost no stake");
        assertEq(sj.credit(verifier), FEE, "verifier paid its fee");
        assertEq(sj.credit(solver), 0, "no pay for training nobody could check");
        assertEq(market.jackpot() - jackpot, REWARD, "the rest to the jackpot");
        _assertBalanced(0);
        uint256 before = token.balanceOf(verifier);
        sj.claimCredit(verifier);
        assertEq(token.balanceOf(verifier) - before, FEE, "claimed");
        // The bond is gone: no return, no second forfeit, no wrap requests for a claim.
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.NotSealed.selector, jobId, SealingStatus.Forfeited));
        sj.returnBond(jobId);
        vm.prank(solver2);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.NotSealed.selector, jobId, SealingStatus.Forfeited));
        sj.requestWrap(jobId);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.NoDemand.selector, jobId));
        sj.timeoutDemand(jobId);
    }

    // ------------------------------------------------------------------ a whistleblower's demand

    function test_whistleblowerDemand_answered_windowResumes() public {
        (uint256 jobId, address verifier) = _sealedVerified();
        uint256 left = market.getJob(jobId).deadline - block.timestamp;
        vm.prank(solver);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.NotAuthorized.selector, solver));
        sj.demandKey(jobId);
        vm.prank(verifier);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.NotAuthorized.selector, verifier));
        sj.demandKey(jobId);
        vm.prank(stranger);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.NotEligible.selector, stranger));
        sj.demandKey(jobId);
        _demand(jobId, whistleblower);
        assertTrue(!sj.demandOf(jobId).verifying, "a whistleblower's");
        vm.warp(block.timestamp + 300);
        _wrap(submitter, jobId, whistleblower);
        assertEq(uint8(_state(jobId)), uint8(JobState.Verified), "back to Verified");
        assertEq(market.getJob(jobId).deadline, block.timestamp + left, "challenge window resumed");
    }

    function test_unansweredWhistleblowerDemand_paysItAFee_jobStillFinalizes() public {
        (uint256 jobId,) = _sealedVerified();
        uint256 left = market.getJob(jobId).deadline - block.timestamp;
        _demand(jobId, whistleblower);
        vm.warp(block.timestamp + KEY_WINDOW + 1);
        uint256 jackpot = market.jackpot();
        sj.timeoutDemand(jobId);
        assertEq(market.jackpot() - jackpot, REWARD, "the rest to the jackpot");
        assertEq(uint8(_state(jobId)), uint8(JobState.Verified), "window resumed");
        assertEq(market.getJob(jobId).deadline, block.timestamp + left, "with the time it had");
        assertEq(sj.credit(whistleblower), FEE, "a verifier's fee to the party withheld from");
        assertEq(uint8(_status(jobId)), uint8(SealingStatus.Forfeited), "forfeited");
        _assertBalanced(0);
        vm.prank(whistleblower2);
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.NotSealed.selector, jobId, SealingStatus.Forfeited));
        sj.demandKey(jobId);
        vm.warp(market.getJob(jobId).deadline + 1);
        market.finalize(jobId);
        assertEq(uint8(_state(jobId)), uint8(JobState.Finalized), "finalized");
    }

    // ------------------------------------------------------------------ the bond's return

    function test_returnBond_onlyOnceSettled() public {
        (uint256 jobId,) = _sealedVerified();
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.NotSettled.selector, jobId, uint8(JobState.Verified)));
        sj.returnBond(jobId);
        vm.warp(market.getJob(jobId).deadline + 1);
        market.finalize(jobId);
        vm.prank(stranger);
        sj.returnBond(jobId);
        assertEq(sj.credit(submitter), BOND, "bond back");
        assertEq(uint8(_status(jobId)), uint8(SealingStatus.Returned), "returned");
        vm.expectRevert(abi.encodeWithSelector(ISealedJobs.NotSealed.selector, jobId, SealingStatus.Returned));
        sj.returnBond(jobId);
        _assertBalanced(0);
    }

    function test_returnBond_afterACancelAndAfterARevealedKey() public {
        uint256 cancelled = _sealedPost();
        vm.prank(submitter);
        market.cancel(cancelled);
        sj.returnBond(cancelled);
        (uint256 jobId, address verifier) = _sealedVerifying();
        _demand(jobId, verifier);
        sj.revealKey(jobId, DATA_KEY);
        _report(jobId, verifier, true);
        vm.warp(market.getJob(jobId).deadline + 1);
        market.finalize(jobId);
        sj.returnBond(jobId);
        assertEq(sj.credit(submitter), 2 * BOND, "both bonds back");
        _assertBalanced(0);
    }
}
