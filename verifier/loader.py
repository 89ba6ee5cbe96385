"""Reads what the verifier policy needs, at one instant, into a frozen :class:`VerifierView`."""

from __future__ import annotations

from core.agent import MarketWatcher
from core.chain import Address
from core.contracts import JobState, Protocol, Role, TokenAmount
from verifier.policy import Assignment, MarketJob, Phase, VerifierView
from verifier.state import VerifierDb


class VerifierLoader:
    def __init__(self, protocol: Protocol, db: VerifierDb, me: Address) -> None:
        self.protocol = protocol
        self.watcher = MarketWatcher(protocol.market, protocol.book.deploy_block)
        self.db = db
        self.me = me
        self._min_stake: TokenAmount | None = None

    def load(self) -> VerifierView:
        p = self.protocol
        block = p.client.block_number()
        now = p.client.timestamp(block)
        scan = self.watcher.scan(self.db.final_jobs())
        if scan.newly_final:
            self.db.mark_final(scan.newly_final)
        if self._min_stake is None:
            self._min_stake = p.stakes.min_stake(Role.VERIFIER)
        records = {r.job_id: r for r in self.db.assignments()}
        assignments: list[Assignment] = []
        jobs: list[MarketJob] = []
        ours: set[int] = set()
        for job_id, job in scan.jobs:
            ready = job.deadline + 2 if job.state is JobState.COMMITTED else 0  # COMMITTED: deadline = anchor block
            jobs.append(MarketJob(job_id, job.state, job.deadline, ready, job.solver, job.verifier, job.submitter))
            if job.verifier == self.me and job.state in (JobState.VERIFYING, JobState.VERIFIED, JobState.DISPUTED):
                ours.add(job_id)
                if job.state is JobState.VERIFYING:
                    record = records.get(job_id)
                    assignments.append(Assignment(job_id, job.deadline, record.phase if record else Phase.ASSIGNED))
        return VerifierView(
            now=now,
            block=block,
            me=self.me,
            token_balance=p.token.balance_of(self.me),
            staked=p.stakes.stake_of(self.me, Role.VERIFIER).staked,
            min_stake=self._min_stake,
            assignments=tuple(assignments),
            jobs=tuple(jobs),
            forgettable=tuple(sorted(j for j in records if j not in ours)),
        )
