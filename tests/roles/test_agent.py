"""The agent loop: transient errors back off and reload, reverts drop the action, bugs stop it."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest

from core.agent import (
    DEADLINE_AT_RISK,
    WORKER_ABANDONED,
    Agent,
    Disposition,
    JsonFormatter,
    KeyValueFormatter,
    LoopSettings,
    StopFlag,
    Stopped,
    TickReport,
    Work,
    default_classify,
)
from core.errors import TransientRPCError, VeritrainError
from core.reverts import ContractRevert


@dataclass(frozen=True)
class Do:
    name: str


@dataclass
class World:
    """A loader, policy and responder in one, scripted per test."""

    loads: int = 0
    done: list[str] = field(default_factory=list)
    load_errors: list[BaseException] = field(default_factory=list)
    perform_errors: dict[str, list[BaseException]] = field(default_factory=dict)
    actions: tuple[str, ...] = ("a", "b", "c")

    def load(self) -> int:
        self.loads += 1
        if self.load_errors:
            raise self.load_errors.pop(0)
        return self.loads

    def next_actions(self, view: int) -> list[Do]:
        return [Do(n) for n in self.actions]

    def perform(self, action: Do) -> None:
        errors = self.perform_errors.get(action.name)
        if errors:
            raise errors.pop(0)
        self.done.append(action.name)


FAST = LoopSettings(poll_interval_s=0.0, backoff_initial_s=0.001, backoff_max_s=0.002)


def make(world: World) -> Agent[int, Do]:
    return Agent("test", world, world, world, settings=FAST)


class ClaimTaken(ContractRevert):
    error_name = "JobNotOpen"


def test_tick_performs_every_action_in_order() -> None:
    world = World()
    report = make(world).tick()
    assert world.done == ["a", "b", "c"]
    assert (report.actions, report.performed, report.dropped, report.transient_error) == (3, 3, 0, None)


def test_revert_drops_only_that_action_and_is_not_retried() -> None:
    world = World(perform_errors={"b": [ClaimTaken(7, fields=("jobId",))]})
    agent = make(world)
    report = agent.tick()
    assert world.done == ["a", "c"]
    assert report.dropped == 1 and report.transient_error is None
    # the next tick decides again from a fresh view; the revert was not replayed within the tick
    agent.tick()
    assert world.done == ["a", "c", "a", "b", "c"]
    assert world.loads == 2


def test_transient_error_ends_the_tick_and_the_next_tick_reloads() -> None:
    world = World(perform_errors={"b": [TransientRPCError("eth_call timed out")]})
    agent = make(world)
    report = agent.tick()
    assert world.done == ["a"]
    assert report.transient_error is not None and "TransientRPCError" in report.transient_error
    agent.tick()
    assert world.loads == 2 and world.done == ["a", "a", "b", "c"]


def test_load_failure_is_a_transient_tick() -> None:
    world = World(load_errors=[ConnectionError("refused")])
    report = make(world).tick()
    assert report.transient_error is not None and world.done == []


def test_bug_propagates() -> None:
    world = World(perform_errors={"a": [KeyError("bug")]})
    with pytest.raises(KeyError):
        make(world).tick()


def test_stopped_action_is_not_an_error() -> None:
    world = World(perform_errors={"a": [Stopped("training interrupted at step 40")]})
    report = make(world).tick()
    assert report.dropped == 1 and world.done == ["b", "c"]


def test_classification() -> None:
    assert default_classify(TransientRPCError("x")) is Disposition.TRANSIENT
    assert default_classify(ConnectionError()) is Disposition.TRANSIENT
    assert default_classify(ClaimTaken(1, fields=("jobId",))) is Disposition.DROP
    assert default_classify(VeritrainError("bad spec")) is Disposition.DROP
    assert default_classify(ValueError("bug")) is Disposition.FATAL


def test_run_backs_off_then_recovers_and_honours_max_ticks() -> None:
    world = World(load_errors=[TransientRPCError("a"), TransientRPCError("b")])
    reports: list[TickReport] = []
    agent = Agent("test", world, world, world, settings=FAST, heartbeat=reports.append)
    agent.run(max_ticks=3)
    assert [r.transient_error is None for r in reports] == [False, False, True]
    assert world.done == ["a", "b", "c"]


def test_sigterm_stops_the_loop_gracefully() -> None:
    world = World(actions=())
    stop = StopFlag()
    agent = Agent("test", world, world, world, settings=LoopSettings(poll_interval_s=30.0), stop=stop)
    timer = threading.Timer(0.2, lambda: os.kill(os.getpid(), signal.SIGTERM))
    timer.start()
    agent.run()  # would sleep 30 s per tick if the signal did not wake it
    timer.join()
    assert stop.is_set() and world.loads >= 1
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handler restored


def test_stop_flag_interrupts_between_actions() -> None:
    stop = StopFlag()

    class Stopping(World):
        def perform(self, action: Do) -> None:
            super().perform(action)
            stop.set()

    world = Stopping()
    Agent("test", world, world, world, settings=FAST, stop=stop).tick()
    assert world.done == ["a"]


def _record(**extra: object) -> logging.LogRecord:
    record = logging.LogRecord("solver.daemon", logging.INFO, __file__, 1, "job claimed", None, None)
    record.__dict__.update(extra)
    return record


def test_key_value_log_line_carries_the_fields() -> None:
    line = KeyValueFormatter().format(_record(job=7, error="JobNotOpen(jobId=7)", note="two words"))
    assert line.endswith('INFO solver.daemon job claimed job=7 error=JobNotOpen(jobId=7) note="two words"')


def test_json_log_line_is_one_object() -> None:
    import json

    payload = json.loads(JsonFormatter().format(_record(job=7, cid=b"\x01")))
    assert payload["msg"] == "job claimed" and payload["job"] == 7 and payload["cid"] == "b'\\x01'"


# ---------------------------------------------------------------- workers: long work never holds the loop


@dataclass(frozen=True)
class Long:
    name: str
    due_in_s: float | None = None
    needs_s: float = 0.0
    group: str | None = None


@dataclass
class Busy:
    """Short actions done in the loop; long ones block until released (each has its own gate)."""

    actions: list[object] = field(default_factory=list)
    done: list[str] = field(default_factory=list)
    gates: dict[str, threading.Event] = field(default_factory=dict)
    started: list[str] = field(default_factory=list)
    fail: dict[str, BaseException] = field(default_factory=dict)
    loads: int = 0

    def load(self) -> int:
        self.loads += 1
        return 0

    def next_actions(self, view: int) -> list[object]:
        return list(self.actions)

    def perform(self, action: object) -> None:
        if isinstance(action, Long):
            self.started.append(action.name)
            if action.name in self.fail:
                raise self.fail[action.name]
            self.gates.setdefault(action.name, threading.Event()).wait(60)
        self.done.append(action.name)  # type: ignore[attr-defined]


def busy_agent(busy: Busy, lanes: dict[str, int] | None = None) -> Agent[int, object]:
    def work(view: int, action: object) -> Work | None:
        if isinstance(action, Long):
            return Work("cpu", group=action.group, due_in_s=action.due_in_s, needs_s=action.needs_s)
        return None

    return Agent("test", busy, busy, busy, settings=FAST, work=work, lanes=lanes or {"cpu": 1})


def _until(check: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 60  # a liveness wait, not a timing claim: a loaded 2-core CI box can starve a thread for seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_a_long_action_runs_on_a_worker_while_the_loop_performs_the_rest() -> None:
    busy = Busy([Long("train"), Do("answer")])
    agent = busy_agent(busy)
    for _ in range(3):  # the training is still running: each tick answers, none starts it twice
        report = agent.tick()
        assert report.performed == 1
    assert busy.done == ["answer"] * 3 and busy.started == ["train"]
    busy.gates["train"].set()
    _until(lambda: "train" in busy.done)
    agent.tick()
    _until(lambda: busy.started.count("train") == 2)  # the policy still asks: a new worker (the test's policy never learns)
    busy.gates["train"].set()


def test_workers_start_nearest_deadline_first_within_the_lane_and_warn_of_a_deadline_at_risk(caplog: pytest.LogCaptureFixture) -> None:
    busy = Busy([Long("far", due_in_s=300), Long("near", due_in_s=20, needs_s=5), Long("late", due_in_s=12, needs_s=30)])
    agent = busy_agent(busy)
    with caplog.at_level(logging.WARNING, logger="core.agent"):
        agent.tick()
    _until(lambda: bool(busy.started))
    assert busy.started == ["late"]  # nearest deadline first; one worker in the lane
    at_risk = [r for r in caplog.records if r.getMessage() == DEADLINE_AT_RISK]
    assert [r.__dict__["work"] for r in at_risk] == ["Long:near:20:5"]  # 20 s left, needs 5 + margin: at risk; "far" is not
    busy.gates["late"].set()
    _until(lambda: "late" in busy.done)
    busy.actions = [Long("far", due_in_s=300), Long("near", due_in_s=20, needs_s=5)]
    agent.tick()
    _until(lambda: len(busy.started) == 2)
    assert busy.started[1] == "near"
    for gate in ("near", "far"):
        busy.gates.setdefault(gate, threading.Event()).set()


def test_a_newer_action_of_the_same_group_supersedes_a_stuck_worker(caplog: pytest.LogCaptureFixture) -> None:
    busy = Busy([Long("replay-1", group="job 7")])
    agent = busy_agent(busy)
    agent.tick()
    _until(lambda: busy.started == ["replay-1"])
    busy.actions = [Long("replay-2", group="job 7")]  # the deadline moved (an availability challenge): a new replay
    with caplog.at_level(logging.WARNING, logger="core.agent"):
        agent.tick()
    _until(lambda: busy.started == ["replay-1", "replay-2"])  # the stuck one holds no slot
    assert any(r.getMessage() == WORKER_ABANDONED for r in caplog.records)
    busy.gates["replay-1"].set()
    busy.gates["replay-2"].set()


def test_a_bug_in_a_worker_stops_the_daemon_at_the_next_tick() -> None:
    busy = Busy([Long("train")], fail={"train": ZeroDivisionError("bug")})
    agent = busy_agent(busy)
    agent.tick()
    _until(lambda: busy.started == ["train"])
    time.sleep(0.05)
    with pytest.raises(ZeroDivisionError):
        agent.tick()


def test_a_revert_in_a_worker_drops_the_action_and_the_loop_goes_on() -> None:
    busy = Busy([Long("train"), Do("answer")], fail={"train": ClaimTaken("gone")})
    agent = busy_agent(busy)
    agent.tick()
    _until(lambda: busy.started == ["train"])
    time.sleep(0.05)
    agent.tick()
    assert busy.done == ["answer", "answer"]


# ---------------------------------------------------------------- the pulse: one load per block while nothing happens


def reads_then_stop(stop: StopFlag, count: int, value: Callable[[int], object], each: Callable[[int], None] = lambda n: None) -> Callable[[], object]:
    """A pulse that gives ``value(n)`` at its n-th read (from 1) after running ``each(n)``, and stops the loop at the ``count``-th."""
    reads = 0

    def pulse() -> object:
        nonlocal reads
        reads += 1
        if reads == count:
            stop.set()
        each(reads)
        return value(reads)

    return pulse


def test_polls_on_the_same_block_load_nothing_and_a_new_block_loads_once() -> None:
    world, stop = World(actions=()), StopFlag()
    Agent("test", world, world, world, settings=FAST, stop=stop, pulse=reads_then_stop(stop, 30, lambda n: (1 if n <= 15 else 2, "0xab"))).run()
    assert world.loads == 2
    busy, stop = World(actions=("a",)), StopFlag()  # a tick that did something is followed by another, same block or not
    Agent("test", busy, busy, busy, settings=FAST, stop=stop, pulse=reads_then_stop(stop, 30, lambda n: (1, "0xab"))).run()
    assert busy.loads == 30


def test_a_quiet_loop_still_loads_every_quiet_max_s_and_whenever_its_pulse_cannot_be_read() -> None:
    world, stop, now = World(actions=()), StopFlag(), [0.0]

    def advance(n: int) -> None:
        now[0] = float(n)  # one second per poll

    quiet_5s = LoopSettings(poll_interval_s=0.0, quiet_max_s=5.0)
    agent = Agent("test", world, world, world, settings=quiet_5s, stop=stop, pulse=reads_then_stop(stop, 30, lambda n: 1, advance))
    agent.workers.clock = lambda: now[0]
    agent.run()
    assert world.loads == 6  # polls 1, 6, 11, 16, 21, 26

    def down(n: int) -> None:
        raise TransientRPCError("node down")

    world, stop = World(actions=()), StopFlag()
    Agent("test", world, world, world, settings=FAST, stop=stop, pulse=reads_then_stop(stop, 40, lambda n: 1, down)).run()
    assert world.loads == 40  # no pulse: every poll ticks (and meets the error itself)


def test_a_finished_worker_brings_a_tick_on_the_same_block() -> None:
    busy, stop = Busy([Long("train")]), StopFlag()

    def finish_training_at_the_fifth_poll(n: int) -> None:
        if n == 5:
            busy.actions = []  # what the next view will say: trained
            busy.gates["train"].set()
            _until(lambda: "train" in busy.done)

    agent = Agent(
        "test", busy, busy, busy, settings=FAST, stop=stop, work=lambda view, action: Work("cpu"), lanes={"cpu": 1},
        pulse=reads_then_stop(stop, 10, lambda n: 1, finish_training_at_the_fifth_poll),
    )  # fmt: skip
    agent.run()
    # poll 1 starts the worker; poll 2 sees it running and does nothing; 3 and 4 skip; the worker
    # finishes at poll 5, which ticks on the same block; 6 to 10 skip
    assert busy.loads == 3 and busy.started == ["train"]
