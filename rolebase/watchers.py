"""What the roles read the chain through: the market's live jobs, what each was posted with and
committed to, and the live dispute games, each read once it is final no more."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TypeVar

from core.contracts import Bytes32, DisputeGame, Game, GameId, Job, JobId, JobMarket, TraceCommitment
from core.errors import VeritrainError
from proofs.merkle import hex32
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


_K = TypeVar("_K")
_V = TypeVar("_V")


class NotInLogs(VeritrainError):
    """A job's posting or commitment is not in the logs read up to the latest block (a node behind the
    one the job was read from)."""


class MarketWatcher:
    """Reads the market for the role loaders and their workers: live jobs each tick, and what a job was
    posted with and committed to, from the ``JobPosted`` and ``TraceCommitted`` logs.

    Final is forever, so jobs known final are never read again. The two logs are read once,
    incrementally, from the deployment block on, into one index that every reader of a role shares
    (the loader on its tick, the workers on their threads: a lock guards it). Before each read the
    hash of the last block read is asked again: a chain that went back or reorganized (a reverted
    snapshot, a restart from a dump, a reorg) is read again from the deployment block. A commitment
    is looked up by the root the caller read from the job.
    """

    def __init__(self, market: JobMarket, deploy_block: int, max_jobs: int = 10_000) -> None:
        self.market = market
        self.max_jobs = max_jobs
        self.deploy_block = deploy_block
        self._lock = threading.Lock()
        self._next_block = deploy_block
        self._last_hash: str | None = None  # of block _next_block - 1, as the logs were read
        self._spec_cids: dict[int, bytes] = {}
        self._full_replay: set[int] = set()  # jobs posted for full replay (JobPosted's fullReplay)
        self._commitments: dict[tuple[int, bytes], TraceCommitment] = {}  # (job, trace root): its latest commit under that root

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

    def _index(self) -> None:
        """Read the logs of the blocks since the last call (all of them again if the chain went back). Holds the lock."""
        client = self.market.client
        latest = client.block_number()
        if self._last_hash is not None and (latest < self._next_block - 1 or client.block_hash(self._next_block - 1) != self._last_hash):
            self._next_block, self._last_hash = self.deploy_block, None  # the chain went back or reorganized: read it all again
            self._spec_cids.clear()
            self._full_replay.clear()
            self._commitments.clear()
        if latest < self._next_block:
            return
        for event in self.market.events("JobPosted", self._next_block, latest):
            self._spec_cids[int(event.args["jobId"])] = bytes(event.args["specCid"])
            if event.args["fullReplay"]:
                self._full_replay.add(int(event.args["jobId"]))
        for event in self.market.events("TraceCommitted", self._next_block, latest):
            commitment = TraceCommitment.of(event)
            self._commitments[(int(event.args["jobId"]), bytes(commitment.trace_root))] = commitment
        self._next_block, self._last_hash = latest + 1, client.block_hash(latest)

    def _indexed(self, table: dict[_K, _V], key: _K, missing: str) -> _V:
        """``table[key]``, the logs since the last read read first if it is not there; else :class:`NotInLogs`."""
        with self._lock:
            if key not in table:
                self._index()
            try:
                return table[key]
            except KeyError:
                raise NotInLogs(missing) from None

    def spec_cid(self, job_id: JobId) -> bytes:
        """The spec CID digest a job was posted with."""
        return self._indexed(self._spec_cids, int(job_id), f"no JobPosted event for job {job_id}")

    def posted_full_replay(self, job_id: JobId) -> bool:
        """Whether the job was posted for full replay (every draw of it a full replay), from the same
        ``JobPosted`` event as its spec CID."""
        self.spec_cid(job_id)
        return job_id in self._full_replay

    def commitment(self, job_id: JobId, trace_root: Bytes32) -> TraceCommitment:
        """What the job's solver committed under ``trace_root`` (the root the caller read from the job)."""
        missing = f"job {job_id}: no TraceCommitted event under root {hex32(trace_root)}"
        return self._indexed(self._commitments, (int(job_id), bytes(trace_root)), missing)


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
