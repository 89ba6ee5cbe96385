"""The trace commitment: an OpenZeppelin ``StandardMerkleTree`` over ``(uint256, bytes32)`` leaves
(and :class:`StandardTree`, the layout it shares with the probe tree of :mod:`proofs.probes`).

Leaf ``i`` of a trace is ``(i, state_hash_i)`` and hashes as OpenZeppelin's
standard tree does::

    leaf = keccak256(keccak256(abi.encode(uint256 index, bytes32 stateHash)))

Leaves are sorted by hash, laid out as ``@openzeppelin/merkle-tree`` lays them
out, and pairs are hashed sorted, so the root and every proof are the npm
package's (``StandardMerkleTree.of(values, ["uint256", "bytes32"])``) and a
proof passes ``MerkleProof.verify(proof, root, leaf)`` on chain.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.probe import Bytes32
from proofs.errors import MerkleError
from proofs.keccak import keccak

__all__ = ["Hex32", "to_bytes32", "hex32", "leaf_hash", "hash_pair", "StandardTree", "TraceTree", "verify_proof", "verify_leaf"]

Hex32 = str  # "0x" + 64 lowercase hex digits: a Bytes32 at the JSON and log edges only


def to_bytes32(value: bytes | str, what: str = "hash") -> Bytes32:
    """``bytes`` of length 32 from ``0x`` hex (where a hash comes in as text: JSON, a CLI) or raw
    bytes (checked for length); :class:`MerkleError` otherwise."""
    if isinstance(value, str):
        text = value[2:] if value.startswith(("0x", "0X")) else value
        try:
            raw = bytes.fromhex(text)
        except ValueError as exc:
            raise MerkleError(f"{what} {value!r} is not hex") from exc
    else:
        raw = bytes(value)
    if len(raw) != 32:
        raise MerkleError(f"{what} must be 32 bytes, got {len(raw)}")
    return Bytes32(raw)


def hex32(raw: bytes) -> Hex32:
    """``0x`` hex of a hash, where it goes out as text (JSON, a log line, a message)."""
    return "0x" + raw.hex()


def leaf_hash(index: int, state_hash: Bytes32) -> bytes:
    """OpenZeppelin's standard leaf of ``(uint256 index, bytes32 stateHash)``."""
    if not 0 <= index < 2**256:
        raise MerkleError(f"leaf index {index} does not fit a uint256")
    if len(state_hash) != 32:
        raise MerkleError(f"state hash must be 32 bytes, got {len(state_hash)}")
    encoded = index.to_bytes(32, "big") + state_hash
    return keccak(keccak(encoded))


def hash_pair(a: bytes, b: bytes) -> Bytes32:
    return Bytes32(keccak(a + b if a <= b else b + a))


class StandardTree:
    """An OpenZeppelin ``StandardMerkleTree`` over leaf hashes already computed, value ``position``
    being ``leaves[position]``: sorted by hash, laid out and pair-hashed as the npm package does.

    The layout is shared by every tree the contracts check with ``MerkleProof`` (the trace tree
    here, the probe tree in :mod:`proofs.probes`); only the leaf encoding differs between them.
    """

    def __init__(self, leaves: Sequence[bytes]) -> None:
        if not leaves:
            raise MerkleError("a Merkle tree needs at least one leaf")
        hashed = sorted(((leaf, pos) for pos, leaf in enumerate(leaves)), key=lambda t: t[0])
        size = 2 * len(hashed) - 1
        nodes: list[Bytes32] = [Bytes32(b"")] * size
        self._tree_index = [0] * len(hashed)
        for leaf_pos, (leaf, value_pos) in enumerate(hashed):
            nodes[size - 1 - leaf_pos] = Bytes32(leaf)
            self._tree_index[value_pos] = size - 1 - leaf_pos
        for i in range(size - 1 - len(hashed), -1, -1):
            nodes[i] = hash_pair(nodes[2 * i + 1], nodes[2 * i + 2])
        self._nodes = nodes

    def __len__(self) -> int:
        return len(self._tree_index)

    @property
    def root(self) -> Bytes32:
        return self._nodes[0]

    def leaf(self, position: int) -> Bytes32:
        """The leaf hash of value ``position`` (for a trace: checkpoint ``position``)."""
        return self._nodes[self._tree_index[self._check(position)]]

    def proof(self, position: int) -> list[Bytes32]:
        """Sibling hashes from value ``position``'s leaf to the root (what ``MerkleProof.verify`` takes)."""
        i = self._tree_index[self._check(position)]
        out = []
        while i > 0:
            sibling = i + 1 if i % 2 else i - 1
            out.append(self._nodes[sibling])
            i = (i - 1) // 2
        return out

    def _check(self, position: int) -> int:
        if not 0 <= position < len(self._tree_index):
            raise MerkleError(f"no leaf {position} in a tree of {len(self._tree_index)}")
        return position


class TraceTree(StandardTree):
    """The Merkle tree of a trace, built exactly like ``StandardMerkleTree.of(values, ["uint256", "bytes32"])``.

    ``TraceTree(hashes)`` commits to leaves ``(i, hashes[i])``; :meth:`of` takes
    arbitrary ``(index, hash)`` values (in the order the npm package gets them).
    """

    def __init__(self, state_hashes: Sequence[Bytes32]) -> None:
        self._init(list(enumerate(state_hashes)))

    @classmethod
    def of(cls, values: Sequence[tuple[int, Bytes32]]) -> TraceTree:
        tree = cls.__new__(cls)
        tree._init(list(values))
        return tree

    def _init(self, values: list[tuple[int, Bytes32]]) -> None:
        self.values = values
        super().__init__([leaf_hash(i, h) for i, h in self.values])


def verify_proof(root: Bytes32, index: int, state_hash: Bytes32, proof: Sequence[Bytes32]) -> bool:
    """What ``MerkleProof.verify(proof, root, leaf(index, stateHash))`` returns on chain."""
    return verify_leaf(root, leaf_hash(index, state_hash), proof)


def verify_leaf(root: Bytes32, leaf: bytes, proof: Sequence[Bytes32]) -> bool:
    """``MerkleProof.verify(proof, root, leaf)`` for a leaf hash of any standard tree."""
    node = leaf
    for sibling in proof:
        if len(sibling) != 32:
            raise MerkleError(f"proof element must be 32 bytes, got {len(sibling)}")
        node = hash_pair(node, sibling)
    return node == root
