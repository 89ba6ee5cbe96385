"""Carries out the solver's actions: transactions through the typed wrappers, work through solver.work.

Every action is idempotent. A transaction whose precondition no longer holds reverts
at gas estimation (nothing is sent) and the agent loop drops it; local records are
written only after the fact they record (a mined receipt, a file fsynced), so a kill
at any point leaves records that are true, if behind, and the next tick catches up.

The responder is handed only the calls it sends (:class:`SolverCalls`), not the chain client.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol as Structural

from core.agent import log_mined
from core.calls import CreditCalls, StakeCalls
from core.chain import Address, Receipt
from core.cid import Cid, cid_to_digest, digest_to_cid
from core.contracts import Bytes32, Device, Game, JobId, Role
from core.dispute import midpoint
from proofs.merkle import hex32
from rolebase.actions import ClaimCredit, Forget, GameCalls, GameMove, GameMoves, Stake, Upkeep, UpkeepCalls
from rolebase.keygame import AnswerDemand, KeyCalls, KeyGame, PublishWraps, RegisterKey, RequestWrap, SealedCalls
from rolebase.multiparty import MultipartyMove
from rolebase.multiparty_duty import MultipartyDuty
from rolebase.turns import TurnCalls, TurnTaker
from rolebase.watchers import MarketWatcher
from solver.availability import publication
from solver.policy import (
    Advertise,
    AnswerAvailability,
    AssignVerifier,
    Claim,
    Commit,
    Finalize,
    ForfeitUnopened,
    Phase,
    Regenerate,
    SolverAction,
    TimeoutVerifier,
    Train,
    Upload,
)
from solver.state import SolverDb
from solver.work import JobTrainer

log = logging.getLogger(__name__)


class _Market(Structural):
    def claim(self, job_id: JobId) -> Receipt: ...

    def commit(self, job_id: JobId, trace_root: bytes, checkpoint_count: int, final_model_cid: bytes, manifest_cid: bytes) -> Receipt: ...

    def assign_verifier(self, job_id: JobId) -> Receipt: ...

    def timeout_verifier(self, job_id: JobId) -> Receipt: ...

    def finalize(self, job_id: JobId) -> Receipt: ...

    def answer_availability(self, job_id: JobId, content: bytes, proof: Sequence[bytes] = ()) -> Receipt: ...


class _Game(GameCalls, CreditCalls, Structural):
    def forfeit_unopened(self, job_id: JobId) -> Receipt: ...


class _Stakes(StakeCalls, Structural):
    def advertise(self, max_params: int, max_dataset_bytes: int, max_steps: int, flops: int, device: Device) -> Receipt: ...


class _Sealed(SealedCalls, CreditCalls, Structural):
    """``SealedJobs``: its key game's moves, and the credits it pays."""


class SolverCalls(UpkeepCalls, TurnCalls, Structural):
    """What the solver sends (``core.contracts.Protocol`` has them all): its market moves, its game
    moves, its stake and credit claims (:class:`rolebase.actions.UpkeepCalls`), its advert and its
    moves in sealed jobs' key game (what :class:`rolebase.keygame.KeyGame` is handed)."""

    @property
    def market(self) -> _Market: ...

    @property
    def game(self) -> _Game: ...

    @property
    def stakes(self) -> _Stakes: ...

    @property
    def keys(self) -> KeyCalls: ...

    @property
    def sealed_jobs(self) -> _Sealed: ...


class _Defense:
    """The solver's side of its games: its state at the midpoint, recomputed from the segment's checkpoint."""

    def __init__(self, job_trainer: JobTrainer) -> None:
        self.job_trainer = job_trainer

    def midpoint(self, game: Game) -> tuple[Bytes32, Cid]:
        return self.job_trainer.midpoint(game.job_id, game.segment, midpoint(game.lo, game.hi))


