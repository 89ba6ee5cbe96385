"""Solver TEST adversaries (never for real use), all picked in :func:`solver.daemon.build`.

A trace adversary (``--cheat`` NAME of ``proofs.strategies.ALL_STRATEGIES``) commits that strategy's
trace instead of training honestly (:class:`CheatingJobTrainer`). The adversaries of the
data-availability game train honestly and misbehave around the commit: ``--cheat withhold``,
``--cheat stale-model``, ``--cheat garbage-manifest`` and ``--cheat foreign-root``.

``withhold`` trains and commits honestly, then, as soon as its commit is mined, deletes every checkpoint
of the job from its disk and from its store (unpinned and collected), keeping the manifest: the
verifier gets as far as the checkpoints, cannot fetch them, and challenges one on chain; the
honest answer code finds nothing to publish, and the solver's bond goes to the verifier.

``stale-model`` trains, stores and serves its checkpoints and manifest honestly, then commits its
checkpoint 0 (the untrained model) as the final model: the manifest is served and matches its CID,
but is not the committed trace. The verifier fails segment 0 as ``malformed-manifest`` and opens the
trace game there from the manifest's leaves; the referees vote against the solver without training.

``garbage-manifest`` and ``foreign-root`` train, store and commit an honest trace, but the manifest
CID they commit (and serve) is another one: bytes that do not parse as a manifest, or a manifest
that parses and is consistent but lists other state hashes, so its root is not the committed root.
Neither gives the verifier leaves for a trace game: it challenges the manifest's availability (the
solver publishes it on chain) and opens a manifest game, where the referees vote against the solver.

``copy-contribution`` (multi-party jobs, docs/multiparty.md) trains its inner jobs honestly but commits
as its contribution the bytes another slot committed this round (the first one it finds), saving the
compression and hoping to be paid for another's work. The aggregator finds it is not what its trace
gives and calls it wrong: the copier loses its slot bond and its slot.
"""

from __future__ import annotations

import logging
from typing import Any

from eth_utils import keccak

from core.contracts import JobId, MultipartyJob
from core.probe import Bytes32
from core.storage import ContentStore, LocalStore, file_cid
from core.storage.peers import FetchingStore
from proofs.adversary import cheat
from proofs.checkpoint import state_hash
from proofs.data import Dataset
from proofs.manifest import MANIFEST_BLOCK, CheckpointEntry, Manifest, load_manifest, write_manifest
from proofs.merkle import TraceTree, hex32
from proofs.spec import JobSpec
from proofs.train import Committed
from rolebase.multiparty_duty import MultipartyDuty
from solver.policy import Commit, SolverAction
from solver.responder import SolverResponder
from solver.state import SolverDb
from solver.work import JobTrainer

log = logging.getLogger(__name__)

WITHHOLD = "withhold"
STALE_MODEL = "stale-model"
GARBAGE_MANIFEST = "garbage-manifest"
FOREIGN_ROOT = "foreign-root"
COPY_CONTRIBUTION = "copy-contribution"


class Withholding:
    """The honest responder, plus: after each commit, the job's checkpoints are deleted."""

    def __init__(self, honest: SolverResponder, db: SolverDb, store: ContentStore) -> None:
        self.honest = honest
        self.db = db
        self.store = store

    def perform(self, action: SolverAction) -> None:
        self.honest.perform(action)
        if isinstance(action, Commit):
            self._withhold(action.job_id)

    def _withhold(self, job_id: JobId) -> None:
        checkpoints = self.db.checkpoints(job_id)
        for ckpt in checkpoints:
            ckpt.path.unlink(missing_ok=True)
            if ckpt.cid is not None:
                self.store.unpin(ckpt.cid)
        own = self.store.own if isinstance(self.store, FetchingStore) else self.store
        if isinstance(own, LocalStore):
            own.gc()
        log.warning("checkpoints deleted after the commit (withholding test adversary)", extra={"job": job_id, "count": len(checkpoints)})


