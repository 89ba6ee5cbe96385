"""Carries out the verifier's actions. Idempotent, records written after the fact (see solver.responder).

A dispute move re-reads its game first: a move the chain no longer waits for (the tick's view
was stale) is skipped rather than sent to revert. A vote is committed with a salt derived from
the secret in the records (:meth:`verifier.state.VerifierDb.salt_secret`) and revealed after a
restart by matching the commitment on chain, so nothing about a vote needs to be stored.

Forced secrets leave the records only as the argument of ``concedeForced``; a new one is
recorded before its commitment is sent, so a crash in between leaves a secret that the next
tick commits (``seed_moves``: never committed yet), not a commitment without its secret.

A sealed job's key game (registering our encryption key, demanding a key, timing out a demand left
unanswered) is carried out by :class:`rolebase.keygame.KeyGame`.

The responder is handed only the calls it makes (:class:`VerifierCalls`), not the chain client.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol as Structural

from core.agent import log_mined
from core.availability import ChallengeCalls, ChallengeCourt, ChallengeMarket, ChallengeStakes, ContentUnavailable, challenge
from core.calls import CreditCalls, StakeCalls
from core.chain import Address, Receipt
from core.cid import cid_to_digest
from core.contracts import MANIFEST_ITEM, Ballot, Bytes32, GameId, JobId, ReportSeal, Role
from core.dispute import Action, committed_vote, derive_salt, vote_commitment
from core.probe import Probe
from rolebase.actions import ClaimCredit, Forget, GameMove, GameMoves, OpeningCalls, Stake, Upkeep, UpkeepCalls
from rolebase.court import CourtCalls, CourtDuty, CourtMove
from rolebase.dispute import DisputeReplayer
from rolebase.events import REPLAY_DONE
from rolebase.keygame import DeclineSeat, DemandKey, KeyCalls, KeyGame, RegisterKey, SealedCalls, TimeoutDemand, WrapReferees
from rolebase.multiparty import MultipartyMove
from rolebase.multiparty_duty import MultipartyDuty
from rolebase.turns import TurnCalls, TurnTaker
from verifier.policy import (
    CONCEDABLE,
    AssignVerifier,
    ChallengeStalled,
    CommitForcedSeed,
    ConcedeForced,
    Finalize,
    ForgetForcedSecret,
    OpenGame,
    Replay,
    Report,
    Timeout,
    TimeoutKind,
    VerifierAction,
)
from verifier.state import VerifierDb
from verifier.work import TraceVerifier

log = logging.getLogger(__name__)


class _Market(ChallengeMarket, Structural):
    def commit_forced_seed(self, commitment: bytes) -> Receipt: ...

    def report(self, job_id: JobId, passed: bool, report_cid: bytes, assign_seed: bytes, forced_commitment: bytes, probes: Sequence[Probe]) -> Receipt: ...

    def assign_verifier(self, job_id: JobId) -> Receipt: ...

    def finalize(self, job_id: JobId) -> Receipt: ...

    def expire(self, job_id: JobId) -> Receipt: ...

    def timeout_solver(self, job_id: JobId) -> Receipt: ...

    def timeout_verifier(self, job_id: JobId) -> Receipt: ...

    def timeout_dispute(self, job_id: JobId) -> Receipt: ...

    def timeout_availability(self, job_id: JobId) -> Receipt: ...


class _Game(OpeningCalls, CreditCalls, Structural):
    def active_game(self, job_id: JobId) -> GameId: ...

    def ballot_of(self, game_id: GameId, referee: str) -> tuple[Ballot, Bytes32]: ...

    def commit_vote(self, game_id: GameId, commitment: bytes) -> Receipt: ...

    def reveal_vote(self, game_id: GameId, defender_right: bool, salt: bytes) -> Receipt: ...

    def concede_forced(self, game_id: GameId, secret: bytes, seal: ReportSeal) -> Receipt: ...


class _Court(ChallengeCourt, CourtCalls, CreditCalls, Structural): ...


class _Stakes(ChallengeStakes, StakeCalls, Structural): ...


class _Sealed(SealedCalls, CreditCalls, Structural):
    """``SealedJobs``: its key game's moves, and the credits it pays (a forfeited demand's fee)."""


class VerifierCalls(ChallengeCalls, UpkeepCalls, TurnCalls, Structural):
    """What the verifier sends (``core.contracts.Protocol`` has it all): its draws, reports,
    timeouts and finalizations, its games (opened, defended, judged, conceded), its court duties and
    availability challenges, its forced seed, its stake and its moves in sealed jobs' key game."""

    @property
    def market(self) -> _Market: ...

    @property
    def game(self) -> _Game: ...

    @property
    def court(self) -> _Court: ...

    @property
    def stakes(self) -> _Stakes: ...

    @property
    def keys(self) -> KeyCalls: ...

    @property
    def sealed_jobs(self) -> _Sealed: ...


