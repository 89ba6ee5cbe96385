"""Probes: the states a passing report commits to, that only a replay can produce.

A trace's checkpoints are the solver's; a report that only says "checkpoint j + 1 reproduces"
can be copied from them by a verifier that never replayed. So a passing report also commits to
``probeCount`` PROBES: for slot ``i`` the chain fixes, from the verifier's ``assignSeed`` (known
only once the verifier is drawn), a segment ``s_i`` and an inner step ``m_i`` of it, and the
verifier states the model's state hash after step ``m_i`` of segment ``s_i``. The solver never
committed those states, so a verifier that did not replay cannot produce them (docs/incentives.md,
requirement 3). The report passes the probes themselves to ``JobMarket.report`` (slot i at position
i, ``(segment, step, state_hash)``); the chain checks their segments, computes the root of their
:class:`ProbeTree` (``ProbeLib.root``, the same value) and emits them, and proves one by
``ProbeLib.verify`` (``JobMarket.verifyProbe``)::

    from proofs.probes import Probe, ProbeTree, probe_positions

    positions = probe_positions(assign_seed, params.probe_count, job.checkpoint_count, spec.checkpoint_interval)
    probes = [Probe(i, s, m, state_hash(state_at(spec, dataset, ckpt[s], s * k + m))) for i, s, m in positions]
    tree = ProbeTree(probes)                       # tree.root: what the chain computes from report(..., probes)
    tree.proof(0)                                  # what openOnReport / verifyProbe take for probe 0

Forced errors (requirement 1): a verifier commits ``forced_commitment(secret, verifier)`` on
chain; on a job whose ``assign_seed`` makes ``is_forced(secret, assign_seed, rate_bps)`` true it
publishes probe 0 as ``forced_hash(true_hash)``, a value no replay gives, and reveals ``secret``
when a whistleblower's report game catches it. The formulas mirror ``JobMarket.sol`` and
``ProbeLib.sol``; tests/chain checks them against the deployed contracts.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from core.probe import Bytes32, Probe
from proofs.errors import MerkleError, ProofError
from proofs.keccak import address_word, keccak, uint256
from proofs.merkle import StandardTree, hex32, to_bytes32, verify_leaf

__all__ = [
    "FORCED_DOMAIN",
    "Probe",
    "probe_json",
    "parse_probe",
    "ProbeTree",
    "probe_leaf",
    "probe_segment",
    "probe_step",
    "probe_positions",
    "verify_probe",
    "forced_commitment",
    "is_forced",
    "forced_hash",
]

FORCED_DOMAIN = b"veritrain/forced"
"""Prefix of a forced probe's hash: keccak256(FORCED_DOMAIN ++ trueHash) is never a state hash."""
_BPS = 10_000


def _seed_word(assign_seed: bytes | str, index: int, *more: int) -> int:
    """``uint256(keccak256(abi.encode(assignSeed, index, *more)))``."""
    if index < 0:
        raise ProofError(f"probe index {index} is negative")
    seed = to_bytes32(assign_seed, "assign seed")
    return int.from_bytes(keccak(seed + b"".join(uint256(v) for v in (index, *more))), "big")


def probe_segment(assign_seed: bytes | str, index: int, checkpoint_count: int) -> int:
    """Segment of probe slot ``index``: ``keccak256(abi.encode(assignSeed, index)) % (checkpointCount - 1)``,
    as ``JobMarket.probeSegment`` computes it (every segment, the last one included, can be drawn)."""
    if checkpoint_count < 2:
        raise ProofError(f"a trace of {checkpoint_count} checkpoints has no segment to probe")
    return _seed_word(assign_seed, index) % (checkpoint_count - 1)


def probe_step(assign_seed: bytes | str, index: int, segment_steps: int) -> int:
    """Inner step of probe slot ``index`` in a segment of ``segment_steps`` steps:
    ``1 + keccak256(abi.encode(assignSeed, index, 1)) % max(k - 1, 1)``, so in 1..k-1 (the end
    checkpoint, committed by the solver, is never asked for unless k = 1)."""
    if segment_steps < 1:
        raise ProofError(f"a segment has at least one step, got {segment_steps}")
    return 1 + _seed_word(assign_seed, index, 1) % max(segment_steps - 1, 1)


