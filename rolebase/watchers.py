"""What the roles read the chain through: the market's live jobs, what each was posted with,
committed to and reported on, and the live dispute games, each read once it is final no more."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TypeVar

from core.chain import Address
from core.contracts import (
    Bytes32,
    DisputeGame,
    Event,
    Game,
    GameId,
    Job,
    JobId,
    JobMarket,
    ReportSeal,
    Role,
    StakeInfo,
    StakeManager,
    TokenAmount,
    TraceCommitment,
    reports_draw,
)
from core.errors import VeritrainError
from core.probe import Probe
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
    posted with, committed to and reported on, from the ``JobPosted``, ``TraceCommitted``,
    ``VerifierAssigned`` and ``ReportSubmitted`` logs.

    Final is forever, so jobs known final are never read again. The four logs are read once,
    incrementally, from the deployment block on, into one index that every reader of a role shares
    (the loader on its tick, the workers on their threads: a lock guards it). Before each read the
    hash of the last block read is asked again: a chain that went back or reorganized (a reverted
    snapshot, a restart from a dump, a reorg) is read again from the deployment block. A commitment
    is looked up by the root the caller read from the job; a report is the one of the job's latest draw.
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
        self._draws: dict[int, Event] = {}  # job -> its latest VerifierAssigned
        self._reports: dict[int, Event] = {}  # job -> the ReportSubmitted of its latest draw, once there is one

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
            self._draws.clear()
            self._reports.clear()
        if latest < self._next_block:
            return
        for event in self.market.events("JobPosted", self._next_block, latest):
            self._spec_cids[int(event.args["jobId"])] = bytes(event.args["specCid"])
            if event.args["fullReplay"]:
                self._full_replay.add(int(event.args["jobId"]))
        for event in self.market.events("TraceCommitted", self._next_block, latest):
            commitment = TraceCommitment.of(event)
            self._commitments[(int(event.args["jobId"]), bytes(commitment.trace_root))] = commitment
        draws_and_reports = [
            *self.market.events("VerifierAssigned", self._next_block, latest),
            *self.market.events("ReportSubmitted", self._next_block, latest),
        ]
        for event in sorted(draws_and_reports, key=lambda e: (e.block_number, e.log_index)):
            job = int(event.args["jobId"])
            if event.name == "VerifierAssigned":
                self._draws[job] = event
                self._reports.pop(job, None)
            elif job in self._draws and job not in self._reports and reports_draw(self._draws[job], event):
                self._reports[job] = event
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

    def draw(self, job_id: JobId) -> Event | None:
        """The job's latest ``VerifierAssigned``, read up to the latest block; None before its first draw."""
        with self._lock:
            self._index()
            return self._draws.get(int(job_id))

    def report(self, job_id: JobId) -> Event | None:
        """The ``ReportSubmitted`` of the job's latest verifier draw, read up to the latest block; None
        while that verifier has not reported."""
        with self._lock:
            self._index()
            return self._reports.get(int(job_id))

    def sealed_report(self, job_id: JobId) -> tuple[ReportSeal, list[Probe]] | None:
        """The seal and the probes of the job's current report (``JobMarket.sealed_report``, from the
        index): None while the latest draw's verifier has not reported. Raises ``ChainError`` if they do
        not hash to the seal the chain stores."""
        with self._lock:
            self._index()
            draw, report = self._draws.get(int(job_id)), self._reports.get(int(job_id))
        return None if draw is None or report is None else self.market.sealed(job_id, draw, report)

    def seal(self, job_id: JobId) -> ReportSeal | None:
        """The seal of the job's current report (:meth:`sealed_report`)."""
        sealed = self.sealed_report(job_id)
        return None if sealed is None else sealed[0]


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


#: The most rivals a role weighs for a turn: the latest to stake or advertise (older ones that still
#: hold their stake wait their turn without being counted, and go at worst at the same moment as one).
MAX_RIVALS = 16


class LatestLogs:
    """Each account's latest ``event`` log (``account`` names its argument; ``filters`` the indexed
    arguments), the latest accounts last: read incrementally, up to the block each read asks for, and
    again from ``from_block`` once the chain went back (a head below what was read). A reorg at the same
    height may leave an account that logged on the abandoned branch: :func:`staked_rivals` checks each
    one's stake."""

    def __init__(self, contract: StakeManager, event: str, account: str, from_block: int, **filters: int) -> None:
        self.contract = contract
        self.event = event
        self.account = account
        self.filters = filters
        self.from_block = from_block
        self._next_block = from_block
        self._latest: dict[Address, Event] = {}

    def read(self, block: int) -> dict[Address, Event]:
        if block < self._next_block - 1:  # the chain went back (a snapshot reverted, a restart from a dump)
            self._next_block = self.from_block
            self._latest.clear()
        if block >= self._next_block:
            for e in self.contract.events(self.event, self._next_block, block, **self.filters):
                who = Address(e.args[self.account])
                self._latest.pop(who, None)  # re-inserted last
                self._latest[who] = e
            self._next_block = block + 1
        return dict(self._latest)


def staked_rivals(logs: LatestLogs, me: Address, role: Role, min_stake: TokenAmount, block: int) -> list[tuple[Address, Event, StakeInfo]]:
    """The latest :data:`MAX_RIVALS` accounts other than ``me`` in ``logs`` that hold ``min_stake`` in
    ``role`` now, each with its latest log and its stake (one read each)."""
    rivals = []
    for who, event in [(a, e) for a, e in logs.read(block).items() if a != me][-MAX_RIVALS:]:
        stake = logs.contract.stake_of(who, role)
        if stake.staked >= min_stake:
            rivals.append((who, event, stake))
    return rivals
