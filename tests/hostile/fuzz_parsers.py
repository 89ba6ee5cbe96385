"""Fuzz every parser of outside bytes, in a process where web3 is imported (run by test_parsers.py).

web3's import raises the recursion limit to 100,000; the C JSON parser then overflows the C
stack on deep nesting (SIGSEGV: no exception, the process dies). So this runs in a child
process: a crash is a non-zero exit the test sees. Each parser gets hand-made hostile cases
(deep nesting, huge numbers, wrong types, truncation, huge lengths) and hypothesis inputs
(random bytes, random JSON, mutations of a valid document); every input must end in the
parser's own one-line error or a value, never in another exception or a crash.
"""

from __future__ import annotations

import io
import json
import os
import struct
import sys
import tempfile
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this checkout's packages, whatever is installed

import web3  # noqa: E402, F401  - raises the recursion limit: the condition under which deep JSON crashed the daemons

assert sys.getrecursionlimit() >= 10_000, "web3 no longer raises the recursion limit: the fuzz proves less"

import numpy as np  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from core.address_book import AddressBook  # noqa: E402
from core.bounded import InputRejected, load_json, safetensors_header  # noqa: E402
from core.chain import Signer  # noqa: E402
from core.cid import InvalidCid, parse_cid  # noqa: E402
from core.errors import AddressBookError, ConfigError, SignerError  # noqa: E402
from core.storage import IpfsStore, LocalStore, StorageError, file_cid  # noqa: E402
from core.storage.unixfs import Link, parent_block, read_block  # noqa: E402
from deploy.deployer import DeployParams  # noqa: E402
from proofs.checkpoint import decode_checkpoint  # noqa: E402
from proofs.data import load_dataset  # noqa: E402
from proofs.datasets import reference_job  # noqa: E402
from proofs.errors import ProofError  # noqa: E402
from proofs.manifest import load_manifest, parse_manifest  # noqa: E402
from proofs.spec import load_spec  # noqa: E402
from proofs.train import train_trace  # noqa: E402
from submitter.errors import SubmitError  # noqa: E402
from submitter.specfile import read_job  # noqa: E402
from whistleblower.audit import MalformedReport, parse_segments  # noqa: E402

WORK = Path(tempfile.mkdtemp(prefix="fuzz-parsers-"))
STORE = LocalStore(WORK / "store")
FUZZ = settings(
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "60")), deadline=None, database=None, derandomize=True, suppress_health_check=list(HealthCheck)
)

# ---------------------------------------------------------------- valid documents to mutate

REF = reference_job("mlp-spirals", steps=4, checkpoint_interval=2)
SPEC = REF.spec(STORE.put(REF.dataset))
TRACE = train_trace(SPEC, load_dataset(SPEC, REF.dataset))
CHECKPOINT = TRACE.checkpoints[1]
MANIFEST = TRACE.manifest(file_cid(SPEC.canonical_bytes()), [file_cid(c) for c in TRACE.checkpoints]).canonical_bytes()
REPORT = json.dumps({"passed": True, "segments": [0, 1]}).encode()
_PAGED = {**json.loads(MANIFEST), "checkpoint_count": 1001, "pages": ["0x" + "11" * 32, "0x" + "22" * 32]}
PAGED_ROOT = json.dumps({k: v for k, v in _PAGED.items() if k not in ("checkpoints", "update_norms", "losses")}, sort_keys=True).encode()
KEYSTORE = json.dumps(Signer.from_private_key("0x" + "11" * 32).encrypt("pw")).encode()
NPZ = io.BytesIO()
np.savez(NPZ, x=np.zeros((64, 2), np.float32), y=np.zeros(64, np.int64))


def _sized(fmt: str, n: int) -> Any:
    return SPEC.model_copy(update={"dataset": SPEC.dataset.model_copy(update={"format": fmt, "size_bytes": max(1, n)})})


def _file(data: bytes) -> Path:
    path = WORK / "input"
    path.write_bytes(data)
    return path


