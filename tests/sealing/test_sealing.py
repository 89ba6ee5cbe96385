"""core.sealing without a chain: round trips at every size around a chunk, every tamper class refused,
wraps to the right key only, the data key's commitment keccak256, and key files kept private."""

from __future__ import annotations

import hashlib
import io
import os
import stat
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core import sealing
from core.errors import ConfigError, SealingError
from core.sealing import HEADER_BYTES, TAG_BYTES, EncryptionKey, new_data_key, open_sealed, seal, unwrap, wrap

CHUNK = 64  # the smallest chunk: every boundary case in a few hundred bytes
RECORD = CHUNK + TAG_BYTES
KEY = bytes(range(32))


def _content(n: int) -> bytes:
    return os.urandom(n)


def _records(sealed: bytes) -> tuple[bytes, list[bytes]]:
    """The header and the records of ``sealed`` (sealed with CHUNK)."""
    body = sealed[HEADER_BYTES:]
    return sealed[:HEADER_BYTES], [body[i : i + RECORD] for i in range(0, len(body), RECORD)]


# ------------------------------------------------------------------ round trips


@pytest.mark.parametrize("n", [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK, 3 * CHUNK + 7])
def test_round_trip_at_every_size_around_a_chunk(n: int) -> None:
    plain = _content(n)
    sealed = seal(KEY, plain, CHUNK)
    assert len(sealed) == sealing.sealed_size(n, CHUNK) == HEADER_BYTES + n + TAG_BYTES * max(1, -(-n // CHUNK))
    assert open_sealed(KEY, sealed) == plain
    if n >= 16:
        assert plain[:16] not in sealed  # the plaintext does not show through


@pytest.mark.parametrize(
    "n", [0, 1, sealing.DEFAULT_CHUNK_BYTES - 1, sealing.DEFAULT_CHUNK_BYTES, sealing.DEFAULT_CHUNK_BYTES + 1, 3 * sealing.DEFAULT_CHUNK_BYTES + 5]
)
def test_round_trip_at_the_default_chunk(n: int) -> None:
    plain = _content(n)
    sealed = seal(KEY, plain)
    assert len(sealed) == sealing.sealed_size(n)
    assert open_sealed(KEY, sealed) == plain


@settings(max_examples=60, deadline=None)
@given(plain=st.binary(max_size=5 * CHUNK + 3), chunk=st.integers(sealing.MIN_CHUNK_BYTES, 4 * sealing.MIN_CHUNK_BYTES))
def test_round_trip_property(plain: bytes, chunk: int) -> None:
    sealed = seal(KEY, plain, chunk)
    assert len(sealed) == sealing.sealed_size(len(plain), chunk)
    assert open_sealed(KEY, sealed) == plain
    assert b"".join(sealing.open_chunks(KEY, io.BytesIO(sealed))) == plain


def test_each_sealing_is_fresh() -> None:
    plain = _content(100)
    assert seal(KEY, plain, CHUNK) != seal(KEY, plain, CHUNK)  # a new nonce prefix every time


def test_streaming_reads_one_chunk_at_a_time() -> None:
    """The streaming form never asks its source for more than one chunk (a record) at a time."""

    class Counting(io.BytesIO):
        largest = 0

        def read(self, size: int | None = -1) -> bytes:
            Counting.largest = max(Counting.largest, size if size is not None and size >= 0 else 1 << 62)
            return super().read(size)

    plain = _content(10 * CHUNK + 3)
    sealed = b"".join(sealing.seal_chunks(KEY, Counting(plain), CHUNK))
    assert Counting.largest == CHUNK
    Counting.largest = 0
    pieces = list(sealing.open_chunks(KEY, Counting(sealed)))
    assert Counting.largest == RECORD and [len(p) for p in pieces] == [CHUNK] * 10 + [3]
    assert b"".join(pieces) == plain


def test_files_seal_and_open_through_part_files(tmp_path: Path) -> None:
    plain = _content(5 * CHUNK + 1)
    (tmp_path / "model.bin").write_bytes(plain)
    size = sealing.seal_file(KEY, tmp_path / "model.bin", tmp_path / "model.sealed", CHUNK)
    assert size == (tmp_path / "model.sealed").stat().st_size == sealing.sealed_size(len(plain), CHUNK)
    assert sealing.open_sealed_file(KEY, tmp_path / "model.sealed", tmp_path / "model.out") == len(plain)
    assert (tmp_path / "model.out").read_bytes() == plain
    assert stat.S_IMODE((tmp_path / "model.out").stat().st_mode) == 0o600
    # a cut one: no output file, no part file left behind
    (tmp_path / "cut.sealed").write_bytes((tmp_path / "model.sealed").read_bytes()[:-RECORD])
    with pytest.raises(SealingError, match="chunk 4"):
        sealing.open_sealed_file(KEY, tmp_path / "cut.sealed", tmp_path / "cut.out")
    assert not (tmp_path / "cut.out").exists() and not (tmp_path / "cut.out.part").exists()
    with pytest.raises(SealingError, match="more than 100 bytes"):
        sealing.open_sealed_file(KEY, tmp_path / "model.sealed", tmp_path / "big.out", max_bytes=100)
    assert not (tmp_path / "big.out").exists()


# ------------------------------------------------------------------ tampering


def _flip(sealed: bytes, at: int) -> bytes:
    return sealed[:at] + bytes([sealed[at] ^ 1]) + sealed[at + 1 :]


def _join(header: bytes, records: list[bytes]) -> bytes:
    return header + b"".join(records)


TAMPERS: dict[str, Callable[[bytes], bytes]] = {
    "flipped byte in the first chunk": lambda s: _flip(s, HEADER_BYTES + 3),
    "flipped byte in a middle tag": lambda s: _flip(s, HEADER_BYTES + 2 * RECORD - 1),
    "flipped byte in the last chunk": lambda s: _flip(s, len(s) - 1),
    "flipped chunk size": lambda s: _flip(s, 8),
    "flipped nonce prefix": lambda s: _flip(s, HEADER_BYTES - 1),
    "truncated inside the last chunk": lambda s: s[:-1],
    "truncated at a chunk boundary": lambda s: _join(_records(s)[0], _records(s)[1][:-1]),
    "truncated to the header": lambda s: s[:HEADER_BYTES],
    "truncated inside the header": lambda s: s[: HEADER_BYTES - 1],
    "dropped middle chunk": lambda s: _join(_records(s)[0], [r for i, r in enumerate(_records(s)[1]) if i != 1]),
    "reordered chunks": lambda s: _join(_records(s)[0], [_records(s)[1][1], _records(s)[1][0], *_records(s)[1][2:]]),
    "duplicated chunk": lambda s: _join(_records(s)[0], [_records(s)[1][0], *_records(s)[1]]),
    "appended bytes": lambda s: s + b"\x00",
    "appended tag-sized bytes": lambda s: s + bytes(TAG_BYTES),
    "appended copy of the last chunk": lambda s: s + _records(s)[1][-1],
    "empty final chunk appended": lambda s: s + bytes(TAG_BYTES),
    "other version": lambda s: s[:4] + b"\x02" + s[5:],
    "other magic": lambda s: b"XXXX" + s[4:],
}


@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_every_tamper_fails_to_open(tamper: str) -> None:
    sealed = seal(KEY, _content(4 * CHUNK + 10), CHUNK)
    altered = TAMPERS[tamper](sealed)
    assert altered != sealed
    with pytest.raises(SealingError):
        open_sealed(KEY, altered)
    with pytest.raises(SealingError):
        b"".join(sealing.open_chunks(KEY, io.BytesIO(altered)))


def test_chunks_from_another_sealing_under_the_same_key_fail() -> None:
    plain = _content(3 * CHUNK)
    header_a, records_a = _records(seal(KEY, plain, CHUNK))
    _, records_b = _records(seal(KEY, plain, CHUNK))
    with pytest.raises(SealingError, match="chunk 1"):
        open_sealed(KEY, _join(header_a, [records_a[0], records_b[1], records_a[2]]))


def test_wrong_data_key_fails_at_the_first_chunk() -> None:
    sealed = seal(KEY, b"private dataset", CHUNK)
    with pytest.raises(SealingError, match="chunk 0"):
        open_sealed(new_data_key(), sealed)


def test_a_crafted_empty_final_chunk_is_refused() -> None:
    """The one encoding: a sealer never ends multi-chunk content with an empty chunk, so a reader refuses it."""
    header, prefix = sealing._header(CHUNK)
    records = [
        sealing.nacl.bindings.crypto_aead_xchacha20poly1305_ietf_encrypt(data, sealing._aad(header, i, final), sealing._nonce(prefix, i), KEY)
        for i, (data, final) in enumerate([(bytes(CHUNK), False), (b"", True)])
    ]
    with pytest.raises(SealingError, match="empty chunk 1"):
        open_sealed(KEY, header + b"".join(records))


def test_header_sizes_are_bounded_before_use() -> None:
    for size in (sealing.MIN_CHUNK_BYTES - 1, sealing.MAX_CHUNK_BYTES + 1):
        with pytest.raises(SealingError, match="outside"):
            seal(KEY, b"x", size)
        header = struct.pack(">4sBI16s", sealing.MAGIC, sealing.VERSION, size, bytes(16))
        with pytest.raises(SealingError, match="declares chunks"):
            open_sealed(KEY, header + bytes(TAG_BYTES))
    with pytest.raises(SealingError, match="32 bytes"):
        seal(b"short", b"x")


# ------------------------------------------------------------------ wraps


def test_wrap_opens_only_for_its_recipient() -> None:
    alice, bob = EncryptionKey.generate(), EncryptionKey.generate()
    data_key = new_data_key()
    wrapped = wrap(data_key, alice.public_key)
    assert len(wrapped) == sealing.WRAP_BYTES and data_key not in wrapped
    assert unwrap(wrapped, alice) == data_key
    with pytest.raises(SealingError, match="another key, or altered"):
        unwrap(wrapped, bob)
    with pytest.raises(SealingError, match="another key, or altered"):
        unwrap(_flip(wrapped, 40), alice)
    for size in (0, sealing.WRAP_BYTES - 1, sealing.WRAP_BYTES + 1, 10**6):
        with pytest.raises(SealingError, match=f"{sealing.WRAP_BYTES} bytes, got {size}"):
            unwrap(bytes(size), alice)


def test_wrap_refuses_bad_keys() -> None:
    with pytest.raises(SealingError, match="not a usable"):
        wrap(new_data_key(), bytes(32))  # a low-order point: no shared secret
    with pytest.raises(SealingError, match="public key is 32 bytes"):
        wrap(new_data_key(), bytes(31))
    with pytest.raises(SealingError, match="data key is 32 bytes"):
        wrap(bytes(16), EncryptionKey.generate().public_key)


def test_key_hash_is_keccak256_not_sha3() -> None:
    """The commitment SealedJobs checks: Ethereum's keccak256 of the 32 bytes (NIST SHA3-256 differs)."""
    zero = bytes(32)
    assert sealing.key_hash(zero).hex() == "290decd9548b62a8d60345a988386fc84ba6bc95484008f6362f93160ef3e563"
    assert sealing.key_hash(zero) != hashlib.sha3_256(zero).digest()
    with pytest.raises(SealingError, match="data key is 32 bytes"):
        sealing.key_hash(bytes(31))


@settings(max_examples=20, deadline=None)
@given(data_key=st.binary(min_size=32, max_size=32))
def test_wrap_round_trip_property(data_key: bytes) -> None:
    key = EncryptionKey.generate()
    assert unwrap(wrap(data_key, key.public_key), key) == data_key


# ------------------------------------------------------------------ key files


def test_key_file_round_trip_and_privacy(tmp_path: Path) -> None:
    key = EncryptionKey.generate()
    path = tmp_path / "enc.key"
    key.save(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and path.stat().st_size == 32
    loaded = EncryptionKey.load(path)
    assert loaded.public_key == key.public_key and len(key.public_key) == 32
    assert bytes(key.private) not in repr(key).encode() and bytes(key.private).hex() not in repr(key)
    assert repr(key) == f"EncryptionKey(public=0x{key.public_key.hex()})"
    with pytest.raises(ConfigError, match="exists already"):
        EncryptionKey.generate().save(path)
    assert EncryptionKey.load(path).public_key == key.public_key  # not overwritten


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o644, 0o606])
def test_key_file_open_to_group_or_others_is_refused(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "enc.key"
    EncryptionKey.generate().save(path)
    path.chmod(mode)
    with pytest.raises(ConfigError, match=f"open to group or others \\(mode {mode:04o}\\): chmod 600") as refused:
        EncryptionKey.load(path)
    assert "\n" not in str(refused.value)


@pytest.mark.parametrize("size", [0, 31, 33, 64])
def test_key_file_of_the_wrong_size_is_refused(tmp_path: Path, size: int) -> None:
    path = tmp_path / "enc.key"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
    os.write(fd, bytes(size))
    os.close(fd)
    with pytest.raises(ConfigError, match=f"is {size} bytes, not 32: not a key file"):
        EncryptionKey.load(path)


def test_key_file_missing_or_a_link_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no encryption key file"):
        EncryptionKey.load(tmp_path / "none.key")
    EncryptionKey.generate().save(tmp_path / "real.key")
    (tmp_path / "link.key").symlink_to(tmp_path / "real.key")
    with pytest.raises(ConfigError, match="link.key"):
        EncryptionKey.load(tmp_path / "link.key")
    with pytest.raises(ConfigError, match="not a regular file"):
        EncryptionKey.load(tmp_path)


# ------------------------------------------------------------------ canonical sealing (a sealed job's checkpoints)


@pytest.mark.parametrize("n", [0, 1, sealing.DEFAULT_CHUNK_BYTES, sealing.DEFAULT_CHUNK_BYTES + 5])
def test_canonical_sealing_is_one_sealing_that_opens(n: int) -> None:
    plain = _content(n)
    sealed = sealing.seal_canonical(KEY, plain)
    assert sealing.seal_canonical(KEY, memoryview(plain)) == sealed  # a function of key and plaintext alone
    assert len(sealed) == sealing.sealed_size(n)
    assert sealing.open_canonical(KEY, sealed) == open_sealed(KEY, sealed) == plain


def test_canonical_sealings_differ_by_key_and_by_plaintext_and_share_no_nonce() -> None:
    plain = _content(300)
    other = bytearray(plain)
    other[-1] ^= 1
    sealings = [sealing.seal_canonical(KEY, plain), sealing.seal_canonical(new_data_key(), plain), sealing.seal_canonical(KEY, bytes(other))]
    prefixes = {s[9:HEADER_BYTES] for s in sealings}
    assert len(prefixes) == 3
    assert len({s[HEADER_BYTES:] for s in sealings}) == 3


def test_open_canonical_refuses_every_other_sealing_of_the_same_plaintext() -> None:
    plain = _content(200)
    with pytest.raises(SealingError, match="not its canonical sealing"):
        sealing.open_canonical(KEY, seal(KEY, plain))  # a random nonce prefix
    with pytest.raises(SealingError, match="not its canonical sealing"):
        sealing.open_canonical(KEY, seal(KEY, plain, CHUNK))  # another chunk size
    forged = sealing.seal_chunks(KEY, io.BytesIO(plain), prefix=sealing.seal_canonical(new_data_key(), plain)[9:HEADER_BYTES])
    with pytest.raises(SealingError, match="not its canonical sealing"):
        sealing.open_canonical(KEY, b"".join(forged))  # another key's synthetic prefix
    sealed = bytearray(sealing.seal_canonical(KEY, plain))
    sealed[-1] ^= 1
    with pytest.raises(SealingError, match="fails at chunk 0"):
        sealing.open_canonical(KEY, bytes(sealed))
    with pytest.raises(SealingError, match="fails at chunk 0"):
        sealing.open_canonical(new_data_key(), sealing.seal_canonical(KEY, plain))
