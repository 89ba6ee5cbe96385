from __future__ import annotations

from typing import TYPE_CHECKING

import pytest
from eth_utils import keccak
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from proofs import MerkleError, TraceTree, leaf_hash, verify_proof

if TYPE_CHECKING:
    from tests.proofs.conftest import OpenZeppelin

TRACE_TYPES = ["uint256", "bytes32"]

hashes32 = st.binary(min_size=32, max_size=32).map(lambda b: "0x" + b.hex())
leaf_sets = st.lists(st.tuples(st.integers(0, 2**256 - 1), hashes32), min_size=1, max_size=40)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(leaf_sets, min_size=1, max_size=8))
def test_root_and_proofs_match_openzeppelin_merkle_tree(openzeppelin: OpenZeppelin, sets: list[list[tuple[int, str]]]) -> None:
    for values, expected in zip(sets, openzeppelin(TRACE_TYPES, sets)):
        tree = TraceTree.of(values)
        assert tree.root == expected["root"]
        assert [tree.proof(i) for i in range(len(values))] == expected["proofs"]


def test_trace_tree_of_sequential_indices_matches_openzeppelin(openzeppelin: OpenZeppelin) -> None:
    hashes = ["0x" + keccak(bytes([i])).hex() for i in range(11)]
    (expected,) = openzeppelin(TRACE_TYPES, [list(enumerate(hashes))])
    assert TraceTree(hashes).root == expected["root"]


@settings(max_examples=50, deadline=None)
@given(st.lists(hashes32, min_size=1, max_size=64), st.data())
def test_every_proof_verifies_and_a_wrong_leaf_does_not(hashes: list[str], data: st.DataObject) -> None:
    tree = TraceTree(hashes)
    i = data.draw(st.integers(0, len(hashes) - 1))
    proof = tree.proof(i)
    assert all(p.startswith("0x") and len(p) == 66 for p in proof)
    assert verify_proof(tree.root, i, hashes[i], proof)
    other = "0x" + keccak(bytes.fromhex(hashes[i][2:])).hex()
    assert not verify_proof(tree.root, i, other, proof)
    if len(hashes) > 1:
        assert not verify_proof(tree.root, i + 1, hashes[i], proof)


def test_single_leaf_tree_root_is_the_leaf_and_proof_is_empty() -> None:
    h = "0x" + "ab" * 32
    tree = TraceTree([h])
    assert tree.root == "0x" + leaf_hash(0, h).hex()
    assert tree.proof(0) == []


def test_leaf_is_double_keccak_of_abi_encoding() -> None:
    h = bytes(range(32))
    assert leaf_hash(7, h) == keccak(keccak((7).to_bytes(32, "big") + h))


@pytest.mark.parametrize("bad", [[], ["0x1234"], ["zz" * 32]])
def test_bad_leaves_raise_merkle_error(bad: list[str]) -> None:
    with pytest.raises(MerkleError):
        TraceTree(bad)


def test_proof_of_missing_leaf_raises() -> None:
    with pytest.raises(MerkleError):
        TraceTree(["0x" + "00" * 32]).proof(1)
