"""Typed JSON-RPC client: signing, nonces, gas, receipts, retries, event logs.

* :class:`Signer` holds a private key loaded from an encrypted keystore or an
  environment variable. The key is never logged and never in ``repr``.
* :class:`ChainClient` sends transactions: estimate gas first (a failing
  estimate is decoded into the named revert and nothing is sent), take a
  nonce from a process-wide cache reconciled with the node's pending count,
  sign, send, wait for the receipt, check its status. A transaction still pending after
  ``reprice_after`` seconds (a busy chain whose base fee rose past its fee cap) is signed again
  with the same nonce and higher fees, and whichever version is mined is the receipt.
* Transient failures (connection errors, timeouts, HTTP 5xx/429) are retried
  with exponential backoff; reverts never are.
* A caller may pin the block its reads see (:meth:`ChainClient.reading_at`: a daemon reads at
  head minus its confirmations) and hear of each transaction it sends before broadcast
  (:meth:`ChainClient.journaled`: a daemon records the hash, to find it again after a restart).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NewType, TypeVar
from typing import Protocol as Structural

import requests
from eth_account import Account
from eth_account.datastructures import SignedTransaction
from eth_account.signers.local import LocalAccount
from eth_utils import to_checksum_address
from web3 import Web3
from web3.contract import Contract
from web3.contract.contract import ContractEvent, ContractFunction
from web3.exceptions import (
    BadFunctionCallOutput,
    BlockNotFound,
    ContractLogicError,
    TimeExhausted,
    TransactionNotFound,
    Web3RPCError,
)
from web3.providers.rpc import HTTPProvider
from web3.types import BlockIdentifier, RPCEndpoint, TxParams

from core.bounded import InputRejected, load_json, read_regular_file
from core.config import redact_url
from core.errors import ChainError, ConfigError, NoGas, SignerError, TransactionFailed, TransientRPCError
from core.reverts import ContractRevert, UnknownRevert, decode_revert

__all__ = [
    "Address",
    "TxHash",
    "Wei",
    "BlockNumber",
    "RetryPolicy",
    "Receipt",
    "Signer",
    "ChainClient",
    "SendJournal",
    "TxState",
    "is_transient",
]

log = logging.getLogger(__name__)

Address = NewType("Address", str)  # EIP-55 checksummed
TxHash = NewType("TxHash", str)  # 0x-prefixed hex
Wei = NewType("Wei", int)
BlockNumber = NewType("BlockNumber", int)

T = TypeVar("T")

_MAX_LOG_RANGE = 10_000
# Send with 120% of the estimate plus a fixed margin. The estimate runs against the pending block
# (the mempool's transactions applied: a contested call that another party already sent reverts
# there, at no cost, instead of being mined reverted), the transaction may land in a later one: a stake checkpoint (OpenZeppelin Checkpoints in the draw's sum
# tree) written in the latest block is updated in place there but appended in the next block, about
# 17k gas more per checkpoint on each level of the tree, more than 20% on the draw and bond-reclaim
# paths. Unused gas is not paid.
_GAS_HEADROOM_NUM, _GAS_HEADROOM_DEN = 6, 5
_GAS_MARGIN = 200_000  # a sum-tree path of ~10 levels
#: A replacement must raise both fee fields by at least 10% (geth's and anvil's pool rule): 12.5%.
_REPRICE_NUM, _REPRICE_DEN = 9, 8
#: Seconds between checks that a transaction we wait for is still known to the node (else it is sent again).
DROP_CHECK_S = 1.0
#: anvil's chain id (``veritrain devnet``, the tests): the devnet.
DEVNET_CHAIN_ID = 31337
#: Chains where the parties share one host or one private network: the devnet's and hardhat's (1337).
LOCAL_CHAIN_IDS = frozenset({DEVNET_CHAIN_ID, 1337})


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff for transient RPC failures: base * 2**i, capped, ``attempts`` tries in all."""

    attempts: int = 5
    base_delay: float = 0.2
    max_delay: float = 5.0

    def delays(self) -> Iterator[float]:
        for i in range(self.attempts - 1):
            yield min(self.max_delay, self.base_delay * 2**i)


def is_transient(exc: BaseException) -> bool:
    """Connection errors, timeouts, HTTP 5xx and 429: worth retrying. Never a revert."""
    if isinstance(exc, (ContractLogicError, ContractRevert)):
        return False
    if isinstance(exc, (requests.ConnectionError, requests.Timeout, ConnectionError, TimeoutError)):
        return True
    if isinstance(exc, requests.HTTPError):
        status = exc.response.status_code if exc.response is not None else 0
        return status >= 500 or status == 429
    return False


