"""Carries out the whistleblower's actions. Idempotent; records written after the fact (see solver.responder).

A challenge re-reads the chain first: the job must still be Verified on the same report, with no
game, and the fault not yet challenged by us (``DisputeOpened`` events, as the loader reads them),
so a stale view or a restart never sends a second challenge. A game move re-reads its game and
is skipped if the chain no longer waits for it. An audit that finds an item unavailable (not served,
not published, past the grace: ``core.availability``) challenges its availability; a held challenge
is logged once per report; ``timeoutAvailability`` re-reads the job first. A sealed job's key game
(registering our encryption key, asking for a wrap, demanding the key, timing out a demand left
unanswered, wrapping the key to the referees of our games) is carried out by :class:`rolebase.keygame.KeyGame`; a sealed report we cannot read is
logged once. The responder is handed only the calls it makes (:class:`WhistleblowerCalls`), not the
chain client.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Protocol as Structural

from core.agent import log_mined
from core.availability import ChallengeCalls, ChallengeCourt, ChallengeMarket, ChallengeStakes, ContentUnavailable, challenge
from core.calls import CreditCalls, StakeCalls
from core.chain import Address, Receipt
from core.cid import digest_to_cid
from core.contracts import GameId, JobId, JobState, ReportSeal, Role
from core.dispute import opening_on_report
from rolebase.actions import ClaimCredit, Forget, GameMove, GameMoves, OpeningCalls, Stake, Upkeep, UpkeepCalls
from rolebase.dispute import DisputeReplayer
from rolebase.events import AUDIT_RECORDED, CHALLENGE_HELD
from rolebase.keygame import DemandKey, KeyCalls, KeyGame, RegisterKey, RequestWrap, SealedCalls, TimeoutDemand, WrapReferees
from whistleblower.audit import Auditor
from whistleblower.loader import WhistleblowerLoader
from whistleblower.policy import (
    Audit,
    Challenge,
    Finding,
    FindingKind,
    HoldChallenge,
    TimeoutAvailability,
    Unreadable,
    WhistleblowerAction,
)
from whistleblower.state import ChallengeRecord, WhistleblowerDb

log = logging.getLogger(__name__)


class _Market(ChallengeMarket, Structural):
    def timeout_availability(self, job_id: JobId) -> Receipt: ...


class _Game(OpeningCalls, CreditCalls, Structural):
    def open_on_report(
        self,
        job_id: JobId,
        seal: ReportSeal,
        index: int,
        segment: int,
        step: int,
        state_hash: bytes,
        proof: Sequence[bytes],
        start_hash: bytes,
        start_proof: Sequence[bytes],
    ) -> tuple[GameId, Receipt]: ...


class _Court(ChallengeCourt, CreditCalls, Structural): ...


class _Stakes(ChallengeStakes, StakeCalls, Structural): ...


class _Sealed(SealedCalls, CreditCalls, Structural):
    """``SealedJobs``: its key game's moves, and the credits it pays (a forfeited demand's fee)."""


class WhistleblowerCalls(ChallengeCalls, UpkeepCalls, Structural):
    """What the whistleblower sends (``core.contracts.Protocol`` has it all): its challenges of
    reports and of availability, its game moves, its stake and its moves in sealed jobs' key game."""

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


