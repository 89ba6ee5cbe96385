"""The solver's side of the data-availability game (docs/protocol.md, "Data availability").

When the job's verifier challenges an item it could not fetch, the solver publishes it on chain
within the availability window (``answerAvailability``): a checkpoint as its bytes (from its disk,
else its store) with the Merkle proof of its leaf under the committed root, the manifest as its
bytes (the chain checks its CIDv0 against the committed manifest CID). A checkpoint the disk budget
dropped is regenerated first (``solver.retention``: checked against its committed leaf). Published, the item is
readable by anyone from the chain for good; a solver that cannot publish loses its bond.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from core.contracts import MANIFEST_ITEM, JobId
from core.errors import VeritrainError
from core.probe import Bytes32
from core.storage import ContentStore, StorageError
from proofs.checkpoint import state_hash
from proofs.manifest import MANIFEST_BLOCK
from proofs.merkle import TraceTree
from proofs.spec import Limits
from solver.state import SolverDb


class PublicationError(VeritrainError):
    """What the verifier challenged cannot be published: it is no longer on disk nor in the store."""


def publication(db: SolverDb, store: ContentStore, job_id: JobId, item: int, regenerate: Callable[[int], bytes]) -> tuple[bytes, list[Bytes32]]:
    """``(content, proof)`` answering a challenge of ``item`` (a checkpoint index, or
    ``MANIFEST_ITEM``) of the job we committed: the bytes the chain will check, and the leaf's proof
    (none for the manifest). ``regenerate(index)``: a checkpoint the disk budget dropped."""
    record = db.job(job_id)
    if record is None or record.manifest_cid is None:
        raise PublicationError(f"job {job_id}: no committed trace on record to publish from")
    try:
        if item == MANIFEST_ITEM:
            return store.get(record.manifest_cid, MANIFEST_BLOCK), []  # its root block: what the chain checks
        checkpoints = db.checkpoints(job_id)
        if not 0 <= item < len(checkpoints):
            raise PublicationError(f"job {job_id}: no checkpoint {item} on record")
        ckpt = checkpoints[item]
        data = regenerate(item) if ckpt.dropped else _from_disk(ckpt.path)
        if data is None or state_hash(data) != ckpt.state_hash:
            if ckpt.cid is None:
                raise PublicationError(f"job {job_id}: checkpoint {item} is neither on disk nor stored")
            data = store.get(ckpt.cid, Limits.CHECKPOINT_BYTES)
            if state_hash(data) != ckpt.state_hash:
                raise PublicationError(f"job {job_id}: checkpoint {item} does not hash to its committed state hash")
    except StorageError as exc:
        raise PublicationError(f"job {job_id}: cannot read item {item} to publish: {exc}") from exc
    tree = TraceTree([c.state_hash for c in checkpoints])
    return data, tree.proof(item)


def _from_disk(path: Path) -> bytes | None:
    """The checkpoint file if it is there and not oversized, else None (the caller checks its hash)."""
    try:
        if path.stat().st_size > Limits.CHECKPOINT_BYTES:
            return None
        return path.read_bytes()
    except OSError:
        return None
