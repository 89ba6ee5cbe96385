"""Reads what the verifier policy needs, at one instant, into a frozen :class:`VerifierView`.

Besides its assignments and the market's live jobs: the jobs its failing report disputed that
have no game yet (with the first failing segment from its records), every dispute game that is
not final, and its own ballot in the games it sits on. All of it from the chain each tick,
so a restart mid-game resumes where the chain stands.
"""

from __future__ import annotations

from core.agent import GameWatcher, MarketWatcher
from core.chain import Address
from core.contracts import Ballot, GameParams, GameStatus, JobState, Protocol, Role, TokenAmount
from verifier.policy import Assignment, LiveGame, MarketJob, PendingOpen, Phase, VerifierView
from verifier.state import VerifierDb


class VerifierLoader:
    def __init__(self, protocol: Protocol, watcher: MarketWatcher, db: VerifierDb, me: Address) -> None:
        self.protocol = protocol
        self.watcher = watcher
        self.games = GameWatcher(protocol.game)
        self.db = db
        self.me = me
        self._min_stake: TokenAmount | None = None
        self._game_params: GameParams | None = None

    def load(self) -> VerifierView:
        p = self.protocol
        moment, scan = self.watcher.read(self.db)
        if self._min_stake is None or self._game_params is None:
            self._min_stake = p.stakes.min_stake(Role.VERIFIER)  # immutable: read once
            self._game_params = p.game.params()
        records = {r.job_id: r for r in self.db.assignments()}
        assignments: list[Assignment] = []
        openings: list[PendingOpen] = []
        jobs: list[MarketJob] = []
        ours: set[int] = set()
        for job_id, job in scan.jobs:
            ready = job.deadline + 2 if job.state is JobState.COMMITTED else 0  # COMMITTED: deadline = anchor block
            jobs.append(MarketJob(job_id, job.state, job.deadline, ready, job.solver, job.verifier, job.submitter))
            if job.verifier == self.me and job.state in (JobState.VERIFYING, JobState.VERIFIED, JobState.DISPUTED):
                ours.add(job_id)
                record = records.get(job_id)
                if job.state is JobState.VERIFYING:
                    assignments.append(Assignment(job_id, job.deadline, record.phase if record else Phase.ASSIGNED))
                elif (
                    job.state is JobState.DISPUTED
                    and job.challenger == self.me
                    and record is not None
                    and record.failed_segment is not None
                    and not p.game.active_game(job_id)
                ):
                    openings.append(PendingOpen(job_id, record.failed_segment, p.game.open_deadline(job_id)))
        games = []
        for game_id, game in self.games.live():
            seated = game.status is GameStatus.ARBITRATING
            ballot = p.game.ballot_of(game_id, self.me)[0] if seated else Ballot.VACANT
            games.append(LiveGame(game_id, game, ballot))
        return VerifierView(
            now=moment.now,
            block=moment.block,
            me=self.me,
            token_balance=p.token.balance_of(self.me),
            staked=p.stakes.stake_of(self.me, Role.VERIFIER).staked,
            min_stake=self._min_stake,
            assignments=tuple(assignments),
            jobs=tuple(jobs),
            forgettable=tuple(sorted(j for j in records if j not in ours)),
            openings=tuple(openings),
            games=tuple(games),
            game_params=self._game_params,
        )
