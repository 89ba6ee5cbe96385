"""Reads what the verifier policy needs, at one instant, into a frozen :class:`VerifierView`.

Besides its assignments and the market's live jobs: the jobs its failing report disputed that
have no game yet (with the first failing segment from its records), every dispute game that is
not final, its own ballot in the games it sits on, the availability court's live cases (with its
ballot where it sits), and its forced seed (on chain and kept).
All of it from the chain each tick, so a restart mid-game resumes where the chain stands.

A sealed job drawn to it carries its key game as it stands for us (:class:`~verifier.policy.SealedDraw`):
whether we hold its data key (found by ``rolebase.keyring`` and kept in the records), our demands so far;
a job our demand holds is listed with the demand's deadline.

Its draws (``VerifierAssigned``: the assign seed and the forced commitment snapshotted) and its
seed commitments (``ForcedSeedCommitted``) are read from logs filtered by its address,
incrementally from the deployment block (:class:`DrawIndex`). Whether a job is forced on it is
decided here, with the secret from the records, and travels in the view only as a flag.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from core.availability import Fetching
from core.chain import Address
from core.contracts import (
    AvailabilityCourt,
    Ballot,
    Bytes32,
    Game,
    GameId,
    GameParams,
    GameStatus,
    Job,
    JobId,
    JobMarket,
    JobState,
    MarketParams,
    Protocol,
    Role,
    SealedJobs,
    SealingStatus,
    TokenAmount,
)
from core.sealing import EncryptionKey
from proofs.probes import is_forced
from rolebase.actions import credits_of
from rolebase.court import CourtWatcher
from rolebase.keyring import OwnKey, data_key, referees_to_wrap
from rolebase.multiparty import MultipartyWatcher
from rolebase.watchers import GameWatcher, LatestLogs, MarketWatcher, staked_rivals
from verifier.policy import Assignment, Draw, LiveGame, MarketJob, OpenDemand, PendingOpen, Phase, SealedDraw, SeedView, VerifierView
from verifier.state import AssignmentRecord, VerifierDb

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Drawn:
    """One ``VerifierAssigned`` event of ours: ``deadline`` tells which draw of the job it is (moved by
    each ``AvailabilityAnswered`` and court ``CaseSettled`` of ours: the report deadline resumed after a
    challenge). A demand of ours for a sealed job's key answered since (``DemandAnswered``) resumed the
    deadline too, but no event says to when: ``resumed`` then lets the job's own deadline stand."""

    deadline: int
    assign_seed: Bytes32
    forced_commitment: Bytes32
    block: int = 0  # of the draw
    drawn_at: int = 0  # the draw's block time: the report clock started
    window: int = 0  # the report window the draw gave (its deadline less ``drawn_at``)
    resumed: bool = False


