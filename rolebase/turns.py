"""Turns for a call that the job's solver and its verifier both want to send (``assignVerifier``,
``finalize``): each is paid by it, so each sends it when due, and two parties that see the same block
at once would send it in the same second, one of them into a revert (issue 25: competing daemons send
no transaction that will revert; a gas estimate against the pending block sees only what is already
in the node's pool).

The time since the call came due is cut into turns of :data:`TURN_S` seconds (blocks, for a call due
at a block): the solver sends only in the even turns, everyone else only in the odd ones, and nobody
in the last :data:`TURN_MARGIN_S` of a turn, so a call sent in one turn is in the pool before the next
turn begins and the other side's estimate sees it. A party that misses its turn (busy, slow) gets the
next one of its own; the other side goes meanwhile, so the call is never held up more than a turn.
From :data:`FREE_AFTER_TURNS` turns on, anyone sends at any time: on a chain whose blocks come
:data:`TURN_S` seconds apart or more, a party may see its turns only between blocks (12 s blocks land
in every other turn, the same side's each time), and a call that pays must never wait on a turn that
no block reaches.

A policy decides :class:`AssignVerifier` or :class:`Finalize` in its turn on the view's block;
:class:`TurnTaker` sends it only if the chain's head is still in that turn (a tick that sent other
calls first may reach it seconds later), and otherwise leaves it to the next tick.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol as Structural

from core.agent import log_mined
from core.chain import BlockNumber, Receipt
from core.contracts import JobId
from rolebase.actions import Journaled

#: Seconds (or blocks) per turn.
TURN_S = 6
#: The end of each turn nobody sends in: the time a call takes from the view that decided it to the pool.
TURN_MARGIN_S = 2
#: Turns after which anyone sends at any time (liveness on a chain of slow blocks).
FREE_AFTER_TURNS = 8
#: The turns not the solver's are shared by everyone else (several verifiers may each want a draw):
#: each starts in one of this many of them, at one of two seconds apart, by a hash of itself and the
#: job (:func:`first_moment`).
OTHER_SLOTS = 3


def in_turn(elapsed: int, *, solver: bool) -> bool:
    """Whether a party may send a call that came due ``elapsed`` seconds (or blocks) ago: the job's
    solver in the even turns, any other party in the odd ones, neither in a turn's last
    :data:`TURN_MARGIN_S`; anyone from turn :data:`FREE_AFTER_TURNS` on."""
    if elapsed < 0:
        return False
    turn, into = divmod(elapsed, TURN_S)
    if turn >= FREE_AFTER_TURNS:
        return True
    return turn % 2 == (0 if solver else 1) and into < TURN_S - TURN_MARGIN_S


def first_moment(wait: int, spread: int) -> int:
    """When a party that is not the solver first sends a call it waits ``wait`` for: the start of its
    first turn at or after ``wait``, then 0, 2 or 4 turns later and :data:`TURN_MARGIN_S` into it or
    not, by ``spread`` (a hash of the party and the job). Parties that come due together start at
    one of six moments, each :data:`TURN_MARGIN_S` or more from the others, so the later one's
    estimate sees the earlier call in the pool."""
    turn = -(-max(0, wait) // TURN_S)
    turn += 1 - turn % 2  # the solver's turns are the even ones
    return (turn + spread % OTHER_SLOTS * 2) * TURN_S + (spread // OTHER_SLOTS) % 2 * TURN_MARGIN_S


@dataclass(frozen=True)
class AssignVerifier(Journaled):
    """Draw the job's verifier (``assignVerifier``), due at block ``ready_block``."""

    job_id: JobId
    ready_block: int


@dataclass(frozen=True)
class Finalize(Journaled):
    """Finalize the job (``finalize``), due once the block time is past ``deadline``."""

    job_id: JobId
    deadline: int


class _Market(Structural):
    def assign_verifier(self, job_id: JobId) -> Receipt: ...

    def finalize(self, job_id: JobId) -> Receipt: ...


class _Head(Structural):
    def head(self) -> BlockNumber: ...

    def timestamp(self, block: int) -> int: ...


class TurnCalls(Structural):
    """What :class:`TurnTaker` reads and sends: the chain's head and time, and the two calls."""

    @property
    def market(self) -> _Market: ...

    @property
    def client(self) -> _Head: ...


class TurnTaker:
    """Sends :class:`AssignVerifier` and :class:`Finalize` for the job's solver (``solver``) or anyone
    else, each only while the chain's head is in that party's turn."""

    def __init__(self, calls: TurnCalls, *, solver: bool, logger: logging.Logger) -> None:
        self.calls = calls
        self.solver = solver
        self.log = logger

    def perform(self, action: AssignVerifier | Finalize) -> None:
        calls = self.calls
        head = calls.client.head()
        match action:
            case AssignVerifier(job_id, ready_block):
                if self._ours(head - ready_block, job_id, "assignVerifier"):
                    log_mined(self.log, "assignVerifier", calls.market.assign_verifier(job_id), job=job_id)
            case Finalize(job_id, deadline):
                if self._ours(calls.client.timestamp(head) - deadline - 1, job_id, "finalize"):  # the contract wants now > deadline
                    log_mined(self.log, "finalize", calls.market.finalize(job_id), job=job_id)

    def _ours(self, elapsed: int, job_id: JobId, what: str) -> bool:
        if in_turn(elapsed, solver=self.solver):
            return True
        self.log.debug("not our turn any more: left to the next tick", extra={"job": job_id, "call": what, "elapsed": elapsed})
        return False
