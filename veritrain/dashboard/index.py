"""What the dashboard knows about the chain: every protocol event since the deployment, indexed by
job, game and account, and advanced block by block.

:meth:`ChainIndex.advance` reads only the blocks past the last one it scanned, with one
``eth_getLogs`` over the three contracts per 2,000 blocks, and re-reads the stored job (``getJob``)
of the jobs those blocks touched, the stakes of the accounts, and the jackpot. Pages are served from
the index, so a page costs no chain scan, with 1,000 jobs on chain or 10.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from eth_utils import to_checksum_address

from core.chain import Address
from core.contracts import Event, GameId, Job, JobId, MultipartyJob, Protocol, Role, StakeInfo
from submitter.multiparty_report import InnerJob, MultipartyFacts

#: Blocks per ``eth_getLogs`` (anvil's and most providers' limits allow it).
SCAN_CHUNK = 2_000

_STAKE_EVENTS = frozenset({"Staked", "StakeSlashed", "UnstakeRequested", "Withdrawn"})


@dataclass
class GameRow:
    """One dispute game: its job, the events about it, the referees once drawn."""

    game_id: GameId
    job_id: JobId
    events: list[Event] = field(default_factory=list)
    referees: tuple[Address, ...] = ()


@dataclass
class Snapshot:
    """A consistent copy of what the network page shows (taken under the index's lock)."""

    head: int
    jobs: dict[JobId, Job]
    posted_at: dict[JobId, int]
    stakes: dict[tuple[Address, Role], StakeInfo]
    jackpot: int
    slashes: list[Event]
    multiparty: dict[int, MultipartyJob]


class ChainIndex:
    """Protocol events since the deployment, by job, game and account; thread-safe, advanced in place."""

    def __init__(self, protocol: Protocol) -> None:
        self.protocol = protocol
        self.head = protocol.book.deploy_block - 1
        self.jobs: dict[JobId, Job] = {}
        self.job_events: dict[JobId, list[Event]] = defaultdict(list)
        self.games: dict[GameId, GameRow] = {}
        self.games_of_job: dict[JobId, list[GameId]] = defaultdict(list)
        self.stakes: dict[tuple[Address, Role], StakeInfo] = {}
        self.slashes: list[Event] = []
        self.jackpot = 0
        self.multiparty: dict[int, MultipartyJob] = {}
        self.multiparty_events: dict[int, list[Event]] = defaultdict(list)
        self._timestamps: dict[int, int] = {}
        self._lock = threading.Lock()
        self._contracts = (protocol.market, protocol.game, protocol.stakes, protocol.diloco)

    def advance(self) -> bool:
        """Scan the blocks mined since the last call; True when there were any."""
        client = self.protocol.client
        latest = client.block_number()
        if latest <= self.head:
            return False
        start = self.head + 1
        while start <= latest:
            end = min(latest, start + SCAN_CHUNK - 1)
            self._scan(start, end)
            start = end + 1
        return True

    def _scan(self, start: int, end: int) -> None:
        addresses = [to_checksum_address(c.address) for c in self._contracts]
        logs = self.protocol.client.with_retry(
            "eth_getLogs", lambda: self.protocol.client.w3.eth.get_logs({"address": addresses, "fromBlock": start, "toBlock": end})
        )
        diloco = self.protocol.diloco
        decoded = [(c is diloco, e) for log in logs for c in self._contracts if (e := c.decode_log(log)) is not None]
        events = [e for multi, e in decoded if not multi]
        multiparty_events = [e for multi, e in decoded if multi and "jobId" in e.args]  # not SurplusSwept: no job's
        touched_jobs: set[JobId] = set()
        touched_stakes: set[tuple[Address, Role]] = set()
        new_games: list[GameRow] = []
        game_events: list[Event] = []
        for event in sorted(events, key=lambda e: (e.block_number, e.log_index)):
            args = event.args
            if event.name in _STAKE_EVENTS and "role" in args:
                touched_stakes.add((Address(args["account"]), Role(int(args["role"]))))
                if event.name == "StakeSlashed":
                    self.slashes.append(event)
            elif "gameId" in args:
                if event.name == "DisputeOpened":
                    new_games.append(GameRow(GameId(int(args["gameId"])), JobId(int(args["jobId"]))))
                game_events.append(event)
            elif "jobId" in args:
                touched_jobs.add(JobId(int(args["jobId"])))
        market = self.protocol.market
        refreshed = {job_id: market.get_job(job_id) for job_id in touched_jobs}
        stake_keys = set(self.stakes) | touched_stakes
        stakes = {key: self.protocol.stakes.stake_of(key[0], key[1]) for key in stake_keys}  # locks move without a StakeManager event
        jackpot = market.jackpot()
        multiparty = {j: diloco.get_job(j) for j in {int(e.args["jobId"]) for e in multiparty_events}}
        with self._lock:
            for event in multiparty_events:
                self.multiparty_events[int(event.args["jobId"])].append(event)
            self.multiparty.update(multiparty)
            for event in events:
                if "jobId" in event.args and "gameId" not in event.args:
                    self.job_events[JobId(int(event.args["jobId"]))].append(event)
            for row in new_games:
                self.games[row.game_id] = row
                self.games_of_job[row.job_id].append(row.game_id)
            for event in game_events:
                game = self.games.get(GameId(int(event.args["gameId"])))
                if game is None:
                    continue
                game.events.append(event)
                if event.name == "RefereesDrawn":
                    game.referees = tuple(Address(a) for a in event.args["referees"])
            self.jobs.update(refreshed)
            self.stakes = stakes
            self.jackpot = jackpot
            self.head = end

    # ------------------------------------------------------------------ reads

    def snapshot(self) -> Snapshot:
        with self._lock:
            posted = {j: int(events[0].block_number) for j, events in self.job_events.items() if events}
            return Snapshot(self.head, dict(self.jobs), posted, dict(self.stakes), self.jackpot, list(self.slashes), dict(self.multiparty))

    def job(self, job_id: JobId) -> tuple[Job, list[Event], list[GameRow]] | None:
        with self._lock:
            job = self.jobs.get(job_id)
            if job is None:
                return None
            games = [self.games[g] for g in self.games_of_job.get(job_id, [])]
            return job, list(self.job_events[job_id]), [GameRow(g.game_id, g.job_id, list(g.events), g.referees) for g in games]

    def multiparty_facts(self, job_id: int) -> MultipartyFacts | None:
        """What :func:`submitter.multiparty_report.multiparty_report` reads of a multi-party job, from the
        index: its DilocoJobs events, its inner jobs (stored job, market events, games' events) and its
        parties' solver-stake slashes; None for a job not on chain (yet)."""
        with self._lock:
            job = self.multiparty.get(job_id)
            if job is None:
                return None
            events = tuple(self.multiparty_events[job_id])
            inner: dict[int, InnerJob] = {}
            for i in (JobId(int(e.args["innerJobId"])) for e in events if e.name == "InnerJobBegun"):
                games = tuple(tuple(self.games[g].events) for g in self.games_of_job.get(i, ()))
                inner[i] = InnerJob(self.jobs.get(i), tuple(self.job_events.get(i, ())), games)
            parties = {e.args["party"] for e in events if e.name == "SlotJoined"}
            slashes = tuple(e for e in self.slashes if e.args["account"] in parties and int(e.args["role"]) == Role.SOLVER)
            return MultipartyFacts(job_id, job, events, inner, slashes)

    def jobs_of(self, account: Address) -> dict[str, list[JobId]]:
        """The jobs ``account`` posted, solved (its current solver) and verified."""
        with self._lock:
            return {
                "submitted": [j for j, job in self.jobs.items() if job.submitter == account],
                "solved": [j for j, job in self.jobs.items() if job.solver == account],
                "verified": [j for j, job in self.jobs.items() if job.verifier == account],
            }

    def games_of(self, account: Address) -> list[dict[str, Any]]:
        """The games ``account`` played: as defender, challenger or referee."""
        found = []
        with self._lock:
            for row in self.games.values():
                opened = row.events[0].args if row.events and row.events[0].name == "DisputeOpened" else {}
                roles = [
                    name
                    for name, holds in (
                        ("defender", opened.get("solver") == account),
                        ("challenger", opened.get("challenger") == account),
                        ("referee", account in row.referees),
                    )
                    if holds
                ]
                if roles:
                    found.append({"game": int(row.game_id), "job": int(row.job_id), "as": roles})
        return found

    def timestamp(self, block: int) -> int:
        """A block's timestamp, fetched once."""
        if block not in self._timestamps:
            self._timestamps[block] = self.protocol.client.timestamp(block)
        return self._timestamps[block]