@dataclass(frozen=True)
class Receipt:
    """A mined, successful transaction."""

    tx_hash: TxHash
    block_number: BlockNumber
    gas_used: int
    effective_gas_price: Wei
    status: int
    logs: tuple[Mapping[str, Any], ...] = field(repr=False)

    @property
    def fee(self) -> Wei:
        return Wei(self.gas_used * self.effective_gas_price)


@dataclass(frozen=True)
class TxState:
    """What the node knows of a transaction by its hash: mined (in ``block``, ``ok`` its status),
    pending (known, not mined), or unknown (never seen, dropped, or rolled back with its block)."""

    known: bool
    block: BlockNumber | None = None
    ok: bool = False

    @property
    def pending(self) -> bool:
        return self.known and self.block is None


class SendJournal(Structural):
    """Hears of each transaction sent under :meth:`ChainClient.journaled`."""

    def signed(self, tx_hash: TxHash, nonce: int) -> None:
        """Signed, about to be broadcast: the hash to look for after a restart."""


class Signer:
    """A local signing key. ``repr``/``str`` show only the address; it cannot be pickled."""

    __slots__ = ("_account", "address")

    def __init__(self, account: LocalAccount) -> None:
        self._account = account
        self.address: Address = Address(account.address)

    @classmethod
    def from_private_key(cls, key: str | bytes) -> Signer:
        try:
            return cls(Account.from_key(key))
        except (ValueError, TypeError):
            raise SignerError("malformed private key") from None

    @classmethod
    def from_env(cls, var: str, env: Mapping[str, str] | None = None) -> Signer:
        value = (os.environ if env is None else env).get(var)
        if not value:
            raise SignerError(f"environment variable {var} is not set (it should hold a private key)")
        try:
            return cls(Account.from_key(value.strip()))
        except (ValueError, TypeError):
            raise SignerError(f"environment variable {var} does not hold a valid private key") from None

    @classmethod
    def from_keystore(cls, path: Path, password: str) -> Signer:
        try:  # a FIFO or device is refused at once (it would block), a file is size and depth bounded
            keyfile = load_json(read_regular_file(path, max_bytes=_MAX_KEYSTORE_BYTES, what="keystore"), max_bytes=_MAX_KEYSTORE_BYTES, what=f"keystore {path}")
        except InputRejected as exc:
            raise SignerError(str(exc)) from None
        _check_kdf(path, keyfile)
        try:
            key = Account.decrypt(keyfile, password)
        except ValueError:
            raise SignerError(f"wrong password for keystore {path}") from None
        except (KeyError, TypeError):
            raise SignerError(f"keystore {path} is not an encrypted key file") from None
        return cls(Account.from_key(key))

    @classmethod
    def from_settings(cls, keystore: Path | None, key_env: str | None, password_env: str = "VERITRAIN_KEYSTORE_PASSWORD") -> Signer:
        """The signer the settings name: a keystore (password from ``password_env``) or a key env var."""
        if keystore is not None and key_env is not None:
            raise ConfigError("give either a keystore or a key env var, not both")
        if keystore is not None:
            password = os.environ.get(password_env)
            if password is None:
                raise SignerError(f"keystore given but {password_env} is not set")
            return cls.from_keystore(keystore, password)
        if key_env is not None:
            return cls.from_env(key_env)
        raise ConfigError("no signing key: pass --keystore or --key-env")

    def encrypt(self, password: str) -> dict[str, Any]:
        """An encrypted keystore (v3 JSON) for this key."""
        return Account.encrypt(self._account.key, password)

    def sign_transaction(self, tx: Mapping[str, Any]) -> SignedTransaction:
        return self._account.sign_transaction(dict(tx))

    def __repr__(self) -> str:
        return f"Signer({self.address})"

    __str__ = __repr__

    def __reduce__(self) -> Any:
        raise TypeError("a Signer holds a private key and cannot be pickled")


#: A v3 keystore is about 500 bytes.
_MAX_KEYSTORE_BYTES = 64 * 1024
#: Key derivation work a keystore may ask for: scrypt's n * r * p (memory 128 * n * r bytes; eth-account's
#: default is 2**18 * 8 * 1, 256 MiB) and PBKDF2's iterations (default 10**6).
_MAX_SCRYPT_WORK = 1 << 23
_MAX_PBKDF2_ROUNDS = 10_000_000


