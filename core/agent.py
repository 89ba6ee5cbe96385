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
  and the action dropped; a bug (any other exception) stops the daemon loudly;
* long work never holds the loop: an action the role's ``work`` function names as work
  (training, a replay, an audit, a regeneration, a fetch, a dispute move's recomputation) runs on
  a worker thread (:class:`Workers`) while the loop goes on reading the chain and sending every
  transaction that is due. Workers run in lanes of bounded size (what the daemon can defend:
  docs/roles.md, "Deadlines and workers"), are started nearest deadline first, and a work that
  waits for a lane with less time left than it needs is logged as at risk before its deadline.

Logs are structured: ``log.info("job claimed", extra={"job": 7})`` prints
``... job claimed job=7``, or one JSON object per line with ``--log-json``.
"""

from __future__ import annotations

import enum
import json
import logging
import random
import re
import signal
import sys
import threading
import time
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Any, Generic, TypeVar
from typing import Protocol as Structural

from core.chain import Receipt, is_transient
from core.errors import TransientRPCError, VeritrainError
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


class Bell:
    """Rung by what changes a daemon's view off the chain, on a thread of its own (a spec's verdict in the
    records): its count is part of the loop's pulse, so the next poll ticks although no block came."""

    def __init__(self) -> None:
        self._rings = 0
        self._lock = threading.Lock()

    def ring(self) -> None:
        with self._lock:
            self._rings += 1

    @property
    def rings(self) -> int:
        with self._lock:
            return self._rings


class Stopped(VeritrainError):
    """A long action noticed the stop flag and gave up cleanly (its progress is saved)."""


@dataclass(frozen=True)
class LoopSettings:
    """How often the loop polls and how it backs off, and how deep the blocks it reads are; not protocol parameters."""

    poll_interval_s: float = 2.0
    backoff_initial_s: float = 1.0
    backoff_max_s: float = 30.0
    confirmations: int = 0  # views are read at head minus this many blocks (rolebase.sent.Confirmed)
    quiet_max_s: float = 10.0  # the longest the loop skips ticks while nothing changed (Agent's ``pulse``)


@dataclass(frozen=True)
class TickReport:
    """What one tick did; handed to the heartbeat observer (the role's ``status``)."""

    started_at: float
    actions: int
    performed: int
    dropped: int
    transient_error: str | None = None
    started: int = 0  # long actions started on workers

    def did_nothing(self) -> bool:
        """Nothing performed, dropped or started, and no transient error: the next tick on the same
        chain and workers would decide the same."""
        return self.performed == self.dropped == self.started == 0 and self.transient_error is None


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


@dataclass(frozen=True)
class Work:
    """How the loop runs one long action: on a worker of ``lane`` (a lane holds a bounded number of
    workers); ``group``: what it is about (a job's replay: a new action of the same group with other
    fields, such as a moved deadline, supersedes a running one, which is abandoned and holds no slot).
    ``due_in_s``: chain seconds left before the action's deadline (None: it has none); ``needs_s``: what
    it is estimated to take (0: unknown). Work is started nearest deadline first."""

    lane: str
    group: str | None = None  # None: the action's own key (nothing supersedes it)
    due_in_s: float | None = None
    needs_s: float = 0.0


#: The log message of a work that waits for a busy lane with less time left than it needs.
DEADLINE_AT_RISK = "deadline at risk: work waits for a busy lane"
#: The log message of a worker left behind: a newer action of its group superseded it.
WORKER_ABANDONED = "worker abandoned: a newer action of its group superseded it"


@dataclass
class _Worker:
    key: str
    work: Work
    thread: threading.Thread
    started: float
    abandoned: bool = False
    error: BaseException | None = None
    finished: float | None = None  # when its action returned (on the workers' clock), set by its thread


