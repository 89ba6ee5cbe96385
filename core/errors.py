"""Every error veritrain raises, under one root: :class:`VeritrainError`.

This module imports nothing but the standard library, so the pure engine (``proofs``) can build on it
without the chain libraries. A contract's revert, decoded from the compiled ABIs into a named
exception carrying its values, is :mod:`core.reverts`.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "VeritrainError",
    "ConfigError",
    "ArtifactsMissing",
    "AddressBookError",
    "SignerError",
    "ChainError",
    "TransientRPCError",
    "TransactionFailed",
    "NoGas",
    "SealingError",
]


class VeritrainError(Exception):
    """Root of every error veritrain raises on purpose.

    ``exit_code`` is what the CLI exits with when this error reaches it.
    """

    exit_code: ClassVar[int] = 1


class ConfigError(VeritrainError):
    """A setting is missing or malformed (flags, environment, files)."""

    exit_code = 2


class ArtifactsMissing(VeritrainError):
    """Compiled contract artifacts are absent or unreadable: run `make build`."""

    exit_code = 2


class AddressBookError(VeritrainError):
    """The address book for a chain is missing, malformed or points at no code."""

    exit_code = 2


class SignerError(VeritrainError):
    """A signing key could not be loaded (missing env var, bad keystore, bad password)."""

    exit_code = 2


class SealingError(VeritrainError):
    """Sealed content or a wrapped data key did not open: altered, truncated, extended, malformed, or
    sealed to another key (core/sealing.py). Nothing of it is to be trusted."""

    exit_code = 6


class ChainError(VeritrainError):
    """The chain could not do what was asked."""

    exit_code = 3


class TransientRPCError(ChainError):
    """The RPC endpoint kept failing transiently (connection, timeout, 5xx) after retries."""

    exit_code = 4


class NoGas(TransientRPCError):
    """The sending account cannot pay for gas. Transient for a daemon: it backs off until someone funds
    it (each retry waits longer, so the log says so at a backoff, not at every poll)."""

    exit_code = 3

    def __init__(self, address: str, balance: int, what: str) -> None:
        super().__init__(f"account {address} has {balance / 10**18:.6g} ETH, not enough gas for {what}: send it ETH (on a devnet: veritrain fund {address})")
        self.address = address
        self.balance = balance


class TransactionFailed(ChainError):
    """A mined transaction has status 0 and its revert reason could not be recovered."""

    def __init__(self, tx_hash: str, gas_used: int) -> None:
        super().__init__(f"transaction {tx_hash} reverted (gas used {gas_used})")
        self.tx_hash = tx_hash
        self.gas_used = gas_used