def _check_kdf(path: Path, keyfile: Any) -> None:
    """Refuse a keystore whose key derivation would take unbounded memory or time."""
    crypto = keyfile.get("crypto", keyfile.get("Crypto")) if isinstance(keyfile, dict) else None
    params = crypto.get("kdfparams") if isinstance(crypto, dict) else None
    if not isinstance(params, dict):
        raise SignerError(f"keystore {path} is not an encrypted key file")
    numbers = {k: v for k, v in params.items() if k in ("n", "r", "p", "c", "dklen")}
    if not all(type(v) is int and v > 0 for v in numbers.values()):
        raise SignerError(f"keystore {path}: key derivation parameters must be positive integers")
    work = numbers.get("n", 1) * numbers.get("r", 1) * numbers.get("p", 1)
    if work > _MAX_SCRYPT_WORK or numbers.get("c", 1) > _MAX_PBKDF2_ROUNDS or numbers.get("dklen", 32) > 64:
        raise SignerError(f"keystore {path} asks for more key derivation work than any wallet uses")


class _NonceCache:
    """Process-wide next-nonce per (endpoint, chain, account), one lock per account.

    The lock is held from nonce choice to broadcast, so concurrent sends from
    one process get consecutive nonces. The cached value is trusted only while
    the node shows transactions of ours pending (pending count > latest
    count); otherwise the node's count wins, which also heals after a chain
    snapshot is reverted or a transaction is dropped.
    """

    _guard = threading.Lock()
    _locks: dict[tuple[str, int, str], threading.Lock] = {}
    _next: dict[tuple[str, int, str], int] = {}

    @classmethod
    def lock(cls, key: tuple[str, int, str]) -> threading.Lock:
        with cls._guard:
            return cls._locks.setdefault(key, threading.Lock())

    @classmethod
    def choose(cls, key: tuple[str, int, str], pending: int, latest: int) -> int:
        cached = cls._next.get(key)
        if cached is not None and cached > pending and pending > latest:
            return cached
        return pending

    @classmethod
    def advance(cls, key: tuple[str, int, str], used: int) -> None:
        cls._next[key] = used + 1

    @classmethod
    def forget(cls, endpoint: str | None = None) -> None:
        with cls._guard:
            for key in [k for k in cls._next if endpoint is None or k[0] == endpoint]:
                del cls._next[key]


class DeadlineSession(requests.Session):
    """A requests session whose every response must arrive whole within ``deadline_s`` seconds of the
    request. requests' own timeout bounds each read, not the response: a node (or a proxy) that answers
    and then drips a byte now and then would hold a call, and the daemon behind it, for ever. Past the
    deadline the call raises ``requests.Timeout``: transient, retried with backoff, then abandoned."""

    def __init__(self, deadline_s: float) -> None:
        super().__init__()
        self.deadline_s = deadline_s

    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any) -> requests.Response:
        started = time.monotonic()
        kwargs["stream"] = True
        response = super().request(method if isinstance(method, str) else method.decode(), url if isinstance(url, str) else url.decode(), *args, **kwargs)
        chunks: list[bytes] = []
        try:
            while True:
                if time.monotonic() - started > self.deadline_s:
                    raise requests.Timeout(f"no whole response from {redact_url(str(url))} within {self.deadline_s:.0f} s")
                chunk = response.raw.read1(1 << 16, decode_content=True)
                if not chunk:
                    break
                chunks.append(chunk)
        except BaseException:
            response.close()
            raise
        response._content = b"".join(chunks)
        response._content_consumed = True
        return response


