"""Probes of a passing report and forced errors: the formulas as SPEC'd, and the probe tree
cross-checked against ``@openzeppelin/merkle-tree`` (tests/chain checks them against the contracts)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from eth_utils import keccak
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.probe import Bytes32
from proofs.errors import MerkleError, ProofError
from proofs.probes import (
    FORCED_DOMAIN,
    Probe,
    ProbeTree,
    forced_commitment,
    forced_hash,
    is_forced,
    parse_probe,
    probe_json,
    probe_leaf,
    probe_positions,
    probe_segment,
    probe_step,
    verify_probe,
)

if TYPE_CHECKING:
    from tests.proofs.conftest import OpenZeppelin

PROBE_TYPES = ["uint256", "uint256", "uint256", "bytes32"]
SEED = "0x" + keccak(b"assign seed").hex()

word = st.integers(0, 2**256 - 1)
hashes32 = st.binary(min_size=32, max_size=32).map(Bytes32)
probes = st.builds(Probe, word, word, word, hashes32)
probe_sets = st.lists(probes, min_size=1, max_size=32, unique_by=lambda p: p.index)


def _u256(value: int) -> bytes:
    return value.to_bytes(32, "big")


def test_probe_segment_is_keccak_of_seed_and_index_mod_segments() -> None:
    seed = bytes.fromhex(SEED[2:])
    for index in range(8):
        expected = int.from_bytes(keccak(seed + _u256(index)), "big") % 9
        assert probe_segment(SEED, index, 10) == expected
    assert {probe_segment(SEED, i, 10) for i in range(200)} == set(range(9))  # every segment, the last one too


def test_probe_step_is_inside_the_segment() -> None:
    seed = bytes.fromhex(SEED[2:])
    for index in range(8):
        assert probe_step(SEED, index, 16) == 1 + int.from_bytes(keccak(seed + _u256(index) + _u256(1)), "big") % 15
    assert {probe_step(SEED, i, 5) for i in range(200)} == {1, 2, 3, 4}
    assert probe_step(SEED, 3, 1) == 1  # a one-step segment: its end (max(k - 1, 1) = 1)
    assert probe_step(SEED, 3, 2) == 1


def test_probe_positions_list_every_slot() -> None:
    positions = probe_positions(SEED, 4, 9, 5)
    assert positions == [(i, probe_segment(SEED, i, 9), probe_step(SEED, i, 5)) for i in range(4)]


@pytest.mark.parametrize(("call", "match"), [
    (lambda: probe_segment(SEED, 0, 1), "no segment"),
    (lambda: probe_step(SEED, 0, 0), "at least one step"),
    (lambda: probe_segment(SEED, -1, 5), "negative"),
    (lambda: probe_segment("0x1234", 0, 5), "32 bytes"),
])  # fmt: skip
def test_bad_probe_arguments_raise(call: object, match: str) -> None:
    with pytest.raises(ProofError, match=match):
        call()  # type: ignore[operator]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(probe_sets, min_size=1, max_size=6))
def test_probe_tree_matches_openzeppelin_merkle_tree(openzeppelin: OpenZeppelin, sets: list[list[Probe]]) -> None:
    values = [[[p.index, p.segment, p.step, p.state_hash] for p in entries] for entries in sets]
    for entries, expected in zip(sets, openzeppelin(PROBE_TYPES, values)):
        tree = ProbeTree(entries)
        assert tree.root == expected["root"]
        assert [tree.proof(p.index) for p in entries] == expected["proofs"]


@settings(max_examples=50, deadline=None)
@given(probe_sets, st.data())
def test_every_probe_proof_verifies_and_a_changed_field_does_not(entries: list[Probe], data: st.DataObject) -> None:
    tree = ProbeTree(entries)
    probe = data.draw(st.sampled_from(entries))
    proof = tree.proof(probe.index)
    assert tree.probe(probe.index) == probe
    assert verify_probe(tree.root, probe, proof)
    wrong = [
        Probe(probe.index, probe.segment, probe.step, forced_hash(probe.state_hash)),
        Probe(probe.index, probe.segment, (probe.step + 1) % 2**256, probe.state_hash),
        Probe(probe.index, (probe.segment + 1) % 2**256, probe.step, probe.state_hash),
    ]
    assert not any(verify_probe(tree.root, w, proof) for w in wrong)


def test_probe_leaf_is_double_keccak_of_abi_encoding() -> None:
    probe = Probe(2, 7, 3, Bytes32(b"\xab" * 32))
    assert probe_leaf(probe) == keccak(keccak(_u256(2) + _u256(7) + _u256(3) + b"\xab" * 32))
    tree = ProbeTree([probe])
    assert tree.root == probe_leaf(probe) and tree.proof(2) == []


def test_probe_tree_refuses_duplicate_slots_and_unknown_proofs() -> None:
    probe = Probe(0, 1, 2, Bytes32(b"\x11" * 32))
    with pytest.raises(MerkleError, match="same index"):
        ProbeTree([probe, Probe(0, 3, 4, Bytes32(b"\x22" * 32))])
    with pytest.raises(MerkleError, match="no probe 1"):
        ProbeTree([probe]).proof(1)
    with pytest.raises(MerkleError):
        ProbeTree([])


def test_probe_json_round_trip_and_bad_entries() -> None:
    probe = Probe(1, 2, 3, Bytes32(bytes(range(32))))
    assert probe_json(probe)["state_hash"] == "0x" + bytes(range(32)).hex()  # hex only in the JSON
    assert parse_probe(probe_json(probe)) == probe
    for bad in [[1, 2], {"index": 1}, {**probe_json(probe), "extra": 1}, {**probe_json(probe), "step": "3"},
                {**probe_json(probe), "index": True}, {**probe_json(probe), "state_hash": "0x12"}, {**probe_json(probe), "segment": -1}]:  # fmt: skip
        with pytest.raises(ProofError):
            parse_probe(bad)
    with pytest.raises(ValueError, match="32 bytes"):
        Probe(1, 2, 3, Bytes32(b"\x01" * 31))


def test_forced_commitment_binds_secret_and_verifier() -> None:
    secret = keccak(b"secret")
    verifier = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"
    expected = keccak(secret + b"\x00" * 12 + bytes.fromhex(verifier[2:]))
    assert forced_commitment(secret, verifier) == expected
    assert forced_commitment(secret, verifier.lower()) == expected
    assert forced_commitment(secret, "0x" + "00" * 19 + "01") != expected


def test_is_forced_follows_the_rate() -> None:
    seed = keccak(b"job")
    secrets = [keccak(i.to_bytes(4, "big")) for i in range(20_000)]
    assert not any(is_forced(s, seed, 0) for s in secrets[:100])
    assert all(is_forced(s, seed, 10_000) for s in secrets[:100])
    forced = sum(is_forced(s, seed, 100) for s in secrets)
    assert 140 <= forced <= 260  # 1 % of 20000 = 200, sd 14: within 4 sd
    first = next(s for s in secrets if is_forced(s, seed, 100))
    assert int.from_bytes(keccak(first + seed), "big") % 10_000 < 100
    with pytest.raises(ProofError):
        is_forced(first, seed, 10_001)


def test_forced_hash_is_domain_separated() -> None:
    true = Bytes32(keccak(b"state"))
    assert FORCED_DOMAIN == b"veritrain/forced"
    assert forced_hash(true) == keccak(b"veritrain/forced" + true)
    assert forced_hash(true) != true