class StaleModel:
    """The honest responder, except that each commit names checkpoint 0 as the final model."""

    def __init__(self, honest: SolverResponder, db: SolverDb) -> None:
        self.honest = honest
        self.db = db

    def perform(self, action: SolverAction) -> None:
        if isinstance(action, Commit) and (record := self.db.job(action.job_id)) is not None and record.manifest_cid is not None:
            first = self.db.checkpoints(action.job_id)[0].cid
            assert first is not None, "uploaded checkpoints have CIDs"
            self.db.set_uploaded(action.job_id, first, record.manifest_cid)
            log.warning("committing checkpoint 0 as the model (stale-model test adversary)", extra={"job": action.job_id, "model": first})
        self.honest.perform(action)


class ForeignManifest:
    """The honest responder, except that each commit names another manifest, stored and served:
    ``garbage-manifest`` bytes that do not parse, or a ``foreign-root`` manifest of other states."""

    def __init__(self, honest: SolverResponder, db: SolverDb, store: ContentStore, kind: str) -> None:
        self.honest = honest
        self.db = db
        self.store = store
        self.kind = kind

    def perform(self, action: SolverAction) -> None:
        if isinstance(action, Commit) and (record := self.db.job(action.job_id)) is not None and record.manifest_cid and record.final_model_cid:
            honest = load_manifest(self.store.get(record.manifest_cid, MANIFEST_BLOCK), lambda page: self.store.get(page, MANIFEST_BLOCK))
            cid = self._manifest(honest)
            self.db.set_uploaded(action.job_id, record.final_model_cid, cid)
            log.warning("committing another manifest (%s test adversary)", self.kind, extra={"job": action.job_id, "manifest": cid})
        self.honest.perform(action)

    def _manifest(self, m: Manifest) -> str:
        """The CID of the manifest committed in place of the honest ``m``, stored."""
        if self.kind == GARBAGE_MANIFEST:
            return self.store.put(b"this is not a manifest\n" + keccak(m.canonical_bytes()))
        wrong = (Bytes32(keccak(text=hex32(c.state_hash))) for c in m.checkpoints)  # the hash of each hash's text
        checkpoints = tuple(CheckpointEntry(index=c.index, cid=c.cid, state_hash=h) for c, h in zip(m.checkpoints, wrong))
        root = TraceTree(tuple(c.state_hash for c in checkpoints)).root
        return write_manifest(self.store.put, m.model_copy(update={"checkpoints": checkpoints, "root": root}))


class CheatingJobTrainer(JobTrainer):
    """Writes the trace of ``proofs.adversary`` strategy ``strategy`` as the job's checkpoints."""

    def __init__(self, *args: Any, strategy: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.strategy = strategy

    def _build_trace(self, job_id: JobId, spec: JobSpec, dataset: Dataset, deadline: int) -> list[Bytes32]:
        faked = cheat(self.strategy, spec, dataset)
        folder = self._dir(job_id)
        folder.mkdir(parents=True, exist_ok=True)
        self.db.drop_checkpoints_from(job_id, 0)
        losses, norms = (None, *faked.trace.losses), (None, *faked.trace.update_norms)
        hashes: list[Bytes32] = []
        record = self._recorder(job_id, spec, folder, hashes)
        for i, data in enumerate(faked.trace.checkpoints):
            self._write_checkpoint(folder, i, data)
            record(Committed(i, state_hash(data), file_cid(data), losses[i], norms[i]))
        log.warning("cheating trace written", extra={"job": job_id, "strategy": self.strategy, "bad_segments": str(list(faked.bad_segments))})
        return hashes


class CopyingMultipartyDuty(MultipartyDuty):
    """``copy-contribution``: an honest party in everything but its contribution, which is the bytes
    another slot committed this round (waits for one)."""

    def _contribute(self, job_id: int, job: MultipartyJob, slot: int) -> None:
        d = self.protocol.diloco
        for other in range(job.parties):
            theirs = d.contribution_of(job_id, job.round, other)
            if other != slot and any(theirs.cid):
                receipt = d.contribute(job_id, slot, bytes(theirs.cid), bytes(theirs.content_hash))
                log.warning("copied contribution committed", extra={"job": job_id, "round": job.round, "slot": slot, "from": other, "gas": receipt.gas_used})
                return
