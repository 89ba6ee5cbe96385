// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {Fixture} from "./utils/Fixture.sol";
import {StandardTree} from "./utils/StandardTree.sol";
import {IJobMarket} from "../../contracts/interfaces/IJobMarket.sol";
import {AvailabilityChallenge, JobState, MarketParams, Probe, Role} from "../../contracts/Types.sol";
import {JobMarket} from "../../contracts/JobMarket.sol";
import {CidLib} from "../../contracts/libraries/CidLib.sol";
import {TraceLib} from "../../contracts/libraries/TraceLib.sol";
import {IsolatedGas} from "./utils/IsolatedGas.sol";

/// Calls CidLib on calldata, as JobMarket does.
contract CidHarness {
    function digest(bytes calldata data) external pure returns (bytes32) {
        return CidLib.fileDigest(data);
    }
}

/// The data-availability game (JobMarket.challengeAvailability / answerAvailability /
/// timeoutAvailability) on a job whose trace tree and manifest are real: checkpoint i is the bytes
/// abi.encode("checkpoint", i), its leaf keccak256 of them; the manifest is MANIFEST_BYTES and its
/// committed CID digest was computed by core/storage/unixfs.py (tested against js-ipfs).
contract AvailabilityTest is Fixture {
    uint32 internal constant CHECKPOINTS = 11;
    uint256 internal constant DEPOSIT = 1 ether; // Fixture: availabilityDeposit
    uint32 internal constant WINDOW = 1 hours; // Fixture: availabilityWindow
    bytes internal constant MANIFEST_BYTES = "veritrain manifest";
    /// CIDv0 digests by core.storage.unixfs.file_cid (python): "", MANIFEST_BYTES, 300 x "a", 262144 x "b".
    bytes32 internal constant CID_EMPTY = 0xbfccda787baba32b59c78450ac3d20b633360b43992c77289f9ed46d843561e6;
    bytes32 internal constant CID_MANIFEST = 0xa795f0678211148d1b44c7cc390a051611d7c4a5aa2d392f23c2cd885d288b4e;
    bytes32 internal constant CID_300A = 0xb17898060dcfa9076d5b18ba2b3f11bc47fe7f4dba5c0d7866be35abd868c14e;
    bytes32 internal constant CID_CHUNK_B = 0x3cc6f45c92fa44b95b0470a1ab3a0482b98620bcda6473e9683c8843cb2ecf4c;

    uint256 internal manifestItem;
    bytes32[] internal leaves;
    bytes32 internal root;

    function setUp() public {
        _setUpActors();
        manifestItem = market.MANIFEST_ITEM();
        for (uint256 i; i < CHECKPOINTS; ++i) {
            leaves.push(TraceLib.leaf(i, keccak256(_checkpoint(i))));
        }
        root = StandardTree.root(leaves);
    }

    function _checkpoint(uint256 i) internal pure returns (bytes memory) {
        return abi.encode("checkpoint", i);
    }

    function _proof(uint256 i) internal view returns (bytes32[] memory) {
        return StandardTree.proof(leaves, i);
    }

    /// A job committed with the real trace root and manifest CID, its verifier drawn.
    function _drawn() internal returns (uint256 jobId, address verifier) {
        jobId = _claimed();
        vm.prank(solver);
        market.commit(jobId, root, CHECKPOINTS, MODEL, CID_MANIFEST);
        verifier = _assign(jobId);
    }

    function _challenge(uint256 jobId, address verifier, uint256 item) internal {
        vm.prank(verifier);
        market.challengeAvailability(jobId, item);
    }

    // ------------------------------------------------------------------ CIDv0

    function test_cidLibMatchesIpfsAdd() public {
        CidHarness h = new CidHarness();
        assertEq(h.digest(""), CID_EMPTY, "empty file");
        assertEq(h.digest(MANIFEST_BYTES), CID_MANIFEST, "one-byte varints");
        bytes memory a = new bytes(300);
        for (uint256 i; i < a.length; ++i) {
            a[i] = "a";
        }
        assertEq(h.digest(a), CID_300A, "two-byte varints");
        bytes memory b = new bytes(CidLib.CHUNK_SIZE);
        for (uint256 i; i < b.length; ++i) {
            b[i] = "b";
        }
        assertEq(h.digest(b), CID_CHUNK_B, "a full chunk: three-byte varints");
    }

    // ------------------------------------------------------------------ answered in time

    function test_checkpointAnsweredInTime_resumesReportClock() public {
        (uint256 jobId, address verifier) = _drawn();
        uint256 reportDeadline = market.getJob(jobId).deadline;
        vm.warp(block.timestamp + 600);
        uint256 left = reportDeadline - block.timestamp;
        uint256 verifierBefore = _bal(verifier);
        vm.expectEmit(true, true, false, true, address(market));
        emit IJobMarket.AvailabilityChallenged(jobId, verifier, 3, DEPOSIT, uint32(block.timestamp + WINDOW));
        _challenge(jobId, verifier, 3);
        assertEq(uint8(_state(jobId)), uint8(JobState.DataChallenged), "data challenged");
        assertEq(_bal(verifier), verifierBefore - DEPOSIT, "deposit escrowed");
        AvailabilityChallenge memory c = market.availabilityChallenge(jobId);
        assertEq(c.item, 3, "item");
        assertEq(c.timeLeft, left, "report time left");

        // the report clock is paused: the verifier cannot report or be timed out meanwhile
        vm.warp(reportDeadline + 1);
        vm.expectRevert(
            abi.encodeWithSelector(
                IJobMarket.WrongState.selector, jobId, JobState.DataChallenged, JobState.Verifying
            )
        );
        market.timeoutVerifier(jobId);

        uint256 solverBefore = _bal(solver);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.AvailabilityAnswered(jobId, verifier, solver, 3, _checkpoint(3), SafeCast.toUint32(block.timestamp + left));
        vm.prank(solver);
        market.answerAvailability(jobId, _checkpoint(3), _proof(3));
        assertEq(uint8(_state(jobId)), uint8(JobState.Verifying), "verifying again");
        assertEq(market.getJob(jobId).deadline, block.timestamp + left, "report deadline resumed");
        assertEq(_bal(solver), solverBefore + DEPOSIT, "deposit to the answerer");
        assertTrue(market.isPublished(jobId, 3), "published");
        assertTrue(!market.isPublished(jobId, 4), "only the item");
        assertEq(market.availabilityChallenge(jobId).timeLeft, 0, "challenge cleared");

        // the job goes on as usual: pass, finalize, everyone paid, market holds only the jackpot
        _report(jobId, verifier, true);
        vm.warp(block.timestamp + 1 hours + 1);
        market.finalize(jobId);
        assertEq(uint8(_state(jobId)), uint8(JobState.Finalized), "finalized");
        assertEq(_locked(solver, Role.Solver), 0, "solver bond released");
        assertEq(_locked(verifier, Role.Verifier), 0, "verifier bond released");
        assertEq(_bal(address(market)), market.jackpot(), "no deposit left behind");
    }

    function test_manifestAnsweredInTime() public {
        (uint256 jobId, address verifier) = _drawn();
        assertEq(market.manifestOf(jobId), CID_MANIFEST, "manifest CID stored at commit");
        _challenge(jobId, verifier, manifestItem);
        vm.prank(stranger); // anyone holding the bytes may answer, and is paid the deposit
        market.answerAvailability(jobId, MANIFEST_BYTES, new bytes32[](0));
        assertEq(uint8(_state(jobId)), uint8(JobState.Verifying), "verifying again");
        assertEq(_bal(stranger), FUND + DEPOSIT, "answerer paid");
        assertTrue(market.isPublished(jobId, manifestItem), "manifest published");
    }

    function test_lastCheckpointAndFirst_answerable() public {
        (uint256 jobId, address verifier) = _drawn();
        _challenge(jobId, verifier, CHECKPOINTS - 1);
        vm.prank(solver);
        market.answerAvailability(jobId, _checkpoint(CHECKPOINTS - 1), _proof(CHECKPOINTS - 1));
        _challenge(jobId, verifier, 0);
        vm.prank(solver);
        market.answerAvailability(jobId, _checkpoint(0), _proof(0));
        assertTrue(market.isPublished(jobId, 0) && market.isPublished(jobId, CHECKPOINTS - 1), "both");
    }

    // ------------------------------------------------------------------ not answered: slashed

    function test_unanswered_slashesSolverToVerifier_verifierWhole() public {
        (uint256 jobId, address verifier) = _drawn();
        uint256 sBond = market.solverBond(REWARD);
        uint256 solverStake = _staked(solver, Role.Solver);
        uint256 verifierStake = _staked(verifier, Role.Verifier);
        uint256 verifierBal = _bal(verifier);
        _challenge(jobId, verifier, 5);
        uint256 deadline = market.getJob(jobId).deadline;

        vm.warp(deadline);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.DeadlineNotReached.selector, jobId, deadline));
        market.timeoutAvailability(jobId);
        vm.warp(deadline + 1);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.DeadlinePassed.selector, jobId, deadline));
        vm.prank(solver); // just late: refused
        market.answerAvailability(jobId, _checkpoint(5), _proof(5));

        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.AvailabilityTimedOut(jobId, solver, verifier, 5, sBond);
        vm.prank(stranger);
        market.timeoutAvailability(jobId);

        assertEq(uint8(_state(jobId)), uint8(JobState.Open), "reopened for another solver");
        assertEq(_staked(solver, Role.Solver), solverStake - sBond, "solver bond slashed in full");
        assertEq(_locked(solver, Role.Solver), 0, "nothing left locked");
        assertEq(_staked(verifier, Role.Verifier), verifierStake, "verifier stake whole");
        assertEq(_locked(verifier, Role.Verifier), 0, "verifier bond released");
        assertEq(_bal(verifier), verifierBal + sBond, "verifier: deposit back + the solver's bond");
        assertEq(_bal(address(market)), ESCROW + market.jackpot(), "escrow kept for the next solver");
        // the submitter does not pay for the unserved model: it may take everything back
        uint256 submitterBal = _bal(submitter);
        vm.prank(submitter);
        market.cancel(jobId);
        assertEq(_bal(submitter), submitterBal + ESCROW, "escrow back to the submitter");
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.WrongState.selector, jobId, JobState.Cancelled, JobState.DataChallenged));
        market.timeoutAvailability(jobId);
    }

    // ------------------------------------------------------------------ frivolous challenges

    function test_frivolousChallenge_costsChallengerOnly_andCannotRepeat() public {
        (uint256 jobId, address verifier) = _drawn();
        uint256 reportDeadline = market.getJob(jobId).deadline;
        uint256 verifierBal = _bal(verifier);
        uint256 solverBal = _bal(solver);
        _challenge(jobId, verifier, manifestItem);
        vm.warp(block.timestamp + 20 minutes); // the solver answers whenever it likes within the window
        vm.prank(solver);
        market.answerAvailability(jobId, MANIFEST_BYTES, new bytes32[](0));
        assertEq(_bal(verifier), verifierBal - DEPOSIT, "challenger paid the deposit");
        assertEq(_bal(solver), solverBal + DEPOSIT, "serving solver compensated");
        assertEq(market.getJob(jobId).deadline, reportDeadline + 20 minutes, "report time not extended beyond the pause");
        assertEq(_locked(solver, Role.Solver), market.solverBond(REWARD), "solver bond intact");
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.AlreadyPublished.selector, jobId, manifestItem));
        _challenge(jobId, verifier, manifestItem);
    }

    function test_publishedStaysPublished_forTheSameContent() public {
        (uint256 jobId, address verifier) = _drawn();
        _challenge(jobId, verifier, 2);
        vm.prank(solver);
        market.answerAvailability(jobId, _checkpoint(2), _proof(2));
        // the verifier times out; the next verifier cannot re-ask what is already on chain
        vm.warp(market.getJob(jobId).deadline + 1);
        market.timeoutVerifier(jobId);
        address next = _assign(jobId);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.AlreadyPublished.selector, jobId, 2));
        _challenge(jobId, next, 2);
    }

    // ------------------------------------------------------------------ wrong answers, wrong callers

    function test_wrongContentReverts() public {
        (uint256 jobId, address verifier) = _drawn();
        _challenge(jobId, verifier, 4);
        bytes memory flipped = _checkpoint(4);
        flipped[40] ^= 0x01;
        bytes4 mismatch = IJobMarket.ContentMismatch.selector;
        vm.expectRevert(abi.encodeWithSelector(mismatch, jobId, 4));
        market.answerAvailability(jobId, flipped, _proof(4));
        vm.expectRevert(abi.encodeWithSelector(mismatch, jobId, 4));
        market.answerAvailability(jobId, _checkpoint(5), _proof(5)); // another leaf
        bytes memory truncated = new bytes(32);
        vm.expectRevert(abi.encodeWithSelector(mismatch, jobId, 4));
        market.answerAvailability(jobId, truncated, _proof(4));
        vm.prank(solver);
        market.answerAvailability(jobId, _checkpoint(4), _proof(4));

        _challenge(jobId, verifier, manifestItem);
        vm.expectRevert(abi.encodeWithSelector(mismatch, jobId, manifestItem));
        market.answerAvailability(jobId, "veritrain manifesT", new bytes32[](0));
        vm.expectRevert(abi.encodeWithSelector(mismatch, jobId, manifestItem));
        market.answerAvailability(jobId, MANIFEST_BYTES, _proof(0)); // a manifest takes no proof
        assertEq(uint8(_state(jobId)), uint8(JobState.DataChallenged), "still owed");
    }

    function test_challengeGuards() public {
        (uint256 jobId, address verifier) = _drawn();
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.NotAuthorized.selector, solver));
        _challenge(jobId, solver, 1);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.InvalidItem.selector, jobId, CHECKPOINTS));
        _challenge(jobId, verifier, CHECKPOINTS);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.InvalidItem.selector, jobId, manifestItem + 1));
        _challenge(jobId, verifier, manifestItem + 1);
        uint256 deadline = market.getJob(jobId).deadline;
        vm.warp(deadline + 1);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.DeadlinePassed.selector, jobId, deadline));
        _challenge(jobId, verifier, 1);
        vm.warp(deadline);
        _challenge(jobId, verifier, 1); // the last second of the report window still pauses it
        assertEq(market.availabilityChallenge(jobId).timeLeft, 0, "no time left, none gained");
        vm.expectRevert(
            abi.encodeWithSelector(IJobMarket.WrongState.selector, jobId, JobState.DataChallenged, JobState.Verifying)
        );
        _challenge(jobId, verifier, 2); // one challenge at a time
        Probe[] memory none = new Probe[](0);
        vm.expectRevert(
            abi.encodeWithSelector(IJobMarket.WrongState.selector, jobId, JobState.DataChallenged, JobState.Verifying)
        );
        vm.prank(verifier);
        market.report(jobId, false, REPORT, seals[jobId].assignSeed, seals[jobId].forcedCommitment, none);

        uint256 other = _committed();
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.WrongState.selector, other, JobState.Committed, JobState.Verifying));
        _challenge(other, verifier, 1);
        vm.expectRevert(
            abi.encodeWithSelector(IJobMarket.WrongState.selector, other, JobState.Committed, JobState.DataChallenged)
        );
        market.answerAvailability(other, _checkpoint(1), _proof(1));
    }

    // ------------------------------------------------------------------ whistleblowers

    /// A passed job in its challenge window, and a staked whistleblower (the stranger).
    function _passed() internal returns (uint256 jobId, address verifier) {
        (jobId, verifier) = _drawn();
        _report(jobId, verifier, true);
        _stake(stranger, Role.Whistleblower, MIN_WHISTLEBLOWER_STAKE);
    }

    function test_whistleblowerChallenge_answered_resumesChallengeWindow() public {
        (uint256 jobId,) = _passed();
        uint256 windowEnd = market.getJob(jobId).deadline;
        vm.warp(block.timestamp + 10 minutes);
        uint256 left = windowEnd - block.timestamp;
        uint256 whistleblowerBal = _bal(stranger);
        _challenge(jobId, stranger, 6);
        assertEq(uint8(_state(jobId)), uint8(JobState.DataChallenged), "challenged");
        assertEq(market.availabilityChallenge(jobId).challenger, stranger, "by the whistleblower");
        vm.warp(block.timestamp + 30 minutes); // the window would have ended: it is paused
        vm.expectRevert(
            abi.encodeWithSelector(IJobMarket.WrongState.selector, jobId, JobState.DataChallenged, JobState.Verified)
        );
        market.finalize(jobId);
        uint256 solverBal = _bal(solver);
        vm.prank(solver);
        market.answerAvailability(jobId, _checkpoint(6), _proof(6));
        assertEq(uint8(_state(jobId)), uint8(JobState.Verified), "verified again");
        assertEq(market.getJob(jobId).deadline, block.timestamp + left, "challenge window resumed");
        assertEq(_bal(solver), solverBal + DEPOSIT, "deposit to the answerer");
        assertEq(_bal(stranger), whistleblowerBal - DEPOSIT, "the whistleblower paid for its challenge");
        vm.warp(block.timestamp + left + 1);
        market.finalize(jobId);
        assertEq(uint8(_state(jobId)), uint8(JobState.Finalized), "paid as usual");
    }

    function test_whistleblowerChallenge_unanswered_slashesSolverToWhistleblower() public {
        (uint256 jobId, address verifier) = _passed();
        uint256 sBond = market.solverBond(REWARD);
        uint256 solverStake = _staked(solver, Role.Solver);
        uint256 verifierStake = _staked(verifier, Role.Verifier);
        uint256 verifierBal = _bal(verifier);
        uint256 whistleblowerBal = _bal(stranger);
        _challenge(jobId, stranger, manifestItem);
        vm.warp(market.getJob(jobId).deadline + 1);
        vm.expectEmit(true, true, true, true, address(market));
        emit IJobMarket.AvailabilityTimedOut(jobId, solver, stranger, manifestItem, sBond);
        market.timeoutAvailability(jobId);
        assertEq(uint8(_state(jobId)), uint8(JobState.Open), "reopened");
        assertEq(_staked(solver, Role.Solver), solverStake - sBond, "solver bond slashed in full");
        assertEq(_bal(stranger), whistleblowerBal + sBond, "whistleblower: deposit back + the solver's bond");
        assertEq(_staked(verifier, Role.Verifier), verifierStake, "the verifier is not slashed");
        assertEq(_locked(verifier, Role.Verifier), 0, "its bond released");
        assertEq(_bal(verifier), verifierBal, "nor paid: the job reopens with its escrow");
        assertEq(_bal(address(market)), ESCROW + market.jackpot(), "escrow kept");
    }

    function test_whistleblowerChallengeGuards() public {
        (uint256 jobId, address verifier) = _passed();
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.NotAuthorized.selector, solver));
        _challenge(jobId, solver, 1);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.NotAuthorized.selector, verifier));
        _challenge(jobId, verifier, 1); // it passed the trace: it had the data
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.NotAuthorized.selector, submitter));
        _challenge(jobId, submitter, 1); // no whistleblower stake
        uint256 windowEnd = market.getJob(jobId).deadline;
        vm.warp(windowEnd + 1);
        vm.expectRevert(abi.encodeWithSelector(IJobMarket.DeadlinePassed.selector, jobId, windowEnd));
        _challenge(jobId, stranger, 1);
    }

    function test_constructorRejectsBadWindow() public {
        MarketParams memory p = _params();
        p.availabilityWindow = 0;
        vm.expectRevert(_withName(IJobMarket.InvalidParameter.selector, "availabilityWindow"));
        new JobMarket(token, stakes, p);
        p.availabilityWindow = 365 days + 1;
        vm.expectRevert(_withName(IJobMarket.InvalidParameter.selector, "availabilityWindow"));
        new JobMarket(token, stakes, p);
    }
}

