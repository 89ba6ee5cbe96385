"""Token amounts as people write them ("12.5") and as the chain counts them (base units).

Every command shows amounts in VERI by default and in base units with ``--json``; the two
functions here are the only conversions.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from core.contracts import TokenAmount
from core.errors import ConfigError

DECIMALS = 18  # VeriToken's decimals(); checked against the chain by the commands that move tokens


def parse_tokens(text: str, what: str, decimals: int = DECIMALS) -> TokenAmount:
    """``"12.5"`` -> 12.5 * 10**decimals base units; rejects negatives, NaN and excess precision."""
    try:
        value = Decimal(text.strip())
    except InvalidOperation:
        raise ConfigError(f"{what}: {text!r} is not a number") from None
    if not value.is_finite() or value < 0:
        raise ConfigError(f"{what}: {text!r} must be a finite, non-negative number")
    units = value.scaleb(decimals)
    if units != units.to_integral_value():
        raise ConfigError(f"{what}: {text!r} has more than {decimals} decimals")
    if units >= 2**96:
        raise ConfigError(f"{what}: {text!r} is too large")
    return TokenAmount(int(units))


def show_tokens(amount: int, decimals: int = DECIMALS) -> str:
    """Base units -> ``"12.5"`` (exact, no trailing zeros)."""
    return format(Decimal(amount).scaleb(-decimals).normalize(), "f")
