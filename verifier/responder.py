"""Carries out the verifier's actions. Idempotent, records written after the fact (see solver.responder).

A dispute move re-reads its game first: a move the chain no longer waits for (the tick's view
was stale) is skipped rather than sent to revert. A vote is committed with a salt derived from
the secret in the records (:meth:`verifier.state.VerifierDb.salt_secret`) and revealed after a
restart by matching the commitment on chain, so nothing about a vote needs to be stored.
"""

from __future__ import annotations

import logging

from core.agent import log_mined, stake
from core.chain import Address
from core.cid import cid_to_digest
from core.contracts import Ballot, GameId, GameStatus, Protocol, Role
from core.dispute import Action, derive_salt, midpoint, vote_commitment
from verifier.dispute import DisputeDesk
from verifier.policy import (
    AssignVerifier,
    Finalize,
    Forget,
    GameMove,
    OpenGame,
    Replay,
    Report,
    Stake,
    Timeout,
    TimeoutKind,
    VerifierAction,
)
from verifier.state import VerifierDb
from verifier.work import Inspector

log = logging.getLogger(__name__)


class VerifierResponder:
    def __init__(self, protocol: Protocol, db: VerifierDb, inspector: Inspector, desk: DisputeDesk, me: Address) -> None:
        self.protocol = protocol
        self.db = db
        self.inspector = inspector
        self.desk = desk
        self.me = me

    def perform(self, action: VerifierAction) -> None:
        p = self.protocol
        match action:
            case Stake(amount):
                stake(p, self.me, Role.VERIFIER, amount)
            case Replay(job_id, deadline):
                verdict = self.inspector.inspect(job_id, deadline)
                self.db.set_verdict(job_id, verdict.passed, verdict.report_cid, verdict.summary, verdict.failed_segment)
                log.info(
                    "replay done",
                    extra={"job": job_id, "passed": verdict.passed, "segments": verdict.summary, "report": verdict.report_cid},
                )
            case Report(job_id):
                record = self.db.assignment(job_id)
                if record is None or record.passed is None or record.report_cid is None:
                    log.warning("no verdict to report", extra={"job": job_id})
                    return
                receipt = p.market.report(job_id, record.passed, cid_to_digest(record.report_cid))
                self.db.set_reported(job_id)
                log_mined(log, "report", receipt, job=job_id, passed=record.passed)
            case AssignVerifier(job_id):
                log_mined(log, "assignVerifier", p.market.assign_verifier(job_id), job=job_id)
            case Finalize(job_id):
                log_mined(log, "finalize", p.market.finalize(job_id), job=job_id)
            case Timeout(job_id, kind):
                call = {
                    TimeoutKind.EXPIRE: p.market.expire,
                    TimeoutKind.SOLVER: p.market.timeout_solver,
                    TimeoutKind.VERIFIER: p.market.timeout_verifier,
                    TimeoutKind.DISPUTE: p.market.timeout_dispute,
                }[kind]
                log_mined(log, kind.value, call(job_id), job=job_id)
            case Forget(job_id):
                self.db.forget(job_id)
                log.info("job forgotten", extra={"job": job_id})
            case OpenGame(job_id, segment):
                if p.game.active_game(job_id):
                    return
                bond = p.game.params().challenge_bond
                if p.token.allowance(self.me, p.game.address) < bond:
                    log_mined(log, "approve", p.token.approve(p.game.address, bond), job=job_id)
                game_id, receipt = p.game.open(job_id, *self.desk.opening(job_id, segment).call_args())
                log_mined(log, "open", receipt, job=job_id, game=game_id, segment=segment)
            case GameMove(game_id, Action.ANSWER_MIDPOINT):
                game = p.game.get_game(game_id)
                if game.status is GameStatus.CHALLENGER_TO_MOVE:
                    agree = self.desk.answer(game_id, game)
                    log_mined(log, "answerMidpoint", p.game.answer_midpoint(game_id, agree), game=game_id, step=midpoint(game.lo, game.hi), agree=agree)
            case GameMove(game_id, Action.COMMIT_VOTE):
                if p.game.ballot_of(game_id, self.me)[0] is Ballot.SEATED:
                    right = self.desk.vote(game_id, p.game.get_game(game_id))
                    commitment = vote_commitment(game_id, right, self._salt(game_id), self.me)
                    log_mined(log, "commitVote", p.game.commit_vote(game_id, commitment), game=game_id)
            case GameMove(game_id, Action.REVEAL_VOTE):
                self._reveal(game_id)
            case GameMove(game_id, what):
                call = {Action.TIMEOUT_CLOCK: p.game.timeout_clock, Action.DRAW_COMMITTEE: p.game.draw_committee, Action.SETTLE: p.game.settle}[what]
                log_mined(log, what.value, call(game_id), game=game_id)

    def _salt(self, game_id: GameId) -> bytes:
        return derive_salt(self.db.salt_secret(), game_id)

    def _reveal(self, game_id: GameId) -> None:
        """Reveal the vote whose commitment is on chain: the salt is re-derived, the vote is the one that matches."""
        ballot, commitment = self.protocol.game.ballot_of(game_id, self.me)
        if ballot is not Ballot.COMMITTED:
            return
        salt = self._salt(game_id)
        for right in (True, False):
            if vote_commitment(game_id, right, salt, self.me) == bytes(commitment):
                log_mined(log, "revealVote", self.protocol.game.reveal_vote(game_id, right, salt), game=game_id, solver_right=right)
                return
        log.error("committed vote matches no salt of ours (the salt secret was lost): cannot reveal", extra={"game": game_id})
