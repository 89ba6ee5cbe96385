"""A contract's revert as a named exception under :class:`core.errors.ChainError`.

Contract reverts are decoded from the compiled ABIs (build/contracts/*.json)
into named exceptions that carry the decoded values::

    from core.reverts import revert_class
    InsufficientStake = revert_class("InsufficientStake")
    try:
        market.claim(job_id)
    except InsufficientStake as e:
        print(e.have, e.need)          # also e.args == (account, have, need)

``from core.reverts import InsufficientStake`` works too (module ``__getattr__``),
as long as some compiled contract declares that error. One class per error
name, created once and cached, so ``except`` clauses written before the first
revert catch the instances decoded later.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from eth_abi import decode as abi_decode
from eth_abi.exceptions import DecodingError
from eth_typing import ABIError
from eth_utils import keccak, to_checksum_address
from eth_utils.abi import abi_to_signature, get_abi_input_names, get_abi_input_types

from core import artifacts
from core.errors import ArtifactsMissing, ChainError

__all__ = [
    "ContractRevert",
    "RevertString",
    "Panic",
    "UnknownRevert",
    "explain",
    "revert_class",
    "decode_revert",
    "error_selector",
]


def _show(value: Any) -> str:
    if isinstance(value, bytes):
        text = value.rstrip(b"\0")
        if len(value) == 32 and text and len(text) < 32 and all(0x20 <= b < 0x7F for b in text):
            return repr(text.decode())  # a bytes32 short string, e.g. InvalidParameter(name='openWindow')
        return "0x" + value.hex()
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(_show(v) for v in value) + ")"
    return str(value)


_RESERVED = frozenset({"data", "fields"})


class ContractRevert(ChainError):
    """A contract reverted. Subclasses are the contracts' custom errors by name.

    ``args`` holds the decoded values in ABI order; each value is also an
    attribute named after its ABI parameter; ``values`` maps names to values.
    """

    error_name: ClassVar[str] = "ContractRevert"
    exit_code = 5

    def __init__(self, *values: Any, fields: Sequence[str] = (), data: bytes = b"") -> None:
        super().__init__(*values)
        names = tuple(fields) or tuple(f"arg{i}" for i in range(len(values)))
        if len(names) != len(values):
            raise ValueError(f"{type(self).__name__}: {len(values)} values for fields {names}")
        self.fields: tuple[str, ...] = names
        self.data: bytes = data
        for name, value in zip(names, values):
            if name and name not in _RESERVED and not hasattr(type(self), name):
                setattr(self, name, value)

    if TYPE_CHECKING:
        # The decoded values' attributes (e.jobId, e.have) are set per instance from the ABI, so the
        # checker cannot list them; this declares them for it only (no runtime __getattr__).
        def __getattr__(self, name: str) -> Any: ...

    @property
    def values(self) -> dict[str, Any]:
        return dict(zip(self.fields, self.args))

    def __str__(self) -> str:
        inner = ", ".join(f"{n}={_show(v)}" for n, v in zip(self.fields, self.args))
        return f"{self.error_name}({inner})"

    def __repr__(self) -> str:
        return str(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.error_name, self.args, self.fields, self.data))


class RevertString(ContractRevert):
    """``Error(string)``: a require-string or ``revert("...")``."""

    error_name = "Error"

    @property
    def reason(self) -> str:
        return str(self.args[0])


_PANIC_CODES: Mapping[int, str] = {
    0x00: "generic compiler panic",
    0x01: "assert failed",
    0x11: "arithmetic overflow or underflow",
    0x12: "division or modulo by zero",
    0x21: "invalid enum value",
    0x22: "corrupt storage byte array",
    0x31: "pop on empty array",
    0x32: "array index out of bounds",
    0x41: "out of memory",
    0x51: "call to a zero-initialized function",
}


class Panic(ContractRevert):
    """``Panic(uint256)``: a failed assert, overflow, division by zero..."""

    error_name = "Panic"

    @property
    def description(self) -> str:
        return _PANIC_CODES.get(int(self.args[0]), "unknown panic code")

    def __str__(self) -> str:
        return f"Panic(code=0x{int(self.args[0]):02x}: {self.description})"


class UnknownRevert(ContractRevert):
    """Revert data that matches no error in the compiled ABIs (or no data at all)."""

    error_name = "UnknownRevert"

    def __str__(self) -> str:
        if not self.data:
            return "UnknownRevert(no revert data)"
        return f"UnknownRevert(data=0x{self.data.hex()})"


def error_selector(error_abi: ABIError) -> bytes:
    """The 4-byte selector of an ABI error entry."""
    return keccak(text=abi_to_signature(error_abi))[:4]


_ERROR_SELECTOR = keccak(text="Error(string)")[:4]
_PANIC_SELECTOR = keccak(text="Panic(uint256)")[:4]

_lock = threading.Lock()
_classes: dict[str, type[ContractRevert]] = {}
_abi_by_selector: dict[bytes, ABIError] = {}
_notices: dict[str, str] = {}  # custom error name -> its NatSpec @notice
_indexed_fingerprint: str | None = None


def _make_class(name: str) -> type[ContractRevert]:
    cls = _classes.get(name)
    if cls is None:
        cls = type(
            name,
            (ContractRevert,),
            {"error_name": name, "__module__": __name__, "__doc__": f"Custom error `{name}` from the compiled ABIs."},
        )
        _classes[name] = cls
    return cls


def _index() -> Mapping[bytes, ABIError]:
    """Selector -> error ABI over every compiled artifact (rebuilt when artifacts change)."""
    global _indexed_fingerprint

    fingerprint = artifacts.fingerprint()
    with _lock:
        if fingerprint != _indexed_fingerprint:
            _abi_by_selector.clear()
            _notices.clear()
            for artifact in artifacts.load_all().values():
                for entry in artifact.abi:
                    if entry["type"] == "error":
                        _abi_by_selector[error_selector(entry)] = entry
                        _make_class(entry["name"])
                for name, notice in artifact.error_notices.items():
                    _notices.setdefault(name, notice)
            _indexed_fingerprint = fingerprint
        return dict(_abi_by_selector)


def explain(exc: ContractRevert) -> str:
    """The one-line NatSpec ``@notice`` of a custom error (what it means), or "" if it has none."""
    _index()
    return _notices.get(exc.error_name, "")


def revert_class(name: str) -> type[ContractRevert]:
    """The exception class for custom error ``name``; KeyError if no compiled ABI declares it."""
    if name in _classes:
        return _classes[name]
    if not any(entry["name"] == name for entry in _index().values()):
        raise KeyError(f"no compiled contract declares error {name!r}")
    return _classes[name]


def decode_revert(data: bytes | str | None) -> ContractRevert:
    """Decode raw revert data into the named exception (not raised, returned)."""
    if isinstance(data, str):
        text = data[2:] if data.startswith("0x") else data
        try:
            raw = bytes.fromhex(text)
        except ValueError:
            return UnknownRevert(data=data.encode())
    else:
        raw = bytes(data or b"")
    selector, body = raw[:4], raw[4:]
    try:
        if selector == _ERROR_SELECTOR:
            (reason,) = abi_decode(["string"], body)
            return RevertString(reason, fields=("reason",), data=raw)
        if selector == _PANIC_SELECTOR:
            (code,) = abi_decode(["uint256"], body)
            return Panic(code, fields=("code",), data=raw)
        entry = _index().get(selector) if len(raw) >= 4 else None
        if entry is None:
            return UnknownRevert(data=raw)
        values = abi_decode(get_abi_input_types(entry), body)
    except DecodingError:
        return UnknownRevert(data=raw)
    names = get_abi_input_names(entry)
    fields = tuple(n or f"arg{i}" for i, n in enumerate(names))
    types = get_abi_input_types(entry)
    readable = tuple(_checksummed(t, v) for t, v in zip(types, values))
    return _make_class(entry["name"])(*readable, fields=fields, data=raw)


def _checksummed(abi_type: str, value: Any) -> Any:
    """Addresses in EIP-55 form, as everywhere else in veritrain."""
    if abi_type == "address":
        return to_checksum_address(value)
    if abi_type.startswith("address[") and isinstance(value, (list, tuple)):
        return tuple(to_checksum_address(v) for v in value)
    return value


def _rebuild(name: str, values: tuple[Any, ...], fields: tuple[str, ...], data: bytes) -> ContractRevert:
    static = {"Error": RevertString, "Panic": Panic, "UnknownRevert": UnknownRevert, "ContractRevert": ContractRevert}
    cls = static.get(name) or _make_class(name)
    return cls(*values, fields=fields, data=data)


def __getattr__(name: str) -> type[ContractRevert]:
    if name.startswith("_") or not name[:1].isupper():
        raise AttributeError(name)
    try:
        return revert_class(name)
    except (KeyError, ArtifactsMissing):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
