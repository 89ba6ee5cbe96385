from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from eth_utils import keccak
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.probe import Bytes32
from proofs.errors import MerkleError
from proofs.merkle import TraceTree, leaf_hash, verify_proof

if TYPE_CHECKING:
    from tests.proofs.conftest import OpenZeppelin

TRACE_TYPES = ["uint256", "bytes32"]

hashes32 = st.binary(min_size=32, max_size=32).map(Bytes32)
leaf_sets = st.lists(st.tuples(st.integers(0, 2**256 - 1), hashes32), min_size=1, max_size=40)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(leaf_sets, min_size=1, max_size=8))
def test_root_and_proofs_match_openzeppelin_merkle_tree(openzeppelin: OpenZeppelin, sets: list[list[tuple[int, Bytes32]]]) -> None:
    for values, expected in zip(sets, openzeppelin(TRACE_TYPES, sets)):
        tree = TraceTree.of(values)
        assert tree.root == expected["root"]
        assert [tree.proof(i) for i in range(len(values))] == expected["proofs"]


def test_trace_tree_of_sequential_indices_matches_openzeppelin(openzeppelin: OpenZeppelin) -> None:
    hashes = [Bytes32(keccak(bytes([i]))) for i in range(11)]
    (expected,) = openzeppelin(TRACE_TYPES, [list(enumerate(hashes))])
    assert TraceTree(hashes).root == expected["root"]


@settings(max_examples=50, deadline=None)
@given(st.lists(hashes32, min_size=1, max_size=64), st.data())
def test_every_proof_verifies_and_a_wrong_leaf_does_not(hashes: list[Bytes32], data: st.DataObject) -> None:
    tree = TraceTree(hashes)
    i = data.draw(st.integers(0, len(hashes) - 1))
    proof = tree.proof(i)
    assert all(isinstance(p, bytes) and len(p) == 32 for p in proof)
    assert verify_proof(tree.root, i, hashes[i], proof)
    other = Bytes32(keccak(hashes[i]))
    assert not verify_proof(tree.root, i, other, proof)
    if len(hashes) > 1:
        assert not verify_proof(tree.root, i + 1, hashes[i], proof)


def test_single_leaf_tree_root_is_the_leaf_and_proof_is_empty() -> None:
    h = Bytes32(b"\xab" * 32)
    tree = TraceTree([h])
    assert tree.root == leaf_hash(0, h)
    assert tree.proof(0) == []


def test_leaf_is_double_keccak_of_abi_encoding() -> None:
    h = Bytes32(bytes(range(32)))
    assert leaf_hash(7, h) == keccak(keccak((7).to_bytes(32, "big") + h))


@pytest.mark.parametrize("bad", [[], [Bytes32(b"\x12\x34")], [Bytes32(b"\x00" * 33)]])
def test_bad_leaves_raise_merkle_error(bad: list[Bytes32]) -> None:
    with pytest.raises(MerkleError):
        TraceTree(bad)


def test_proof_of_missing_leaf_raises() -> None:
    with pytest.raises(MerkleError):
        TraceTree([Bytes32(b"\x00" * 32)]).proof(1)


def test_a_proof_element_that_is_not_32_bytes_raises() -> None:
    tree = TraceTree([Bytes32(b"\x00" * 32), Bytes32(b"\x01" * 32)])
    with pytest.raises(MerkleError, match="32 bytes"):
        verify_proof(tree.root, 0, Bytes32(b"\x00" * 32), [Bytes32(b"\x01" * 31)])
