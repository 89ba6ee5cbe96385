"""What a verifier does about what it sees: pure, no I/O, unit-tested without a chain.

Its own work first: stake, then for each job it was drawn for, replay and report
before the deadline. Then the calls anyone may make (draw a verifier, finalize,
time out a silent party). The job's solver makes the draw and the finalize its own
business at once (its pay depends on them); a verifier that profits too (a draw it
may win, its own fee) follows ``own_grace_s`` later, so the two do not race and
waste gas on a reverted duplicate, and any other call waits ``duty_grace_s`` past
due, so the interested parties go first, yet no job stays stuck when they are silent.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from core.chain import Address
from core.contracts import JobId, JobState, TokenAmount


class Phase(enum.Enum):
    """How far this verifier got with an assignment, by its own records (verifier/state.py)."""

    ASSIGNED = "assigned"  # nothing replayed yet (or the records were lost)
    REPLAYED = "replayed"  # verdict computed and stored, report not yet mined
    REPORTED = "reported"


@dataclass(frozen=True)
class MarketJob:
    """A non-final job, as much as the duties need."""

    job_id: JobId
    state: JobState
    deadline: int  # due time of the current phase (OPEN: claim by; CLAIMED: commit by; ...)
    ready_block: int  # COMMITTED: assignVerifier possible from this block; else 0
    solver: Address
    verifier: Address
    submitter: Address


@dataclass(frozen=True)
class Assignment:
    """A VERIFYING job whose drawn verifier is this account."""

    job_id: JobId
    deadline: int
    phase: Phase


@dataclass(frozen=True)
class VerifierView:
    now: int
    block: int
    me: Address
    token_balance: TokenAmount
    staked: TokenAmount
    min_stake: TokenAmount
    assignments: tuple[Assignment, ...]
    jobs: tuple[MarketJob, ...]  # every non-final job (for the duties)
    forgettable: tuple[JobId, ...]  # jobs in the local records that are final


@dataclass(frozen=True)
class VerifierConfig:
    stake_target: TokenAmount  # stake up to this much (0: the chain minimum)
    duties: bool = True  # make the anyone-may calls at all
    own_grace_s: int = 5  # past due before a call that pays us (the solver usually makes it first)
    duty_grace_s: int = 30  # past due before a call that does not pay us


# --------------------------------------------------------------------- actions


@dataclass(frozen=True)
class Stake:
    amount: TokenAmount


@dataclass(frozen=True)
class Replay:
    job_id: JobId
    deadline: int


@dataclass(frozen=True)
class Report:
    job_id: JobId


@dataclass(frozen=True)
class AssignVerifier:
    job_id: JobId


@dataclass(frozen=True)
class Finalize:
    job_id: JobId


class TimeoutKind(enum.Enum):
    EXPIRE = "expire"  # Open past expiresAt
    SOLVER = "timeoutSolver"  # Claimed past the commit deadline
    VERIFIER = "timeoutVerifier"  # Verifying past the report deadline
    DISPUTE = "timeoutDispute"  # Disputed past the dispute deadline


@dataclass(frozen=True)
class Timeout:
    job_id: JobId
    kind: TimeoutKind


@dataclass(frozen=True)
class Forget:
    job_id: JobId


VerifierAction = Stake | Replay | Report | AssignVerifier | Finalize | Timeout | Forget

_TIMEOUTS = {
    JobState.OPEN: TimeoutKind.EXPIRE,
    JobState.CLAIMED: TimeoutKind.SOLVER,
    JobState.VERIFYING: TimeoutKind.VERIFIER,
    JobState.DISPUTED: TimeoutKind.DISPUTE,
}


class VerifierPolicy:
    def __init__(self, config: VerifierConfig) -> None:
        self.config = config

    def next_actions(self, view: VerifierView) -> Sequence[VerifierAction]:
        actions: list[VerifierAction] = []
        stake = self._stake(view)
        if stake is not None:
            actions.append(stake)
        for a in sorted(view.assignments, key=lambda a: a.deadline):  # nearest deadline first
            if view.now >= a.deadline:
                continue  # missed; our bond pays for it
            if a.phase is Phase.ASSIGNED:
                actions.append(Replay(a.job_id, a.deadline))
            elif a.phase is Phase.REPLAYED:
                actions.append(Report(a.job_id))
        if self.config.duties:
            for job in sorted(view.jobs, key=lambda j: j.job_id):
                duty = self._duty(view, job)
                if duty is not None:
                    actions.append(duty)
        actions.extend(Forget(job_id) for job_id in sorted(view.forgettable))
        return actions

    def _stake(self, view: VerifierView) -> Stake | None:
        missing = max(int(self.config.stake_target), int(view.min_stake)) - view.staked
        if missing <= 0:
            return None
        amount = min(missing, int(view.token_balance))
        if amount <= 0 or view.staked + amount < view.min_stake:
            return None
        return Stake(TokenAmount(amount))

    def _duty(self, view: VerifierView, job: MarketJob) -> AssignVerifier | Finalize | Timeout | None:
        grace = self.config.duty_grace_s
        if job.state is JobState.COMMITTED:
            # a draw we may win (not as the job's solver or submitter: they are excluded)
            pays = view.staked >= view.min_stake and view.me not in (job.solver, job.submitter)
            wait = self.config.own_grace_s if pays else grace
            if _overdue_blocks(view.block, job.ready_block, wait):
                return AssignVerifier(job.job_id)
            return None
        if job.state is JobState.VERIFIED:
            wait = self.config.own_grace_s if job.verifier == view.me else grace
            if view.now > job.deadline + wait:  # the contract wants now > deadline
                return Finalize(job.job_id)
            return None
        kind = _TIMEOUTS.get(job.state)
        if kind is None:
            return None
        if kind is TimeoutKind.VERIFIER and job.verifier == view.me:
            return None  # never time ourselves out
        if view.now > job.deadline + grace:
            return Timeout(job.job_id, kind)
        return None


def _overdue_blocks(block: int, ready_block: int, grace_s: int) -> bool:
    """Blocks stand in for seconds here (at most one block per second on the chains we target)."""
    return block >= ready_block + grace_s