/// Transaction gas of the data-availability moves (snapshots/AvailabilityGas.json), regenerated by
///   node_modules/.bin/forge test --offline --isolate --match-contract AvailabilityGasTest
/// (without --isolate the test skips itself and writes nothing). Steady state as GasSnapshotTest: the
/// market and every actor were used once. Checkpoints of 4 KiB (the demo's tiny MLP is ~4 KiB) and
/// 64 KiB, a manifest of 2 KiB; an 11-leaf trace tree (proofs of 3-4 hashes).
contract AvailabilityGasTest is Fixture, IsolatedGas {
    string internal constant GROUP = "AvailabilityGas";
    /// Budgets, a little above the figures (README): a challenge, a 4 KiB and a 64 KiB checkpoint
    /// answer, a 2 KiB manifest answer, a timeout.
    uint256 internal constant CHALLENGE_BUDGET = 85_000;
    uint256 internal constant ANSWER_4KIB_BUDGET = 200_000;
    uint256 internal constant ANSWER_64KIB_BUDGET = 1_800_000;
    uint256 internal constant ANSWER_MANIFEST_BUDGET = 145_000;
    uint256 internal constant TIMEOUT_BUDGET = 110_000;
    uint32 internal constant CHECKPOINTS = 11;

    bytes32[] internal leaves;
    bytes internal manifestBytes;
    bytes32 internal manifestCid;
    CidHarness internal cids;

    function setUp() public {
        _setUpActors();
        (uint256 warm, address v) = _verified();
        vm.warp(block.timestamp + 1 hours + 1);
        market.finalize(warm);
        _stake(v, Role.Verifier, 1);
        _post(); // stays open: the market holds escrow
        cids = new CidHarness();
        manifestBytes = _filled(2048, "m");
        manifestCid = cids.digest(manifestBytes);
        for (uint256 i; i < CHECKPOINTS; ++i) {
            leaves.push(TraceLib.leaf(i, keccak256(_checkpoint(i))));
        }
    }

    /// Checkpoint 3 is 64 KiB, the others 4 KiB.
    function _checkpoint(uint256 i) internal pure returns (bytes memory data) {
        data = _filled(i == 3 ? 65_536 : 4096, bytes1(SafeCast.toUint8(0x41 + i)));
    }

    function _filled(uint256 size, bytes1 b) internal pure returns (bytes memory data) {
        data = new bytes(size);
        for (uint256 j; j < size; ++j) {
            data[j] = b;
        }
    }

    function _drawn() internal returns (uint256 jobId, address verifier) {
        jobId = _claimed();
        vm.prank(solver);
        market.commit(jobId, StandardTree.root(leaves), CHECKPOINTS, MODEL, manifestCid);
        verifier = _assign(jobId);
    }

    function test_availability_gas() public {
        if (!_isolated()) return;
        (uint256 jobId, address verifier) = _drawn();
        uint256 manifestItem = market.MANIFEST_ITEM();
        uint256[7] memory used;
        vm.prank(verifier);
        market.challengeAvailability(jobId, 5);
        used[0] = _gas();
        bytes memory content = _checkpoint(5);
        bytes32[] memory proof = StandardTree.proof(leaves, 5);
        vm.prank(solver);
        market.answerAvailability(jobId, content, proof);
        used[1] = _gas();
        vm.prank(verifier);
        market.challengeAvailability(jobId, 3);
        content = _checkpoint(3);
        proof = StandardTree.proof(leaves, 3);
        vm.prank(solver);
        market.answerAvailability(jobId, content, proof);
        used[2] = _gas();
        vm.prank(verifier);
        market.challengeAvailability(jobId, manifestItem);
        used[3] = _gas();
        content = manifestBytes;
        vm.prank(solver);
        market.answerAvailability(jobId, content, new bytes32[](0));
        used[4] = _gas();
        vm.prank(verifier);
        market.challengeAvailability(jobId, 7);
        used[5] = _gas();
        vm.warp(block.timestamp + 1 hours + 1);
        market.timeoutAvailability(jobId);
        used[6] = _gas();
        string[7] memory names = [
            "challengeAvailability_checkpoint",
            "answerAvailability_checkpoint4KiB",
            "answerAvailability_checkpoint64KiB",
            "challengeAvailability_manifest",
            "answerAvailability_manifest2KiB",
            "challengeAvailability_third",
            "timeoutAvailability"
        ];
        for (uint256 i; i < used.length; ++i) {
            vm.snapshotValue(GROUP, names[i], used[i]);
        }
        assertTrue(used[0] <= CHALLENGE_BUDGET && used[3] <= CHALLENGE_BUDGET, "challenge");
        assertTrue(used[5] <= CHALLENGE_BUDGET, "third challenge");
        assertTrue(used[1] <= ANSWER_4KIB_BUDGET, "4 KiB answer");
        assertTrue(used[2] <= ANSWER_64KIB_BUDGET, "64 KiB answer");
        assertTrue(used[4] <= ANSWER_MANIFEST_BUDGET, "manifest answer");
        assertTrue(used[6] <= TIMEOUT_BUDGET, "timeout");
    }
}
