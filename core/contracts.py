"""Typed wrappers over the deployed VeriToken, StakeManager, JobMarket, DisputeGame, AvailabilityCourt, KeyRegistry, SealedJobs and DilocoJobs.

Each wrapper method is one line over the compiled ABI (read from
build/contracts): argument encoding, return decoding, revert decoding and
signing are generic. Struct results become frozen dataclasses whose fields
are checked against the ABI's struct components when decoded, and a test
checks that every ABI function has its method, so the wrappers cannot drift
from the contracts silently.

Reads need no signer; writes use the wrapper's signer (``with_signer``) and
return a :class:`core.chain.Receipt` (``gas_used`` included).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, ClassVar, NewType, Self, TypeVar

from eth_abi import encode as abi_encode
from eth_utils import event_abi_to_log_topic, keccak, to_checksum_address
from web3.contract import Contract

from core import artifacts
from core.address_book import AddressBook
from core.chain import Address, BlockNumber, ChainClient, Receipt, Signer
from core.cid import Cid, digest_to_cid
from core.errors import ArtifactsMissing, ChainError, SignerError
from core.gas import answer_availability_gas
from core.probe import Bytes32, Probe

__all__ = [
    "JobId",
    "GameId",
    "TokenAmount",
    "Bytes32",
    "Role",
    "JobState",
    "RefundReason",
    "GameStatus",
    "Ballot",
    "SettleReason",
    "Job",
    "MarketParams",
    "ReportSeal",
    "TraceCommitment",
    "ForcedSeed",
    "AvailabilityChallenge",
    "StakeInfo",
    "Device",
    "Capabilities",
    "Game",
    "GameParams",
    "Event",
    "VeriToken",
    "StakeManager",
    "JobMarket",
    "DisputeGame",
    "AvailabilityCourt",
    "KeyRegistry",
    "RegisteredKey",
    "SealedJobs",
    "Sealing",
    "SealingStatus",
    "KeyDemand",
    "PublishedWrap",
    "WrapRequest",
    "Case",
    "CaseStatus",
    "CourtParams",
    "court_commitment",
    "DilocoJobs",
    "DilocoParams",
    "JobTerms",
    "MultipartyJob",
    "MultipartyPhase",
    "MultipartyContribution",
    "MultipartyAggregate",
    "lacking_bitmap",
    "lacking_items",
    "reports_draw",
    "Protocol",
    "MANIFEST_ITEM",
]

JobId = NewType("JobId", int)
GameId = NewType("GameId", int)
TokenAmount = NewType("TokenAmount", int)  # token base units (18 decimals)

ZERO_ADDRESS = Address("0x0000000000000000000000000000000000000000")
#: The item number of the manifest in availability challenges (``JobMarket.MANIFEST_ITEM``, a
#: constant; tests/chain/test_availability.py checks it against the chain). Checkpoints are their index.
MANIFEST_ITEM = 2**24 - 1


class Role(IntEnum):
    SOLVER = 0
    VERIFIER = 1
    WHISTLEBLOWER = 2


class Device(IntEnum):
    """What a solver trains on (Types.sol ``Device``)."""

    CPU = 0
    CUDA = 1


class JobState(IntEnum):
    NONE = 0
    OPEN = 1
    CLAIMED = 2
    COMMITTED = 3
    VERIFYING = 4
    VERIFIED = 5
    DISPUTED = 6
    FINALIZED = 7
    CANCELLED = 8
    REFUNDED = 9
    DATA_CHALLENGED = 10
    """A Verifying job whose verifier challenged the availability of one item: the report clock is
    paused until the solver publishes it (``answerAvailability``) or is slashed (``timeoutAvailability``)."""
    DATA_VOTE = 11
    """A Verifying or Verified job held by an ``AvailabilityCourt`` case: a drawn committee checks that the
    named items are served; the challenger's clock is paused until the case settles."""

    @property
    def final(self) -> bool:
        return self in (JobState.FINALIZED, JobState.CANCELLED, JobState.REFUNDED)


class RefundReason(IntEnum):
    EXPIRED = 0
    NO_ELIGIBLE_VERIFIER = 1
    VERIFIER_DRAWS_EXHAUSTED = 2
    DISPUTE_TIMED_OUT = 3


class GameStatus(IntEnum):
    """Where a dispute game stands (IDisputeGame.sol ``GameStatus``; docs/dispute.md)."""

    NONE = 0
    DEFENDER_TO_MOVE = 1
    CHALLENGER_TO_MOVE = 2
    ISOLATED = 3
    ARBITRATING = 4
    DEFENDER_WON = 5
    CHALLENGER_WON = 6
    UNDECIDED = 7

    @property
    def final(self) -> bool:
        return self in (GameStatus.DEFENDER_WON, GameStatus.CHALLENGER_WON, GameStatus.UNDECIDED)

    @property
    def bisecting(self) -> bool:
        return self in (GameStatus.DEFENDER_TO_MOVE, GameStatus.CHALLENGER_TO_MOVE)


class CaseStatus(IntEnum):
    """Where an availability case stands (IAvailabilityCourt.sol ``CaseStatus``; docs/protocol.md)."""

    NONE = 0
    DRAWING = 1
    VOTING = 2
    SERVED = 3
    WITHHELD = 4
    UNDECIDED = 5

    @property
    def final(self) -> bool:
        return self in (CaseStatus.SERVED, CaseStatus.WITHHELD, CaseStatus.UNDECIDED)


class SealingStatus(IntEnum):
    """What became of a sealed job's key bond (ISealedJobs.sol ``SealingStatus``; docs/sealing.md)."""

    NONE = 0
    ACTIVE = 1
    REVEALED = 2
    """A demand was answered with the data key itself: the job's data is sealed to nobody any more."""
    FORFEITED = 3
    """A demand went unanswered: the demander was credited the verifier fee, the rest went to the jackpot."""
    RETURNED = 4


class Ballot(IntEnum):
    """A referee's ballot in one game (VACANT: not on the committee)."""

    VACANT = 0
    SEATED = 1
    COMMITTED = 2
    REVEALED_DEFENDER_RIGHT = 3
    REVEALED_DEFENDER_WRONG = 4
    DECLINED = 5
    """Released before committing (``SealedJobs.declineSeat``: a sealed job's referee given no key that opens)."""


class SettleReason(IntEnum):
    """How a game ended (``DisputeSettled.reason``)."""

    VERDICT = 0
    DEFENDER_CLOCK = 1
    CHALLENGER_CLOCK = 2
    NO_COMMITTEE = 3
    NO_MAJORITY = 4
    JOB_GONE = 5
    FORCED_ERROR = 6
    """A report game's defender conceded a forced error (``concedeForced``); the challenger won."""


class MultipartyPhase(IntEnum):
    """Where a multi-party job's current round stands (IDilocoJobs.sol ``Phase``; docs/multiparty.md)."""

    NONE = 0
    WORKING = 1
    DRAWING = 2
    AGGREGATING = 3
    PROPOSED = 4
    CONTESTED = 5
    FINISHED = 6


_ENUMS: Mapping[str, type[IntEnum]] = {
    "Phase": MultipartyPhase,
    "Role": Role,
    "Device": Device,
    "JobState": JobState,
    "RefundReason": RefundReason,
    "GameStatus": GameStatus,
    "CaseStatus": CaseStatus,
    "SealingStatus": SealingStatus,
    "Ballot": Ballot,
    "SettleReason": SettleReason,
}


@dataclass(frozen=True)
class Job:
    """JobMarket's stored job (Types.sol ``Job``). The spec CID and the trace CIDs live in events."""

    solver: Address
    reward: TokenAmount
    verifier: Address
    verifier_fee: TokenAmount
    submitter: Address
    state: JobState
    deadline: int
    """Unix deadline of the current phase (none, 0, in Committed)."""
    draws: int
    commit_window: int
    checkpoint_count: int
    trace_root: Bytes32
    challenger: Address
    challenge_left: int
    """Seconds of the challenge window left when a whistleblower's dispute paused it (0 otherwise)."""
    anchor_block: int
    """The block of the latest commit or re-anchor: the verifier draw needs blockhash(anchor_block + 1)."""


