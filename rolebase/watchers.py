"""What the role loaders read the chain through: the market's live jobs and the live dispute games,
each read once it is final no more."""

from __future__ import annotations

from dataclasses import dataclass

from core.contracts import DisputeGame, Game, GameId, Job, JobId, JobMarket
from core.errors import VeritrainError
from rolebase.records import RoleDb


@dataclass(frozen=True)
class MarketScan:
    """Every job that is not final, read at one block; and the ids that became final since the last scan."""

    jobs: tuple[tuple[JobId, Job], ...]
    newly_final: tuple[JobId, ...]


@dataclass(frozen=True)
class Moment:
    """The latest block and its timestamp: every view is read "as of" one."""

    block: int
    now: int


class MarketWatcher:
    """Reads the market for the role loaders: live jobs each tick, spec CIDs from ``JobPosted`` events.

    Final is forever, so jobs known final are never read again; ``JobPosted`` logs are read
    once, incrementally, from the deployment block on (the spec CID is only in that event).
    """

    def __init__(self, market: JobMarket, deploy_block: int, max_jobs: int = 10_000) -> None:
        self.market = market
        self.max_jobs = max_jobs
        self._next_block = deploy_block
        self._spec_cids: dict[int, bytes] = {}
        self._full_replay: set[int] = set()  # jobs posted for full replay (JobPosted's fullReplay)

    def scan(self, known_final: set[int]) -> MarketScan:
        """Read each job not yet known final (the newest ``max_jobs`` ids at most)."""
        count = self.market.job_count()
        live: list[tuple[JobId, Job]] = []
        final: list[JobId] = []
        for raw_id in range(max(1, count - self.max_jobs + 1), count + 1):
            if raw_id in known_final:
                continue
            job_id = JobId(raw_id)
            job = self.market.get_job(job_id)
            if job.state.final:
                final.append(job_id)
            else:
                live.append((job_id, job))
        return MarketScan(tuple(live), tuple(final))

    def read(self, records: RoleDb) -> tuple[Moment, MarketScan]:
        """The latest block and the live jobs, remembering in ``records`` the ones that became final."""
        block = self.market.client.block_number()
        moment = Moment(block, self.market.client.timestamp(block))
        scan = self.scan(records.final_jobs())
        if scan.newly_final:
            records.mark_final(scan.newly_final)
        return moment, scan

    def spec_cid(self, job_id: JobId) -> bytes:
        """The spec CID digest a job was posted with."""
        if job_id not in self._spec_cids:
            latest = self.market.client.block_number()
            if latest >= self._next_block:
                for event in self.market.events("JobPosted", self._next_block, latest):
                    self._spec_cids[int(event.args["jobId"])] = bytes(event.args["specCid"])
                    if event.args["fullReplay"]:
                        self._full_replay.add(int(event.args["jobId"]))
                self._next_block = latest + 1
        try:
            return self._spec_cids[job_id]
        except KeyError:
            raise VeritrainError(f"no JobPosted event for job {job_id}") from None

    def posted_full_replay(self, job_id: JobId) -> bool:
        """Whether the job was posted for full replay (every draw of it a full replay), from the same
        ``JobPosted`` event as its spec CID."""
        self.spec_cid(job_id)
        return job_id in self._full_replay


class GameWatcher:
    """Reads the dispute games that are not final; settled games are never read again (in memory:
    after a restart one read each tells again which are final)."""

    def __init__(self, game: DisputeGame, max_games: int = 10_000) -> None:
        self.game = game
        self.max_games = max_games
        self._final: set[int] = set()

    def live(self) -> list[tuple[GameId, Game]]:
        count = self.game.game_count()
        out: list[tuple[GameId, Game]] = []
        for raw_id in range(max(1, count - self.max_games + 1), count + 1):
            if raw_id in self._final:
                continue
            game = self.game.get_game(GameId(raw_id))
            if game.status.final:
                self._final.add(raw_id)
            else:
                out.append((GameId(raw_id), game))
        return out
