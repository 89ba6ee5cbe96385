"""What an account holds and what the protocol paid it, from the chain alone (no local records).

Used by ``veritrain balance`` / ``earnings`` and by every role's ``status``. Amounts in base units,
as decimal strings (the commands format them).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypedDict, cast

from core.chain import Address
from core.contracts import Event, GameStatus, Protocol, Role, SettleReason
from rolebase.actions import credits_of


class StakeReport(TypedDict):
    staked: str
    locked: str
    unbonding: str
    release_at: int


class BalanceReport(TypedDict):
    address: Address
    veri: str
    gas: str
    stakes: dict[str, StakeReport]
    credits: dict[str, str]  # what the game, the court and the sealed jobs' contract owe (claimable: ``veritrain claim``)


class GasReport(TypedDict):
    transactions: int
    wei: str


class Earning(TypedDict):
    block: int
    job: int | None
    game: int | None
    what: str
    amount: str
    tx: str


def balances(protocol: Protocol, me: Address) -> BalanceReport:
    """VERI and gas balances, the stake of every role and the credits the game, the court and the sealed jobs' contract owe, in
    base units (decimal strings)."""
    stakes: dict[str, StakeReport] = {}
    for r in Role:
        info = protocol.stakes.stake_of(me, r)
        stakes[r.name.lower()] = {"staked": str(info.staked), "locked": str(info.locked), "unbonding": str(info.unbonding), "release_at": info.release_at}
    credits: dict[str, str] = {source: str(amount) for source, amount in credits_of(protocol, me).items()}
    return {"address": me, "veri": str(protocol.token.balance_of(me)), "gas": str(protocol.client.balance(me)), "stakes": stakes, "credits": credits}


def earnings_of(protocol: Protocol, me: Address) -> list[Earning]:
    """What the chain paid ``me`` and took from it, one entry per event, in block order (amounts in
    base units, signed). A referee earns the game's ``refereeFee`` for a revealed vote with the majority
    of a verdict (DisputeGame._settle); a referee's lost bond is a ``StakeSlashed`` like any other."""
    start, market, game, stakes = protocol.book.deploy_block, protocol.market, protocol.game, protocol.stakes
    params = game.params()
    bond, fee = params.challenge_bond, params.referee_fee
    entries: list[tuple[int, int, Earning]] = []

    def add(event: Event, job: int | None, game_id: int | None, what: str, amount: int) -> None:
        fields: Earning = {"block": event.block_number, "job": job, "game": game_id, "what": what, "amount": str(amount), "tx": event.tx_hash}
        entries.append((event.block_number, event.log_index, fields))

    for e in market.events("JobFinalized", start, solver=me):
        add(e, int(e.args["jobId"]), None, "reward (job finalized)", int(e.args["reward"]))
    for e in market.events("JobFinalized", start, verifier=me):
        add(e, int(e.args["jobId"]), None, "verifier fee (job finalized)", int(e.args["verifierFee"]))
    for e in market.events("ReplayFeePaid", start, to=me):
        what = "replay fee (full replay)" if e.args["fullReplay"] else "replay fee back (not fully replayed)"
        add(e, int(e.args["jobId"]), None, what, int(e.args["amount"]))
    for e in game.events("UnopenedDisputeForfeited", start, solver=me):
        add(e, int(e.args["jobId"]), None, "verifier bond (dispute not opened)", int(e.args["amount"]))
    for e in game.events("DisputeOpened", start, challenger=me):
        add(e, None, int(e.args["gameId"]), "challenge bond posted", -bond)
    votes = {int(e.args["gameId"]): bool(e.args["defenderRight"]) for e in game.events("VoteRevealed", start, referee=me)}
    for e in game.events("DisputeSettled", start):
        game_id, job_id = int(e.args["gameId"]), int(e.args["jobId"])
        if e.args["winner"] == me:
            add(e, job_id, game_id, "game won (bond back included)", int(e.args["payout"]))
        verdict = SettleReason(int(e.args["reason"])) is SettleReason.VERDICT
        if game_id in votes and verdict and votes[game_id] == (GameStatus(int(e.args["status"])) is GameStatus.DEFENDER_WON):
            add(e, job_id, game_id, "referee fee (voted with the majority)", fee)
    deposit = market.params().availability_deposit
    for e in market.events("AvailabilityChallenged", start, challenger=me):
        add(e, int(e.args["jobId"]), None, f"availability deposit paid (item {e.args['item']})", -int(e.args["deposit"]))
    for e in market.events("AvailabilityAnswered", start, answerer=me):
        add(e, int(e.args["jobId"]), None, f"availability deposit won (item {e.args['item']} published)", deposit)
    for e in market.events("AvailabilityTimedOut", start, challenger=me):
        add(e, int(e.args["jobId"]), None, f"availability deposit back (item {e.args['item']} never published)", deposit)
    for e in stakes.events("StakeSlashed", start, account=me):
        add(e, _job_of(protocol, e.tx_hash), None, f"slashed ({Role(int(e.args['role'])).name.lower()} stake)", -int(e.args["amount"]))
    for e in stakes.events("StakeSlashed", start, recipient=me):
        add(e, _job_of(protocol, e.tx_hash), None, "paid from a slashed stake", int(e.args["amount"]))
    return [entry for _, _, entry in sorted(entries, key=lambda t: (t[0], t[1]))]