@dataclass(frozen=True)
class MarketParams:
    """JobMarket's immutable deployment parameters (amounts in base units, windows in seconds, bps)."""

    min_solver_bond: TokenAmount
    solver_bond_bps: int
    min_verifier_bond: TokenAmount
    verifier_bond_bps: int
    timeout_slash_bps: int
    open_window: int
    max_commit_window: int
    report_window: int
    challenge_window: int
    dispute_window: int
    max_verifier_draws: int
    jackpot_tax_bps: int
    """Share of reward + fee the submitter pays on top at postJob, into the jackpot at finalize."""
    jackpot_share_bps: int
    """Share of the jackpot paid per caught forced error (at most ``MAX_JACKPOT_SHARE_BPS``)."""
    forced_error_rate_bps: int
    """Chance that a verifier with a forced seed is forced on a job."""
    probe_count: int
    """Probe slots of a passing report (``proofs.probes``)."""
    availability_window: int
    """Time a solver has to publish an item its verifier could not fetch (``answerAvailability``)."""
    availability_deposit: TokenAmount
    """Tokens a verifier escrows per availability challenge; paid to whoever answers it."""
    full_replay_rate_bps: int
    """Chance that a commit's draw chooses it for full replay (every segment replayed; docs/protocol.md)."""
    full_replay_fee_bps: int
    """Replay fee (share of the reward) a submitter escrows on top; paid to a full replay's verifier."""


@dataclass(frozen=True)
class TraceCommitment:
    """What a solver committed for a job, from its ``TraceCommitted`` event (the chain stores only
    the root: ``Job.trace_root``; a job reopened after a slash is committed again, under another root)."""

    solver: Address
    trace_root: Bytes32
    checkpoint_count: int
    final_model_cid: Cid
    manifest_cid: Cid

    @classmethod
    def of(cls, event: Event) -> TraceCommitment:
        a = event.args
        return cls(
            Address(a["solver"]), Bytes32(bytes(a["traceRoot"])), int(a["checkpointCount"]), digest_to_cid(a["finalModelCid"]), digest_to_cid(a["manifestCid"])
        )


@dataclass(frozen=True)
class ReportSeal:
    """What a report is bound to (Types.sol ``ReportSeal``). The chain stores only its hash
    (``JobMarket.reportSeal``); the values are in the job's last ``VerifierAssigned`` and
    ``ReportSubmitted`` events, so clients rebuild it with :meth:`JobMarket.seal_of`."""

    assign_seed: Bytes32
    """Fixes the sampled segments and the probe segments and steps (``proofs.probes``);
    keccak256(abi.encode(drawSeed)): the draw's entropy and job, not the verifier drawn."""
    forced_commitment: Bytes32
    """The verifier's forced seed snapshotted at the draw (zero: it cannot be forced on this job)."""
    probe_root: Bytes32
    """Root of the report's probe tree (``proofs.ProbeTree``)."""

    def as_tuple(self) -> tuple[Bytes32, Bytes32, Bytes32]:
        """The ABI tuple ``(assignSeed, forcedCommitment, probeRoot)``."""
        return self.assign_seed, self.forced_commitment, self.probe_root

    def digest(self) -> Bytes32:
        """The stored seal: keccak256(abi.encode(keccak256(abi.encode(assignSeed, forcedCommitment)), probeRoot))."""
        drawn = keccak(abi_encode(["bytes32", "bytes32"], [self.assign_seed, self.forced_commitment]))
        return Bytes32(keccak(abi_encode(["bytes32", "bytes32"], [drawn, self.probe_root])))


@dataclass(frozen=True)
class ForcedSeed:
    """A verifier's forced-error commitment keccak256(abi.encode(secret, verifier)) and the block it
    was set at (a draw snapshots it only if set at or before the draw's anchor block)."""

    commitment: Bytes32
    set_at_block: int


@dataclass(frozen=True)
class AvailabilityChallenge:
    """A job's open availability challenge (Types.sol ``AvailabilityChallenge``): the item its challenger
    could not fetch (a checkpoint index, or :data:`MANIFEST_ITEM`), the seconds that were left of the
    window it paused (the verifier's report window, or a whistleblower's challenge window: they resume
    once the item is published), and the challenger (the job's verifier, or a whistleblower)."""

    item: int
    time_left: int
    challenger: Address


@dataclass(frozen=True)
class StakeInfo:
    """One account's stake in one role; ``staked`` includes ``locked``."""

    staked: TokenAmount
    locked: TokenAmount
    release_at: int
    unbonding: TokenAmount

    @property
    def free(self) -> TokenAmount:
        return TokenAmount(self.staked - self.locked)


@dataclass(frozen=True)
class Capabilities:
    """What a solver advertised it can run (Types.sol ``Capabilities``): the largest model, dataset and
    step count it takes, its device, and its training speed in FLOP/s as clients count a job's compute
    (rolebase/capabilities.py). ``advertised_at`` is 0 when it never advertised."""

    max_params: int
    max_dataset_bytes: int
    max_steps: int
    flops: int
    device: Device
    advertised_at: int


@dataclass(frozen=True)
class Game:
    """DisputeGame's stored game (IDisputeGame.sol ``Game``): position ``(lo, hi)`` inside the segment's
    ``steps`` steps, both chess clocks, the agreed / disputed / last posted state hashes.

    ``deadline`` is the end of the commit phase while Arbitrating; ``anchor_block`` the committee
    draw's anchor block while Isolated; ``commits`` and the vote counters count the committee's ballots.
    """

    defender: Address
    """The job's solver, or in a report game (``on_report``) the job's verifier."""
    job_id: JobId
    segment: int
    by_verifier: bool
    challenger: Address
    steps: int
    commits: int
    votes_defender_right: int
    votes_defender_wrong: int
    on_report: bool
    """A report game: the challenger disputes probe state ``disputed_hash`` of the job's verifier at
    step ``steps`` of ``segment``, from checkpoint ``segment`` (``DisputeGame.openOnReport``)."""
    status: GameStatus
    lo: int
    hi: int
    defender_clock: int
    challenger_clock: int
    last_move_at: int
    deadline: int
    moves: int
    anchor_block: int
    agreed_hash: Bytes32
    agreed_cid: Bytes32
    disputed_hash: Bytes32
    mid_hash: Bytes32
    mid_cid: Bytes32


@dataclass(frozen=True)
class GameParams:
    """DisputeGame's immutable deployment parameters (amounts in base units, times in seconds)."""

    challenge_bond: TokenAmount
    referee_bond: TokenAmount
    referee_fee: TokenAmount
    clock_time: int
    open_window: int
    draw_window: int
    commit_window: int
    reveal_window: int
    max_segment_steps: int
    committee_size: int

    @property
    def max_game_duration(self) -> int:
        """``2 * clockTime + drawWindow + commitWindow + revealWindow``, as the contract computes it."""
        return 2 * self.clock_time + self.draw_window + self.commit_window + self.reveal_window


@dataclass(frozen=True)
class Case:
    """AvailabilityCourt's stored case: ``items`` items of ``job_id`` (the bitmap is in ``CaseOpened``)
    that ``challenger`` could not fetch for the trace ``trace_root``. ``anchor_block`` is the
    committee draw's anchor block while Drawing; ``deadline`` the end of the commit phase while Voting."""

    job_id: JobId
    challenger: Address
    status: CaseStatus
    commits: int
    votes_served: int
    votes_withheld: int
    deadline: int
    anchor_block: int
    opened_at: int
    items: int
    deposit: TokenAmount
    trace_root: Bytes32


@dataclass(frozen=True)
class CourtParams:
    """AvailabilityCourt's immutable deployment parameters (amounts in base units, times in seconds)."""

    referee_bond: TokenAmount
    referee_fee: TokenAmount
    item_fee: TokenAmount
    draw_window: int
    fetch_window: int
    reveal_window: int
    committee_size: int

    def deposit(self, items: int) -> TokenAmount:
        """What a case naming ``items`` items escrows (``depositFor``)."""
        return TokenAmount(self.committee_size * self.referee_fee + items * self.item_fee)


@dataclass(frozen=True)
class DilocoParams:
    """DilocoJobs' immutable deployment parameters (amounts in base units, times in seconds)."""

    aggregator_bond: TokenAmount
    referee_bond: TokenAmount
    referee_fee: TokenAmount
    challenge_deposit: TokenAmount
    aggregate_window: int
    challenge_window: int
    vote_window: int
    reveal_window: int
    committee_size: int
    max_parties: int


@dataclass(frozen=True)
class JobTerms:
    """What a submitter posts for a multi-party job (``DilocoJobs.post``): its document, G_0's hash and
    CID, its shape, windows (seconds) and pay (base units)."""

    spec_cid: bytes
    global_hash: bytes
    global_cid: bytes
    parties: int
    min_parties: int
    rounds: int
    work_window: int
    verify_window: int
    inner_reward: int
    inner_fee: int
    contribution_reward: int
    aggregator_fee: int
    slot_bond: int

    def as_tuple(self) -> tuple[Any, ...]:
        """The ABI tuple, in the struct's field order."""
        return dataclasses.astuple(self)


