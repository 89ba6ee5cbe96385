"""The one agent shape every role client runs (after Optimism's op-challenger).

A role is three parts and a loop::

    view = loader.load()                       # chain + storage + local db -> frozen dataclasses
    for action in policy.next_actions(view):   # pure: no I/O, unit-tested without a chain
        responder.perform(action)              # signs, sends, uploads; idempotent

The loop (:class:`Agent`) adds what every daemon needs and no role should rewrite:

* a poll interval, and a stop flag set by SIGTERM/SIGINT that every wait and every
  long action (training, replay) checks, so a stop is graceful and prompt;
* backoff on transient errors (an RPC timeout, a refused connection, a storage node
  that is not up yet): the tick is abandoned and the next one reloads the view, so
  nothing is retried on stale facts;
* no blind retry of reverts: a revert means a precondition no longer holds
  (another solver claimed first, a deadline passed); it is logged with its decoded
  name and the action is dropped. The next tick's fresh view decides again;
* other errors of ours (a malformed spec, content missing from storage) are logged
  and the action dropped; a bug (any other exception) stops the daemon loudly.

Logs are structured: ``log.info("job claimed", extra={"job": 7})`` prints
``... job claimed job=7``, or one JSON object per line with ``--log-json``.
"""

from __future__ import annotations

import enum
import json
import logging
import os
import random
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Generic, TypeVar
from typing import Protocol as Structural

from core.address_book import AddressBook
from core.chain import Address, ChainClient, Receipt, Signer, is_transient
from core.config import Settings
from core.contracts import DisputeGame, Game, GameId, Job, JobId, JobMarket, Protocol, Role, TokenAmount
from core.errors import ConfigError, TransientRPCError, VeritrainError
from core.localdb import Heartbeat, LocalDb, read_heartbeat, write_heartbeat
from core.storage import ContentStore, IpfsStore, LocalStore
from core.storage.errors import StoreUnavailable

log = logging.getLogger(__name__)

#: The log message of an action the loop dropped (a decoded revert, a bad input): logged once, then at a backoff.
ACTION_DROPPED = "action dropped"

V = TypeVar("V")
A = TypeVar("A")
V_contra = TypeVar("V_contra", contravariant=True)
A_co = TypeVar("A_co", covariant=True)
A_contra = TypeVar("A_contra", contravariant=True)
V_co = TypeVar("V_co", covariant=True)


class Loader(Structural[V_co]):
    """Reads the world (chain, storage, local db) into one frozen view."""

    def load(self) -> V_co: ...


class Policy(Structural[V_contra, A_co]):
    """Decides what to do about a view. Pure: same view, same actions, no I/O."""

    def next_actions(self, view: V_contra) -> Sequence[A_co]: ...


class Responder(Structural[A_contra]):
    """Carries out one action. Idempotent: performing an action twice does no harm."""

    def perform(self, action: A_contra) -> None: ...


class Disposition(enum.Enum):
    """What the loop does about an exception raised while loading or performing."""

    TRANSIENT = "transient"  # back off, reload, decide again
    DROP = "drop"  # log, drop this action, go on with the next
    FATAL = "fatal"  # stop the daemon: a bug or a misconfiguration


def default_classify(exc: BaseException) -> Disposition:
    """Transient network trouble backs off; our own errors (reverts included) drop the action.

    :class:`core.errors.TransientRPCError` is what the chain client raises once its own
    short retries are spent; a store that cannot be reached (``StoreUnavailable``) and raw
    connection errors and timeouts count too. Every other :class:`VeritrainError` (a decoded revert, a bad
    spec, a CID mismatch) is a fact about this action, not about the network.
    """
    if isinstance(exc, (TransientRPCError, StoreUnavailable)) or is_transient(exc):
        return Disposition.TRANSIENT
    if isinstance(exc, VeritrainError):
        return Disposition.DROP
    return Disposition.FATAL