class DrawIndex:
    """Our latest draw per job and every seed commitment we made, from the logs up to a block."""

    def __init__(self, market: JobMarket, court: AvailabilityCourt, sealed: SealedJobs, deploy_block: int, me: Address) -> None:
        self.market = market
        self.court = court
        self.sealed = sealed
        self.me = me
        self.deploy_block = deploy_block
        self._next_block = deploy_block
        self.draws: dict[int, Drawn] = {}
        self.committed: set[Bytes32] = set()

    def update(self, block: int) -> None:
        if block < self._next_block - 1:  # the chain went back (a snapshot reverted, a restart from a dump): read it again
            self._next_block = self.deploy_block
            self.draws.clear()
            self.committed.clear()
        if block < self._next_block:
            return
        for e in self.market.events("VerifierAssigned", self._next_block, block, verifier=self.me):
            a = e.args
            deadline, at = int(a["deadline"]), self.market.client.timestamp(e.block_number)
            seal = Bytes32(bytes(a["assignSeed"])), Bytes32(bytes(a["forcedCommitment"]))
            self.draws[int(a["jobId"])] = Drawn(deadline, *seal, block=e.block_number, drawn_at=at, window=deadline - at)
        for e in self.market.events("AvailabilityAnswered", self._next_block, block, challenger=self.me):
            # an item we challenged was published: the report clock resumed with a new deadline
            job_id = int(e.args["jobId"])
            if job_id in self.draws:
                self.draws[job_id] = replace(self.draws[job_id], deadline=int(e.args["deadline"]))
        for e in self.court.events("CaseSettled", self._next_block, block, challenger=self.me):
            # a court case of ours ended with the items served (or undecided): the report clock resumed
            job_id, resumed = int(e.args["jobId"]), int(e.args["resumedDeadline"])
            if job_id in self.draws and resumed:
                self.draws[job_id] = replace(self.draws[job_id], deadline=resumed)
        for e in self.sealed.events("DemandAnswered", self._next_block, block, party=self.me):
            # our demand for the key was answered: the report clock resumed with the time it had left
            job_id = int(e.args["jobId"])
            if job_id in self.draws and e.block_number >= self.draws[job_id].block:
                self.draws[job_id] = replace(self.draws[job_id], resumed=True)
        for e in self.market.events("ForcedSeedCommitted", self._next_block, block, verifier=self.me):
            self.committed.add(Bytes32(bytes(e.args["commitment"])))
        self._next_block = block + 1


#: The states in which a job we were drawn for is ours: its assignment, report, dispute or final call.
_OURS_WHILE = frozenset({JobState.VERIFYING, JobState.DATA_CHALLENGED, JobState.DATA_VOTE, JobState.VERIFIED, JobState.DISPUTED})


@dataclass
class _Ours:
    """What one load gathers about our jobs on the way through the market's."""

    jobs: set[JobId] = field(default_factory=set)
    assignments: list[Assignment] = field(default_factory=list)
    openings: list[PendingOpen] = field(default_factory=list)
    snapshotted: set[Bytes32] = field(default_factory=set)
    demands: list[OpenDemand] = field(default_factory=list)