class VerifierResponder:
    def __init__(
        self, calls: VerifierCalls, db: VerifierDb, trace_verifier: TraceVerifier, replayer: DisputeReplayer, me: Address, multiparty: MultipartyDuty
    ) -> None:
        """``multiparty``: our duties in multi-party jobs (aggregate, check, vote, the permissionless moves)."""
        self.calls = calls
        self.multiparty = multiparty
        self.db = db
        self.trace_verifier = trace_verifier
        self.replayer = replayer
        self.me = me
        self.upkeep = Upkeep(calls, Role.VERIFIER, me, db, log)
        self.turns = TurnTaker(calls, logger=log)
        self.moves = GameMoves(calls.game, me, log, challenger=replayer, defender=replayer)
        self.keys = KeyGame(calls, me, db.data_key, log)

    def perform(self, action: VerifierAction) -> None:
        p = self.calls
        match action:
            case Stake() | ClaimCredit() | Forget():
                self.upkeep.perform(action)
            case CommitForcedSeed(fresh):
                kept = self.db.forced_commitments()
                commitment = self.db.new_forced_secret(self.me) if fresh or not kept else kept[-1]
                log_mined(log, "commitForcedSeed", p.market.commit_forced_seed(commitment), fresh=fresh)
            case ForgetForcedSecret(commitment):
                self.db.forget_forced_secret(commitment)
                log.info("old forced secret forgotten (no live job snapshotted it)")
            case Replay(job_id, deadline, draw):
                try:
                    verdict = self.trace_verifier.inspect(job_id, deadline, draw)
                except ContentUnavailable as unavailable:  # the solver must publish it, or be slashed
                    challenge(p, self.me, unavailable)
                    return
                self.db.set_verdict(
                    job_id,
                    verdict.passed,
                    verdict.report_cid,
                    verdict.summary,
                    verdict.probe_root,
                    verdict.failed_segment,
                    draw=draw,
                    probes=verdict.probes,
                )
                log.info(
                    REPLAY_DONE,
                    extra={"job": job_id, "passed": verdict.passed, "segments": verdict.summary, "report": verdict.report_cid},
                )
            case ChallengeStalled(job_id, item):
                fetching = self.trace_verifier.availability.fetching(job_id)
                took = f"{fetching.seconds:.0f} s" if fetching is not None else "too long"
                challenge(p, self.me, ContentUnavailable(job_id, item, f"item {item} still fetching after {took}"))
            case Report(job_id):
                record = self.db.assignment(job_id)
                if record is None or record.passed is None or record.report_cid is None or record.draw is None or record.probes is None:
                    log.warning("no verdict to report", extra={"job": job_id})
                    return
                # The probes go on chain (the chain checks their segments and computes their root).
                receipt = p.market.report(
                    job_id,
                    record.passed,
                    cid_to_digest(record.report_cid),
                    record.draw.assign_seed,
                    record.draw.forced_commitment,
                    record.probes,
                )
                self.db.set_reported(job_id)
                log_mined(log, "report", receipt, job=job_id, passed=record.passed)
            case AssignVerifier() | Finalize():
                self.turns.perform(action)
            case Timeout(job_id, kind):
                call = {
                    TimeoutKind.EXPIRE: p.market.expire,
                    TimeoutKind.SOLVER: p.market.timeout_solver,
                    TimeoutKind.VERIFIER: p.market.timeout_verifier,
                    TimeoutKind.DISPUTE: p.market.timeout_dispute,
                    TimeoutKind.AVAILABILITY: p.market.timeout_availability,
                }[kind]
                log_mined(log, kind.value, call(job_id), job=job_id)
            case OpenGame(job_id, segment):
                if p.game.active_game(job_id):
                    return
                bond = p.game.params().challenge_bond
                if p.token.allowance(self.me, p.game.address) < bond:
                    log_mined(log, "approve", p.token.approve(p.game.address, bond), job=job_id)
                if segment == MANIFEST_ITEM:  # the manifest gives no leaves: the referees judge it whole
                    game_id, receipt = p.game.open_on_manifest(job_id)
                    log_mined(log, "openOnManifest", receipt, job=job_id, game=game_id)
                    return
                game_id, receipt = p.game.open(job_id, *self.replayer.opening(job_id, segment).call_args())
                log_mined(log, "open", receipt, job=job_id, game=game_id, segment=segment)
            case ConcedeForced(game_id, job_id):
                self._concede(game_id, job_id)
            case GameMove(game_id, Action.COMMIT_VOTE):
                if p.game.ballot_of(game_id, self.me)[0] is Ballot.SEATED:
                    right = self.replayer.vote(game_id, p.game.get_game(game_id))
                    commitment = vote_commitment(game_id, right, self._salt(game_id), self.me)
                    log_mined(log, "commitVote", p.game.commit_vote(game_id, commitment), game=game_id)
            case GameMove(game_id, Action.REVEAL_VOTE):
                self._reveal(game_id)
            case GameMove():  # a midpoint posted (a report game's defender) or answered (a challenger), the permissionless moves
                self.moves.perform(action)
            case CourtMove():  # a member fetches into the store it replays from, and serves from
                CourtDuty(p.court, p.book.deploy_block, self.trace_verifier.store, self.me, self.db.salt_secret, self.trace_verifier.watcher).perform(action)
            case MultipartyMove():
                self.multiparty.perform(action)
            case RegisterKey() | DemandKey() | TimeoutDemand() | WrapReferees() | DeclineSeat():
                self.keys.perform(action)

    def _concede(self, game_id: GameId, job_id: JobId) -> None:
        """Reveal the secret that forced the job's probe 0 (the report game's whistleblower is paid
        from the jackpot, we keep bond and fee); the market then clears our seed if it was this one."""
        p = self.calls
        if p.game.get_game(game_id).status not in CONCEDABLE:
            return
        seal = self.trace_verifier.watcher.seal(job_id)
        secret = None if seal is None else self.db.forced_secret(seal.forced_commitment)
        if seal is None or secret is None:
            log.error("cannot concede: no forced secret of ours behind the job's seal", extra={"game": game_id, "job": job_id})
            return
        log_mined(log, "concedeForced", p.game.concede_forced(game_id, secret, seal), game=game_id, job=job_id)

    def _salt(self, game_id: GameId) -> bytes:
        return derive_salt(self.db.salt_secret(), game_id)

    def _reveal(self, game_id: GameId) -> None:
        """Reveal the vote whose commitment is on chain: the salt is re-derived, the vote is the one that matches."""
        ballot, commitment = self.calls.game.ballot_of(game_id, self.me)
        if ballot is not Ballot.COMMITTED:
            return
        salt = self._salt(game_id)
        right = committed_vote(commitment, game_id, salt, self.me)
        if right is None:
            log.error("committed vote matches no salt of ours (the salt secret was lost): cannot reveal", extra={"game": game_id})
            return
        log_mined(log, "revealVote", self.calls.game.reveal_vote(game_id, right, salt), game=game_id, defender_right=right)
