"""The part of every role's ``status`` report that the roles share, and its header lines."""

from __future__ import annotations

import time
from collections.abc import Callable

from core.chain import Address
from core.contracts import Protocol, Role
from core.localdb import LocalDb, read_heartbeat


def status_base(protocol: Protocol, me: Address, role: Role, db: LocalDb | None, show_tokens: Callable[[int], str]) -> dict[str, object]:
    """The part of a role's ``status`` report every role shares: balance, stake, the daemon's heartbeat
    (``show_tokens`` formats an amount, at the CLI edge)."""
    info = protocol.stakes.stake_of(me, role)
    beat = read_heartbeat(db) if db is not None else None
    return {
        "address": me,
        "balance": show_tokens(protocol.token.balance_of(me)),
        "stake": {"staked": show_tokens(info.staked), "locked": show_tokens(info.locked), "unbonding": show_tokens(info.unbonding)},
        "daemon": None if beat is None else beat.summary(time.time()),
    }


def status_lines(role: str, report: dict[str, object]) -> list[str]:
    """The header lines of a role's ``status`` (rich markup), from :func:`status_base`'s report."""
    stake_info = report["stake"]
    assert isinstance(stake_info, dict)
    lines = [f"{role} [bold]{report['address']}[/]  balance {report['balance']} VERI  staked {stake_info['staked']} (locked {stake_info['locked']})"]
    beat = report["daemon"]
    if isinstance(beat, dict):
        state = "[green]running[/]" if beat["running"] else "[red]not running[/]"
        lines.append(
            f"daemon pid {beat['pid']} {state}, last tick {beat['last_tick_s_ago']} s ago, {beat['ticks']} ticks, last error: {beat['last_error'] or '-'}"
        )
    else:
        lines.append("daemon: no records (never ran with this data dir)")
    return lines
