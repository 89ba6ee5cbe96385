// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {SafeCast} from "@openzeppelin/contracts/utils/math/SafeCast.sol";
import {Credits} from "./Credits.sol";
import {Case, CaseStatus, CourtParams, IAvailabilityCourt} from "./interfaces/IAvailabilityCourt.sol";
import {Ballot} from "./interfaces/IDisputeGame.sol";
import {IJobMarket} from "./interfaces/IJobMarket.sol";
import {IStakeManager} from "./interfaces/IStakeManager.sol";
import {Job, JobState, Role} from "./Types.sol";

// Phases are timestamps by design: they are minutes to days, far above the seconds a block producer
// can shift a timestamp.
// forge-lint: disable-next-item(block-timestamp)
/// @title AvailabilityCourt
/// @notice The second path of the data-availability game, for content of any size (IAvailabilityCourt
///         has the rules; docs/protocol.md "Availability court" the trust assumption and the prices).
/// @dev Token balance of this contract == sum of `deposit` over cases not yet settled + totalCredit: a
///      settlement credits (Credits), in the same transaction, its deposit plus every member bond it
///      slashed to this contract, and the parties claim their credit.
contract AvailabilityCourt is IAvailabilityCourt, Credits {
    using SafeERC20 for IERC20;

    uint256 private constant MAX_WINDOW = 365 days;

    /// @inheritdoc IAvailabilityCourt
    IERC20 public immutable token;
    /// @inheritdoc IAvailabilityCourt
    IStakeManager public immutable stakeManager;
    /// @inheritdoc IAvailabilityCourt
    IJobMarket public immutable market;

    uint96 private immutable _refereeBond;
    uint96 private immutable _refereeFee;
    uint96 private immutable _itemFee;
    uint32 private immutable _drawWindow;
    uint32 private immutable _fetchWindow;
    uint32 private immutable _revealWindow;
    uint8 private immutable _committeeSize;

    /// @inheritdoc IAvailabilityCourt
    uint256 public caseCount;
    /// @inheritdoc IAvailabilityCourt
    mapping(uint256 jobId => uint256 caseId) public activeCase;

    mapping(uint256 caseId => Case) private _cases;
    mapping(uint256 caseId => address[]) private _committees;
    mapping(uint256 caseId => mapping(address member => Ballot)) private _ballots;
    mapping(uint256 caseId => mapping(address member => bytes32)) private _commitments;
    /// keccak256(abi.encode(traceRoot, challenger, namesManifest)): one case of each kind per trace and challenger.
    mapping(bytes32 key => bool) private _heard;

    /// @param market_ the JobMarket (its token and StakeManager are the court's); the StakeManager's
    ///        wiring must authorize the court (it locks and slashes member bonds and holds jobs)
    /// @param p the deployment parameters (see CourtParams and docs/protocol.md)
    constructor(IJobMarket market_, CourtParams memory p) {
        IStakeManager stakes = market_.stakeManager();
        if (p.refereeBond == 0) revert InvalidParameter("refereeBond");
        // The exclusion list of a draw: solver, challenger, verifier, submitter + the seats drawn before.
        if (p.committeeSize % 2 == 0 || uint256(p.committeeSize) + 3 > stakes.MAX_EXCLUDED()) {
            revert InvalidParameter("committeeSize");
        }
        if (p.drawWindow == 0 || p.drawWindow > MAX_WINDOW) revert InvalidParameter("drawWindow");
        if (p.fetchWindow == 0 || p.fetchWindow > MAX_WINDOW) revert InvalidParameter("fetchWindow");
        if (p.revealWindow == 0 || p.revealWindow > MAX_WINDOW) revert InvalidParameter("revealWindow");
        market = market_;
        token = market_.token();
        stakeManager = stakes;
        _refereeBond = p.refereeBond;
        _refereeFee = p.refereeFee;
        _itemFee = p.itemFee;
        _drawWindow = p.drawWindow;
        _fetchWindow = p.fetchWindow;
        _revealWindow = p.revealWindow;
        _committeeSize = p.committeeSize;
    }

    // ------------------------------------------------------------------ views

    /// @inheritdoc IAvailabilityCourt
    function params() external view returns (CourtParams memory) {
        return CourtParams({
            refereeBond: _refereeBond,
            refereeFee: _refereeFee,
            itemFee: _itemFee,
            drawWindow: _drawWindow,
            fetchWindow: _fetchWindow,
            revealWindow: _revealWindow,
            committeeSize: _committeeSize
        });
    }

    /// @inheritdoc IAvailabilityCourt
    function getCase(uint256 caseId) external view returns (Case memory) {
        return _case(caseId);
    }

    /// @inheritdoc IAvailabilityCourt
    function committee(uint256 caseId) external view returns (address[] memory) {
        return _committees[caseId];
    }

    /// @inheritdoc IAvailabilityCourt
    function ballotOf(uint256 caseId, address member) external view returns (Ballot, bytes32) {
        return (_ballots[caseId][member], _commitments[caseId][member]);
    }

    /// @inheritdoc IAvailabilityCourt
    function depositFor(uint256 items) public view returns (uint256) {
        return uint256(_committeeSize) * _refereeFee + items * _itemFee;
    }

    // ------------------------------------------------------------------ the case

    /// @inheritdoc IAvailabilityCourt
    function challenge(uint256 jobId, bytes calldata lacking) external nonReentrant returns (uint256 caseId) {
        Job memory job = market.getJob(jobId);
        if (job.state == JobState.Verifying) {
            if (msg.sender != job.verifier) revert NotAuthorized(msg.sender);
        } else if (
            // INVARIANT: no party challenges the availability of a trace it made or passed (as in JobMarket).
            msg.sender == job.solver || msg.sender == job.verifier
                || !stakeManager.isEligible(msg.sender, Role.Whistleblower)
        ) {
            revert NotAuthorized(msg.sender);
        }
        uint256 items = _countItems(jobId, job.checkpointCount, lacking);
        // The manifest's bit: a challenger that lacks the manifest learns which checkpoints it needs
        // only once it is served, so it may name them in a second case.
        bool manifest = uint8(lacking[lacking.length - 1]) >> (job.checkpointCount % 8) & 1 == 1;
        bytes32 key = keccak256(abi.encode(job.traceRoot, msg.sender, manifest));
        // INVARIANT: at most one case naming the manifest and one naming only checkpoints per trace and
        // challenger, so nobody stalls a serving solver by asking again.
        if (_heard[key]) revert AlreadyHeard(jobId, msg.sender);
        _heard[key] = true;
        uint256 deposit = depositFor(items);
        caseId = ++caseCount;
        activeCase[jobId] = caseId;
        uint32 anchor = SafeCast.toUint32(block.number);
        _cases[caseId] = Case({
            jobId: jobId,
            challenger: msg.sender,
            status: CaseStatus.Drawing,
            commits: 0,
            votesServed: 0,
            votesWithheld: 0,
            deadline: 0,
            anchorBlock: anchor,
            openedAt: _now(),
            // items <= checkpointCount + 1 <= 2**24; deposit checked by SafeCast
            // forge-lint: disable-next-line(unsafe-typecast)
            items: uint32(items),
            deposit: SafeCast.toUint96(deposit),
            traceRoot: job.traceRoot
        });
        emit CaseOpened(caseId, jobId, msg.sender, lacking, items, deposit, anchor);
        // Reverts unless the job is Verifying or Verified within its deadline; pauses its clock.
        market.holdForCourt(jobId, msg.sender);
        if (deposit != 0) token.safeTransferFrom(msg.sender, address(this), deposit);
    }

    /// @inheritdoc IAvailabilityCourt
    function drawCommittee(uint256 caseId) external nonReentrant {
        Case storage c = _caseIn(caseId, CaseStatus.Drawing);
        uint256 drawDeadline = uint256(c.openedAt) + _drawWindow;
        if (block.timestamp > drawDeadline) revert DrawWindowPassed(caseId, drawDeadline);
        uint256 anchor = c.anchorBlock;
        // INVARIANT: the committee is drawn from a block hash that did not exist when the case opened.
        if (block.number <= anchor + 1) revert RandomnessNotReady(caseId, anchor + 2);
        bytes32 entropy = blockhash(anchor + 1);
        if (entropy == bytes32(0)) {
            // More than 256 blocks old: no redraw anyone could choose; the case ends undecided.
            _settle(caseId, c, CaseStatus.Undecided);
            return;
        }
        Job memory job = market.getJob(c.jobId);
        uint256 size = _committeeSize;
        address[] memory exclude = new address[](4 + size);
        exclude[0] = job.solver;
        exclude[1] = c.challenger;
        exclude[2] = job.verifier;
        exclude[3] = job.submitter;
        address[] memory drawn = new address[](size);
        for (uint256 i; i < size; ++i) {
            // INVARIANT: every seat reads stakes as of the anchor block, fixed before its entropy existed.
            (address member, bool locked) = stakeManager.drawVerifier(
                keccak256(abi.encode(entropy, "availability", caseId, i)), anchor, exclude, _refereeBond
            );
            if (member == address(0) || !locked) {
                for (uint256 j; j < i; ++j) {
                    stakeManager.unlock(drawn[j], Role.Verifier, _refereeBond);
                }
                if (member == address(0)) {
                    _settle(caseId, c, CaseStatus.Undecided);
                } else {
                    c.anchorBlock = SafeCast.toUint32(block.number);
                    emit CaseReanchored(caseId, block.number);
                }
                return;
            }
            drawn[i] = member;
            exclude[4 + i] = member;
        }
        address[] storage seats = _committees[caseId];
        for (uint256 i; i < size; ++i) {
            seats.push(drawn[i]);
            _ballots[caseId][drawn[i]] = Ballot.Seated;
        }
        uint32 commitDeadline = _after(_fetchWindow);
        c.status = CaseStatus.Voting;
        c.deadline = commitDeadline;
        emit CommitteeDrawn(caseId, drawn, commitDeadline, uint256(commitDeadline) + _revealWindow);
    }

    /// @inheritdoc IAvailabilityCourt
    function commitVote(uint256 caseId, bytes32 commitment) external {
        Case storage c = _caseIn(caseId, CaseStatus.Voting);
        if (block.timestamp > c.deadline) revert PhaseClosed(caseId, c.deadline);
        if (commitment == bytes32(0)) revert ZeroCommitment();
        Ballot ballot = _ballots[caseId][msg.sender];
        // INVARIANT: one commitment per seated member.
        if (ballot != Ballot.Seated) revert WrongBallot(caseId, msg.sender, ballot, Ballot.Seated);
        _ballots[caseId][msg.sender] = Ballot.Committed;
        _commitments[caseId][msg.sender] = commitment;
        ++c.commits; // at most committeeSize <= 13
        emit VoteCommitted(caseId, msg.sender, commitment);
    }

    /// @inheritdoc IAvailabilityCourt
    function revealVote(uint256 caseId, bool served, bytes32 salt) external {
        Case storage c = _caseIn(caseId, CaseStatus.Voting);
        uint256 commitEnd = c.deadline;
        // INVARIANT: no vote is revealed while another member may still commit.
        if (block.timestamp <= commitEnd && c.commits < _committeeSize) revert RevealNotOpen(caseId, commitEnd);
        uint256 revealEnd = commitEnd + _revealWindow;
        if (block.timestamp > revealEnd) revert PhaseClosed(caseId, revealEnd);
        Ballot ballot = _ballots[caseId][msg.sender];
        if (ballot != Ballot.Committed) revert WrongBallot(caseId, msg.sender, ballot, Ballot.Committed);
        if (keccak256(abi.encode(caseId, served, salt, msg.sender)) != _commitments[caseId][msg.sender]) {
            revert CommitmentMismatch(caseId, msg.sender);
        }
        if (served) {
            _ballots[caseId][msg.sender] = Ballot.RevealedDefenderRight;
            ++c.votesServed;
        } else {
            _ballots[caseId][msg.sender] = Ballot.RevealedDefenderWrong;
            ++c.votesWithheld;
        }
        emit VoteRevealed(caseId, msg.sender, served);
    }

    /// @inheritdoc IAvailabilityCourt
    function settle(uint256 caseId) external nonReentrant {
        Case storage c = _case(caseId);
        CaseStatus s = c.status;
        if (s == CaseStatus.Drawing) {
            uint256 drawDeadline = uint256(c.openedAt) + _drawWindow;
            if (block.timestamp <= drawDeadline) revert NotSettleable(caseId, drawDeadline + 1);
            _settle(caseId, c, CaseStatus.Undecided);
            return;
        }
        if (s != CaseStatus.Voting) revert WrongStatus(caseId, s, CaseStatus.Voting);
        uint256 revealEnd = uint256(c.deadline) + _revealWindow;
        uint256 served = c.votesServed;
        uint256 withheld = c.votesWithheld;
        if (block.timestamp <= revealEnd && served + withheld < _committeeSize) {
            revert NotSettleable(caseId, revealEnd + 1);
        }
        if (served == withheld) {
            _settle(caseId, c, CaseStatus.Undecided);
        } else {
            _settle(caseId, c, served > withheld ? CaseStatus.Served : CaseStatus.Withheld);
        }
    }

    // ------------------------------------------------------------------ internals

    function _case(uint256 caseId) private view returns (Case storage c) {
        c = _cases[caseId];
        if (c.status == CaseStatus.None) revert UnknownCase(caseId);
    }

    function _caseIn(uint256 caseId, CaseStatus want) private view returns (Case storage c) {
        c = _case(caseId);
        if (c.status != want) revert WrongStatus(caseId, c.status, want);
    }

    /// The items `lacking` names: exactly checkpointCount / 8 + 1 bytes (bits 0..count-1 the
    /// checkpoints, bit count the manifest, least significant bit first), no bit past the manifest's,
    /// at least one set.
    function _countItems(uint256 jobId, uint256 checkpointCount, bytes calldata lacking)
        private
        pure
        returns (uint256 items)
    {
        uint256 expected = checkpointCount / 8 + 1;
        uint256 length = lacking.length;
        if (length != expected) revert InvalidItems(jobId, length, expected);
        // bits above the manifest's in the last byte; checkpointCount % 8 < 8
        // forge-lint: disable-next-line(unsafe-typecast)
        if (uint8(lacking[length - 1]) >> (checkpointCount % 8 + 1) != 0) revert InvalidItems(jobId, length, expected);
        for (uint256 i; i < length; i += 32) {
            items += _popcount(uint256(bytes32(lacking[i:length < i + 32 ? length : i + 32])));
        }
        if (items == 0) revert InvalidItems(jobId, length, expected);
    }

    /// Set bits of a word (SWAR).
    function _popcount(uint256 x) private pure returns (uint256) {
        unchecked {
            x -= (x >> 1) & 0x5555555555555555555555555555555555555555555555555555555555555555;
            x = (x & 0x3333333333333333333333333333333333333333333333333333333333333333)
                + ((x >> 2) & 0x3333333333333333333333333333333333333333333333333333333333333333);
            x = (x + (x >> 4)) & 0x0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f0f;
            x = (x + (x >> 8)) & 0x00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff00ff;
            // sixteen 16-bit lanes of at most 16 each: their sum (<= 256) lands in the top lane
            return (x * 0x0001000100010001000100010001000100010001000100010001000100010001) >> 240;
        }
    }

    /// Ends a case: closes the committee, releases the job (slashing the solver on Withheld), and credits
    /// the deposit plus the member bonds slashed to this contract. The majority's members get
    /// refereeFee each; on Served the solver gets itemFee per item (its uploads to the committee);
    /// everything else goes to the challenger. A member that did not reveal loses its bond to the
    /// winner (the solver on Served, else the challenger).
    function _settle(uint256 caseId, Case storage c, CaseStatus outcome) private {
        // INVARIANT: a case settles once (callers require Drawing or Voting).
        c.status = outcome;
        uint256 jobId = c.jobId;
        delete activeCase[jobId];
        Ballot majority = outcome == CaseStatus.Served
            ? Ballot.RevealedDefenderRight
            : outcome == CaseStatus.Withheld ? Ballot.RevealedDefenderWrong : Ballot.Vacant;
        (address[] memory earners, uint256 slashed) = _closeCommittee(caseId, majority);
        Job memory job = market.getJob(jobId);
        address solver = job.solver;
        if (outcome == CaseStatus.Withheld) {
            // INVARIANT: a verifier is never slashed for data it could not get; a solver that withheld
            // committed data loses its whole bond to the challenger (as on timeoutAvailability).
            uint256 sBond = market.solverBond(job.reward);
            emit SolverSlashed(caseId, jobId, solver, c.challenger, sBond);
            stakeManager.slash(solver, Role.Solver, sBond, c.challenger);
            stakeManager.unlock(job.verifier, Role.Verifier, market.verifierBond(job.reward));
        }
        // INVARIANT: a job is held only by an open case, and every case releases its job when it ends.
        market.releaseFromCourt(jobId, outcome == CaseStatus.Withheld);
        uint256 fees = earners.length * _refereeFee;
        for (uint256 i; i < earners.length; ++i) {
            _credit(earners[i], _refereeFee);
        }
        // INVARIANT: the solver gets from a deposit only the price of its uploads to the committee.
        uint256 toSolver = outcome == CaseStatus.Served ? uint256(c.items) * _itemFee : 0;
        // fees <= committeeSize * refereeFee: deposit = that + items * itemFee covers both
        uint256 toChallenger = c.deposit - fees - toSolver;
        if (outcome == CaseStatus.Served) toSolver += slashed;
        else toChallenger += slashed;
        address[] memory custodians = outcome == CaseStatus.Served ? earners : new address[](0);
        uint32 resumed = outcome == CaseStatus.Withheld ? 0 : market.getJob(jobId).deadline;
        emit CaseSettled(caseId, jobId, c.challenger, outcome, resumed, custodians, toSolver, toChallenger, fees);
        _credit(solver, toSolver);
        _credit(c.challenger, toChallenger);
    }

    /// Releases the bond of every member that revealed and slashes (to this contract) every one that
    /// did not; returns the members whose revealed ballot is `majority` (none for Vacant) and the
    /// bonds slashed.
    function _closeCommittee(uint256 caseId, Ballot majority)
        private
        returns (address[] memory earners, uint256 slashed)
    {
        address[] storage seats = _committees[caseId];
        uint256 size = seats.length;
        earners = new address[](size);
        uint256 count;
        for (uint256 i; i < size; ++i) {
            address member = seats[i];
            Ballot ballot = _ballots[caseId][member];
            if (ballot == Ballot.RevealedDefenderRight || ballot == Ballot.RevealedDefenderWrong) {
                stakeManager.unlock(member, Role.Verifier, _refereeBond);
                if (ballot == majority) earners[count++] = member;
            } else {
                // INVARIANT: a seated member that did not reveal loses its bond.
                emit MemberSlashed(caseId, member, _refereeBond);
                slashed += _refereeBond;
                stakeManager.slash(member, Role.Verifier, _refereeBond, address(this));
            }
        }
        assembly ("memory-safe") {
            // shrink the array to the members actually collected (count <= size)
            mstore(earners, count)
        }
    }

    function _creditToken() internal view override returns (IERC20) {
        return token;
    }

    function _now() private view returns (uint32) {
        return SafeCast.toUint32(block.timestamp);
    }

    function _after(uint256 window) private view returns (uint32) {
        return SafeCast.toUint32(block.timestamp + window);
    }
}