class StopFlag:
    """Set once to ask the daemon to stop; long actions poll it between units of work."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, seconds: float) -> bool:
        """Sleep up to ``seconds``; return True at once if a stop was asked."""
        return self._event.wait(max(0.0, seconds))


class Stopped(VeritrainError):
    """A long action noticed the stop flag and gave up cleanly (its progress is saved)."""


@dataclass(frozen=True)
class LoopSettings:
    """How often the loop polls and how it backs off; not protocol parameters."""

    poll_interval_s: float = 2.0
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 30.0


@dataclass(frozen=True)
class TickReport:
    """What one tick did; handed to the heartbeat observer (the role's ``status``)."""

    started_at: float
    actions: int
    performed: int
    dropped: int
    transient_error: str | None = None


@dataclass
class _Backoff:
    settings: LoopSettings
    current: float = 0.0
    rng: random.Random = field(default_factory=random.Random)

    def next_delay(self) -> float:
        base = self.settings.backoff_initial_s if self.current == 0 else self.current * 2
        self.current = min(base, self.settings.backoff_max_s)
        return self.current * (0.75 + 0.5 * self.rng.random())  # jitter: daemons do not march in step

    def reset(self) -> None:
        self.current = 0.0


class DropLog:
    """Logs a dropped action once, then its repeats at a backoff (not at every tick).

    An action that keeps failing the same way (content still missing, a precondition still
    unmet) is logged as a WARNING the first time; each repeat is counted and logged again
    (with the count) only once ``first_s`` has passed, then twice that, up to ``max_s``.
    The repeats in between go to DEBUG. Keyed by the action's type and fields and the error's type.
    """

    def __init__(self, first_s: float = 10.0, max_s: float = 600.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.first_s = first_s
        self.max_s = max_s
        self.clock = clock
        self._seen: dict[tuple[object, ...], tuple[int, float, float]] = {}  # key -> (repeats, next log at, interval)

    def report(self, action: str, fields: dict[str, object], exc: BaseException) -> None:
        key = (action, tuple(sorted(fields.items())), type(exc).__name__)
        now = self.clock()
        extra = {"action": action, **fields, "error": _describe(exc)}
        seen = self._seen.get(key)
        if seen is None:
            if len(self._seen) >= 10_000:
                self._seen.clear()  # bounded memory: forgetting only means one more WARNING
            self._seen[key] = (0, now + self.first_s, self.first_s)
            log.warning(ACTION_DROPPED, extra=extra)
            return
        repeats, next_at, interval = seen
        repeats += 1
        if now < next_at:
            self._seen[key] = (repeats, next_at, interval)
            log.debug("action dropped again", extra={**extra, "repeats": repeats})
            return
        interval = min(interval * 2, self.max_s)
        self._seen[key] = (repeats, now + interval, interval)
        log.warning("action still dropped", extra={**extra, "repeats": repeats, "next_log_s": interval})


class _TransientTick(Exception):
    """Internal: carries a transient error out of the action loop."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(str(cause))
        self.cause = cause


class Agent(Generic[V, A]):
    """Runs ``loader -> policy -> responder`` until stopped."""

    def __init__(
        self,
        role: str,
        loader: Loader[V],
        policy: Policy[V, A],
        responder: Responder[A],
        *,
        settings: LoopSettings = LoopSettings(),
        stop: StopFlag | None = None,
        classify: Callable[[BaseException], Disposition] = default_classify,
        heartbeat: Callable[[TickReport], None] | None = None,
    ) -> None:
        self.role = role
        self.loader = loader
        self.policy = policy
        self.responder = responder
        self.settings = settings
        self.stop = stop or StopFlag()
        self.classify = classify
        self.heartbeat = heartbeat
        self._backoff = _Backoff(settings)
        self._drops = DropLog()

    def tick(self) -> TickReport:
        """Load once, decide once, perform each action; transient errors end the tick early."""
        started = time.time()
        performed = dropped = 0
        actions: Sequence[A] = ()
        try:
            view = self._guard(self.loader.load)
            actions = self.policy.next_actions(view)
            for action in actions:
                if self.stop.is_set():
                    break
                if self._perform(action):
                    performed += 1
                else:
                    dropped += 1
        except _TransientTick as transient:
            return TickReport(started, len(actions), performed, dropped, _describe(transient.cause))
        return TickReport(started, len(actions), performed, dropped)

    def _guard(self, load: Callable[[], V]) -> V:
        try:
            return load()
        except Exception as exc:
            if self.classify(exc) is Disposition.FATAL:
                raise
            # a view that cannot be loaded cannot be decided on: back off either way
            raise _TransientTick(exc) from exc

    def _perform(self, action: A) -> bool:
        name = type(action).__name__
        fields = _action_fields(action)
        try:
            self.responder.perform(action)
        except Stopped:
            log.info("action interrupted by stop", extra={"action": name, **fields})
            return False
        except Exception as exc:
            disposition = self.classify(exc)
            if disposition is Disposition.TRANSIENT:
                raise _TransientTick(exc) from exc
            if disposition is Disposition.DROP:
                self._drops.report(name, fields, exc)
                return False
            raise
        return True

    def run(self, *, max_ticks: int | None = None) -> None:
        """Tick until stopped (signal, :attr:`stop`, or ``max_ticks``); sleeps between ticks."""
        ticks = 0
        log.info("agent started", extra={"role": self.role, "poll_s": self.settings.poll_interval_s})
        with self._signals():
            while not self.stop.is_set():
                report = self.tick()
                ticks += 1
                if self.heartbeat is not None:
                    self.heartbeat(report)
                if max_ticks is not None and ticks >= max_ticks:
                    break
                if report.transient_error is not None:
                    delay = self._backoff.next_delay()
                    log.warning(
                        "transient error, backing off",
                        extra={"error": report.transient_error, "delay_s": round(delay, 2)},
                    )
                else:
                    self._backoff.reset()
                    delay = self.settings.poll_interval_s
                self.stop.wait(delay)
        log.info("agent stopped", extra={"role": self.role, "ticks": ticks})

    @contextmanager
    def _signals(self) -> Iterator[None]:
        """SIGTERM and SIGINT set the stop flag (main thread only; elsewhere the caller stops us)."""
        if threading.current_thread() is not threading.main_thread():
            yield
            return

        def handler(signum: int, _frame: FrameType | None) -> None:
            log.info("stop requested", extra={"signal": signal.Signals(signum).name})
            self.stop.set()

        previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            yield
        finally:
            for sig, old in previous.items():
                signal.signal(sig, old)


def _describe(exc: BaseException) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _action_fields(action: object) -> dict[str, object]:
    """The scalar fields of a dataclass action, for the log line."""
    out: dict[str, object] = {}
    for key, value in getattr(action, "__dict__", {}).items():
        if isinstance(value, (int, str, float, bool)) and key not in _RESERVED:
            out[key] = value
    return out


# ---------------------------------------------------------------- structured logging

_RESERVED = frozenset(vars(logging.LogRecord("x", 0, "x", 0, "x", None, None)).keys() | {"message", "asctime", "taskName"})


class KeyValueFormatter(logging.Formatter):
    """``2026-01-01T00:00:00Z INFO solver.daemon job claimed job=7 gas=91234``."""

    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created))
        extras = " ".join(f"{k}={_kv(v)}" for k, v in _extras(record).items())
        line = f"{ts} {record.levelname} {record.name} {record.getMessage()}"
        if extras:
            line += " " + extras
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``{"ts":..., "level":..., "logger":..., "msg":..., **fields}``."""

    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, object] = {
            "ts": round(record.created, 3),
            "level": record.levelname,
            "logger": record.name,
            "msg": record.getMessage(),
        }
        payload.update({k: v if _is_json_scalar(v) else str(v) for k, v in _extras(record).items()})
        if record.exc_info:
            payload["exc"] = self.formatException(record.exc_info)
        return json.dumps(payload, sort_keys=False)


def _extras(record: logging.LogRecord) -> dict[str, object]:
    return {k: v for k, v in vars(record).items() if k not in _RESERVED}


def _is_json_scalar(value: object) -> bool:
    return value is None or isinstance(value, (bool, int, float, str))


def _kv(value: object) -> str:
    text = str(value)
    return json.dumps(text) if (" " in text or not text) else text


_USERINFO = re.compile(r"(?<=://)[^/\s@]+@")


class CredentialFilter(logging.Filter):
    """Scrubs ``user:secret@`` from every URL in a log line, ours or a library's (web3 logs its
    endpoint URL at DEBUG). A handler filter: it sees the records of every logger."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "@" in message:
            record.msg, record.args = _USERINFO.sub("***@", message), None
        return True


def configure_logging(*, level: str = "INFO", json_lines: bool = False) -> None:
    """Send our logs to stderr in the structured format; called once, at the CLI edge."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if json_lines else KeyValueFormatter())
    handler.addFilter(CredentialFilter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("web3", "urllib3", "asyncio"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def heartbeat_to(db: LocalDb, address: str) -> Callable[[TickReport], None]:
    """An observer that records each tick in the role's ``heartbeat`` table (for ``status``)."""
    started = time.time()
    ticks = 0

    def record(report: TickReport) -> None:
        nonlocal ticks
        ticks += 1
        write_heartbeat(db, Heartbeat(os.getpid(), address, started, time.time(), ticks, report.transient_error))

    return record


# ------------------------------------------------------------------ shared by the role daemons


@dataclass(frozen=True)
class RoleDaemon(Generic[V, A]):
    """A built daemon: its agent loop and the records it closes on the way out."""

    agent: Agent[V, A]
    db: RoleDb

    def run(self) -> None:
        try:
            self.agent.run()
        finally:
            self.db.close()


def connect(settings: Settings, signer: Signer) -> Protocol:
    """The deployed protocol at ``settings.rpc_url`` (address book by chain id), signing as ``signer``."""
    client = ChainClient(settings.rpc_url, timeout=settings.rpc_timeout, expected_chain_id=settings.chain_id)
    return Protocol.connect(client, AddressBook.for_chain(settings.address_book_dir, client), signer)


def state_dir(data_dir: Path, role: str, address: str) -> Path:
    """One directory per role and account: its records (and a solver's checkpoints)."""
    return data_dir / f"{role}-{address.lower()}"


class RoleDb:
    """A role's SQLite records (its ``migrations`` must create ``final_jobs`` and the heartbeat).

    The state directory is the owner's only (0700) and the database file 0600, created so before
    SQLite opens it (its WAL and shared-memory files take the database file's mode): a role's
    records hold secrets (salts, forced-error secrets, the auditor's secret) and its work.
    """

    def __init__(self, path: Path, migrations: Sequence[str]) -> None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(path.parent, 0o700)
        os.close(os.open(path, os.O_CREAT | os.O_RDWR | os.O_NOFOLLOW, 0o600))
        for made in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
            if made.exists():  # left by an older version, or loosened by hand
                os.chmod(made, 0o600)
        self.db = LocalDb(path, migrations)

    def close(self) -> None:
        self.db.close()

    def final_jobs(self) -> set[int]:
        return {r[0] for r in self.db.query("SELECT job_id FROM final_jobs")}

    def mark_final(self, job_ids: Sequence[int]) -> None:
        with self.db.transaction() as conn:
            conn.executemany("INSERT OR IGNORE INTO final_jobs (job_id) VALUES (?)", [(j,) for j in job_ids])

    def once_secret(self, table: str, column: str) -> bytes:
        """A secret of 32 random bytes made on first use in the one-row ``table`` (``id = 1``), the same
        after every restart. ``table`` and ``column`` are the role's own schema names, never input."""
        self.db.execute(f"INSERT OR IGNORE INTO {table} (id, {column}) VALUES (1, ?)", (os.urandom(32),))
        row = self.db.query_one(f"SELECT {column} FROM {table} WHERE id = 1")
        assert row is not None
        return bytes(row[column])


def stake_needed(target: int, min_stake: int, staked: int, balance: int) -> TokenAmount | None:
    """How much more to stake to hold ``max(target, min_stake)``; None if nothing useful can be staked."""
    missing = max(target, min_stake) - staked
    if missing <= 0:
        return None
    amount = min(missing, balance)
    if amount <= 0 or staked + amount < min_stake:
        return None  # cannot reach the minimum: nothing useful to stake
    return TokenAmount(amount)


def stake(protocol: Protocol, me: Address, role: Role, amount: int) -> None:
    """Approve (if needed) and stake ``amount`` in ``role``, logging each mined call."""
    if protocol.token.allowance(me, protocol.stakes.address) < amount:
        log_mined(log, "approve", protocol.token.approve(protocol.stakes.address, amount))
    log_mined(log, "stake", protocol.stakes.stake(role, amount), amount=amount)


def mined(what: str) -> str:
    """The log message of a mined call ``what`` (a contract function's name)."""
    return f"{what} mined"


def log_mined(logger: logging.Logger, what: str, receipt: Receipt, **fields: object) -> None:
    """``<what> mined gas=... tx=...`` with the action's fields, on the role's own logger."""
    logger.info(mined(what), extra={**fields, "gas": receipt.gas_used, "tx": receipt.tx_hash})


def status_base(protocol: Protocol, me: Address, role: Role, db: LocalDb | None, show_tokens: Callable[[int], str]) -> dict[str, object]:
    """The part of a role's ``status`` report every role shares: balance, stake, the daemon's heartbeat
    (``show_tokens`` formats an amount, at the CLI edge)."""
    info = protocol.stakes.stake_of(me, role)
    beat = read_heartbeat(db) if db is not None else None
    return {
        "address": me,
        "balance": show_tokens(protocol.token.balance_of(me)),
        "stake": {"staked": show_tokens(info.staked), "locked": show_tokens(info.locked), "unbonding": show_tokens(info.unbonding)},
        "daemon": None if beat is None else beat.summary(time.time()),
    }


def status_lines(role: str, report: dict[str, object]) -> list[str]:
    """The header lines of a role's ``status`` (rich markup), from :func:`status_base`'s report."""
    stake_info = report["stake"]
    assert isinstance(stake_info, dict)
    lines = [f"{role} [bold]{report['address']}[/]  balance {report['balance']} VERI  staked {stake_info['staked']} (locked {stake_info['locked']})"]
    beat = report["daemon"]
    if isinstance(beat, dict):
        state = "[green]running[/]" if beat["running"] else "[red]not running[/]"
        lines.append(
            f"daemon pid {beat['pid']} {state}, last tick {beat['last_tick_s_ago']} s ago, {beat['ticks']} ticks, last error: {beat['last_error'] or '-'}"
        )
    else:
        lines.append("daemon: no records (never ran with this data dir)")
    return lines


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
                self._next_block = latest + 1
        try:
            return self._spec_cids[job_id]
        except KeyError:
            raise VeritrainError(f"no JobPosted event for job {job_id}") from None


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


def open_store(*, store_dir: Path | None, ipfs_api: str | None, data_dir: Path) -> ContentStore:
    """The content store a role uses: an IPFS node's RPC API if given, else a local directory store.

    Processes that must see each other's content without IPFS (the demo's daemons) share one
    ``store_dir``; the default is ``<data_dir>/store``.
    """
    if ipfs_api is not None and store_dir is not None:
        raise ConfigError("give either --store-dir or --ipfs-api, not both")
    if ipfs_api is not None:
        return IpfsStore(ipfs_api)
    return LocalStore(store_dir if store_dir is not None else data_dir / "store")
