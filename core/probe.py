"""The one probe type: what a verifier publishes for one probe slot of a passing report
(Types.sol ``Probe`` plus its slot), shared by the engine (``proofs.probes``), the chain wrapper
(``core.contracts``), the dispute helpers (``core.dispute``) and the roles.

``core`` loads no chain library here, so the engine can use it (tests/test_imports.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NewType

__all__ = ["Bytes32", "Probe"]

Bytes32 = NewType("Bytes32", bytes)  # a CID digest, a Merkle root, a state hash: hex only at the JSON and log edges


@dataclass(frozen=True)
class Probe:
    """The state hash after ``step`` steps of ``segment``, published for slot ``index`` (the global
    training step is ``segment * k + step``). Raises ``ValueError`` on a field that does not fit
    the chain's ``(uint256, uint256, uint256, bytes32)``."""

    index: int
    segment: int
    step: int
    state_hash: Bytes32

    def __post_init__(self) -> None:
        for name in ("index", "segment", "step"):
            value = getattr(self, name)
            if not 0 <= value < 2**256:
                raise ValueError(f"probe {name} {value} does not fit a uint256")
        if not isinstance(self.state_hash, bytes) or len(self.state_hash) != 32:
            raise ValueError(f"probe state hash must be 32 bytes, got {self.state_hash!r}")