@dataclass(frozen=True)
class MultipartyJob:
    """DilocoJobs' stored job: ``round`` is the current round, ``global_hash``/``global_cid`` its global
    model, ``deadline`` the current phase's (0 when it has none), ``funds`` the escrow left."""

    submitter: Address
    parties: int
    min_parties: int
    rounds: int
    round: int
    phase: MultipartyPhase
    deadline: int
    anchor_block: int
    work_window: int
    verify_window: int
    inner_reward: TokenAmount
    inner_fee: TokenAmount
    contribution_reward: TokenAmount
    aggregator_fee: TokenAmount
    slot_bond: TokenAmount
    spec_cid: Bytes32
    global_hash: Bytes32
    global_cid: Bytes32
    funds: TokenAmount


@dataclass(frozen=True)
class MultipartyContribution:
    """A party's round: its inner job on the JobMarket (0: not begun) and its contribution's CID and
    keccak256 (zero: none committed)."""

    inner_job_id: int
    cid: Bytes32
    content_hash: Bytes32


@dataclass(frozen=True)
class MultipartyAggregate:
    """The current round's aggregate: bit p of ``included`` / ``wrong`` is slot p; ``state_hash`` zero
    with an aggregator that committed: the round is void."""

    aggregator: Address
    last_failed: Address
    state_hash: Bytes32
    state_cid: Bytes32
    included: int
    wrong: int
    challenger: Address
    commits: int
    votes_right: int
    votes_wrong: int
    case_id: int


