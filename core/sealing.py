"""Job data sealed to the parties that need it (issue 30, step 1): encryption keys, data keys, wraps, sealed content.

Every primitive is PyNaCl's (libsodium); nothing here is hand-written cryptography:

* an :class:`EncryptionKey` is an X25519 key pair (``nacl.public.PrivateKey``), apart from the
  account's signing key; its public half is what ``KeyRegistry.registerKey`` publishes;
* a data key (:func:`new_data_key`) is 32 random bytes, one per job; a sealed job commits to it on
  chain by its keccak256 (:func:`key_hash`, pycryptodome's, as ``SealedJobs`` computes it: a hash,
  not a cipher);
* :func:`wrap` encrypts a data key to one recipient's public key with ``nacl.public.SealedBox``
  (an ephemeral X25519 key, XSalsa20-Poly1305): 80 bytes that only that recipient opens (:func:`unwrap`);
* :func:`seal` / :func:`open_sealed` encrypt and authenticate content of any size under a data key
  in fixed-size chunks with XChaCha20-Poly1305 (``crypto_aead_xchacha20poly1305_ietf``);
  :func:`seal_chunks` / :func:`open_chunks` and :func:`seal_file` / :func:`open_sealed_file` do the
  same a chunk at a time, so a 10 GB checkpoint needs one chunk of memory;
* :func:`seal_canonical` / :func:`open_canonical`: the one sealing of a plaintext under a data key
  that everyone holding the key computes alike (a sealed job's checkpoints: their keccak256 is a
  trace's leaf). Its nonce prefix is not random but synthetic (the SIV construction): a keyed
  BLAKE2b of the plaintext (Python's ``hashlib``), so two sealings share a prefix only when their
  plaintexts are equal, and then their bytes are equal too; what it shows is only that equality.

Sealed content, byte by byte (docs/sealing.md has the same table)::

    header  (25 bytes)
      0  4  magic    b"VTSL"
      4  1  version  1
      5  4  chunk    plaintext bytes per chunk, big-endian uint32, MIN_CHUNK_BYTES..MAX_CHUNK_BYTES
      9 16  prefix   random nonce prefix, fresh for every sealing; canonical sealing:
                     BLAKE2b-128(plaintext, key = data key, person = b"veritrain-siv/1")
    records (one per chunk, at least one)
      chunk i (0-based): XChaCha20-Poly1305 of plaintext[i * chunk : (i + 1) * chunk]
        key    the data key (32 bytes)
        nonce  prefix || uint64_be(i)                                     (24 bytes)
        aad    header || uint64_be(i) || final (1 byte: 1 on the last chunk, else 0)
        bytes  ciphertext || 16-byte tag: chunk + 16 bytes, the last one 16..chunk + 16

Every chunk but the last holds exactly ``chunk`` bytes of plaintext; the last holds 1..chunk bytes,
or 0 when the content is empty (its only chunk). So the record boundaries follow from the length
alone, and the length is ``25 + n + 16 * max(1, ceil(n / chunk))`` for ``n`` plaintext bytes. Each
chunk is bound to the header (hence to its sealing's chunk size and nonce prefix), to its index and to
whether it is the last: a flipped byte, a dropped, reordered, duplicated or foreign chunk, a cut at a
chunk boundary (the new last chunk was not sealed as last) or appended bytes (the old last chunk is
not last any more) fail to open. A streamed chunk is authentic when it is yielded; the whole content
only once the iterator ends without error (:func:`open_sealed_file` renames its output into place
only then).
"""

from __future__ import annotations

import hashlib
import io
import os
import stat
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import nacl.bindings
import nacl.exceptions
import nacl.public
import nacl.utils
from Crypto.Hash import keccak as _keccak

from core.errors import ConfigError, SealingError
from core.probe import Bytes32

__all__ = [
    "DATA_KEY_BYTES",
    "WRAP_BYTES",
    "MAGIC",
    "VERSION",
    "HEADER_BYTES",
    "TAG_BYTES",
    "DEFAULT_CHUNK_BYTES",
    "MIN_CHUNK_BYTES",
    "MAX_CHUNK_BYTES",
    "EncryptionKey",
    "write_secret",
    "read_secret",
    "new_data_key",
    "key_hash",
    "wrap",
    "unwrap",
    "sealed_size",
    "seal",
    "open_sealed",
    "seal_chunks",
    "open_chunks",
    "seal_file",
    "open_sealed_file",
    "seal_canonical",
    "open_canonical",
]