class VerifierLoader:
    def __init__(
        self,
        protocol: Protocol,
        watcher: MarketWatcher,
        db: VerifierDb,
        me: Address,
        fetching: Callable[[JobId], Fetching | None] = lambda _: None,
        key: EncryptionKey | None = None,
        forget: Callable[[int], None] = lambda _job: None,
    ) -> None:
        """``fetching``: what the replay worker is fetching for a job (``core.availability.Availability.fetching``);
        ``key``: our encryption key (``--encryption-key``), which opens the wraps of sealed jobs' keys to us;
        ``forget``: told each multi-party job once it is Finished (``MultipartyDuty.forget``)."""
        self.fetching = fetching
        self.key = key
        self._own_key = OwnKey(protocol.keys, me, key)
        self._keyless: set[JobId] = set()  # sealed jobs drawn to us without an encryption key, told once
        self.protocol = protocol
        self.watcher = watcher
        self.games = GameWatcher(protocol.game)
        self.index = DrawIndex(protocol.market, protocol.court, protocol.sealed_jobs, protocol.book.deploy_block, me)
        self.court = CourtWatcher(protocol, me)
        self.multiparty = MultipartyWatcher(protocol, me, finished=forget)
        self.db = db
        self.me = me
        self._min_stake: TokenAmount | None = None
        self._game_params: GameParams | None = None
        self._market_params: MarketParams | None = None
        self._stakers = LatestLogs(protocol.stakes, "Staked", "account", protocol.book.deploy_block, role=int(Role.VERIFIER))

    def load(self) -> VerifierView:
        p = self.protocol
        moment, scan = self.watcher.read(self.db)
        if self._min_stake is None or self._game_params is None or self._market_params is None:
            self._min_stake = p.stakes.min_stake(Role.VERIFIER)  # immutable: read once
            self._game_params = p.game.params()
            self._market_params = p.market.params()
        self.index.update(moment.block)
        rate = self._market_params.forced_error_rate_bps
        records = {r.job_id: r for r in self.db.assignments()}
        ours = _Ours()
        jobs = tuple(self._job(job_id, job, records, rate, ours) for job_id, job in scan.jobs)
        return VerifierView(
            now=moment.now,
            block=moment.block,
            me=self.me,
            token_balance=p.token.balance_of(self.me),
            credits=credits_of(p, self.me),
            staked=p.stakes.stake_of(self.me, Role.VERIFIER).staked,
            min_stake=self._min_stake,
            assignments=tuple(ours.assignments),
            jobs=jobs,
            forgettable=tuple(sorted({j for j in records if j not in ours.jobs} | {JobId(j) for j in self.db.keyed_final()})),
            openings=tuple(ours.openings),
            games=self._games(rate),
            game_params=self._game_params,
            seed=self._seed(frozenset(ours.snapshotted)),
            cases=self.court.live(),
            court_params=self.court.params,
            multiparty=self.multiparty.live(),
            multiparty_params=self.multiparty.params,
            rivals=self._rivals(moment.block, jobs),
            demands=tuple(ours.demands),
            registered_key=self._own_key.registered(),
        )

    def _rivals(self, block: int, jobs: Sequence[MarketJob]) -> tuple[Address, ...]:
        """The other verifiers that hold the minimum stake (the latest :data:`~rolebase.watchers.MAX_RIVALS`
        to stake), read only while a job waits for a call that several verifiers may make."""
        if self._min_stake is None or not any(j.state in (JobState.COMMITTED, JobState.VERIFIED) for j in jobs):
            return ()
        return tuple(who for who, _, _ in staked_rivals(self._stakers, self.me, Role.VERIFIER, self._min_stake, block))

    def _job(self, job_id: JobId, job: Job, records: Mapping[JobId, AssignmentRecord], rate_bps: int, ours: _Ours) -> MarketJob:
        """A live job as the view lists it; one of ours also goes into ``ours``: its assignment while it
        waits for our report, the game to open while our failing report disputes it without one."""
        ready = job.anchor_block + 2 if job.state is JobState.COMMITTED else 0  # the draw needs blockhash(anchor + 1)
        listed = MarketJob(job_id, job.state, job.deadline, ready, job.solver, job.verifier, job.submitter)
        if job.verifier != self.me:
            return listed
        drawn = self.index.draws.get(job_id)
        if drawn is not None:
            ours.snapshotted.add(drawn.forced_commitment)
        if job.state not in _OURS_WHILE:
            return listed
        ours.jobs.add(job_id)
        record = records.get(job_id)
        if job.state is JobState.VERIFYING:
            if drawn is None or (drawn.deadline != job.deadline and not drawn.resumed):
                return listed  # drawn after the block the logs were read to: next tick
            draw = Draw(drawn.assign_seed, drawn.forced_commitment, self._forced(drawn, rate_bps))
            # a verdict for another draw (the one it was made for was rolled back or reorged out) is replayed again
            same = (
                record is not None
                and record.draw is not None
                and (record.draw.assign_seed, record.draw.forced_commitment) == (draw.assign_seed, draw.forced_commitment)
            )
            phase = record.phase if record is not None and same else Phase.ASSIGNED
            ours.assignments.append(Assignment(job_id, job.deadline, phase, draw, self.fetching(job_id), self._sealed(job_id, drawn)))
        elif job.state is JobState.DATA_VOTE and job.challenger == self.me:  # held for our court case, or for our demand
            demand = self.protocol.sealed_jobs.demand_of(job_id)
            if demand.party == self.me:
                ours.demands.append(OpenDemand(job_id, demand.deadline))
        elif job.state is JobState.DISPUTED and job.challenger == self.me and record is not None and record.failed_segment is not None:
            if not self.protocol.game.active_game(job_id):
                ours.openings.append(PendingOpen(job_id, record.failed_segment, self.protocol.game.open_deadline(job_id)))
        return listed

    def _sealed(self, job_id: JobId, drawn: Drawn) -> SealedDraw | None:
        """The key game of a job drawn to us, None if its data is not sealed. A data key in the records
        settles it without a read; else the keyring looks for a revealed key or a wrap to us that opens."""
        if self.db.data_key(job_id) is not None:
            return SealedDraw(True, drawn.drawn_at, drawn.window)
        sealed = self.protocol.sealed_jobs
        if sealed.sealing_of(job_id).status is SealingStatus.NONE:
            return None
        if self.key is None:
            if job_id not in self._keyless:
                self._keyless.add(job_id)
                log.warning("sealed job drawn to us and no --encryption-key: it cannot be replayed", extra={"job": job_id})
            return SealedDraw(False, drawn.drawn_at, drawn.window)
        if data_key(sealed, self.db, job_id, self.me, self.key, self.protocol.book.deploy_block) is not None:
            return SealedDraw(True, drawn.drawn_at, drawn.window)
        return SealedDraw(False, drawn.drawn_at, drawn.window, sealed.demands_by(job_id, self.me), sealed.demand_of(job_id).open)

    def _unwrapped(self, game_id: GameId, game: Game) -> tuple[Address, ...]:
        """The seated referees of a game we are a party to, on a sealed job whose key we hold (only a
        sealed job's key is in our records), that no wrap was published to for their current key."""
        if self.me not in (game.defender, game.challenger) or self.db.data_key(game.job_id) is None:
            return ()
        return referees_to_wrap(self.protocol, game_id, game)

    def _unreadable(self, game: Game) -> bool:
        """Whether the job of a game we are seated in is sealed, its key not public, and no wrap to us
        opens (a key found is kept, so a later tick reads the records only)."""
        if self.db.data_key(game.job_id) is not None:
            return False
        sealed = self.protocol.sealed_jobs
        if sealed.sealing_of(game.job_id).status is not SealingStatus.ACTIVE:
            return False  # not sealed, or its key revealed (the keyring finds it when the step is replayed)
        return self.key is None or data_key(sealed, self.db, game.job_id, self.me, self.key, self.protocol.book.deploy_block) is None

    def _games(self, rate_bps: int) -> tuple[LiveGame, ...]:
        """Every game not final, with our ballot where we sit, and whether a report game against us is a forced error."""
        games = []
        for game_id, game in self.games.live():
            seated = game.status is GameStatus.ARBITRATING
            ballot = self.protocol.game.ballot_of(game_id, self.me)[0] if seated else Ballot.VACANT
            drawn = self.index.draws.get(game.job_id) if game.on_report and game.defender == self.me else None
            forced = drawn is not None and self._forced(drawn, rate_bps)
            unwrapped = self._unwrapped(game_id, game) if seated else ()
            unreadable = ballot is Ballot.SEATED and self._unreadable(game)
            games.append(LiveGame(game_id, game, ballot, forced=forced, unwrapped=unwrapped, unreadable=unreadable))
        return tuple(games)

    def _seed(self, snapshotted: frozenset[Bytes32]) -> SeedView:
        """Our forced seed: the commitment on chain, those kept in the records, which draws snapshotted."""
        kept = tuple(Bytes32(c) for c in self.db.forced_commitments())
        return SeedView(
            on_chain=self.protocol.market.forced_seed_of(self.me).commitment,
            kept=kept,
            current_committed=bool(kept) and kept[-1] in self.index.committed,
            snapshotted=snapshotted,
        )

    def _forced(self, drawn: Drawn, rate_bps: int) -> bool:
        """Whether the draw forced an error on us: its snapshot is a commitment of ours whose secret says so."""
        secret = self.db.forced_secret(drawn.forced_commitment)
        return secret is not None and is_forced(secret, drawn.assign_seed, rate_bps)