def lacking_bitmap(checkpoint_count: int, items: Iterable[int]) -> bytes:
    """The bitmap ``AvailabilityCourt.challenge`` takes: bit i (least significant first) for
    checkpoint i, bit ``checkpoint_count`` for the manifest (``MANIFEST_ITEM`` maps there)."""
    out = bytearray(checkpoint_count // 8 + 1)
    for item in items:
        if item != MANIFEST_ITEM and not 0 <= item < checkpoint_count:
            raise ValueError(f"item {item} is not a checkpoint of {checkpoint_count} nor the manifest")
        bit = checkpoint_count if item == MANIFEST_ITEM else item
        out[bit // 8] |= 1 << (bit % 8)
    return bytes(out)


def lacking_items(checkpoint_count: int, bitmap: bytes) -> list[int]:
    """The items a bitmap names (the manifest as ``MANIFEST_ITEM``), in order."""
    bits = [i for i in range(min(len(bitmap) * 8, checkpoint_count + 1)) if bitmap[i // 8] >> (i % 8) & 1]
    return [MANIFEST_ITEM if i == checkpoint_count else i for i in bits]


@dataclass(frozen=True)
class Event:
    """A decoded contract event."""

    name: str
    args: Mapping[str, Any]
    block_number: BlockNumber
    tx_hash: str
    log_index: int


def snake_case(name: str) -> str:
    """ABI name -> Python name: ``postJob`` -> ``post_job``, ``MAX_VERIFIERS`` -> ``max_verifiers``."""
    if name.isupper():
        return name.lower()
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


D = TypeVar("D")


def _value(component: Mapping[str, Any], value: Any) -> Any:
    internal = str(component.get("internalType", ""))
    if internal.startswith("enum "):
        enum = _ENUMS.get(internal.split()[-1].split(".")[-1])
        return enum(value) if enum else value
    if component["type"] == "address":
        return Address(to_checksum_address(value))
    return value


def decode_struct(cls: type[D], components: Sequence[Mapping[str, Any]], value: Sequence[Any]) -> D:
    """A tuple from the ABI -> dataclass ``cls``, by component name; raises if they disagree."""
    names = [snake_case(c["name"]) for c in components]
    expected = [f.name for f in dataclasses.fields(cls)]  # type: ignore[arg-type]
    if sorted(names) != sorted(expected):
        raise ArtifactsMissing(f"{cls.__name__} fields {expected} do not match the compiled ABI {names}: rebuild, or update core/contracts.py")
    return cls(**{n: _value(c, v) for n, c, v in zip(names, components, value)})


def reports_draw(draw: Event, report: Event) -> bool:
    """Whether ``ReportSubmitted`` event ``report`` is the report of ``VerifierAssigned`` event ``draw``
    (the same job's): emitted after it, by the verifier it drew."""
    return (report.block_number, report.log_index) > (draw.block_number, draw.log_index) and report.args["verifier"] == draw.args["verifier"]


def _reported_probe(index: int, value: Any) -> Probe:
    """Slot ``index``'s ``Probe`` of a ``ReportSubmitted`` event, decoded as a tuple or by component name."""
    segment, step, state_hash = (value["segment"], value["step"], value["stateHash"]) if isinstance(value, Mapping) else value
    return Probe(index, int(segment), int(step), Bytes32(bytes(state_hash)))


class _Wrapper:
    """A deployed contract: ABI from build/contracts/<ARTIFACT>.json, calls through a ChainClient."""

    ARTIFACT: ClassVar[str]

    def __init__(self, client: ChainClient, address: str, signer: Signer | None = None) -> None:
        self.client = client
        checksummed = to_checksum_address(address)
        self.address = Address(checksummed)
        self.signer = signer
        self.artifact = artifacts.load(self.ARTIFACT)
        self.contract: Contract = client.w3.eth.contract(address=checksummed, abi=self.artifact.abi_list())
        self._topics = {event_abi_to_log_topic(e): e["name"] for e in self.artifact.abi if e["type"] == "event"}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.address}, signer={self.signer!r})"

    def with_signer(self, signer: Signer) -> Self:
        return type(self)(self.client, self.address, signer)

    def _call(self, fn: str, *args: Any) -> Any:
        sender = self.signer.address if self.signer else None
        return self.client.call(self.contract.functions[fn](*args), sender=sender)

    def _struct(self, cls: type[D], fn: str, *args: Any) -> D:
        outputs = self.contract.get_function_by_name(fn).abi["outputs"]
        return decode_struct(cls, outputs[0]["components"], self._call(fn, *args))

    def _send(self, fn: str, *args: Any, gas: int | None = None) -> Receipt:
        """Send ``fn(*args)`` with ``gas`` (None: estimated)."""
        if self.signer is None:
            raise SignerError(f"{type(self).__name__}.{snake_case(fn)} sends a transaction: give the wrapper a signer")
        return self.client.transact(self.contract, fn, args, self.signer, gas=gas)

    def decode_events(self, receipt: Receipt, name: str | None = None) -> list[Event]:
        """This contract's events in ``receipt`` (only those named ``name`` if given)."""
        found = [event for event in map(self.decode_log, receipt.logs) if event is not None]
        return [event for event in found if name is None or event.name == name]

    def decode_log(self, log: Mapping[str, Any]) -> Event | None:
        """One raw log as this contract's event, or None when another contract (or no known event) emitted it."""
        if Address(to_checksum_address(log["address"])) != self.address or not log["topics"]:
            return None
        event_name = self._topics.get(bytes(log["topics"][0]))
        if event_name is None:
            return None
        decoded = self.contract.events[event_name]().process_log(log)
        return Event(
            event_name, dict(decoded["args"]), BlockNumber(decoded["blockNumber"]), "0x" + bytes(decoded["transactionHash"]).hex(), decoded["logIndex"]
        )

    def events(self, name: str, from_block: int, to_block: int | None = None, **filters: Any) -> list[Event]:
        """Logs of event ``name`` in a block range (fetched in bounded chunks), indexed-argument filters by name."""
        logs = self.client.get_logs(self.contract.events[name](), from_block, to_block, argument_filters=filters or None)
        return [Event(name, dict(e["args"]), BlockNumber(e["blockNumber"]), "0x" + bytes(e["transactionHash"]).hex(), e["logIndex"]) for e in logs]


class VeriToken(_Wrapper):
    ARTIFACT = "VeriToken"

    def name(self) -> str:
        return str(self._call("name"))

    def symbol(self) -> str:
        return str(self._call("symbol"))

    def decimals(self) -> int:
        return int(self._call("decimals"))

    def total_supply(self) -> TokenAmount:
        return TokenAmount(self._call("totalSupply"))

    def balance_of(self, account: str) -> TokenAmount:
        return TokenAmount(self._call("balanceOf", account))

    def allowance(self, owner: str, spender: str) -> TokenAmount:
        return TokenAmount(self._call("allowance", owner, spender))

    def approve(self, spender: str, amount: int) -> Receipt:
        return self._send("approve", spender, amount)

    def transfer(self, to: str, amount: int) -> Receipt:
        return self._send("transfer", to, amount)

    def transfer_from(self, owner: str, to: str, amount: int) -> Receipt:
        return self._send("transferFrom", owner, to, amount)


class StakeManager(_Wrapper):
    ARTIFACT = "StakeManager"

    # views
    def token(self) -> Address:
        return Address(self._call("token"))

    def wiring_admin(self) -> Address:
        return Address(self._call("wiringAdmin"))

    def wired(self) -> bool:
        return bool(self._call("wired"))

    def is_protocol(self, account: str) -> bool:
        return bool(self._call("isProtocol", account))

    def min_stake(self, role: Role) -> TokenAmount:
        return TokenAmount(self._call("minStake", int(role)))

    def unbonding_delay(self) -> int:
        return int(self._call("unbondingDelay"))

    def max_verifiers(self) -> int:
        return int(self._call("MAX_VERIFIERS"))

    def max_draw_tries(self) -> int:
        return int(self._call("MAX_DRAW_TRIES"))

    def max_excluded(self) -> int:
        return int(self._call("MAX_EXCLUDED"))

    def stake_of(self, account: str, role: Role) -> StakeInfo:
        return self._struct(StakeInfo, "stakeOf", account, int(role))

    def free_stake(self, account: str, role: Role) -> TokenAmount:
        return TokenAmount(self._call("freeStake", account, int(role)))

    def is_eligible(self, account: str, role: Role) -> bool:
        return bool(self._call("isEligible", account, int(role)))

    def verifier_weight(self, account: str) -> int:
        return int(self._call("verifierWeight", account))

    def total_verifier_weight(self) -> int:
        return int(self._call("totalVerifierWeight"))

    def verifier_slot_count(self) -> int:
        return int(self._call("verifierSlotCount"))

    def total_verifier_weight_at(self, block_number: int) -> int:
        """Sum of verifier weights at the end of ``block_number``: what a draw anchored there reads."""
        return int(self._call("totalVerifierWeightAt", block_number))

    def capabilities_of(self, solver: str) -> Capabilities:
        """The solver's latest advert (count it only while the solver is eligible: it outlives its stake)."""
        return self._struct(Capabilities, "capabilitiesOf", solver)

    def max_gateway_url_bytes(self) -> int:
        return int(self._call("MAX_GATEWAY_URL_BYTES"))

    def gateway_of(self, account: str) -> str:
        """The gateway URL ``account`` last announced ("" if none); unchecked by the chain."""
        return str(self._call("gatewayOf", account))

    # anyone
    def stake(self, role: Role, amount: int) -> Receipt:
        """Stake ``amount`` (approve the stake manager on the token first)."""
        return self._send("stake", int(role), amount)

    def request_unstake(self, role: Role, amount: int) -> Receipt:
        return self._send("requestUnstake", int(role), amount)

    def withdraw(self, role: Role) -> Receipt:
        return self._send("withdraw", int(role))

    def advertise(self, max_params: int, max_dataset_bytes: int, max_steps: int, flops: int, device: Device) -> Receipt:
        """Publish the signer's capabilities (it must be an eligible solver)."""
        return self._send("advertise", max_params, max_dataset_bytes, max_steps, flops, int(device))

    def announce(self, url: str) -> Receipt:
        """Announce the signer's gateway URL ("" withdraws it; at most ``max_gateway_url_bytes``)."""
        return self._send("announce", url)

    # wiring admin / protocol contracts only (wrapped so their access control can be exercised)
    def authorize(self, protocols: Sequence[str]) -> Receipt:
        return self._send("authorize", list(protocols))

    def lock(self, account: str, role: Role, amount: int) -> Receipt:
        return self._send("lock", account, int(role), amount)

    def unlock(self, account: str, role: Role, amount: int) -> Receipt:
        return self._send("unlock", account, int(role), amount)

    def slash(self, account: str, role: Role, amount: int, recipient: str) -> Receipt:
        return self._send("slash", account, int(role), amount, recipient)

    def draw_verifier(self, seed: bytes, anchor: int, exclude: Sequence[str], bond: int) -> Receipt:
        return self._send("drawVerifier", seed, anchor, list(exclude), bond)


class JobMarket(_Wrapper):
    ARTIFACT = "JobMarket"

    # views
    def token(self) -> Address:
        return Address(self._call("token"))

    def stake_manager(self) -> Address:
        return Address(self._call("stakeManager"))

    def dispute_game(self) -> Address:
        return Address(self._call("disputeGame"))

    def wiring_admin(self) -> Address:
        return Address(self._call("wiringAdmin"))

    def wired(self) -> bool:
        return bool(self._call("wired"))

    def params(self) -> MarketParams:
        return self._struct(MarketParams, "params")

    def job_count(self) -> int:
        return int(self._call("jobCount"))

    def get_job(self, job_id: JobId) -> Job:
        return self._struct(Job, "getJob", job_id)

    def solver_bond(self, reward: int) -> TokenAmount:
        return TokenAmount(self._call("solverBond", reward))

    def verifier_bond(self, reward: int) -> TokenAmount:
        return TokenAmount(self._call("verifierBond", reward))

    def manifest_item(self) -> int:
        """The item number of the manifest in availability challenges (checkpoints are their index)."""
        return int(self._call("MANIFEST_ITEM"))

    def manifest_of(self, job_id: JobId) -> Bytes32:
        """The manifest CID digest the job's solver committed (zero before a commit)."""
        return Bytes32(bytes(self._call("manifestOf", job_id)))

    def availability_challenge(self, job_id: JobId) -> AvailabilityChallenge:
        return self._struct(AvailabilityChallenge, "availabilityChallenge", job_id)

    def is_published(self, job_id: JobId, item: int) -> bool:
        """Whether ``item`` of the job's current trace is on chain already (an ``AvailabilityAnswered``)."""
        return bool(self._call("isPublished", job_id, item))

    def published(self, job_id: JobId, item: int, from_block: int = 0) -> list[bytes]:
        """The contents published on chain as ``item``, the job's own first, then other jobs' (newest
        first in each). The chain checked each when it was published (keccak256 against the committed
        leaf, or the manifest's CIDv0) under the trace committed then, and keys a publication by that
        content (``isPublished``): another job's copy of the same manifest or trace counts for this job.
        A caller takes the one that is what it expects (its state hash or CID)."""
        answered = self.events("AvailabilityAnswered", from_block)
        items = [e for e in reversed(answered) if int(e.args["item"]) == item]
        return [bytes(e.args["content"]) for e in sorted(items, key=lambda e: int(e.args["jobId"]) != int(job_id))]

    def max_jackpot_share_bps(self) -> int:
        return int(self._call("MAX_JACKPOT_SHARE_BPS"))

    def jackpot(self) -> TokenAmount:
        return TokenAmount(self._call("jackpot"))

    def jackpot_tax(self, reward: int, fee: int) -> TokenAmount:
        """What a submitter pays on top of ``reward + fee`` at postJob."""
        return TokenAmount(self._call("jackpotTax", reward, fee))

    def replay_fee(self, reward: int) -> TokenAmount:
        """The replay fee a submitter escrows on top at postJob: a full replay's verifier earns it at
        finalize, else it goes back to the submitter."""
        return TokenAmount(self._call("replayFee", reward))

    def is_full_replay(self, job_id: JobId) -> bool:
        """Whether a draw of the job's current commit chose it for full replay (``FullReplayChosen``),
        or the job was posted for full replay (``JobPosted``'s ``fullReplay``: true from the post on)."""
        return bool(self._call("isFullReplay", job_id))

    def is_full_replay_draw(self, assign_seed: Bytes32) -> bool:
        """Whether the draw of ``assign_seed`` chooses its job for full replay (the market's coin)."""
        return bool(self._call("isFullReplayDraw", assign_seed))

    def hold_for_court(self, job_id: JobId, challenger: str) -> Receipt:
        """The availability court's entry (only a wired protocol contract may send it; it reverts
        ``NotAuthorized`` from an account): the job waits in ``DataVote``, its clock paused."""
        return self._send("holdForCourt", job_id, challenger)

    def release_from_court(self, job_id: JobId, withheld: bool) -> Receipt:
        """The court's settlement (wired contracts only): reopen a withheld job, else resume its clock."""
        return self._send("releaseFromCourt", job_id, withheld)

    def forced_seed_of(self, verifier: str) -> ForcedSeed:
        return self._struct(ForcedSeed, "forcedSeedOf", verifier)

    def report_seal(self, job_id: JobId) -> Bytes32:
        """The job's stored seal hash (:meth:`ReportSeal.digest` of :meth:`seal_of` once reported)."""
        return Bytes32(bytes(self._call("reportSeal", job_id)))

    def probe_segment(self, assign_seed: bytes, index: int, checkpoint_count: int) -> int:
        return int(self._call("probeSegment", assign_seed, index, checkpoint_count))

    def is_forced(self, secret: bytes, verifier: str, seal: ReportSeal) -> bool:
        return bool(self._call("isForced", secret, verifier, seal.as_tuple()))

    def verify_probe(self, job_id: JobId, seal: ReportSeal, index: int, segment: int, step: int, state_hash: bytes, proof: Sequence[bytes]) -> bool:
        return bool(self._call("verifyProbe", job_id, seal.as_tuple(), index, segment, step, state_hash, list(proof)))

    def seal_of(self, job_id: JobId, from_block: int = 0) -> ReportSeal | None:
        """The :class:`ReportSeal` of the job's current report (:meth:`sealed_report`)."""
        sealed = self.sealed_report(job_id, from_block)
        return None if sealed is None else sealed[0]

    def sealed_report(self, job_id: JobId, from_block: int = 0) -> tuple[ReportSeal, list[Probe]] | None:
        """The seal and the probes of the report of the job's last verifier draw, both from that one
        ``ReportSubmitted`` (after the draw's ``VerifierAssigned``; scanning from ``from_block``: pass
        the address book's ``deploy_block``); the probes in slot order, none for a failing report.
        None while that verifier has not reported (before a report, or after a new draw). Whether the
        report still stands is the job's state (Verified), not the seal's. A daemon reads the same
        from its index of the two logs (``rolebase.watchers.MarketWatcher.sealed_report``).
        """
        assigned = self.events("VerifierAssigned", from_block, jobId=job_id)
        if not assigned:
            return None
        draw = max(assigned, key=lambda e: (e.block_number, e.log_index))
        report = next((e for e in self.events("ReportSubmitted", draw.block_number, jobId=job_id) if reports_draw(draw, e)), None)
        return None if report is None else self.sealed(job_id, draw, report)

    def sealed(self, job_id: JobId, draw: Event, report: Event) -> tuple[ReportSeal, list[Probe]]:
        """The seal and the probes of ``report``, the report of the job's verifier ``draw`` (both
        events of the job). Raises :class:`ChainError` if they do not hash to the stored seal (the
        events were read from a node behind the one the job was read from, or a new draw since)."""
        seal = ReportSeal(
            Bytes32(bytes(draw.args["assignSeed"])),
            Bytes32(bytes(draw.args["forcedCommitment"])),
            Bytes32(bytes(report.args["probeRoot"])),
        )
        stored = self.report_seal(job_id)
        if stored != seal.digest():
            raise ChainError(f"job {job_id}: the draw and report events do not hash to the stored seal 0x{stored.hex()}")
        return seal, [_reported_probe(i, p) for i, p in enumerate(report.args["probes"])]

    # lifecycle
    def post_job(self, spec_cid: bytes, reward: int, verifier_fee: int, commit_window: int, *, full_replay: bool = False) -> tuple[JobId, Receipt]:
        """Escrow ``reward + verifier_fee + jackpot_tax(reward, verifier_fee) + replay_fee(reward)``
        (approve the market first); returns the new job id. ``full_replay``: every draw of the job is a
        full replay whatever the coin (a spec that ``proofs.sampling.needs_full_replay``)."""
        receipt = self._send("postJob", spec_cid, reward, verifier_fee, commit_window, full_replay)
        (posted,) = self.decode_events(receipt, "JobPosted")
        return JobId(posted.args["jobId"]), receipt

    def claim(self, job_id: JobId) -> Receipt:
        return self._send("claim", job_id)

    def claim_for(self, job_id: JobId, solver: str) -> Receipt:
        """A protocol contract's own job claimed for ``solver`` (only DilocoJobs sends it, from a party's ``begin``)."""
        return self._send("claimFor", job_id, solver)

    def commit(self, job_id: JobId, trace_root: bytes, checkpoint_count: int, final_model_cid: bytes, manifest_cid: bytes) -> Receipt:
        return self._send("commit", job_id, trace_root, checkpoint_count, final_model_cid, manifest_cid)

    def assign_verifier(self, job_id: JobId) -> Receipt:
        return self._send("assignVerifier", job_id)

    def report(
        self,
        job_id: JobId,
        passed: bool,
        report_cid: bytes,
        assign_seed: bytes,
        forced_commitment: bytes,
        probes: Sequence[Probe],
    ) -> Receipt:
        """Report on the job drawn with ``(assign_seed, forced_commitment)`` (its ``VerifierAssigned``;
        else ``InvalidSeal``). A pass gives exactly ``probe_count`` probes, slot i (``Probe.index``)
        at position i, on ``probe_segment(assign_seed, i, checkpoint_count)`` with a non-zero hash
        (else ``InvalidProbe``); the chain computes their probe root (``proofs.ProbeTree``) and
        emits them. A fail gives none. Raises ``ValueError`` if probe i is not slot i."""
        if [p.index for p in probes] != list(range(len(probes))):
            raise ValueError(f"report() takes probe slot i at position i, got slots {[p.index for p in probes]}")
        entries = [(p.segment, p.step, p.state_hash) for p in probes]
        return self._send("report", job_id, passed, report_cid, assign_seed, forced_commitment, entries)

    def finalize(self, job_id: JobId) -> Receipt:
        return self._send("finalize", job_id)

    def cancel(self, job_id: JobId) -> Receipt:
        return self._send("cancel", job_id)

    def fund_jackpot(self, amount: int) -> Receipt:
        """Add ``amount`` to the jackpot (approve the market first)."""
        return self._send("fundJackpot", amount)

    def commit_forced_seed(self, commitment: bytes) -> Receipt:
        """Commit ``proofs.forced_commitment(secret, me)``; it counts for draws anchored from this block."""
        return self._send("commitForcedSeed", commitment)

    # data availability
    def challenge_availability(self, job_id: JobId, item: int) -> Receipt:
        """As the job's verifier (Verifying) or a whistleblower (Verified): state that ``item`` (a
        checkpoint index, or :data:`MANIFEST_ITEM`) cannot be fetched; escrows
        ``availability_deposit`` (approve the market first)."""
        return self._send("challengeAvailability", job_id, item)

    def answer_availability(self, job_id: JobId, content: bytes, proof: Sequence[bytes] = ()) -> Receipt:
        """Publish the challenged item: a checkpoint's bytes with the proof of its leaf, or the
        manifest's bytes with no proof (else ``ContentMismatch``); the deposit comes to the caller.
        A checkpoint's answer is sent with the gas :func:`answer_availability_gas` gives, plus a tenth,
        not estimated: a node's estimate runs the answer again and again (anvil's did not answer in 50 s at 120 MB)."""
        args = (job_id, bytes(content), [bytes(p) for p in proof])
        if not proof:
            return self._send("answerAvailability", *args)
        return self._send("answerAvailability", *args, gas=answer_availability_gas(len(content), len(proof)) * 11 // 10)

    def timeout_availability(self, job_id: JobId) -> Receipt:
        return self._send("timeoutAvailability", job_id)

    # timeouts (anyone)
    def expire(self, job_id: JobId) -> Receipt:
        return self._send("expire", job_id)

    def timeout_solver(self, job_id: JobId) -> Receipt:
        return self._send("timeoutSolver", job_id)

    def timeout_verifier(self, job_id: JobId) -> Receipt:
        return self._send("timeoutVerifier", job_id)

    def timeout_dispute(self, job_id: JobId) -> Receipt:
        return self._send("timeoutDispute", job_id)

    # dispute game / wiring admin only
    def open_dispute(self, job_id: JobId, challenger: str) -> Receipt:
        return self._send("openDispute", job_id, challenger)

    def resolve_dispute(self, job_id: JobId, solver_won: bool, verifier_slashed: bool, slash_recipient: str) -> Receipt:
        return self._send("resolveDispute", job_id, solver_won, verifier_slashed, slash_recipient)

    def resolve_report_dispute(self, job_id: JobId, verifier_won: bool, slash_recipient: str) -> Receipt:
        return self._send("resolveReportDispute", job_id, verifier_won, slash_recipient)

    def pay_forced_error(self, job_id: JobId, seal: ReportSeal, secret: bytes, whistleblower: str) -> Receipt:
        return self._send("payForcedError", job_id, seal.as_tuple(), secret, whistleblower)

    def set_dispute_game(self, game: str) -> Receipt:
        return self._send("setDisputeGame", game)


class _Crediting(_Wrapper):
    """A contract that pays by credit (contracts/Credits.sol): its settlements credit each payee, who
    claims the sum with ``claimCredit``."""

    def credit(self, account: str) -> TokenAmount:
        """What ``account`` may claim here now."""
        return TokenAmount(self._call("credit", account))

    def total_credit(self) -> TokenAmount:
        return TokenAmount(self._call("totalCredit"))

    def claim_credit(self, to: str) -> Receipt:
        """Transfer all the credit of ``to`` to it (anyone may send this)."""
        return self._send("claimCredit", to)


class DisputeGame(_Crediting):
    """The dispute game: opening, bisection moves, clocks, the referee committee, settlement.

    Pure helpers for its clients (opening arguments, vote commitments, who moves next) are in
    :mod:`core.dispute`.
    """

    ARTIFACT = "DisputeGame"

    # views
    def token(self) -> Address:
        return Address(self._call("token"))

    def stake_manager(self) -> Address:
        return Address(self._call("stakeManager"))

    def market(self) -> Address:
        return Address(self._call("market"))

    def params(self) -> GameParams:
        return self._struct(GameParams, "params")

    def max_game_duration(self) -> int:
        return int(self._call("maxGameDuration"))

    def game_count(self) -> int:
        return int(self._call("gameCount"))

    def get_game(self, game_id: GameId) -> Game:
        return self._struct(Game, "getGame", game_id)

    def active_game(self, job_id: JobId) -> GameId:
        """The job's open (or undecided) game; 0 if none."""
        return GameId(self._call("activeGame", job_id))

    def committee(self, game_id: GameId) -> list[Address]:
        return [Address(to_checksum_address(a)) for a in self._call("committee", game_id)]

    def ballot_of(self, game_id: GameId, referee: str) -> tuple[Ballot, Bytes32]:
        ballot, commitment = self._call("ballotOf", game_id, referee)
        return Ballot(ballot), Bytes32(bytes(commitment))

    def verify_checkpoint(self, job_id: JobId, index: int, state_hash: bytes, proof: Sequence[bytes]) -> bool:
        """Whether ``(index, state_hash)`` is a leaf of the job's committed trace (what an opening proves)."""
        return bool(self._call("verifyCheckpoint", job_id, index, state_hash, list(proof)))

    def clocks(self, game_id: GameId) -> tuple[int, int]:
        """Seconds left now (solver, challenger); the running clock ticks."""
        defender_left, challenger_left = self._call("clocks", game_id)
        return int(defender_left), int(challenger_left)

    def next_midpoint(self, game_id: GameId) -> int:
        return int(self._call("nextMidpoint", game_id))

    def max_moves(self, steps: int) -> int:
        return int(self._call("maxMoves", steps))

    def open_deadline(self, job_id: JobId) -> int:
        """When a failing verifier must have opened its game (0: not a failed, unopened dispute)."""
        return int(self._call("openDeadline", job_id))

    # moves
    def open(
        self,
        job_id: JobId,
        segment: int,
        steps: int,
        start_hash: bytes,
        start_proof: Sequence[bytes],
        end_hash: bytes,
        end_proof: Sequence[bytes],
    ) -> tuple[GameId, Receipt]:
        """Open a game on ``segment`` escrowing challengeBond (approve the game first); returns its id.

        :func:`core.dispute.opening` builds these arguments from a manifest's trace.
        """
        receipt = self._send("open", job_id, segment, steps, start_hash, list(start_proof), end_hash, list(end_proof))
        (opened,) = self.decode_events(receipt, "DisputeOpened")
        return GameId(opened.args["gameId"]), receipt

    def open_on_report(
        self,
        job_id: JobId,
        seal: ReportSeal,
        index: int,
        segment: int,
        step: int,
        state_hash: bytes,
        proof: Sequence[bytes],
        start_hash: bytes,
        start_proof: Sequence[bytes],
    ) -> tuple[GameId, Receipt]:
        """Open a report game on probe ``index`` of the job's passing report, the verifier defending
        its ``state_hash`` at ``step`` of ``segment`` from checkpoint ``segment`` (``start_hash``,
        proven against the trace root); escrows challengeBond. Returns the game id.

        :func:`core.dispute.opening_on_report` builds these arguments from the report's probes.
        """
        probe = (index, segment, step, state_hash, list(proof))
        receipt = self._send("openOnReport", job_id, seal.as_tuple(), probe, start_hash, list(start_proof))
        (opened,) = self.decode_events(receipt, "DisputeOpened")
        return GameId(opened.args["gameId"]), receipt

    def open_on_manifest(self, job_id: JobId) -> tuple[GameId, Receipt]:
        """Dispute the job's committed manifest itself (it does not parse, or its root is not the
        committed root), escrowing challengeBond; it must be published on chain first (an
        availability challenge on ``MANIFEST_ITEM``). Returns the game id (0 steps: isolated at once)."""
        receipt = self._send("openOnManifest", job_id)
        (opened,) = self.decode_events(receipt, "DisputeOpened")
        return GameId(opened.args["gameId"]), receipt

    def concede_forced(self, game_id: GameId, secret: bytes, seal: ReportSeal) -> Receipt:
        """The defender of a report game reveals that its probe was a forced error: the challenger
        wins and is paid from the jackpot; the verifier keeps its bond and fee."""
        return self._send("concedeForced", game_id, secret, seal.as_tuple())

    def post_midpoint(self, game_id: GameId, state_hash: bytes, cid: bytes) -> Receipt:
        return self._send("postMidpoint", game_id, state_hash, cid)

    def answer_midpoint(self, game_id: GameId, agree: bool) -> Receipt:
        return self._send("answerMidpoint", game_id, agree)

    def timeout_clock(self, game_id: GameId) -> Receipt:
        return self._send("timeoutClock", game_id)

    def draw_committee(self, game_id: GameId) -> Receipt:
        return self._send("drawCommittee", game_id)

    def commit_vote(self, game_id: GameId, commitment: bytes) -> Receipt:
        """:func:`core.dispute.vote_commitment` computes ``commitment`` as the contract checks it."""
        return self._send("commitVote", game_id, commitment)

    def release_seat(self, game_id: GameId, referee: str) -> Receipt:
        """Release ``referee``'s seat, not yet committed, unslashed: only a protocol contract of the
        StakeManager's wiring may (``SealedJobs.declineSeat`` does, for a sealed job's referee); an
        account's call is refused (``NotAuthorized``)."""
        return self._send("releaseSeat", game_id, referee)

    def reveal_vote(self, game_id: GameId, defender_right: bool, salt: bytes) -> Receipt:
        return self._send("revealVote", game_id, defender_right, salt)

    def settle(self, game_id: GameId) -> Receipt:
        return self._send("settle", game_id)

    def forfeit_unopened(self, job_id: JobId) -> Receipt:
        return self._send("forfeitUnopened", job_id)


class AvailabilityCourt(_Crediting):
    """The availability court: one case names every item its challenger lacks; a committee drawn by
    verifier stake fetches them by CID and votes (docs/protocol.md, "Availability court")."""

    ARTIFACT = "AvailabilityCourt"

    # views
    def params(self) -> CourtParams:
        return self._struct(CourtParams, "params")

    def case_count(self) -> int:
        return int(self._call("caseCount"))

    def get_case(self, case_id: int) -> Case:
        return self._struct(Case, "getCase", case_id)

    def active_case(self, job_id: JobId) -> int:
        """The case holding the job now; 0 if none."""
        return int(self._call("activeCase", job_id))

    def committee(self, case_id: int) -> list[Address]:
        return [Address(to_checksum_address(a)) for a in self._call("committee", case_id)]

    def ballot_of(self, case_id: int, member: str) -> tuple[Ballot, Bytes32]:
        ballot, commitment = self._call("ballotOf", case_id, member)
        return Ballot(ballot), Bytes32(bytes(commitment))

    def deposit_for(self, items: int) -> TokenAmount:
        return TokenAmount(self._call("depositFor", items))

    # moves
    def challenge(self, job_id: JobId, lacking: bytes) -> tuple[int, Receipt]:
        """Open a case on every item ``lacking`` names (:func:`lacking_bitmap`), escrowing
        ``depositFor(items)`` (approve the court first); returns its id."""
        receipt = self._send("challenge", job_id, lacking)
        (opened,) = self.decode_events(receipt, "CaseOpened")
        return int(opened.args["caseId"]), receipt

    def draw_committee(self, case_id: int) -> Receipt:
        return self._send("drawCommittee", case_id)

    def commit_vote(self, case_id: int, commitment: bytes) -> Receipt:
        """:func:`court_commitment` computes ``commitment`` as the contract checks it."""
        return self._send("commitVote", case_id, commitment)

    def reveal_vote(self, case_id: int, served: bool, salt: bytes) -> Receipt:
        return self._send("revealVote", case_id, served, salt)

    def settle(self, case_id: int) -> Receipt:
        return self._send("settle", case_id)


@dataclass(frozen=True)
class RegisteredKey:
    """An account's encryption key as the KeyRegistry holds it: the 32-byte X25519 public key and its
    version (how many times the account registered one; 0 with a zero key: none)."""

    key: Bytes32
    version: int

    @property
    def registered(self) -> bool:
        return self.version > 0


class KeyRegistry(_Wrapper):
    """Staked accounts' encryption keys, apart from their signing keys (docs/sealing.md)."""

    ARTIFACT = "KeyRegistry"

    # views
    def stake_manager(self) -> Address:
        return Address(self._call("stakeManager"))

    def key_of(self, account: str) -> RegisteredKey:
        key, version = self._call("keyOf", account)
        return RegisteredKey(Bytes32(bytes(key)), int(version))

    # anyone staked
    def register_key(self, key: bytes) -> Receipt:
        """Register ``key`` (a 32-byte X25519 public key) as the signer's encryption key; the signer
        must have stake in some role. Registering again rotates it (the version goes up by one)."""
        return self._send("registerKey", key)


@dataclass(frozen=True)
class Sealing:
    """A sealed job's commitment to its data key and the key bond its submitter escrowed
    (ISealedJobs.sol ``Sealing``; status NONE: the job is not sealed)."""

    key_hash: Bytes32
    """keccak256 of the 32-byte data key (:func:`core.sealing.key_hash`)."""
    submitter: Address
    bond: TokenAmount
    status: SealingStatus


@dataclass(frozen=True)
class KeyDemand:
    """The open demand for a sealed job's data key (ISealedJobs.sol ``KeyDemand``; party zero: none)."""

    party: Address
    deadline: int
    """Answer by (unix seconds)."""
    key_only: bool
    """Not the party's first demand on the job: only the key itself answers it, not a wrap."""
    verifying: bool
    """The job was Verifying (the party is its verifier) when held, else Verified (a whistleblower)."""

    @property
    def open(self) -> bool:
        return self.party != ZERO_ADDRESS


@dataclass(frozen=True)
class PublishedWrap:
    """A wrap of a sealed job's data key to one recipient, from its ``WrapPublished`` event: the
    80-byte SealedBox (:func:`core.sealing.unwrap`), the version of the recipient's registered key it
    was made for, and who published it (the submitter, or the job's solver)."""

    wrap: bytes
    key_version: int
    publisher: Address
    block_number: BlockNumber


@dataclass(frozen=True)
class WrapRequest:
    """A party's ask for a wrap of a sealed job's key, from its ``WrapRequested`` event (an eligible
    solver while the job is Open, an eligible whistleblower while it is Verified), and the version of
    the key it had registered then."""

    party: Address
    key_version: int
    block_number: BlockNumber


class SealedJobs(_Crediting):
    """Sealed jobs: a job's data-key commitment and key bond, the wraps of its key to the entitled
    parties, and the key game (ISealedJobs.sol has the rules, docs/sealing.md the design). Pays by
    credit: forfeited and returned key bonds are claimed with ``claim_credit``."""

    ARTIFACT = "SealedJobs"

    # views
    def market(self) -> Address:
        return Address(self._call("market"))

    def stake_manager(self) -> Address:
        return Address(self._call("stakeManager"))

    def keys(self) -> Address:
        """The KeyRegistry whose keys wraps are made to."""
        return Address(self._call("keys"))

    def token(self) -> Address:
        return Address(self._call("token"))

    def key_window(self) -> int:
        """Seconds a demand for the key may stay unanswered."""
        return int(self._call("keyWindow"))

    def sealing_of(self, job_id: JobId) -> Sealing:
        return self._struct(Sealing, "sealingOf", job_id)

    def demand_of(self, job_id: JobId) -> KeyDemand:
        return self._struct(KeyDemand, "demandOf", job_id)

    def demands_by(self, job_id: JobId, party: str) -> int:
        """How many times ``party`` demanded the key of the job (a wrap answers only the first)."""
        return int(self._call("demandsBy", job_id, party))

    def wraps_to(self, job_id: JobId, recipient: str, from_block: int = 0) -> list[PublishedWrap]:
        """The wraps of the job's data key published to ``recipient``, oldest first (scanning from
        ``from_block``: pass the address book's ``deploy_block``). The chain cannot open them: the
        recipient takes one made for its current key version that opens (:func:`core.sealing.unwrap`)."""
        return [
            PublishedWrap(bytes(e.args["wrap"]), int(e.args["keyVersion"]), Address(e.args["from"]), e.block_number)
            for e in self.events("WrapPublished", from_block, jobId=job_id, recipient=to_checksum_address(recipient))
        ]

    def wrapped(self, job_id: JobId, from_block: int = 0) -> dict[Address, int]:
        """Every recipient a wrap of the job's key was published to, with the newest key version a wrap
        was made for (whether it opens, only the recipient can tell)."""
        newest: dict[Address, int] = {}
        for e in self.events("WrapPublished", from_block, jobId=job_id):
            recipient = Address(e.args["recipient"])
            newest[recipient] = max(newest.get(recipient, 0), int(e.args["keyVersion"]))
        return newest

    def wrap_requests(self, job_id: JobId, from_block: int = 0) -> list[WrapRequest]:
        """The asks for a wrap of the job's key, oldest first."""
        return [
            WrapRequest(Address(e.args["party"]), int(e.args["keyVersion"]), e.block_number) for e in self.events("WrapRequested", from_block, jobId=job_id)
        ]

    def revealed_key(self, job_id: JobId, from_block: int = 0) -> bytes | None:
        """The job's data key if a demand was answered with it (``KeyRevealed``: public from then on),
        else None. The contract checked it against the commitment."""
        revealed = self.events("KeyRevealed", from_block, jobId=job_id)
        return bytes(revealed[0].args["dataKey"]) if revealed else None

    # the submitter
    def seal(self, job_id: JobId, key_hash: bytes) -> Receipt:
        """Seal the signer's Open job: commit to its data key (``key_hash``: :func:`core.sealing.key_hash`)
        and escrow the key bond, the job's reward + verifier fee (approve this contract first)."""
        return self._send("seal", job_id, key_hash)

    def return_bond(self, job_id: JobId) -> Receipt:
        """Credit the key bond back to the submitter once the job settled without a forfeit (anyone)."""
        return self._send("returnBond", job_id)

    # wraps
    def request_wrap(self, job_id: JobId) -> Receipt:
        """With a registered key, ask for a wrap of the job's key (an event): as an eligible solver while
        it is Open (before claiming), or as an eligible whistleblower, neither its solver nor its
        verifier, while it is Verified (before demanding)."""
        return self._send("requestWrap", job_id)

    def publish_wraps(self, job_id: JobId, recipients: Sequence[str], wraps: Sequence[bytes]) -> Receipt:
        """As the submitter, or the job's solver once claimed, publish ``wraps[i]`` (80 bytes:
        :func:`core.sealing.wrap` to the registered key of ``recipients[i]``). A wrap to the party of
        an open first demand answers it."""
        return self._send("publishWraps", job_id, list(recipients), [bytes(w) for w in wraps])

    def wrap_for_referees(self, game_id: GameId, referees: Sequence[str], wraps: Sequence[bytes]) -> Receipt:
        """As a party of dispute game ``game_id`` (its defender or challenger), publish ``wraps[i]`` of its
        job's key to ``referees[i]``, each seated in the game's committee."""
        return self._send("wrapForReferees", game_id, list(referees), [bytes(w) for w in wraps])

    def decline_seat(self, game_id: GameId) -> Receipt:
        """As a referee seated in ``game_id`` on a sealed job whose key is not public, before committing,
        give the seat up: the bond comes back whole, unslashed, and the seat earns nothing."""
        return self._send("declineSeat", game_id)

    # the key game
    def demand_key(self, job_id: JobId) -> Receipt:
        """As the job's verifier (Verifying) or an eligible whistleblower (Verified) with no wrap that
        opens, demand the key: the job is held and the signer's clock paused for ``key_window``."""
        return self._send("demandKey", job_id)

    def reveal_key(self, job_id: JobId, data_key: bytes) -> Receipt:
        """Answer the open demand with the data key itself (checked against the commitment). The key
        is then public, in ``KeyRevealed``: anyone may open the job's sealed data."""
        return self._send("revealKey", job_id, data_key)

    def timeout_demand(self, job_id: JobId) -> Receipt:
        """After an unanswered demand's deadline, forfeit the key bond (anyone): the demander is credited
        the verifier fee and the rest goes to the jackpot; a verifier's demand also releases both bonds
        and reopens the job, a whistleblower's resumes the challenge window."""
        return self._send("timeoutDemand", job_id)


def court_commitment(case_id: int, served: bool, salt: bytes, member: str) -> Bytes32:
    """keccak256(abi.encode(caseId, served, salt, member)): what ``AvailabilityCourt.revealVote`` checks,
    and ``DilocoJobs.revealVote`` with ``served`` the vote that the aggregate is right."""
    return Bytes32(keccak(abi_encode(["uint256", "bool", "bytes32", "address"], [case_id, served, salt, member])))


class DilocoJobs(_Crediting):
    """Multi-party training jobs, DiLoCo-style (IDilocoJobs.sol has the rules, docs/multiparty.md the
    design). Each party's round is an inner job on the JobMarket that this contract posts and claims for
    it. Pays by credit: contribution rewards, aggregator fees, referee fees and refunds are claimed with
    ``claim_credit``."""

    ARTIFACT = "DilocoJobs"

    # views
    def token(self) -> Address:
        return Address(self._call("token"))

    def market(self) -> Address:
        return Address(self._call("market"))

    def stake_manager(self) -> Address:
        return Address(self._call("stakeManager"))

    def params(self) -> DilocoParams:
        return self._struct(DilocoParams, "params")

    def job_count(self) -> int:
        return int(self._call("jobCount"))

    def get_job(self, job_id: int) -> MultipartyJob:
        return self._struct(MultipartyJob, "getJob", job_id)

    def party_of(self, job_id: int, slot: int) -> Address:
        """The party holding ``slot`` (the zero address: vacant)."""
        return Address(to_checksum_address(self._call("partyOf", job_id, slot)))

    def contribution_of(self, job_id: int, round_: int, slot: int) -> MultipartyContribution:
        return self._struct(MultipartyContribution, "contributionOf", job_id, round_, slot)

    def aggregate_of(self, job_id: int) -> MultipartyAggregate:
        return self._struct(MultipartyAggregate, "aggregateOf", job_id)

    def committee(self, job_id: int, case_id: int, from_block: int = 0) -> list[Address]:
        """A challenge's members, from its ``CommitteeDrawn`` event (the contract stores no list to read: code room)."""
        drawn = [e for e in self.events("CommitteeDrawn", from_block, jobId=job_id) if e.args["caseId"] == case_id]
        return [Address(to_checksum_address(a)) for a in drawn[-1].args["members"]] if drawn else []

    def ballot_of(self, case_id: int, member: str) -> tuple[Ballot, Bytes32]:
        ballot, commitment = self._call("ballotOf", case_id, member)
        return Ballot(ballot), Bytes32(bytes(commitment))

    def inner_escrow(self, inner_reward: int, inner_fee: int) -> TokenAmount:
        return TokenAmount(self._call("innerEscrow", inner_reward, inner_fee))

    def escrow_for(self, terms: JobTerms) -> TokenAmount:
        """What ``post`` takes for ``terms``."""
        return TokenAmount(self._call("escrowFor", terms.as_tuple()))

    # moves
    def post(self, terms: JobTerms) -> tuple[int, Receipt]:
        """Post a job, escrowing ``escrow_for(terms)`` (approve this contract first); returns its id."""
        receipt = self._send("post", terms.as_tuple())
        (posted,) = self.decode_events(receipt, "MultipartyJobPosted")
        return int(posted.args["jobId"]), receipt

    def join(self, job_id: int, slot: int) -> Receipt:
        return self._send("join", job_id, slot)

    def begin(self, job_id: int, slot: int, inner_spec_cid: bytes) -> tuple[JobId, Receipt]:
        """Begin the slot's round: its inner job is posted and claimed for the caller; returns its JobMarket id."""
        receipt = self._send("begin", job_id, slot, inner_spec_cid)
        (begun,) = self.decode_events(receipt, "InnerJobBegun")
        return JobId(begun.args["innerJobId"]), receipt

    def contribute(self, job_id: int, slot: int, cid: bytes, content_hash: bytes) -> Receipt:
        return self._send("contribute", job_id, slot, cid, content_hash)

    def close_round(self, job_id: int) -> Receipt:
        return self._send("closeRound", job_id)

    def draw_aggregator(self, job_id: int) -> Receipt:
        return self._send("drawAggregator", job_id)

    def commit_aggregate(self, job_id: int, state_hash: bytes, state_cid: bytes, included: int, wrong: int) -> Receipt:
        return self._send("commitAggregate", job_id, state_hash, state_cid, included, wrong)

    def timeout_aggregator(self, job_id: int) -> Receipt:
        return self._send("timeoutAggregator", job_id)

    def challenge(self, job_id: int) -> tuple[int, Receipt]:
        """Challenge the round's aggregate, depositing ``params().challenge_deposit`` (approve first); returns the case id."""
        receipt = self._send("challenge", job_id)
        (opened,) = self.decode_events(receipt, "AggregateChallenged")
        return int(opened.args["caseId"]), receipt

    def draw_committee(self, job_id: int) -> Receipt:
        return self._send("drawCommittee", job_id)

    def commit_vote(self, job_id: int, commitment: bytes) -> Receipt:
        """:func:`court_commitment` (case id, the vote that the aggregate is right, salt, member) computes ``commitment``."""
        return self._send("commitVote", job_id, commitment)

    def reveal_vote(self, job_id: int, aggregate_right: bool, salt: bytes) -> Receipt:
        return self._send("revealVote", job_id, aggregate_right, salt)

    def settle_challenge(self, job_id: int) -> Receipt:
        return self._send("settleChallenge", job_id)

    def finalize_round(self, job_id: int) -> Receipt:
        return self._send("finalizeRound", job_id)

    def reclaim(self, job_id: int, round_: int, slot: int) -> Receipt:
        return self._send("reclaim", job_id, round_, slot)

    def sweep(self) -> Receipt:
        return self._send("sweep")


@dataclass(frozen=True)
class Protocol:
    """The deployed contracts, bound to one client (and optionally one signer)."""

    token: VeriToken
    stakes: StakeManager
    market: JobMarket
    book: AddressBook
    game: DisputeGame
    court: AvailabilityCourt
    keys: KeyRegistry
    sealed_jobs: SealedJobs
    diloco: DilocoJobs

    @classmethod
    def connect(cls, client: ChainClient, book: AddressBook, signer: Signer | None = None) -> Protocol:
        if client.chain_id != book.chain_id:
            raise ChainError(f"address book is for chain {book.chain_id}, client is on chain {client.chain_id}")
        return cls(
            token=VeriToken(client, book.address("VeriToken"), signer),
            stakes=StakeManager(client, book.address("StakeManager"), signer),
            market=JobMarket(client, book.address("JobMarket"), signer),
            book=book,
            game=DisputeGame(client, book.address("DisputeGame"), signer),
            court=AvailabilityCourt(client, book.address("AvailabilityCourt"), signer),
            keys=KeyRegistry(client, book.address("KeyRegistry"), signer),
            sealed_jobs=SealedJobs(client, book.address("SealedJobs"), signer),
            diloco=DilocoJobs(client, book.address("DilocoJobs"), signer),
        )

    def with_signer(self, signer: Signer) -> Protocol:
        return Protocol(
            self.token.with_signer(signer),
            self.stakes.with_signer(signer),
            self.market.with_signer(signer),
            self.book,
            self.game.with_signer(signer),
            self.court.with_signer(signer),
            self.keys.with_signer(signer),
            self.sealed_jobs.with_signer(signer),
            self.diloco.with_signer(signer),
        )

    @property
    def client(self) -> ChainClient:
        return self.market.client