class ChainClient:
    """One JSON-RPC endpoint. Thread-safe; share one per process and endpoint."""

    def __init__(
        self,
        rpc_url: str,
        *,
        timeout: float = 10.0,
        retry: RetryPolicy = RetryPolicy(),
        expected_chain_id: int | None = None,
        receipt_timeout: float = 120.0,
        reprice_after: float = 30.0,
    ) -> None:
        # eth_chainId cached: web3's validation middleware asks for it before every eth_call and
        # gas estimate, a second round trip per read (the chain id is checked once, below).
        provider = HTTPProvider(
            rpc_url,
            request_kwargs={"timeout": timeout},
            session=DeadlineSession(timeout),
            exception_retry_configuration=None,
            cache_allowed_requests=True,
            cacheable_requests={RPCEndpoint("eth_chainId")},
        )
        self.rpc_url = rpc_url  # may hold a credential: never in a message, ``endpoint`` is shown instead
        self.endpoint = redact_url(rpc_url)
        self.w3 = Web3(provider)
        self.retry = retry
        self.receipt_timeout = receipt_timeout
        self.reprice_after = reprice_after
        self._chain_id: int | None = None
        self._local = threading.local()  # this thread's pinned read block and send journal
        if expected_chain_id is not None and self.chain_id != expected_chain_id:
            raise ConfigError(f"{self.endpoint} serves chain {self.chain_id}, expected {expected_chain_id}")

    def __repr__(self) -> str:
        return f"ChainClient({self.endpoint})"

    # -- plumbing ---------------------------------------------------------------------------

    def with_retry(self, what: str, fn: Callable[[], T]) -> T:
        """Run ``fn``, retrying transient failures with backoff; everything else propagates."""
        delays = self.retry.delays()
        while True:
            try:
                return fn()
            except Exception as exc:
                if _block_gone(exc):  # a read at a block the chain no longer has: it went back under us
                    raise TransientRPCError(f"{what} at {self.endpoint}: the chain went back under a read ({_first_line(exc)})") from exc
                if not is_transient(exc):
                    raise
                delay = next(delays, None)
                if delay is None:
                    if isinstance(exc, (requests.ConnectionError, ConnectionError)):  # one clear line for a node that is not there
                        raise TransientRPCError(
                            f"no chain at {self.endpoint}: {what} could not connect ({self.retry.attempts} attempts); is the node running?"
                        ) from None
                    raise TransientRPCError(f"{what} failed at {self.endpoint} after {self.retry.attempts} attempts: {type(exc).__name__}") from exc
                # the last attempt's error is what the caller sees; each retry only at DEBUG
                log.debug("transient RPC failure, retrying", extra={"what": what, "error": type(exc).__name__, "delay": delay})
                time.sleep(delay)

    def rpc(self, method: str, params: Sequence[Any] = ()) -> Any:
        """A raw JSON-RPC call (e.g. ``evm_snapshot``); errors raise :class:`ChainError`."""
        response = self.with_retry(method, lambda: self.w3.provider.make_request(method, list(params)))  # type: ignore[arg-type]
        if "error" in response:
            error = response["error"]
            raise ChainError(f"{method}: {error.get('message', error) if isinstance(error, dict) else error}")
        return response.get("result")

    @property
    def chain_id(self) -> int:
        if self._chain_id is None:
            self._chain_id = self.with_retry("eth_chainId", lambda: int(self.w3.eth.chain_id))
        return self._chain_id

    def head(self) -> BlockNumber:
        """The node's latest block, pinned or not."""
        return BlockNumber(self.with_retry("eth_blockNumber", lambda: int(self.w3.eth.block_number)))

    def head_id(self) -> tuple[BlockNumber, str]:
        """The latest block's number and hash: a new block, a reorg or a restarted chain changes it."""
        block = self.rpc("eth_getBlockByNumber", ["latest", False])
        return BlockNumber(int(block["number"], 16)), str(block["hash"])

    def block_hash(self, number: int) -> str | None:
        """The hash of block ``number`` on the node's chain now (None: the chain has no such block)."""
        block = self.rpc("eth_getBlockByNumber", [hex(number), False])
        return None if block is None else str(block["hash"])

    def block_gas_limit(self) -> int:
        """The latest block's gas limit: the most one transaction can spend on this chain."""
        return int(self.with_retry("eth_getBlockByNumber", lambda: self.w3.eth.get_block("latest"))["gasLimit"])

    def block_number(self) -> BlockNumber:
        """The block reads see: the pinned one (:meth:`reading_at`), else the latest."""
        pinned: BlockNumber | None = getattr(self._local, "block", None)
        return self.head() if pinned is None else pinned

    def timestamp(self, block: BlockIdentifier | None = None) -> int:
        """The timestamp of ``block`` (default: the block reads see)."""
        at = self._read_block() if block is None else block
        return int(self.with_retry("eth_getBlockByNumber", lambda: self.w3.eth.get_block(at))["timestamp"])

    @contextmanager
    def reading_at(self, block: int) -> Iterator[None]:
        """In this thread, reads (``call``, ``block_number``, ``timestamp``, ``get_logs``) see ``block``,
        not the latest: a daemon decides on what is ``confirmations`` blocks deep. Sends are unaffected."""
        previous = getattr(self._local, "block", None)
        self._local.block = BlockNumber(block)
        try:
            yield
        finally:
            self._local.block = previous

    def _read_block(self) -> BlockIdentifier:
        pinned: BlockNumber | None = getattr(self._local, "block", None)
        return "latest" if pinned is None else pinned

    @contextmanager
    def journaled(self, journal: SendJournal) -> Iterator[None]:
        """In this thread, ``journal`` hears of each transaction sent, its hash before broadcast."""
        previous = getattr(self._local, "journal", None)
        self._local.journal = journal
        try:
            yield
        finally:
            self._local.journal = previous

    def tx_state(self, tx_hash: str) -> TxState:
        """Whether ``tx_hash`` is mined (where, and whether it succeeded), pending, or unknown to the node."""
        try:
            raw = self.with_retry("eth_getTransactionReceipt", lambda: self.w3.eth.get_transaction_receipt(tx_hash))  # type: ignore[arg-type]
            return TxState(True, BlockNumber(int(raw["blockNumber"])), int(raw["status"]) == 1)
        except TransactionNotFound:
            pass
        try:
            self.with_retry("eth_getTransactionByHash", lambda: self.w3.eth.get_transaction(tx_hash))  # type: ignore[arg-type]
        except TransactionNotFound:
            return TxState(False)
        return TxState(True)

    def wait_for(self, tx_hash: TxHash, what: str) -> Receipt:
        """Wait for the receipt of a transaction already sent (ours, from before a restart); a failure raises."""
        raw = self._wait(tx_hash, what)
        receipt = _receipt(tx_hash, raw)
        if receipt.status != 1:
            tx = self.with_retry("eth_getTransactionByHash", lambda: self.w3.eth.get_transaction(tx_hash))  # type: ignore[arg-type]
            raise self._failure({"to": tx["to"], "data": tx["input"], "value": tx["value"]}, receipt)
        return receipt

    def get_code(self, address: str) -> bytes:
        return bytes(self.with_retry("eth_getCode", lambda: self.w3.eth.get_code(to_checksum_address(address))))

    def balance(self, address: str) -> Wei:
        return Wei(int(self.with_retry("eth_getBalance", lambda: self.w3.eth.get_balance(to_checksum_address(address)))))

    # -- reads ------------------------------------------------------------------------------

    def call(self, fn: ContractFunction, *, sender: str | None = None, block: BlockIdentifier | None = None) -> Any:
        """``eth_call`` a contract function at ``block`` (default: the block reads see); a revert raises the named exception."""
        params: TxParams = {"from": to_checksum_address(sender)} if sender else {}
        at = self._read_block() if block is None else block
        try:
            return self.with_retry(fn.fn_name, lambda: fn.call(params, block_identifier=at))
        except ContractLogicError as exc:
            raise decode_revert(exc.data if isinstance(exc.data, str) else None) from None
        except BadFunctionCallOutput as exc:
            # no code answered at that block: a node restarting, behind, or rolled back below the block a
            # view pinned (a deployment whose code is missing is refused at start: AddressBook's check)
            raise TransientRPCError(f"{fn.fn_name}: the node returned no data at the block read (restarting, behind, or rolled back)") from exc

    # -- writes -----------------------------------------------------------------------------

    def transact(self, contract: Contract, fn_name: str, args: Sequence[Any], signer: Signer, *, value: int = 0, gas: int | None = None) -> Receipt:
        """Send ``contract.fn_name(*args)``; returns the receipt or raises the named revert."""
        data = contract.encode_abi(fn_name, args=list(args))
        return self.send(signer, to=contract.address, data=data, value=value, gas=gas, what=fn_name)

    def deploy(self, bytecode: bytes, constructor_args: bytes, signer: Signer, *, what: str = "deploy") -> tuple[Address, Receipt]:
        """Deploy raw creation code + ABI-encoded constructor arguments."""
        receipt, raw = self._send(signer, to=None, data=bytecode + constructor_args, value=0, gas=None, what=what)
        address = raw.get("contractAddress")
        if not address:
            raise ChainError(f"{what}: receipt {receipt.tx_hash} has no contract address")
        return Address(to_checksum_address(address)), receipt

    def send(
        self,
        signer: Signer,
        *,
        to: str | None,
        data: bytes | str = b"",
        value: int = 0,
        gas: int | None = None,
        what: str = "transaction",
    ) -> Receipt:
        """Estimate, sign, send and wait. A revert at estimate time is raised before sending."""
        return self._send(signer, to=to, data=data, value=value, gas=gas, what=what)[0]

    def _send(self, signer: Signer, *, to: str | None, data: bytes | str, value: int, gas: int | None, what: str) -> tuple[Receipt, Mapping[str, Any]]:
        payload = data if isinstance(data, str) else "0x" + bytes(data).hex()
        tx: dict[str, Any] = {"from": signer.address, "data": payload, "value": value, "chainId": self.chain_id}
        if to is not None:
            tx["to"] = to_checksum_address(to)
        block = self.with_retry("eth_getBlockByNumber", lambda: self.w3.eth.get_block("latest"))
        if gas is None:
            # Never above the block's gas limit: a large availability answer (up to ~1 MiB of calldata)
            # would otherwise ask for more than any block holds and be refused outright.
            estimate = self._estimate(tx)
            gas = max(estimate, min(estimate * _GAS_HEADROOM_NUM // _GAS_HEADROOM_DEN + _GAS_MARGIN, int(block["gasLimit"])))
        tx["gas"] = gas
        tx.update(self._fees(block))
        journal: SendJournal | None = getattr(self._local, "journal", None)
        tx_hash, signed = self._sign_and_broadcast(signer, tx, what, journal)
        tx_hash, raw = self._wait_repricing(signer, tx, tx_hash, signed, what, journal)
        receipt = _receipt(tx_hash, raw)
        if receipt.status != 1:
            raise self._failure(tx, receipt)
        log.info("transaction mined", extra={"what": what, "tx": tx_hash, "gas_used": receipt.gas_used, "block": receipt.block_number})
        return receipt, raw

    def _estimate(self, tx: Mapping[str, Any]) -> int:
        try:
            return int(self.with_retry("eth_estimateGas", lambda: self.w3.eth.estimate_gas(dict(tx), "pending")))  # type: ignore[arg-type]
        except ContractLogicError as exc:
            raise decode_revert(exc.data if isinstance(exc.data, str) else None) from None
        except Web3RPCError as exc:
            self._raise_if_no_gas(exc, str(tx["from"]), "a gas estimate")
            raise ChainError(f"gas estimate failed: {exc.message or exc}") from None

    def _raise_if_no_gas(self, exc: Web3RPCError, sender: str, what: str) -> None:
        """A node's "insufficient funds" as :class:`NoGas`, with the account's balance."""
        if "insufficient funds" in (exc.message or str(exc)).lower():
            raise NoGas(sender, self.balance(sender), what) from None

    def _fees(self, block: Mapping[str, Any]) -> dict[str, int]:
        base = int(block.get("baseFeePerGas", 0))
        tip = int(self.with_retry("eth_maxPriorityFeePerGas", lambda: self.w3.eth.max_priority_fee))
        return {"maxFeePerGas": 2 * base + tip, "maxPriorityFeePerGas": tip}

    def _nonce_key(self, address: str) -> tuple[str, int, str]:
        return (self.rpc_url, self.chain_id, address)

    def reset_nonces(self) -> None:
        """Forget cached nonces for this endpoint (after an ``evm_revert``, say)."""
        _NonceCache.forget(self.rpc_url)

    def _sign_and_broadcast(self, signer: Signer, tx: dict[str, Any], what: str, journal: SendJournal | None) -> tuple[TxHash, bytes]:
        key = self._nonce_key(signer.address)
        sender = to_checksum_address(signer.address)
        with _NonceCache.lock(key):
            pending = int(self.with_retry("eth_getTransactionCount", lambda: self.w3.eth.get_transaction_count(sender, "pending")))
            latest = int(self.with_retry("eth_getTransactionCount", lambda: self.w3.eth.get_transaction_count(sender, "latest")))
            tx["nonce"] = _NonceCache.choose(key, pending, latest)
            tx.pop("from", None)
            try:
                tx_hash, raw = self._sign_and_send(signer, tx, journal)
            except Web3RPCError as exc:
                _NonceCache.forget(self.rpc_url)
                self._raise_if_no_gas(exc, signer.address, what)
                raise ChainError(f"{what}: node refused the transaction: {exc.message or exc}") from None
            except TransientRPCError:
                _NonceCache.forget(self.rpc_url)
                raise
            _NonceCache.advance(key, tx["nonce"])
        log.debug("transaction sent", extra={"what": what, "tx": tx_hash, "nonce": tx["nonce"]})
        return tx_hash, raw

    def _sign_and_send(self, signer: Signer, tx: Mapping[str, Any], journal: SendJournal | None) -> tuple[TxHash, bytes]:
        """Sign ``tx`` (nonce and fees set), journal its hash, broadcast it; the node's refusal is raised.
        Returns the hash and the signed bytes (sent again as they are if the chain drops them)."""
        signed = signer.sign_transaction(tx)
        tx_hash = TxHash("0x" + bytes(signed.hash).hex())
        if journal is not None:
            journal.signed(tx_hash, tx["nonce"])
        raw = bytes(signed.raw_transaction)
        self.with_retry("eth_sendRawTransaction", lambda: self._broadcast(raw, tx_hash))
        return tx_hash, raw

    def _broadcast(self, raw: bytes, tx_hash: TxHash) -> None:
        """Send signed bytes; resending the same bytes after a lost response is harmless."""
        try:
            self.w3.eth.send_raw_transaction(raw)
        except Web3RPCError as exc:
            message = (exc.message or str(exc)).lower()
            if "already known" in message or "already imported" in message or "nonce too low" in message:
                try:
                    self.w3.eth.get_transaction(tx_hash)  # type: ignore[arg-type]
                    return  # ours, from an earlier attempt whose response was lost
                except TransactionNotFound:
                    pass
            raise

    def _wait_repricing(
        self, signer: Signer, tx: dict[str, Any], tx_hash: TxHash, raw_tx: bytes, what: str, journal: SendJournal | None
    ) -> tuple[TxHash, Mapping[str, Any]]:
        """The receipt of whichever version of ``tx`` (signed, nonce set) is mined, and its hash. A
        version still pending after :attr:`reprice_after` seconds is replaced: the same nonce with both
        fee fields 12.5% higher and at least what the latest block asks (2 x base fee + tip), journaled
        before broadcast like the first. A replacement the node refuses (underpriced, or the nonce
        already used by a mined version) changes nothing: the wait goes on for every version. A transaction
        the node no longer knows is sent again at once (:meth:`_send_again_if_dropped`)."""
        versions = [tx_hash]
        signed = {tx_hash: raw_tx}
        deadline = time.monotonic() + self.receipt_timeout
        reprice_at = time.monotonic() + self.reprice_after
        known_at = time.monotonic() + DROP_CHECK_S
        while True:
            for version in reversed(versions):
                raw = self.with_retry("eth_getTransactionReceipt", lambda: self._receipt_or_none(version))
                if raw is not None:
                    return version, raw
            now = time.monotonic()
            if now >= deadline:
                raise ChainError(f"{what}: no receipt for {versions[-1]} within {self.receipt_timeout:.0f}s")
            if now >= known_at:
                known_at = now + DROP_CHECK_S
                if self._send_again_if_dropped(versions, signed, what):
                    reprice_at = now
            if now >= reprice_at:
                reprice_at = now + self.reprice_after
                tx.update(self._repriced(tx))
                try:
                    replacement, replacement_raw = self._sign_and_send(signer, tx, journal)
                except Web3RPCError as exc:
                    log.debug("replacement refused", extra={"what": what, "nonce": tx["nonce"], "error": exc.message or str(exc)})
                else:
                    signed[replacement] = replacement_raw
                    versions.append(replacement)
                    log.info(
                        "transaction re-priced",
                        extra={"what": what, "tx": replacement, "replaces": versions[-2], "nonce": tx["nonce"], "max_fee": tx["maxFeePerGas"]},
                    )
            time.sleep(0.1)

    def _send_again_if_dropped(self, versions: Sequence[TxHash], signed: Mapping[TxHash, bytes], what: str) -> bool:
        """A transaction no version of which the node knows any more (a reorg took its block, the pool
        dropped it) is broadcast again at once, the same signed bytes: not after the re-price delay.
        Returns whether it must be re-priced now (the node refuses those bytes at their fees). If its nonce
        was used meanwhile ("nonce too low"), it can never be mined: raised, so that the daemon decides
        again on a fresh view."""
        for version in versions:
            try:
                self.w3.eth.get_transaction(version)  # type: ignore[arg-type]
                return False  # pending (or mined): the receipt comes
            except TransactionNotFound:
                continue
        last = versions[-1]
        log.warning("transaction dropped from the chain (reorg or pool): sending it again now", extra={"what": what, "tx": last})
        try:
            self.with_retry("eth_sendRawTransaction", lambda: self._broadcast(signed[last], last))
        except Web3RPCError as exc:
            message = exc.message or str(exc)
            if "nonce too low" in message.lower():
                raise ChainError(f"{what}: transaction {last} was dropped and its nonce used since: {message}") from None
            log.debug("dropped transaction refused again, re-pricing", extra={"what": what, "error": message})
            return True
        return False

    def _receipt_or_none(self, tx_hash: TxHash) -> Mapping[str, Any] | None:
        try:
            return self.w3.eth.get_transaction_receipt(tx_hash)  # type: ignore[arg-type]
        except TransactionNotFound:
            return None

    def _repriced(self, tx: Mapping[str, Any]) -> dict[str, int]:
        """Fees for a replacement of ``tx``: each field at least 12.5% above the pending version's
        (rounded up) and at least what the latest block asks."""
        block = self.with_retry("eth_getBlockByNumber", lambda: self.w3.eth.get_block("latest"))
        market = self._fees(block)
        tip = max(-(-int(tx["maxPriorityFeePerGas"]) * _REPRICE_NUM // _REPRICE_DEN), market["maxPriorityFeePerGas"])
        cap = max(-(-int(tx["maxFeePerGas"]) * _REPRICE_NUM // _REPRICE_DEN), market["maxFeePerGas"] - market["maxPriorityFeePerGas"] + tip)
        return {"maxFeePerGas": cap, "maxPriorityFeePerGas": tip}

    def _wait(self, tx_hash: TxHash, what: str) -> Mapping[str, Any]:
        deadline = time.monotonic() + self.receipt_timeout
        while True:
            try:
                remaining = max(0.1, deadline - time.monotonic())
                return self.with_retry(
                    "eth_getTransactionReceipt",
                    lambda: self.w3.eth.wait_for_transaction_receipt(tx_hash, timeout=min(remaining, 5.0), poll_latency=0.05),  # type: ignore[arg-type]
                )
            except TimeExhausted:
                if time.monotonic() >= deadline:
                    raise ChainError(f"{what}: no receipt for {tx_hash} within {self.receipt_timeout:.0f}s") from None

    def _failure(self, tx: Mapping[str, Any], receipt: Receipt) -> ChainError:
        """Recover the revert reason of a mined failure by replaying it at its block."""
        replay = {k: tx[k] for k in ("to", "data", "value") if k in tx}
        sender = self.w3.eth.get_transaction(receipt.tx_hash)["from"]  # type: ignore[arg-type]
        replay["from"] = sender
        try:
            self.with_retry("eth_call", lambda: self.w3.eth.call(replay, block_identifier=receipt.block_number - 1))  # type: ignore[arg-type]
        except ContractLogicError as exc:
            decoded = decode_revert(exc.data if isinstance(exc.data, str) else None)
            if not isinstance(decoded, UnknownRevert):
                return decoded
        return TransactionFailed(receipt.tx_hash, receipt.gas_used)

    # -- events -----------------------------------------------------------------------------

    def get_logs(
        self,
        event: ContractEvent,
        from_block: int,
        to_block: int | None = None,
        *,
        argument_filters: Mapping[str, Any] | None = None,
        max_range: int = 2_000,
    ) -> list[Any]:
        """Decoded logs of ``event`` in [from_block, to_block], fetched ``max_range`` blocks at a time."""
        if not 0 < max_range <= _MAX_LOG_RANGE:
            raise ValueError(f"max_range must be in 1..{_MAX_LOG_RANGE}")
        last = self.block_number() if to_block is None else to_block
        found: list[Any] = []
        start = from_block
        while start <= last:
            end = min(last, start + max_range - 1)
            chunk = self.with_retry(
                "eth_getLogs",
                lambda: event.get_logs(from_block=start, to_block=end, argument_filters=dict(argument_filters or {})),
            )
            found.extend(chunk)
            start = end + 1
        return found


def _block_gone(exc: BaseException) -> bool:
    """A node's answer to a read at a block beyond its head (anvil: ``BlockOutOfRangeError``; geth:
    ``header not found``), or web3's ``BlockNotFound``: the chain went back (a restart from an older
    state, a reverted snapshot, a reorg) between choosing the block and reading it."""
    if isinstance(exc, BlockNotFound):
        return True
    if not isinstance(exc, Web3RPCError):
        return False
    message = (exc.message or str(exc)).lower()
    return "blockoutofrange" in message or "header not found" in message or "unknown block" in message


def _first_line(exc: BaseException) -> str:
    return (str(exc).splitlines() or [type(exc).__name__])[0][:200]


def _receipt(tx_hash: TxHash, raw: Mapping[str, Any]) -> Receipt:
    return Receipt(
        tx_hash=tx_hash,
        block_number=BlockNumber(int(raw["blockNumber"])),
        gas_used=int(raw["gasUsed"]),
        effective_gas_price=Wei(int(raw.get("effectiveGasPrice", 0))),
        status=int(raw["status"]),
        logs=tuple(raw["logs"]),
    )