class SolverResponder:
    def __init__(self, calls: SolverCalls, db: SolverDb, job_trainer: JobTrainer, watcher: MarketWatcher, me: Address, multiparty: MultipartyDuty) -> None:
        """``multiparty``: our slots' moves in multi-party jobs (an inner job begun is recorded as one we claimed) and the permissionless ones."""
        self.calls = calls
        self.multiparty = multiparty
        self.watcher = watcher
        self.db = db
        self.job_trainer = job_trainer
        self.me = me
        self.upkeep = Upkeep(calls, Role.SOLVER, me, db, log)
        self.turns = TurnTaker(calls, logger=log)
        self.moves = GameMoves(calls.game, me, log, defender=_Defense(job_trainer))
        self.keys = KeyGame(calls, me, db.data_key, log)

    def perform(self, action: SolverAction) -> None:
        p = self.calls
        match action:
            case Stake() | ClaimCredit():
                self.upkeep.perform(action)
            case Advertise(offer):
                receipt = p.stakes.advertise(offer.max_params, offer.max_dataset_bytes, offer.max_steps, offer.flops, offer.device)
                log_mined(
                    log,
                    "advertise",
                    receipt,
                    max_params=offer.max_params,
                    max_dataset_bytes=offer.max_dataset_bytes,
                    max_steps=offer.max_steps,
                    flops=offer.flops,
                    device=offer.device.name,
                )
            case MultipartyMove():
                self.multiparty.perform(action)
            case Claim(job_id):
                spec_cid = digest_to_cid(self.watcher.spec_cid(job_id))
                self.job_trainer.keep_inputs(job_id)  # spec and dataset pinned before the bond is at stake
                receipt = p.market.claim(job_id)
                self.db.start_job(job_id, spec_cid)
                log_mined(log, "claim", receipt, job=job_id)
            case Train(job_id, deadline):
                self.job_trainer.train(job_id, deadline)
            case Upload(job_id):
                self.job_trainer.upload(job_id)
            case Commit(job_id):
                record = self.db.job(job_id)
                if record is None or record.manifest_cid is None or record.trace_root is None:
                    log.warning("nothing to commit", extra={"job": job_id})
                    return
                receipt = p.market.commit(
                    job_id,
                    record.trace_root,
                    int(record.checkpoint_count or 0),
                    cid_to_digest(record.final_model_cid or ""),
                    cid_to_digest(record.manifest_cid),
                )
                self.db.set_phase(job_id, Phase.COMMITTED)
                log_mined(log, "commit", receipt, job=job_id, root=hex32(record.trace_root))
            case AssignVerifier() | Finalize():
                self.turns.perform(action)
            case TimeoutVerifier(job_id):
                log_mined(log, "timeoutVerifier", p.market.timeout_verifier(job_id), job=job_id)
            case GameMove():
                self.moves.perform(action)
            case AnswerAvailability(job_id, item):
                content, proof = publication(self.db, self.job_trainer.store, job_id, item, lambda i: self.job_trainer.checkpoint(job_id, i))
                receipt = p.market.answer_availability(job_id, content, proof)
                log_mined(log, "answerAvailability", receipt, job=job_id, item=item, bytes=len(content))
            case Regenerate(job_id, index, held):
                self.job_trainer.checkpoint(job_id, index, held=held)
            case ForfeitUnopened(job_id):
                log_mined(log, "forfeitUnopened", p.game.forfeit_unopened(job_id), job=job_id)
            case Forget(job_id):
                self.job_trainer.release(job_id)
                self.upkeep.perform(action)
            case AnswerDemand(job_id, party):
                if p.sealed_jobs.demand_of(job_id).key_only:  # became its second since the view: the key answers it, not ours to give
                    log.info("a second demand is the submitter's to answer", extra={"job": job_id, "party": party})
                    return
                self.keys.perform(action)
            case RegisterKey() | RequestWrap() | PublishWraps():
                self.keys.perform(action)