class _Reply:
    """A hostile IPFS node's HTTP reply."""

    def __init__(self, status: int, body: bytes) -> None:
        self.status_code, self.body = status, body

    def iter_content(self, size: int) -> Any:
        return iter([self.body[i : i + size] for i in range(0, len(self.body), size)])

    def __enter__(self) -> _Reply:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


class _Node:
    def __init__(self, status: int, body: bytes) -> None:
        self.reply = _Reply(status, body)

    def post(self, *args: Any, **kwargs: Any) -> _Reply:
        return self.reply


def _ipfs(status: int) -> Callable[[bytes], object]:
    return lambda data: IpfsStore("http://user:secret@127.0.0.1:1", session=_Node(status, data)).stat(file_cid(b"x"))  # type: ignore[arg-type]


# ---------------------------------------------------------------- every parser of outside bytes

PARSERS: dict[str, tuple[Callable[[bytes], object], tuple[type[BaseException], ...], bytes]] = {
    "bounded json": (lambda d: load_json(d, max_bytes=1 << 20, what="input"), (InputRejected,), REPORT),
    "job spec": (load_spec, (ProofError,), SPEC.canonical_bytes()),
    "spec file (submit post)": (lambda d: read_job(_file(d), None, STORE), (SubmitError,), json.dumps(SPEC.to_json_dict()).encode()),
    "manifest": (parse_manifest, (ProofError,), MANIFEST),
    "manifest root and pages": (lambda d: load_manifest(d, lambda cid: d), (ProofError,), PAGED_ROOT),
    "checkpoint": (decode_checkpoint, (ProofError,), CHECKPOINT),
    "safetensors header": (lambda d: safetensors_header(d, max_header=1 << 20, what="input"), (InputRejected,), CHECKPOINT),
    "dataset safetensors": (lambda d: load_dataset(_sized("safetensors", len(d)), d), (ProofError,), REF.dataset),
    "dataset npz": (lambda d: load_dataset(_sized("npz", len(d)), d), (ProofError,), NPZ.getvalue()),
    "whistleblower report": (lambda d: parse_segments(d, 2), (MalformedReport,), REPORT),
    "keystore": (lambda d: Signer.from_keystore(_file(d), "pw"), (SignerError,), KEYSTORE),
    "address book": (lambda d: AddressBook.load(_file(d)), (AddressBookError,), b'{"chainId": 1}'),
    "deploy parameters": (lambda d: DeployParams.load(_file(d)), (ConfigError,), b"{}"),
    "ipfs reply": (_ipfs(200), (StorageError,), b'{"Size": 5}'),
    "ipfs error reply": (_ipfs(500), (StorageError,), b'{"Message": "not found"}'),
    "cid": (lambda d: parse_cid(d.decode("latin-1")), (InvalidCid,), file_cid(b"x").encode()),
    "dag-pb block (peer gateway)": (read_block, (ValueError,), parent_block([Link(bytes(32), 300, 262144), Link(b"\x01" * 32, 20, 5)])),
}


