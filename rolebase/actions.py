"""The actions every role takes the same way, and how they are carried out."""

from __future__ import annotations

import logging

from core.agent import log_mined
from core.chain import Address
from core.contracts import Protocol, Role, TokenAmount

log = logging.getLogger(__name__)


def stake_needed(target: int, min_stake: int, staked: int, balance: int) -> TokenAmount | None:
    """How much more to stake to hold ``max(target, min_stake)``; None if nothing useful can be staked."""
    missing = max(target, min_stake) - staked
    if missing <= 0:
        return None
    amount = min(missing, balance)
    if amount <= 0 or staked + amount < min_stake:
        return None  # cannot reach the minimum: nothing useful to stake
    return TokenAmount(amount)


def stake(protocol: Protocol, me: Address, role: Role, amount: int) -> None:
    """Approve (if needed) and stake ``amount`` in ``role``, logging each mined call."""
    if protocol.token.allowance(me, protocol.stakes.address) < amount:
        log_mined(log, "approve", protocol.token.approve(protocol.stakes.address, amount))
    log_mined(log, "stake", protocol.stakes.stake(role, amount), amount=amount)
