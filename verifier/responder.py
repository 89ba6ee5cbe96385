"""Carries out the verifier's actions. Idempotent, records written after the fact (see solver.responder)."""

from __future__ import annotations

import logging

from core.chain import Address, Receipt
from core.cid import cid_to_digest
from core.contracts import Protocol, Role
from verifier.policy import AssignVerifier, Finalize, Forget, Replay, Report, Stake, Timeout, TimeoutKind, VerifierAction
from verifier.state import VerifierDb
from verifier.work import Inspector

log = logging.getLogger(__name__)


class VerifierResponder:
    def __init__(self, protocol: Protocol, db: VerifierDb, inspector: Inspector, me: Address) -> None:
        self.protocol = protocol
        self.db = db
        self.inspector = inspector
        self.me = me

    def perform(self, action: VerifierAction) -> None:
        p = self.protocol
        match action:
            case Stake(amount):
                if p.token.allowance(self.me, p.stakes.address) < amount:
                    self._mined("approve", p.token.approve(p.stakes.address, amount))
                self._mined("stake", p.stakes.stake(Role.VERIFIER, amount), amount=amount)
            case Replay(job_id, deadline):
                verdict = self.inspector.inspect(job_id, deadline)
                self.db.set_verdict(job_id, verdict.passed, verdict.report_cid, verdict.summary)
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
                self._mined("report", receipt, job=job_id, passed=record.passed)
            case AssignVerifier(job_id):
                self._mined("assignVerifier", p.market.assign_verifier(job_id), job=job_id)
            case Finalize(job_id):
                self._mined("finalize", p.market.finalize(job_id), job=job_id)
            case Timeout(job_id, kind):
                call = {
                    TimeoutKind.EXPIRE: p.market.expire,
                    TimeoutKind.SOLVER: p.market.timeout_solver,
                    TimeoutKind.VERIFIER: p.market.timeout_verifier,
                    TimeoutKind.DISPUTE: p.market.timeout_dispute,
                }[kind]
                self._mined(kind.value, call(job_id), job=job_id)
            case Forget(job_id):
                self.db.forget(job_id)
                log.info("job forgotten", extra={"job": job_id})

    def _mined(self, what: str, receipt: Receipt, **fields: object) -> None:
        log.info(f"{what} mined", extra={**fields, "gas": receipt.gas_used, "tx": receipt.tx_hash})