def probe_positions(assign_seed: bytes | str, probe_count: int, checkpoint_count: int, checkpoint_interval: int) -> list[tuple[int, int, int]]:
    """``(index, segment, step)`` of every probe slot of a report on a trace of ``checkpoint_count``
    checkpoints, ``checkpoint_interval`` steps apart (every segment of a spec has exactly k steps)."""
    return [(i, probe_segment(assign_seed, i, checkpoint_count), probe_step(assign_seed, i, checkpoint_interval)) for i in range(probe_count)]


def probe_json(probe: Probe) -> dict[str, Any]:
    """A report's JSON entry: ``{"index", "segment", "step", "state_hash"}`` (the hash as ``0x`` hex)."""
    return {"index": probe.index, "segment": probe.segment, "step": probe.step, "state_hash": hex32(probe.state_hash)}


def parse_probe(entry: Any) -> Probe:
    """A report's entry back (a :class:`ProofError` if it is not one)."""
    if not isinstance(entry, dict) or set(entry) != {"index", "segment", "step", "state_hash"}:
        raise ProofError(f"a probe entry has exactly index, segment, step, state_hash: got {entry!r}")
    index, segment, step, state_hash = entry["index"], entry["segment"], entry["step"], entry["state_hash"]
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (index, segment, step)) or not isinstance(state_hash, str):
        raise ProofError(f"probe entry has wrong types: {entry!r}")
    for name, value in (("index", index), ("segment", segment), ("step", step)):
        if not 0 <= value < 2**256:
            raise ProofError(f"probe {name} {value} does not fit a uint256")
    return Probe(index, segment, step, to_bytes32(state_hash, "probe state hash"))


def probe_leaf(probe: Probe) -> bytes:
    """``ProbeLib.leaf``: keccak256(keccak256(abi.encode(index, segment, step, stateHash)))."""
    encoded = uint256(probe.index) + uint256(probe.segment) + uint256(probe.step) + probe.state_hash
    return keccak(keccak(encoded))


class ProbeTree(StandardTree):
    """The probe commitment: ``StandardMerkleTree.of(values, ["uint256", "uint256", "uint256", "bytes32"])``
    over ``(index, segment, step, stateHash)``; proofs are looked up by probe slot, not position."""

    def __init__(self, entries: Sequence[Probe]) -> None:
        self.probes = tuple(entries)
        self._position = {p.index: pos for pos, p in enumerate(self.probes)}
        if len(self._position) != len(self.probes):
            raise MerkleError("two probes with the same index")
        super().__init__([probe_leaf(p) for p in self.probes])

    def proof(self, index: int) -> list[Bytes32]:
        """The proof of probe slot ``index`` (as ``verifyProbe`` and ``openOnReport`` take it)."""
        if index not in self._position:
            raise MerkleError(f"no probe {index} in this tree (slots {sorted(self._position)})")
        return super().proof(self._position[index])

    def probe(self, index: int) -> Probe:
        """The committed probe of slot ``index``."""
        if index not in self._position:
            raise MerkleError(f"no probe {index} in this tree (slots {sorted(self._position)})")
        return self.probes[self._position[index]]


def verify_probe(root: Bytes32, probe: Probe, proof: Sequence[Bytes32]) -> bool:
    """``ProbeLib.verify``: whether ``probe`` is a leaf of the probe tree ``root``."""
    return verify_leaf(root, probe_leaf(probe), proof)


def forced_commitment(secret: bytes | str, verifier: str) -> bytes:
    """``keccak256(abi.encode(secret, verifier))``: what ``commitForcedSeed`` stores; it binds the
    secret to one verifier, so nobody can replay another verifier's reveal."""
    return keccak(to_bytes32(secret, "forced secret") + address_word(verifier))


def is_forced(secret: bytes | str, assign_seed: bytes | str, rate_bps: int) -> bool:
    """Whether the verifier holding ``secret`` is forced on the job with ``assign_seed``:
    ``uint256(keccak256(abi.encode(secret, assignSeed))) % 10000 < rate``. Only the secret's
    holder can compute it before the reveal (the on-chain check also needs the committed
    commitment, see ``JobMarket.isForced``)."""
    if not 0 <= rate_bps <= _BPS:
        raise ProofError(f"forced error rate {rate_bps} bps is not in 0..{_BPS}")
    word = keccak(to_bytes32(secret, "forced secret") + to_bytes32(assign_seed, "assign seed"))
    return int.from_bytes(word, "big") % _BPS < rate_bps


def forced_hash(true_hash: Bytes32) -> Bytes32:
    """The deliberately wrong probe of a forced report: keccak256(FORCED_DOMAIN ++ trueHash)."""
    return Bytes32(keccak(FORCED_DOMAIN + true_hash))
