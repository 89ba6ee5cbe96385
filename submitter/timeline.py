"""A job's history, read from the market's events: who did what, when, and what it cost in gas.

Used by ``veritrain submit show`` and by the demo. Every JobMarket event carries the
job id as an indexed topic, so one filtered log query per event name gives the whole
history; each entry adds its block's timestamp, its transaction's sender and gas used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from eth_utils import keccak

from core.chain import Address
from core.cid import digest_to_cid
from core.contracts import Event, GameId, JobId, Protocol
from rolebase.amounts import show_tokens
from rolebase.cli import show_time

#: Event fields that are token amounts: shown in VERI by the CLI and the dashboard (``--json`` and the
#: API keep base units).
AMOUNT_FIELDS = frozenset({"reward", "verifierFee", "bond", "slashed", "payout", "amount", "refund", "jackpot", "refereeFees", "deposit", "tax", "escrow"})

#: JobMarket events about one job, in lifecycle order (ties in one transaction keep log order).
JOB_EVENTS = (
    "JobPosted",
    "JobClaimed",
    "SolverTimedOut",
    "TraceCommitted",
    "DrawReanchored",
    "DrawExpired",
    "VerifierAssigned",
    "AvailabilityChallenged",
    "AvailabilityAnswered",
    "AvailabilityTimedOut",
    "VerifierTimedOut",
    "ReportSubmitted",
    "DisputeOpened",
    "DisputeResolved",
    "ReportOverturned",
    "ForcedErrorCaught",
    "JobReopened",
    "JobFinalized",
    "JackpotTaxed",
    "JobCancelled",
    "JobRefunded",
)

#: Event fields that are chain timestamps (unix seconds): shown as dates by the CLI and the dashboard.
TIME_FIELDS = frozenset({"deadline", "commitDeadline", "claimDeadline"})

_CID_FIELDS = frozenset({"specCid", "finalModelCid", "manifestCid", "reportCid"})


@dataclass(frozen=True)
class TimelineEntry:
    event: str
    block: int
    timestamp: int
    log_index: int
    tx_hash: str
    sender: Address
    gas_used: int
    args: Mapping[str, Any]  # JSON-ready: bytes32 CIDs as CIDv0 strings, other bytes as 0x-hex

    def to_json(self) -> dict[str, Any]:
        return {
            "event": self.event,
            "block": self.block,
            "timestamp": self.timestamp,
            "tx": self.tx_hash,
            "from": self.sender,
            "gas_used": self.gas_used,
            "args": dict(self.args),
        }


def readable_args(args: Mapping[str, Any]) -> dict[str, str]:
    """An entry's JSON arguments for people: amounts in VERI, timestamps as dates, a report's
    probes as ``#i segment s step t 0x1234abcd…``, other hashes shortened to 10 digits; ``--json``
    and the API keep :meth:`TimelineEntry.to_json`'s raw values."""
    return {k: _readable(k, v) for k, v in args.items()}


def _readable(name: str, value: Any) -> str:
    if name in AMOUNT_FIELDS and isinstance(value, int) and not isinstance(value, bool):
        return f"{show_tokens(value)} VERI"
    if name in TIME_FIELDS and isinstance(value, int) and not isinstance(value, bool):
        return show_time(value)
    if isinstance(value, list):
        return "; ".join(_readable(name, v) for v in value) if value else "none"
    if isinstance(value, Mapping):
        if {"segment", "step", "stateHash"} <= value.keys():  # a report's probe
            return f"segment {value['segment']} step {value['step']} {_short_hash(value['stateHash'])}"
        return ", ".join(f"{k} {_readable(k, v)}" for k, v in value.items())
    if isinstance(value, str) and value.startswith("0x") and len(value) == 66:
        return _short_hash(value)
    return str(value)


def _short_hash(value: object) -> str:
    text = str(value)
    return text[:10] + "…" if text.startswith("0x") and len(text) > 12 else text


def job_timeline(protocol: Protocol, job_id: JobId) -> list[TimelineEntry]:
    """Every market event about ``job_id`` since the deployment, in chain order."""
    start = protocol.book.deploy_block
    events = [e for name in JOB_EVENTS for e in protocol.market.events(name, start, jobId=job_id)]
    return timeline_entries(protocol, events, lambda e: {k: _jsonable(k, v) for k, v in e.args.items() if k != "jobId"})


def timeline_entries(protocol: Protocol, events: Iterable[Event], args: Callable[[Event], Mapping[str, Any]]) -> list[TimelineEntry]:
    """``events`` as timeline entries in chain order, with ``args(event)`` as their arguments.

    Each block's timestamp and each transaction's sender and gas are fetched once.
    """
    client = protocol.client
    receipts: dict[str, tuple[Address, int]] = {}
    stamps: dict[int, int] = {}
    entries = []
    for event in sorted(events, key=lambda e: (e.block_number, e.log_index)):
        if event.tx_hash not in receipts:
            receipts[event.tx_hash] = _sender_and_gas(protocol, event.tx_hash)
        if event.block_number not in stamps:
            stamps[event.block_number] = client.timestamp(event.block_number)
        sender, gas = receipts[event.tx_hash]
        entries.append(TimelineEntry(event.name, event.block_number, stamps[event.block_number], event.log_index, event.tx_hash, sender, gas, args(event)))
    return entries


def _sender_and_gas(protocol: Protocol, tx_hash: str) -> tuple[Address, int]:
    client = protocol.client

    def fetch() -> Any:
        return client.w3.eth.get_transaction_receipt(tx_hash)  # type: ignore[arg-type]

    receipt = client.with_retry("eth_getTransactionReceipt", fetch)
    return Address(receipt["from"]), int(receipt["gasUsed"])


def _jsonable(name: str, value: Any) -> Any:
    if name == "content" and isinstance(value, bytes):  # a published checkpoint or manifest: not shown whole
        return {"bytes": len(value), "keccak256": "0x" + keccak(value).hex()}
    if isinstance(value, bytes):
        if name in _CID_FIELDS and any(value):
            return digest_to_cid(value)
        return "0x" + value.hex()
    if isinstance(value, (bool, int, str)):
        return value.value if hasattr(value, "value") else value
    if isinstance(value, Mapping):  # a struct, e.g. one of ReportSubmitted's probes
        return {k: _jsonable(k, v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(name, v) for v in value]
    return str(value)


#: The dispute game's events, in the order a game plays them.
GAME_EVENTS = (
    "DisputeOpened",
    "ReportDisputeOpened",
    "MidpointPosted",
    "MidpointAnswered",
    "StepIsolated",
    "DrawReanchored",
    "RefereesDrawn",
    "VoteCommitted",
    "VoteRevealed",
    "RefereeSlashed",
    "SeatReleased",
    "ClockExpired",
    "DisputeSettled",
)


def game_timeline(protocol: Protocol, job_id: JobId) -> list[TimelineEntry]:
    """Every dispute-game event of the games on ``job_id``, in chain order, with sender and gas."""
    start = protocol.book.deploy_block
    game_ids = [GameId(int(e.args["gameId"])) for e in protocol.game.events("DisputeOpened", start, jobId=job_id)]
    events = [e for gid in game_ids for name in GAME_EVENTS for e in protocol.game.events(name, start, gameId=gid)]
    return timeline_entries(
        protocol,
        events,
        lambda e: {k: (v.hex()[:10] + ".." if isinstance(v, bytes) else v) for k, v in e.args.items() if k not in ("jobId", "referees")},
    )
