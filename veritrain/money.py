"""Money commands: `veritrain stake|unstake|withdraw|claim|balance|transfer|earnings`, and `fund` on a devnet.

Amounts are typed and shown in VERI (``--json``: base units as decimal strings, times as unix
seconds). A refusal by the chain is estimated before anything is sent and ends in one line: the
contract's custom error with its values and the error's NatSpec notice, e.g.::

    error: UnbondingNotElapsed(account=0x70.., role=1, releaseAt=1767225600): withdraw before the unbonding delay elapsed.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer
from eth_utils import is_address, to_checksum_address
from rich.table import Table

from core.chain import DEVNET_CHAIN_ID, Address, Receipt
from core.config import Settings
from core.contracts import Protocol, Role
from core.errors import ConfigError
from core.reverts import ContractRevert
from deploy.anvil import dev_signers
from rolebase import cli as options
from rolebase.actions import creditor, credits_of
from rolebase.amounts import parse_tokens, show_tokens
from rolebase.cli import console, show_time, who
from rolebase.earnings import GasReport, balances, earnings_of, gas_spent

RoleName = Annotated[str, typer.Argument(help="solver, verifier or whistleblower", show_default=False)]
Amount = Annotated[str, typer.Argument(help="amount in VERI, e.g. 150 or 12.5", show_default=False)]
AddressArg = Annotated[str | None, typer.Argument(help="account (default: the key's address)", show_default=False)]


def _role(name: str) -> Role:
    try:
        return Role[name.upper()]
    except KeyError:
        raise typer.BadParameter(f"{name!r} is not one of solver, verifier, whistleblower", param_hint="ROLE") from None


def _address(text: str, what: str) -> Address:
    if not is_address(text):
        raise typer.BadParameter(f"{text!r} is not an address", param_hint=what)
    return Address(to_checksum_address(text))


def _done(json_out: bool, receipt: Receipt, line: str, **fields: object) -> None:
    if json_out:
        print(json.dumps({**fields, "tx": receipt.tx_hash, "gas": receipt.gas_used}))
    else:
        console.print(f"{line}  (tx {receipt.tx_hash}, gas {receipt.gas_used:,})", highlight=False)


@options.with_settings(*options.CHAIN, *options.KEY)
def stake(
    settings: Settings,
    role: RoleName,
    amount: Amount,
    json_out: options.Json = False,
) -> None:
    """Stake AMOUNT VERI in ROLE (approving the StakeManager first if needed).

    Examples:

      veritrain stake solver 150 --key-env SOLVER_KEY
    """
    units, r = parse_tokens(amount, "AMOUNT"), _role(role)
    protocol, key = options.signing_protocol(settings)
    me = key.address
    try:  # the stake's own refusal (below the minimum...) before an approval is sent for it
        protocol.client.call(protocol.stakes.contract.functions.stake(int(r), units), sender=me)
    except ContractRevert as exc:
        if exc.error_name != "ERC20InsufficientAllowance":
            raise
        protocol.token.approve(protocol.stakes.address, units)
    receipt = protocol.stakes.stake(r, units)
    info = protocol.stakes.stake_of(me, r)
    _done(
        json_out, receipt, f"staked {amount} VERI as {r.name.lower()}; now {show_tokens(info.staked)} VERI staked", role=r.name.lower(), staked=str(info.staked)
    )


@options.with_settings(*options.CHAIN, *options.KEY)
def unstake(
    settings: Settings,
    role: RoleName,
    amount: Amount,
    json_out: options.Json = False,
) -> None:
    """Start unbonding AMOUNT VERI of free stake in ROLE; `withdraw` it once the unbonding delay passed.

    Examples:

      veritrain unstake verifier 50 --key-env VERIFIER_KEY
    """
    units, r = parse_tokens(amount, "AMOUNT"), _role(role)
    protocol, key = options.signing_protocol(settings)
    receipt = protocol.stakes.request_unstake(r, units)
    info = protocol.stakes.stake_of(key.address, r)
    _done(json_out, receipt, f"unbonding {show_tokens(info.unbonding)} VERI as {r.name.lower()}, withdrawable from {show_time(info.release_at)}",
          role=r.name.lower(), unbonding=str(info.unbonding), release_at=info.release_at)  # fmt: skip


@options.with_settings(*options.CHAIN, *options.KEY)
def withdraw(
    settings: Settings,
    role: RoleName,
    json_out: options.Json = False,
) -> None:
    """Withdraw ROLE's unbonded stake to the key's balance (after the unbonding delay).

    Examples:

      veritrain withdraw verifier --key-env VERIFIER_KEY
    """
    r = _role(role)
    protocol, key = options.signing_protocol(settings)
    me = key.address
    before = protocol.token.balance_of(me)
    receipt = protocol.stakes.withdraw(r)
    got = protocol.token.balance_of(me) - before
    _done(json_out, receipt, f"withdrew {show_tokens(got)} VERI of {r.name.lower()} stake", role=r.name.lower(), withdrawn=str(got))


@options.with_settings(*options.CHAIN, *options.KEY)
def claim(
    settings: Settings,
    json_out: options.Json = False,
) -> None:
    """Claim what the dispute game, the availability court and the sealed jobs' contract owe the key
    (their settlements, forfeits and returned key bonds credit payouts; a running role daemon claims
    them itself).

    Examples:

      veritrain claim --key-env VERIFIER_KEY
    """
    protocol, key = options.signing_protocol(settings)
    me = key.address
    owed = {source: amount for source, amount in credits_of(protocol, me).items() if amount}
    for source, amount in owed.items():
        receipt = creditor(protocol, source).claim_credit(me)
        _done(json_out, receipt, f"claimed {show_tokens(amount)} VERI from the {source}", source=source, claimed=str(amount))
    if not owed:
        if json_out:
            print(json.dumps({"claimed": {}}))
        else:
            console.print("nothing to claim", highlight=False)


@options.with_settings(*options.CHAIN, *options.KEY)
def transfer(
    settings: Settings,
    to: Annotated[str, typer.Argument(help="recipient address", show_default=False)],
    amount: Amount,
    json_out: options.Json = False,
) -> None:
    """Send AMOUNT VERI to TO.

    Examples:

      veritrain transfer 0x90F79bf6EB2c4f870365E785982E1f101E93b906 25 --key-env MY_KEY
    """
    recipient, units = _address(to, "TO"), parse_tokens(amount, "AMOUNT")
    receipt = options.protocol(settings, signing=True).token.transfer(recipient, units)
    _done(json_out, receipt, f"sent {amount} VERI to {recipient}", to=recipient, amount=str(units))


@options.with_settings("rpc", "book_dir")
def fund(
    settings: Settings,
    to: Annotated[str, typer.Argument(help="address to fund", show_default=False)],
    amount: Annotated[str, typer.Option(help="VERI to send")] = "1000",
    eth: Annotated[int, typer.Option(help="whole ETH for gas to set as its balance (0: leave it)", min=0)] = 10,
    json_out: options.Json = False,
) -> None:
    """On a devnet only: give TO VERI from the deployer (anvil's public account 0) and ETH for gas.

    Examples:

      veritrain fund 0x90F79bf6EB2c4f870365E785982E1f101E93b906 --amount 500
    """
    recipient, units = _address(to, "TO"), parse_tokens(amount, "--amount")
    client = options.client(settings)
    if client.chain_id != DEVNET_CHAIN_ID:
        raise ConfigError(f"fund works on a devnet (chain {DEVNET_CHAIN_ID}) only; this RPC serves chain {client.chain_id}: use `veritrain transfer`")
    if eth:
        client.rpc("anvil_setBalance", [recipient, hex(eth * 10**18)])
    protocol = Protocol.connect(client, options.address_book(settings, client), dev_signers(1)[0])
    receipt = protocol.token.transfer(recipient, units)
    _done(json_out, receipt, f"funded {recipient} with {amount} VERI and {eth} ETH for gas", to=recipient, amount=str(units), eth=str(eth * 10**18))


@options.with_settings(*options.CHAIN, *options.KEY)
def balance(
    settings: Settings,
    address: AddressArg = None,
    json_out: options.Json = False,
) -> None:
    """Show an account's VERI, its gas balance, its stake in each role (locked, unbonding and when it is
    released) and what the game, the court and the sealed jobs' contract owe it (claimed by its daemon, or by `veritrain claim`).

    Examples:

      veritrain balance 0x70997970C51812dc3A010C7d01b50e0d17dc79C8

      veritrain balance --key-env SOLVER_KEY --json
    """
    me = _address(address, "ADDRESS") if address is not None else who(None, settings)
    protocol = options.protocol(settings, signing=False)
    report = balances(protocol, me)
    if json_out:
        print(json.dumps(report, indent=2))
        return
    console.print(f"[bold]{me}[/]  {show_tokens(int(report['veri']))} VERI  gas {show_tokens(int(report['gas']))} ETH", highlight=False)
    table = Table("role", "staked", "locked", "unbonding", "withdrawable from")
    for name, s in report["stakes"].items():
        release = show_time(s["release_at"]) if int(s["unbonding"]) else "-"
        table.add_row(name, show_tokens(int(s["staked"])), show_tokens(int(s["locked"])), show_tokens(int(s["unbonding"])), release)
    console.print(table)
    owed = {source: int(amount) for source, amount in report["credits"].items() if int(amount)}
    if owed:
        where = ", ".join(f"{show_tokens(amount)} VERI from the {source}" for source, amount in owed.items())
        console.print(f"claimable: {where} (veritrain claim)", highlight=False)


@options.with_settings(*options.CHAIN, *options.KEY)
def earnings(
    settings: Settings,
    address: AddressArg = None,
    json_out: options.Json = False,
) -> None:
    """An account's earnings history from chain events, by job and game: rewards, fees, games won,
    challenge bonds posted, availability deposits paid and won, stake slashed from it or paid to it
    (with the job it was for), and the gas its transactions cost, so a wallet reconciles from it.

    Examples:

      veritrain earnings 0x70997970C51812dc3A010C7d01b50e0d17dc79C8

      veritrain earnings --key-env SOLVER_KEY --json
    """
    me = _address(address, "ADDRESS") if address is not None else who(None, settings)
    protocol = options.protocol(settings, signing=False)
    entries = earnings_of(protocol, me)
    total = sum(int(e["amount"]) for e in entries)
    try:
        gas: GasReport | None = gas_spent(protocol, me)
    except ValueError as exc:
        gas, gas_note = None, str(exc)
    if json_out:
        print(json.dumps({"address": me, "total": str(total), "entries": entries, "gas_spent": gas}, indent=2))
        return
    table = Table("block", "job", "game", "what", "VERI", title=f"earnings of {me}")
    for e in entries:
        amount = int(e["amount"])
        table.add_row(str(e["block"]), str(e["job"] or "-"), str(e["game"] or "-"), str(e["what"]), ("-" if amount < 0 else "+") + show_tokens(abs(amount)))
    console.print(table)
    if gas is not None:
        console.print(f"gas spent: {show_tokens(int(gas['wei']))} ETH over {gas['transactions']} transactions")
    else:
        console.print(f"gas spent: not counted ({gas_note})")
    console.print(f"[bold]net {'-' if total < 0 else '+'}{show_tokens(abs(total))} VERI[/]")