def _npy(header: str) -> bytes:
    head = header.encode() + b" " * (-(len(header) + 11) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head


def _npz(members: dict[str, bytes], declared: int | None = None) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    raw = buf.getvalue()
    if declared is not None:  # lie about the uncompressed size in the central directory
        at = raw.rfind(b"PK\x01\x02")
        raw = raw[: at + 24] + struct.pack("<I", declared) + raw[at + 28 :]
    return raw


HAND_MADE: list[bytes] = [
    b"[" * 300_000,  # what crashed every whistleblower
    b"[" * 65_536,  # a 64 KiB spec file of nested [: what crashed `veritrain submit post`
    b'{"a":' * 100_000,
    b'{"model":' + b"[" * 16_000 + b"]" * 16_000 + b"}",
    b'"' + b'\\"' * 100_000,  # an unterminated string of escapes
    b"1e999999",
    b"-1e999999",
    b"9" * 100_000,
    b"[" + b"9" * 5000 + b"]",
    b"NaN",
    b"Infinity",
    b"[-Infinity]",
    b"",
    b"\x00",
    b"\xff\xfe\x00",
    b"null",
    b"true",
    b"[]",
    b"{}",
    b'"x"',
    b"0",
    b'{"model": [], "dataset": 7}',
    b'{"crypto": {"kdf": "scrypt", "kdfparams": {"n": 1073741824, "r": 8, "p": 1, "dklen": 32}}}',
    b'{"crypto": {"kdfparams": {"c": 1e300}}}',
    b'{"passed": true, "segments": [' + b"[" * 50 + b"]" * 50 + b"]}",
    b"\xff" * 8 + b"{}",  # safetensors header length 2**64 - 1
    struct.pack("<Q", 2**62) + b"{}",
    struct.pack("<Q", 2) + b"{}",
    struct.pack("<Q", 60) + b'{"x":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}',
    struct.pack("<Q", 30_000) + b"[" * 30_000,
    _npz({"x.npy": _npy("{'descr': '|O', 'fortran_order': False, 'shape': (64, 2), }"), "y.npy": b""}),
    _npz({"x.npy": _npy("{'descr': '<f4', 'fortran_order': False, 'shape': (10000000000000,), }")}),
    _npz({"x.npy": _npy("{'descr': '<f4', 'fortran_order': False, 'shape': " + "(" * 5000 + ")" * 5000 + ", }")}),
    _npz({"x.npy": _npy("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (64,), }")}),
    _npz({"x.npy": np.zeros(8, np.float32).tobytes()}, declared=2**31),
    b"PK\x05\x06" + b"\x00" * 18,  # an empty zip
    b"PK\x03\x04" + b"\xff" * 100,
]


def _mutations(seed: bytes) -> st.SearchStrategy[bytes]:
    """Truncations, flipped bytes and spliced garbage of a valid document."""
    cut = st.integers(0, len(seed)).map(lambda n: seed[:n])
    flip = st.tuples(st.integers(0, max(0, len(seed) - 1)), st.integers(0, 255)).map(lambda t: seed[: t[0]] + bytes([t[1]]) + seed[t[0] + 1 :] if seed else b"")
    splice = st.tuples(st.integers(0, len(seed)), st.binary(max_size=64)).map(lambda t: seed[: t[0]] + t[1] + seed[t[0] :])
    return st.one_of(cut, flip, splice)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=30,
)


def check(name: str, parse: Callable[[bytes], object], allowed: tuple[type[BaseException], ...], data: bytes) -> None:
    try:
        parse(data)
    except allowed as exc:
        text = str(exc)
        assert "\n" not in text.strip(), f"{name}: a multi-line error for {data[:60]!r}: {text[:300]!r}"
        assert "secret" not in text, f"{name}: a credential in an error: {text!r}"
    except BaseException as exc:
        raise AssertionError(f"{name}: {type(exc).__name__} for input {data[:60]!r}: {str(exc)[:300]}") from exc


def main() -> None:
    for name, (parse, allowed, seed) in PARSERS.items():
        print(f"fuzzing {name}", flush=True)
        check(name, parse, allowed, seed)  # the valid document itself: a value or the parser's own error
        for case in HAND_MADE:
            check(name, parse, allowed, case)

        @FUZZ
        @given(st.one_of(st.binary(max_size=512), _mutations(seed), JSON_VALUES.map(lambda v: json.dumps(v).encode())))
        def fuzz(data: bytes) -> None:
            check(name, parse, allowed, data)

        fuzz()
    fifo = WORK / "fifo"
    os.mkfifo(fifo)
    for what, parse in (("keystore", lambda p: Signer.from_keystore(p, "pw")), ("spec file", lambda p: read_job(p, None, STORE))):
        try:
            parse(fifo)  # would block forever on open or read
        except (SignerError, SubmitError) as exc:
            assert "not a regular file" in str(exc), str(exc)
        else:
            raise AssertionError(f"a FIFO was accepted as a {what}")
    print(f"all {len(PARSERS)} parsers survived", flush=True)


if __name__ == "__main__":
    main()