def _job_of(protocol: Protocol, tx_hash: str) -> int | None:
    """The job a slash belongs to: the job id of the JobMarket event in the same transaction (every
    JobMarket event about a job carries it as its first indexed topic); None if there is none."""
    client, market = protocol.client, protocol.market.address.lower()
    receipt = client.with_retry("eth_getTransactionReceipt", lambda: client.w3.eth.get_transaction_receipt(tx_hash))  # type: ignore[arg-type]
    for entry in receipt["logs"]:
        if str(entry["address"]).lower() == market and len(entry["topics"]) > 1:
            return int.from_bytes(bytes(entry["topics"][1]), "big")
    return None


def gas_spent(protocol: Protocol, me: Address, *, max_blocks: int = 100_000) -> GasReport:
    """The gas ``me`` paid (wei: each receipt's ``gasUsed * effectiveGasPrice``) for every transaction it
    sent since the deployment, read block by block: what a wallet's native balance lost besides
    transfers. Refused (``ValueError``) past ``max_blocks`` blocks: the chain has no index of an
    account's transactions, so on a long chain ask an explorer."""
    client = protocol.client
    start, end = protocol.book.deploy_block, client.block_number()
    if end - start > max_blocks:
        raise ValueError(f"{end - start:,} blocks since the deployment, over the {max_blocks:,} scanned for gas")
    mine = me.lower()
    count, wei = 0, 0
    for number in range(start, end + 1):
        block = client.with_retry("eth_getBlockByNumber", lambda n=number: client.w3.eth.get_block(n, full_transactions=True))  # type: ignore[misc]
        for tx in cast(list[Mapping[str, Any]], block["transactions"]):  # full_transactions: dicts, not hashes
            if str(tx["from"]).lower() == mine:
                receipt = client.with_retry("eth_getTransactionReceipt", lambda h=tx["hash"]: client.w3.eth.get_transaction_receipt(h))  # type: ignore[misc]
                count, wei = count + 1, wei + int(receipt["gasUsed"]) * int(receipt["effectiveGasPrice"])
    return {"transactions": count, "wei": str(wei)}


def expected_jackpot_per_audit(jackpot: int, share_bps: int, forced_rate_bps: int) -> int:
    """p_f · s · J (docs/incentives.md): the jackpot income one audit expects when it is the first
    to challenge (φ = 1; with N auditors of rate a it is φ = A/(N a) of that)."""
    return jackpot * share_bps * forced_rate_bps // 10_000**2


def jackpot_economics(protocol: Protocol) -> dict[str, int]:
    """The jackpot game read from chain (docs/incentives.md, requirement 7): the pool, its share per
    caught forced error, the forced-error rate, and what one audit expects from it (p_f · s · J,
    when the auditor is the first to challenge)."""
    params = protocol.market.params()
    jackpot = protocol.market.jackpot()
    return {
        "jackpot": jackpot,
        "jackpot_share_bps": params.jackpot_share_bps,
        "forced_error_rate_bps": params.forced_error_rate_bps,
        "expected_per_audit": expected_jackpot_per_audit(jackpot, params.jackpot_share_bps, params.forced_error_rate_bps),
    }
