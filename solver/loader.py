"""Reads what the solver policy needs, at one instant, into a frozen :class:`SolverView`.

The chain says which jobs are open and which are ours; the local records say how far
our work on each got. Specs of open jobs are fetched by CID and judged once
(:class:`solver.work.SpecJudge`), the verdict cached in the records.
"""

from __future__ import annotations

import logging

from core.agent import MarketWatcher
from core.chain import Address
from core.contracts import JobState, Protocol, Role, TokenAmount
from solver.policy import HeldJob, OpenJob, Phase, SolverView
from solver.state import SolverDb
from solver.work import SpecJudge

log = logging.getLogger(__name__)

_HELD_STATES = frozenset({JobState.CLAIMED, JobState.COMMITTED, JobState.VERIFYING, JobState.VERIFIED, JobState.DISPUTED})


class SolverLoader:
    def __init__(self, protocol: Protocol, watcher: MarketWatcher, db: SolverDb, judge: SpecJudge, me: Address) -> None:
        self.protocol = protocol
        self.watcher = watcher
        self.db = db
        self.judge = judge
        self.me = me
        self._min_stake: TokenAmount | None = None

    def load(self) -> SolverView:
        p = self.protocol
        block = p.client.block_number()
        now = p.client.timestamp(block)
        scan = self.watcher.scan(self.db.final_jobs())
        if scan.newly_final:
            self.db.mark_final(scan.newly_final)
        if self._min_stake is None:
            self._min_stake = p.stakes.min_stake(Role.SOLVER)  # immutable: read once
        stake = p.stakes.stake_of(self.me, Role.SOLVER)
        records = {r.job_id: r for r in self.db.jobs()}

        open_jobs: list[OpenJob] = []
        held: list[HeldJob] = []
        for job_id, job in scan.jobs:
            if job.state is JobState.OPEN and now <= job.deadline:  # OPEN: deadline = claim by
                spec = self.judge.check(self.watcher.spec_cid(job_id))
                open_jobs.append(OpenJob(job_id, job.reward, p.market.solver_bond(job.reward), job.deadline, job.commit_window, spec))
            elif job.state in _HELD_STATES and job.solver == self.me:
                record = records.get(job_id)
                if job.state is JobState.CLAIMED:
                    phase = record.phase if record is not None else Phase.CLAIMED
                else:
                    phase = Phase.COMMITTED
                # COMMITTED: deadline holds the draw's anchor block; the draw needs blockhash(anchor + 1)
                ready = job.deadline + 2 if job.state is JobState.COMMITTED else 0
                held.append(HeldJob(job_id, job.state, job.deadline, ready, phase))
        held_ids = {h.job_id for h in held}
        return SolverView(
            now=now,
            block=block,
            me=self.me,
            token_balance=p.token.balance_of(self.me),
            staked=stake.staked,
            free_stake=stake.free,
            min_stake=self._min_stake,
            open_jobs=tuple(open_jobs),
            held_jobs=tuple(held),
            forgettable=tuple(sorted(j for j in records if j not in held_ids)),
        )