DATA_KEY_BYTES = 32
#: A wrapped data key: SealedBox's ephemeral public key (32) + Poly1305 tag (16) + the data key (32).
WRAP_BYTES = nacl.bindings.crypto_box_SEALBYTES + DATA_KEY_BYTES
MAGIC = b"VTSL"
VERSION = 1
_HEADER = struct.Struct(">4sBI16s")  # magic, version, chunk size, nonce prefix
HEADER_BYTES = _HEADER.size
TAG_BYTES = nacl.bindings.crypto_aead_xchacha20poly1305_ietf_ABYTES
DEFAULT_CHUNK_BYTES = 1 << 20
MIN_CHUNK_BYTES = 1 << 6
MAX_CHUNK_BYTES = 1 << 24
_PREFIX_BYTES = 16
_SIV_PERSON = b"veritrain-siv/1"  # BLAKE2b's personalization: this prefix's own domain
_INDEX = struct.Struct(">Q")
_KEY_FILE_BYTES = nacl.public.PrivateKey.SIZE


def _check_data_key(data_key: bytes) -> None:
    if not isinstance(data_key, bytes) or len(data_key) != DATA_KEY_BYTES:
        raise SealingError(f"a data key is {DATA_KEY_BYTES} bytes, got {len(data_key) if isinstance(data_key, bytes) else type(data_key).__name__}")


class EncryptionKey:
    """An account's X25519 encryption key pair (docs/sealing.md), apart from its signing key.

    Kept in a file of its 32 private bytes, mode 0600, created never overwritten; never shown: its
    ``repr`` names the public key only."""

    __slots__ = ("_private",)

    def __init__(self, private: nacl.public.PrivateKey) -> None:
        self._private = private

    @classmethod
    def generate(cls) -> EncryptionKey:
        return cls(nacl.public.PrivateKey.generate())

    @property
    def public_key(self) -> Bytes32:
        """The 32-byte X25519 public key: what ``KeyRegistry.registerKey`` publishes."""
        return Bytes32(bytes(self._private.public_key))

    @property
    def private(self) -> nacl.public.PrivateKey:
        return self._private

    def __repr__(self) -> str:
        return f"EncryptionKey(public=0x{self.public_key.hex()})"

    def save(self, path: Path) -> None:
        """Write the private key to a new file ``path`` (mode 0600; an existing file is refused)."""
        write_secret(path, bytes(self._private), "encryption key file")

    @classmethod
    def load(cls, path: Path) -> EncryptionKey:
        """Read a key file written by :meth:`save`, refusing one that is not a regular file of 32
        bytes, or that anyone but its owner may read or write."""
        return cls(nacl.public.PrivateKey(read_secret(path, _KEY_FILE_BYTES, "encryption key file", "veritrain keys new")))


