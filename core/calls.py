"""Narrow views of the contract wrappers (``core.contracts``): what a carrier of actions may call.

A responder, or a helper that sends for one, is handed only the calls it makes, as a structural
type: the deployed wrappers (``core.contracts.Protocol``) satisfy it, mypy checks that nothing
else is called, and a test's fake implements it in a few lines. These are the pieces every carrier
shares; each carrier composes its own from them beside its code.
"""

from __future__ import annotations

from typing import Any
from typing import Protocol as Structural

from core.chain import Address, Receipt
from core.contracts import Event, Role, TokenAmount


class TokenCalls(Structural):
    """Approving a contract that takes our tokens."""

    def allowance(self, owner: str, spender: str) -> TokenAmount: ...

    def approve(self, spender: str, amount: int) -> Receipt: ...


class Located(Structural):
    """A contract's address (the spender an approval names)."""

    @property
    def address(self) -> Address: ...


class Logs(Structural):
    """A contract's logs."""

    def events(self, name: str, from_block: int, to_block: int | None = None, **filters: Any) -> list[Event]: ...


class Book(Structural):
    """Where the deployment's logs begin."""

    @property
    def deploy_block(self) -> int: ...


class StakeCalls(Located, Structural):
    """Staking in a role (``StakeManager.stake``), after approving its ``address``."""

    def stake(self, role: Role, amount: int) -> Receipt: ...


class CreditCalls(Structural):
    """A contract that pays by credit (``contracts/Credits.sol``): what it owes us, and the claim."""

    def credit(self, account: str) -> TokenAmount: ...

    def claim_credit(self, to: str) -> Receipt: ...