class WhistleblowerResponder:
    def __init__(
        self, calls: WhistleblowerCalls, db: WhistleblowerDb, auditor: Auditor, replayer: DisputeReplayer, loader: WhistleblowerLoader, me: Address
    ) -> None:
        self.calls = calls
        self.db = db
        self.auditor = auditor
        self.replayer = replayer
        self.loader = loader
        self.me = me
        self._held: set[tuple[JobId, str]] = set()  # reports whose held challenge was logged
        self._unreadable: set[JobId] = set()  # sealed jobs logged as not audited
        self.upkeep = Upkeep(calls, Role.WHISTLEBLOWER, me, db, log)
        self.moves = GameMoves(calls.game, me, log, challenger=replayer)
        self.keys = KeyGame(calls, me, db.data_key, log)  # we wrap only to our games' referees, never reveal

    def perform(self, action: WhistleblowerAction) -> None:
        p = self.calls
        match action:
            case Stake() | ClaimCredit() | Forget():
                self.upkeep.perform(action)
            case GameMove():
                self.moves.perform(action)
            case Audit(job_id, report_cid, window_end, trace_root):
                try:
                    record = self.auditor.audit(job_id, report_cid, window_end, trace_root)
                except ContentUnavailable as unavailable:  # the solver must publish it, or its bond is ours
                    challenge(p, self.me, unavailable)
                    return
                self.db.set_audit(record)
                log.info(AUDIT_RECORDED, extra={"job": job_id, "report": report_cid, "faults": len(record.findings), "summary": record.summary})
            case Challenge(job_id, report_cid, finding):
                self._challenge(job_id, report_cid, finding)
            case HoldChallenge(job_id, report_cid, referees, needed):
                if (job_id, report_cid) not in self._held:
                    self._held.add((job_id, report_cid))
                    reason = f"{referees} eligible referees besides the parties, a committee needs {needed}: the game would end Undecided"
                    log.warning(CHALLENGE_HELD, extra={"job": job_id, "report": report_cid, "reason": reason})
            case TimeoutAvailability(job_id):
                if p.market.get_job(job_id).state is JobState.DATA_CHALLENGED:
                    log_mined(log, "timeoutAvailability", p.market.timeout_availability(job_id), job=job_id)
            case RegisterKey() | RequestWrap() | DemandKey() | TimeoutDemand() | WrapReferees():
                self.keys.perform(action)
            case Unreadable(job_id, report_cid, reason):
                if job_id not in self._unreadable:
                    self._unreadable.add(job_id)
                    log.warning("sealed job not audited: we cannot read it", extra={"job": job_id, "report": report_cid, "reason": reason})

    def _challenge(self, job_id: JobId, report_cid: str, finding: Finding) -> None:
        p = self.calls
        job = p.market.get_job(job_id)
        report = self.loader.current_report(job_id, job)
        if job.state is not JobState.VERIFIED or report is None or digest_to_cid(bytes(report.args["reportCid"])) != report_cid:
            return  # the view was stale: the next tick decides again
        if finding.key in self.loader.challenged(job_id, report.block_number):
            return  # opened before a restart: never twice
        bond = p.game.params().challenge_bond
        if p.token.allowance(self.me, p.game.address) < bond:
            log_mined(log, "approve", p.token.approve(p.game.address, bond), job=job_id)
        if finding.kind is FindingKind.MANIFEST:  # no leaves: the referees judge the manifest the chain holds
            game_id, receipt = p.game.open_on_manifest(job_id)
            log_mined(log, "openOnManifest", receipt, job=job_id, game=game_id, detail=finding.detail)
            self.db.add_challenge(ChallengeRecord(GameId(game_id), job_id, report_cid, finding.kind, finding.index))
            return
        m = self.replayer.material(job_id)
        if finding.kind is FindingKind.PROBE:
            seal = finding.seal if finding.seal is not None else self.auditor.watcher.seal(job_id)
            args = opening_on_report(seal, finding.probe(), finding.proof, m.manifest.state_hashes, m.manifest.tree())
            game_id, receipt = p.game.open_on_report(job_id, *args.call_args())
            what = "openOnReport"
        else:
            game_id, receipt = p.game.open(job_id, *self.replayer.opening(job_id, finding.segment).call_args())
            what = "open"
        log_mined(log, what, receipt, job=job_id, game=game_id, fault=finding.kind.value, index=finding.index, detail=finding.detail)
        self.db.add_challenge(ChallengeRecord(GameId(game_id), job_id, report_cid, finding.kind, finding.index))
