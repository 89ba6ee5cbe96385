"""core.cid: CIDv0 <-> bytes32 digest, base58, CIDv1 parsing, and clear errors for everything else."""

from __future__ import annotations

import base64
import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.cid import (
    DAG_PB,
    RAW,
    SHA2_256,
    InvalidCid,
    b58decode,
    b58encode,
    block_cid,
    cid_to_digest,
    digest_to_cid,
    parse_cid,
    to_v0,
    validate_cid,
)
from core.errors import VeritrainError

# "hello\n" as `ipfs add` stores it (a known Kubo CID), and its CIDv1 forms as js-ipfs prints them
# (`jsipfs cid base32`, `jsipfs cid format -v 1 -b base58btc`, `jsipfs add --cid-version 1 --raw-leaves`).
HELLO_V0 = "QmZULkCELmmk5XNfCgTnCyFgAVxBRBXyDHGGMVoLFLiXEN"
HELLO_V1_BASE32 = "bafybeiffndsajwhk3lwjewwdxqntmjm4b5wxaaanokonsggenkbw6slwk4"
HELLO_V1_BASE58 = "zdj7WgZb7dJCFFLxEgawRRQ5M6Eni9d8ix75bfo2JC14nHRQJ"
HELLO_RAW_LEAF_V1 = "zb2rhcc1wJn2GHDLT2YkmPq5b69cXc2xfRZZmyufbjFUfBkxr"
HELLO_BLOCK = bytes.fromhex("0a0c080212066865") + b"llo\n" + bytes.fromhex("1806")


def test_known_cid_of_a_block_and_its_digest() -> None:
    assert block_cid(HELLO_BLOCK) == HELLO_V0
    assert cid_to_digest(HELLO_V0) == hashlib.sha256(HELLO_BLOCK).digest()
    assert digest_to_cid(hashlib.sha256(HELLO_BLOCK).digest()) == HELLO_V0


def test_zero_digest_keeps_its_leading_zero_bytes() -> None:
    cid = digest_to_cid(bytes(32))
    assert cid.startswith("Qm") and len(cid) == 46
    assert cid_to_digest(cid) == bytes(32)


@given(st.binary(min_size=32, max_size=32))
def test_digest_round_trips_through_cid(digest: bytes) -> None:
    cid = digest_to_cid(digest)
    assert cid.startswith("Qm") and len(cid) == 46
    assert validate_cid(cid) == cid
    assert cid_to_digest(cid) == digest


@given(st.binary(max_size=80))
def test_base58_round_trips_with_leading_zeros(data: bytes) -> None:
    assert b58decode(b58encode(data)) == data


def test_base58_known_vector() -> None:
    assert b58encode(b"hello world") == "StV1DL6CwTryKyV"
    assert b58encode(b"\0\0\x01") == "112"


@pytest.mark.parametrize("v1", [HELLO_V1_BASE32, HELLO_V1_BASE58])
def test_cidv1_of_dag_pb_converts_to_the_same_v0(v1: str) -> None:
    parsed = parse_cid(v1)
    assert (parsed.version, parsed.codec, parsed.hash_code) == (1, DAG_PB, SHA2_256)
    assert to_v0(v1) == HELLO_V0
    assert cid_to_digest(v1) == cid_to_digest(HELLO_V0)


def test_raw_leaf_cidv1_parses_but_has_no_v0_form() -> None:
    parsed = parse_cid(HELLO_RAW_LEAF_V1)
    assert parsed.codec == RAW
    with pytest.raises(InvalidCid, match="not dag-pb"):
        to_v0(HELLO_RAW_LEAF_V1)


def test_cidv1_with_another_hash_is_refused_for_the_chain() -> None:
    digest = hashlib.sha512(b"x").digest()
    raw = bytes([1, DAG_PB, 0x13, 64]) + digest  # sha2-512 multihash
    v1 = "b" + base64.b32encode(raw).decode().lower().rstrip("=")
    assert parse_cid(v1).hash_code == 0x13
    with pytest.raises(InvalidCid, match="not a 32-byte sha2-256"):
        cid_to_digest(v1)


def test_validate_cid_asks_for_v0_and_names_the_conversion() -> None:
    with pytest.raises(InvalidCid, match="to_v0"):
        validate_cid(HELLO_V1_BASE32)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("Qm", "46 characters"),
        (HELLO_V0[:-1], "46 characters"),
        (HELLO_V0 + "a", "46 characters"),
        (HELLO_V0[:-1] + "0", "not base58btc"),  # 0, O, I, l are not in the alphabet
        (HELLO_V0[:-1] + "l", "not base58btc"),
        ("Qm" + "/" * 44, "not base58btc"),
        ("../../../../etc/passwd", "multibase prefix"),
        ("Qm" + "../" * 14 + "ab", "not base58btc"),
        ("x" * 500, "longer than"),
        (HELLO_V1_BASE32.upper(), "multibase prefix"),
        ("b" + HELLO_V1_BASE32[1:].upper(), "lower case"),
        (HELLO_V1_BASE32[:-3], "multihash"),
        ("bafybeiffndsajwhk3lwjewwdxqntmjm4b5wxaaanokonsggenkbw6slwk4!", "bad multibase"),
    ],
)
def test_malformed_cids_say_why(text: str, reason: str) -> None:
    with pytest.raises(InvalidCid, match=reason) as info:
        to_v0(text)
    assert isinstance(info.value, VeritrainError) and isinstance(info.value, ValueError)
    assert "invalid CID" in str(info.value)


def test_qm_string_that_is_not_sha256_multihash_is_refused() -> None:
    bogus = b58encode(b"\x12\x21" + bytes(32))  # wrong digest length byte
    with pytest.raises(InvalidCid, match="0x12 0x20"):
        validate_cid(bogus)


@pytest.mark.parametrize("digest", [b"", bytes(31), bytes(33)])
def test_digest_of_wrong_length_is_refused(digest: bytes) -> None:
    with pytest.raises(InvalidCid, match="32-byte"):
        digest_to_cid(digest)


def test_non_string_cid_is_refused() -> None:
    with pytest.raises(InvalidCid, match="expected a string"):
        to_v0(b"Qm" * 23)  # type: ignore[arg-type]
