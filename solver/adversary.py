"""A TEST adversary of the data-availability game (never for real use): ``--cheat withhold``.

It trains and commits honestly, then, as soon as its commit is mined, deletes every checkpoint
of the job from its disk and from its store (unpinned and collected), keeping the manifest: the
verifier gets as far as the checkpoints, cannot fetch them, and challenges one on chain; the
honest answer code finds nothing to publish, and the solver's bond goes to the verifier.
Chosen in :func:`solver.daemon.build`, where every solver adversary is picked.
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