class Workers(Generic[A]):
    """The loop's workers: each long action on a thread of its own, ``lanes[lane]`` at most at once
    per lane (a lane not named holds one), one worker per action key, nearest deadline first.

    Threads, not processes: training and replay spend their time in torch and numba kernels, and the
    loop's own work (JSON-RPC, SQLite, a policy) needs the GIL only between them (docs/roles.md,
    "Deadlines and workers"). A worker that raises a fatal error hands it to the loop, which stops.
    """

    def __init__(self, lanes: Mapping[str, int], run: Callable[[A], object], key: Callable[[A], str], clock: Callable[[], float] = time.monotonic) -> None:
        self.lanes = dict(lanes)
        self.run = run
        self.key = key
        self.clock = clock
        self._workers: dict[str, _Worker] = {}
        self._finished: dict[str, float] = {}  # key -> when its worker finished (its action may still be in a view read before)
        self._at_risk: set[str] = set()
        self._lock = threading.Lock()

    def busy(self, lane: str) -> int:
        """Workers running in ``lane`` (abandoned ones do not count: they hold no slot)."""
        with self._lock:
            return sum(1 for w in self._workers.values() if w.work.lane == lane and not w.abandoned)

    def running(self) -> list[str]:
        with self._lock:
            return [k for k, w in self._workers.items() if not w.abandoned]

    def finished_since(self, at: float) -> bool:
        """Whether a worker finished at or after ``at`` (on :attr:`clock`), reaped or not."""
        with self._lock:
            running = [w.finished for w in self._workers.values()]
            reaped = list(self._finished.values())
        return any(t is not None and t >= at for t in [*running, *reaped])

    def reap(self) -> None:
        """Forget finished workers; re-raise the first fatal error a live one met."""
        with self._lock:
            done = [w for w in self._workers.values() if not w.thread.is_alive()]
            for w in done:
                del self._workers[w.key]
                self._finished[w.key] = w.finished if w.finished is not None else self.clock()
        for w in done:
            if w.error is not None and not w.abandoned:
                raise w.error

    def offer(self, offered: Sequence[tuple[A, Work]], viewed_at: float) -> int:
        """Start what there is room for, nearest deadline first; returns how many started. A running
        action is not started twice, nor one whose worker finished after the view it comes from was
        read (``viewed_at``, on :attr:`clock`: that view did not see its outcome); one of the same group
        with another key abandons the older."""
        self.reap()
        self._finished = {k: t for k, t in self._finished.items() if t >= viewed_at}
        started = 0
        keys = {self.key(a): (a, w) for a, w in offered}
        for key, (action, work) in sorted(keys.items(), key=lambda kv: (kv[1][1].due_in_s is None, kv[1][1].due_in_s or 0.0)):
            if key in self._workers or key in self._finished:
                continue
            if work.group is not None:
                self._supersede(key, work.group)
            if self.busy(work.lane) >= self.lanes.get(work.lane, 1):
                self._warn_if_at_risk(key, work)
                continue
            self._start(key, action, work)
            started += 1
        return started

    def _supersede(self, key: str, group: str) -> None:
        with self._lock:
            for w in self._workers.values():
                if w.work.group == group and w.key != key and not w.abandoned:
                    w.abandoned = True
                    log.warning(WORKER_ABANDONED, extra={"work": w.key, "by": key, "running_s": round(self.clock() - w.started, 1)})

    def _warn_if_at_risk(self, key: str, work: Work) -> None:
        """Log once, before its deadline, a work that waits with less time left than it needs after the
        lane's running workers are done (by their own estimates): the operator hears it before a loss."""
        if work.due_in_s is None or key in self._at_risk:
            return
        now = self.clock()
        with self._lock:
            ahead = [w for w in self._workers.values() if w.work.lane == work.lane and not w.abandoned]
        wait_s = sum(max(0.0, w.work.needs_s - (now - w.started)) for w in ahead) / max(1, self.lanes.get(work.lane, 1))
        if work.due_in_s >= work.needs_s * 1.25 + wait_s:
            return
        if len(self._at_risk) > 10_000:
            self._at_risk.clear()
        self._at_risk.add(key)
        log.warning(
            DEADLINE_AT_RISK,
            extra={
                "work": key,
                "lane": work.lane,
                "due_in_s": round(work.due_in_s, 1),
                "needs_s": round(work.needs_s, 1),
                "wait_s": round(wait_s, 1),
                "behind": ",".join(w.key for w in ahead),
            },
        )

    def _start(self, key: str, action: A, work: Work) -> None:
        worker = _Worker(key, work, threading.Thread(name=f"work {key}", daemon=True), self.clock())

        def body() -> None:
            try:
                self.run(action)
            except BaseException as exc:  # handed to the loop (reap), which stops the daemon
                worker.error = exc
            finally:
                worker.finished = self.clock()  # a view read after this saw its outcome

        worker.thread = threading.Thread(target=body, name=f"work {key}", daemon=True)
        with self._lock:
            self._workers[key] = worker
        log.debug("work started", extra={"work": key, "lane": work.lane, "due_in_s": work.due_in_s})
        worker.thread.start()

    def join(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for the workers (they check the stop flag) once the loop stops."""
        end = self.clock() + timeout_s
        with self._lock:
            threads = [w.thread for w in self._workers.values()]
        for thread in threads:
            thread.join(max(0.0, end - self.clock()))


@dataclass(frozen=True)
class _Quiet:
    """The pulse a tick that did nothing was read at, and when (on the workers' clock)."""

    pulse: Hashable
    at: float

    def holds(self, pulse: Hashable | None, now: float, workers: Workers[Any], max_s: float) -> bool:
        """Whether a tick now would see what that one saw: same pulse, no worker finished since, not too long ago."""
        return pulse is not None and pulse == self.pulse and now - self.at < max_s and not workers.finished_since(self.at)


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
        work: Callable[[V, A], Work | None] | None = None,
        lanes: Mapping[str, int] | None = None,
        pulse: Callable[[], Hashable] | None = None,
    ) -> None:
        """``work(view, action)``: how a long action runs on a worker (None: in the loop, as every action
        does without ``work``); ``lanes``: how many workers each lane holds at once (:class:`Workers`).

        ``pulse()``: a cheap reading that changes whenever what the loader reads may have (the chain's
        latest block: its number and hash). While it stays the same, no worker finished and the last
        tick did nothing, the loop skips the tick (its view would be the same, and so its decision),
        for at most ``settings.quiet_max_s``: a daemon that polls faster than blocks come loads once
        per block. None: every poll ticks."""
        self.role = role
        self.work = work
        self.workers: Workers[A] = Workers(lanes or {}, self._work, work_key)
        self.loader = loader
        self.policy = policy
        self.responder = responder
        self.settings = settings
        self.stop = stop or StopFlag()
        self.classify = classify
        self.heartbeat = heartbeat
        self.pulse = pulse
        self._backoff = _Backoff(settings)
        self._drops = DropLog()

    def tick(self) -> TickReport:
        """Load once, decide once, perform each action; transient errors end the tick early."""
        started = time.time()
        performed = dropped = started_work = 0
        actions: Sequence[A] = ()
        try:
            viewed_at = self.workers.clock()
            view = self._guard(self.loader.load)
            actions = self.policy.next_actions(view)
            inline: Sequence[A] = actions
            if self.work is not None:
                works = [(action, self.work(view, action)) for action in actions]
                started_work = self.workers.offer([(action, w) for action, w in works if w is not None], viewed_at)
                inline = [action for action, w in works if w is None]
            for action in inline:
                if self.stop.is_set():
                    break
                if self._perform(action):
                    performed += 1
                else:
                    dropped += 1
        except _TransientTick as transient:
            return TickReport(started, len(actions), performed, dropped, _describe(transient.cause), started_work)
        return TickReport(started, len(actions), performed, dropped, started=started_work)

    def _guard(self, load: Callable[[], V]) -> V:
        try:
            return load()
        except Exception as exc:
            if self.classify(exc) is Disposition.FATAL:
                raise
            # a view that cannot be loaded cannot be decided on: back off either way
            raise _TransientTick(exc) from exc

    def _work(self, action: A) -> None:
        """A worker's body: the action performed as the loop would, a transient error ending it (the next
        tick decides again)."""
        try:
            self._perform(action)
        except _TransientTick as transient:
            log.warning("work ended by a transient error", extra={"work": work_key(action), "error": _describe(transient.cause)})

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
        quiet: _Quiet | None = None  # what the last tick saw, while it did nothing
        log.info("agent started", extra={"role": self.role, "poll_s": self.settings.poll_interval_s})
        with self._signals():
            while not self.stop.is_set():
                pulse, now = self._read_pulse(), self.workers.clock()
                if quiet is not None and quiet.holds(pulse, now, self.workers, self.settings.quiet_max_s):
                    self.stop.wait(self.settings.poll_interval_s)
                    continue
                report = self.tick()
                quiet = _Quiet(pulse, now) if pulse is not None and report.did_nothing() else None
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
        self.workers.join(10.0)
        log.info("agent stopped", extra={"role": self.role, "ticks": ticks})

    def _read_pulse(self) -> Hashable | None:
        """The pulse now; None (tick) without one or when it cannot be read (the tick meets the error)."""
        if self.pulse is None:
            return None
        try:
            return self.pulse()
        except Exception:
            return None

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


def work_key(action: object) -> str:
    """``Type:field:field`` of an action's scalar fields (``Train:7:1712345678``): one worker per key."""
    values = (v.value if isinstance(v, enum.Enum) else v for v in getattr(action, "__dict__", {}).values())
    return ":".join([type(action).__name__, *(str(v) for v in values if isinstance(v, (int, str, float, bool)))])


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


def mined(what: str) -> str:
    """The log message of a mined call ``what`` (a contract function's name)."""
    return f"{what} mined"


def log_mined(logger: logging.Logger, what: str, receipt: Receipt, **fields: object) -> None:
    """``<what> mined gas=... tx=...`` with the action's fields, on the role's own logger."""
    logger.info(mined(what), extra={**fields, "gas": receipt.gas_used, "tx": receipt.tx_hash})
