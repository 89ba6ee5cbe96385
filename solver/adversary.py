"""TEST adversaries of the data-availability game (never for real use): ``--cheat withhold`` and
``--cheat stale-model``.

``withhold`` trains and commits honestly, then, as soon as its commit is mined, deletes every checkpoint
of the job from its disk and from its store (unpinned and collected), keeping the manifest: the
verifier gets as far as the checkpoints, cannot fetch them, and challenges one on chain; the
honest answer code finds nothing to publish, and the solver's bond goes to the verifier.

``stale-model`` trains, stores and serves its checkpoints and manifest honestly, then commits its
checkpoint 0 (the untrained model) as the final model: the manifest is served and matches its CID,
but is not the committed trace. The verifier fails segment 0 as ``malformed-manifest`` and opens the
trace game there from the manifest's leaves; the referees vote against the solver without training.
Both are chosen in :func:`solver.daemon.build`, where every solver adversary is picked.
"""

from __future__ import annotations

import logging

from core.contracts import JobId
from core.storage import ContentStore, LocalStore
from solver.policy import Commit, SolverAction
from solver.responder import SolverResponder
from solver.state import SolverDb

log = logging.getLogger(__name__)

WITHHOLD = "withhold"
STALE_MODEL = "stale-model"


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
        if isinstance(self.store, LocalStore):
            self.store.gc()
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
