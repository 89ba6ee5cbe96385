"""What a verifier does about what it sees: pure, no I/O, unit-tested without a chain.

Its own work first: stake, then for each job it was drawn for, replay and report
before the deadline. Then the calls anyone may make (draw a verifier, finalize,
time out a silent party). The job's solver makes the draw and the finalize its own
business at once (its pay depends on them); a verifier that profits too (a draw it
may win, its own fee) follows ``own_grace_s`` later, so the two do not race and
waste gas on a reverted duplicate, and any other call waits ``duty_grace_s`` past
due, so the interested parties go first, yet no job stays stuck when they are silent.

Disputes: a verifier whose replay failed opens the game on its first failing segment
within the open window and answers each of the solver's midpoints while its clock runs;
seated on a committee, it commits its vote and reveals it; the game's permissionless
calls (time a silent side out, draw the committee, settle) are made at once by the
challenger and by everyone else ``own_grace_s`` (draw, settle) or ``duty_grace_s``
(timeout) past due.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from core.agent import stake_needed
from core.chain import Address
from core.contracts import Ballot, Game, GameId, GameParams, GameStatus, JobId, JobState, TokenAmount
from core.dispute import Action, next_turn


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
class PendingOpen:
    """A job our failing report disputed, with no game yet: open it on ``segment`` by ``open_deadline``."""

    job_id: JobId
    segment: int
    open_deadline: int


@dataclass(frozen=True)
class LiveGame:
    """A dispute game that is not final; ``ballot`` is ours (VACANT unless we are seated)."""

    game_id: GameId
    game: Game
    ballot: Ballot = Ballot.VACANT


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
    openings: tuple[PendingOpen, ...] = ()
    games: tuple[LiveGame, ...] = ()
    game_params: GameParams | None = None


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


@dataclass(frozen=True)
class OpenGame:
    job_id: JobId
    segment: int


@dataclass(frozen=True)
class GameMove:
    """One call in a game: ``answerMidpoint`` (as its challenger), ``commitVote`` / ``revealVote``
    (as a seated referee), or a permissionless ``timeoutClock``, ``drawCommittee``, ``settle``."""

    game_id: GameId
    action: Action


VerifierAction = Stake | Replay | Report | AssignVerifier | Finalize | Timeout | Forget | OpenGame | GameMove

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
        for pending in view.openings:
            if view.now <= pending.open_deadline:
                actions.append(OpenGame(pending.job_id, pending.segment))
        if view.game_params is not None:
            for live in sorted(view.games, key=lambda g: g.game_id):
                move = self._game(view, view.game_params, live)
                if move is not None:
                    actions.append(move)
        if self.config.duties:
            for job in sorted(view.jobs, key=lambda j: j.job_id):
                duty = self._duty(view, job)
                if duty is not None:
                    actions.append(duty)
        actions.extend(Forget(job_id) for job_id in sorted(view.forgettable))
        return actions

    def _stake(self, view: VerifierView) -> Stake | None:
        amount = stake_needed(self.config.stake_target, view.min_stake, view.staked, view.token_balance)
        return None if amount is None else Stake(amount)

    def _game(self, view: VerifierView, params: GameParams, live: LiveGame) -> VerifierAction | None:
        game = live.game
        turn = next_turn(game, params, view.now, view.block)
        challenger = game.challenger == view.me
        # bystanders (not the challenger) make the permissionless calls only with duties on, after a grace
        own = self.config.own_grace_s if self.config.duties else None
        duty = self.config.duty_grace_s if self.config.duties else None
        match turn.action:
            case Action.ANSWER_MIDPOINT:
                return GameMove(live.game_id, turn.action) if challenger else None
            case Action.COMMIT_VOTE:
                return GameMove(live.game_id, turn.action) if live.ballot is Ballot.SEATED else None
            case Action.REVEAL_VOTE:
                return GameMove(live.game_id, turn.action) if live.ballot is Ballot.COMMITTED else None
            case Action.TIMEOUT_CLOCK:
                clock = game.solver_clock if game.status is GameStatus.SOLVER_TO_MOVE else game.challenger_clock
                if challenger and game.status is GameStatus.CHALLENGER_TO_MOVE:
                    return None  # our own clock ran out: the solver times us out, not we
                wait = 0 if challenger else duty
                due = game.last_move_at + clock
            case Action.DRAW_COMMITTEE:
                assert turn.ready_block is not None
                wait = 0 if challenger else own
                ready = wait is not None and view.block >= turn.ready_block + wait
                return GameMove(live.game_id, Action.DRAW_COMMITTEE) if ready else None
            case Action.SETTLE:
                wait = 0 if challenger else own
                if game.status is GameStatus.ISOLATED:
                    due = game.last_move_at + params.draw_window
                else:
                    due = game.deadline + params.reveal_window
                    if challenger:
                        due = view.now - 1  # settleable early (all revealed): the challenger goes at once
            case _:
                return None
        if wait is None or view.now <= due + wait:
            return None
        return GameMove(live.game_id, turn.action)

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