def write_secret(path: Path, secret: bytes, what: str) -> None:
    """Write ``secret`` to a new file ``path``, mode 0600, synced before it returns; an existing file
    (or a link) is refused: a key file is never overwritten."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        raise ConfigError(f"{what} {path} exists already: not overwritten") from None
    except OSError as exc:
        raise ConfigError(f"{what} {path}: {exc.strerror}") from None
    with os.fdopen(fd, "wb") as out:
        out.write(secret)
        out.flush()
        os.fsync(out.fileno())


def read_secret(path: Path, size: int, what: str, made_by: str) -> bytes:
    """The ``size`` bytes of the key file ``path``, refusing (in one line) one that is missing, not a
    regular file (a link included), not ``size`` bytes, or open to anyone but its owner; ``made_by``
    says what makes one."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise ConfigError(f"no {what} at {path} ({made_by})") from None
    except OSError as exc:
        raise ConfigError(f"{what} {path}: {exc.strerror}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ConfigError(f"{what} {path} is not a regular file")
        if info.st_mode & 0o077:
            raise ConfigError(f"{what} {path} is open to group or others (mode {stat.S_IMODE(info.st_mode):04o}): chmod 600 {path}")
        if info.st_size != size:
            raise ConfigError(f"{what} {path} is {info.st_size} bytes, not {size}: not a key file")
        raw = os.read(fd, size + 1)
    finally:
        os.close(fd)
    if len(raw) != size:
        raise ConfigError(f"{what} {path} changed while read")
    return raw


def new_data_key() -> bytes:
    """A fresh random data key (32 bytes): one per job, never reused across jobs."""
    return nacl.utils.random(DATA_KEY_BYTES)


def key_hash(data_key: bytes) -> Bytes32:
    """keccak256 (Ethereum's, not NIST SHA3-256) of the 32-byte ``data_key``: the commitment
    ``SealedJobs.seal`` takes and ``revealKey`` checks a revealed key against."""
    _check_data_key(data_key)
    return Bytes32(_keccak.new(digest_bits=256, data=data_key).digest())


def wrap(data_key: bytes, recipient_public: bytes) -> bytes:
    """``data_key`` encrypted to the holder of X25519 public key ``recipient_public`` (SealedBox):
    :data:`WRAP_BYTES` bytes that only the matching private key opens."""
    _check_data_key(data_key)
    if not isinstance(recipient_public, bytes) or len(recipient_public) != nacl.public.PublicKey.SIZE:
        raise SealingError(f"an X25519 public key is {nacl.public.PublicKey.SIZE} bytes")
    try:
        wrapped = nacl.public.SealedBox(nacl.public.PublicKey(recipient_public)).encrypt(data_key)
    except nacl.exceptions.CryptoError:
        raise SealingError(f"0x{recipient_public.hex()} is not a usable X25519 public key") from None
    return bytes(wrapped)


def unwrap(wrapped: bytes, key: EncryptionKey) -> bytes:
    """The data key in ``wrapped``, if it was wrapped to ``key``'s public key and is unaltered."""
    if len(wrapped) != WRAP_BYTES:
        raise SealingError(f"a wrapped data key is {WRAP_BYTES} bytes, got {len(wrapped)}")
    try:
        data_key = nacl.public.SealedBox(key.private).decrypt(bytes(wrapped))
    except nacl.exceptions.CryptoError:
        raise SealingError(f"the wrapped data key does not open with encryption key 0x{key.public_key.hex()}: wrapped to another key, or altered") from None
    _check_data_key(data_key)
    return data_key


def sealed_size(plaintext_bytes: int, chunk_size: int = DEFAULT_CHUNK_BYTES) -> int:
    """The length of ``plaintext_bytes`` bytes sealed in chunks of ``chunk_size``."""
    chunks = max(1, -(-plaintext_bytes // chunk_size))
    return HEADER_BYTES + plaintext_bytes + TAG_BYTES * chunks


def _aad(header: bytes, index: int, final: bool) -> bytes:
    return header + _INDEX.pack(index) + (b"\x01" if final else b"\x00")


def _nonce(prefix: bytes, index: int) -> bytes:
    return prefix + _INDEX.pack(index)


def _read_upto(source: BinaryIO, size: int) -> bytes:
    """Up to ``size`` bytes: fewer only at the end of ``source``."""
    parts, got = [], 0
    while got < size:
        part = source.read(size - got)
        if not part:
            break
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def _header(chunk_size: int, prefix: bytes | None = None) -> tuple[bytes, bytes]:
    """The header of a sealing in chunks of ``chunk_size`` with nonce ``prefix`` (random when None)."""
    if not MIN_CHUNK_BYTES <= chunk_size <= MAX_CHUNK_BYTES:
        raise SealingError(f"chunk size {chunk_size} is outside {MIN_CHUNK_BYTES}..{MAX_CHUNK_BYTES} bytes")
    prefix = nacl.utils.random(_PREFIX_BYTES) if prefix is None else prefix
    return _HEADER.pack(MAGIC, VERSION, chunk_size, prefix), prefix


def _parse_header(header: bytes) -> tuple[int, bytes]:
    if len(header) < HEADER_BYTES:
        raise SealingError(f"sealed content shorter than its {HEADER_BYTES}-byte header ({len(header)} bytes)")
    magic, version, chunk_size, prefix = _HEADER.unpack(header)
    if magic != MAGIC:
        raise SealingError("not sealed content (no VTSL magic)")
    if version != VERSION:
        raise SealingError(f"sealed content of version {version}; this client reads version {VERSION}")
    if not MIN_CHUNK_BYTES <= chunk_size <= MAX_CHUNK_BYTES:
        raise SealingError(f"sealed content declares chunks of {chunk_size} bytes, outside {MIN_CHUNK_BYTES}..{MAX_CHUNK_BYTES}")
    return chunk_size, prefix


def seal_chunks(data_key: bytes, source: BinaryIO, chunk_size: int = DEFAULT_CHUNK_BYTES, *, prefix: bytes | None = None) -> Iterator[bytes]:
    """``source`` (read to its end) sealed under ``data_key``: the header, then one record per chunk.
    Holds two chunks of plaintext at a time (the next one tells whether this one is the last).
    ``prefix``: the nonce prefix, random unless given (only :func:`seal_canonical` gives one)."""
    _check_data_key(data_key)
    header, prefix = _header(chunk_size, prefix)
    yield header
    current, index = _read_upto(source, chunk_size), 0
    while True:
        following = _read_upto(source, chunk_size) if len(current) == chunk_size else b""
        final = not following
        yield nacl.bindings.crypto_aead_xchacha20poly1305_ietf_encrypt(current, _aad(header, index, final), _nonce(prefix, index), data_key)
        if final:
            return
        current, index = following, index + 1


def open_chunks(data_key: bytes, source: BinaryIO, *, max_bytes: int | None = None) -> Iterator[bytes]:
    """The plaintext of sealed ``source``, chunk by chunk, each authenticated before it is yielded;
    raises :class:`SealingError` at the first chunk that fails (or once more than ``max_bytes`` of
    plaintext came). The content is whole only if the iterator ends without error."""
    _check_data_key(data_key)
    header = _read_upto(source, HEADER_BYTES)
    chunk_size, prefix = _parse_header(header)
    record = chunk_size + TAG_BYTES
    current, index, total = _read_upto(source, record), 0, 0
    while True:
        if len(current) < TAG_BYTES:
            raise SealingError(f"sealed content truncated in chunk {index} ({len(current)} bytes, under the {TAG_BYTES}-byte tag)")
        following = _read_upto(source, record) if len(current) == record else b""
        final = not following
        if final and index > 0 and len(current) == TAG_BYTES:
            raise SealingError(f"sealed content ends in an empty chunk {index}: not how it is sealed")
        try:
            plain = nacl.bindings.crypto_aead_xchacha20poly1305_ietf_decrypt(current, _aad(header, index, final), _nonce(prefix, index), data_key)
        except nacl.exceptions.CryptoError:
            where = "the last" if final else "a middle"
            raise SealingError(
                f"sealed content fails at chunk {index} ({where} one): altered, truncated, extended, reordered, or sealed under another data key"
            ) from None
        total += len(plain)
        if max_bytes is not None and total > max_bytes:
            raise SealingError(f"sealed content opens to more than {max_bytes} bytes")
        yield plain
        if final:
            return
        current, index = following, index + 1


def seal(data_key: bytes, plaintext: bytes, chunk_size: int = DEFAULT_CHUNK_BYTES) -> bytes:
    """``plaintext`` sealed under ``data_key`` (the format in this module's docstring)."""
    return b"".join(seal_chunks(data_key, io.BytesIO(plaintext), chunk_size))


def open_sealed(data_key: bytes, ciphertext: bytes) -> bytes:
    """The plaintext of ``ciphertext`` (:func:`seal`'s output), authenticated whole; never more than
    ``len(ciphertext)`` bytes."""
    return b"".join(open_chunks(data_key, io.BytesIO(ciphertext)))


def _write_new(path: Path, chunks: Iterator[bytes]) -> int:
    """Write ``chunks`` to a fresh ``<path>.part`` (0600) and rename it to ``path`` once every chunk
    came; on any error the part file is removed and ``path`` is untouched."""
    part = path.with_name(path.name + ".part")
    fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    written = 0
    try:
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                out.write(chunk)
                written += len(chunk)
            out.flush()
            os.fsync(out.fileno())
        os.replace(part, path)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    return written


def seal_file(data_key: bytes, source: Path, target: Path, chunk_size: int = DEFAULT_CHUNK_BYTES) -> int:
    """Seal file ``source`` into ``target`` a chunk at a time; returns the sealed size."""
    with open(source, "rb") as plain:
        return _write_new(target, seal_chunks(data_key, plain, chunk_size))


def open_sealed_file(data_key: bytes, source: Path, target: Path, *, max_bytes: int | None = None) -> int:
    """Open sealed file ``source`` into ``target`` a chunk at a time; ``target`` appears only once
    the whole content authenticated. Returns the plaintext size."""
    with open(source, "rb") as sealed:
        return _write_new(target, open_chunks(data_key, sealed, max_bytes=max_bytes))


def _canonical_prefix(data_key: bytes, plaintext: bytes | bytearray | memoryview) -> bytes:
    return hashlib.blake2b(plaintext, digest_size=_PREFIX_BYTES, key=data_key, person=_SIV_PERSON).digest()


def seal_canonical(data_key: bytes, plaintext: bytes | bytearray | memoryview) -> bytes:
    """The canonical sealing of ``plaintext`` under ``data_key``: chunks of :data:`DEFAULT_CHUNK_BYTES`,
    nonce prefix a keyed BLAKE2b of the plaintext, so equal inputs give equal bytes (and only equal
    plaintexts share a nonce). Reads ``plaintext`` twice: once for the prefix, once to seal it."""
    _check_data_key(data_key)
    prefix = _canonical_prefix(data_key, plaintext)
    return b"".join(seal_chunks(data_key, io.BytesIO(plaintext), prefix=prefix))


def open_canonical(data_key: bytes, sealed: bytes | bytearray | memoryview) -> bytes:
    """The plaintext of ``sealed`` if it is exactly :func:`seal_canonical`'s output for it, authenticated
    whole; :class:`SealingError` otherwise (another key, altered, or a valid sealing with another chunk
    size or nonce prefix: content committed by its hash has one sealing)."""
    _check_data_key(data_key)
    chunk_size, prefix = _parse_header(bytes(sealed[:HEADER_BYTES]))
    plaintext = b"".join(open_chunks(data_key, io.BytesIO(sealed)))
    if chunk_size != DEFAULT_CHUNK_BYTES or prefix != _canonical_prefix(data_key, plaintext):
        raise SealingError("sealed content opens but is not its canonical sealing (chunk size or nonce prefix)")
    return plaintext
