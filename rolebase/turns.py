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
From :data:`FREE_AFTER_TURNS` turns on, anyone sends a call counted in seconds (the finalize) at any
time: on a chain whose blocks come :data:`TURN_S` seconds apart or more, a party may see its turns
only between blocks (12 s blocks land in every other turn, the same side's each time), and a call
that pays must never wait on a turn that no block reaches. A call counted in blocks (the draw) is
never free: every block is in someone's turn, and late parties would meet in a free-for-all.

The parties that are not the solver share the odd turns in slots, each in the slot of its rank among
its rivals in the job's order (:class:`Turn`). A policy decides :class:`AssignVerifier` or
:class:`Finalize` in its turn on the view's block, the turn carried on the action;
:class:`TurnTaker` sends it only if the chain's head is still in that turn (a tick that sent other
calls first may reach it seconds later), and otherwise leaves it to the next tick.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol as Structural

from core.agent import log_mined
from core.chain import Address, BlockNumber, Receipt
from core.contracts import JobId
from rolebase.actions import Journaled

#: Seconds (or blocks) per turn.
TURN_S = 6
#: The end of each turn nobody sends in: the time a call takes from the view that decided it to the pool.
TURN_MARGIN_S = 2
#: Turns after which anyone sends at any time (liveness on a chain of slow blocks).
FREE_AFTER_TURNS = 8
#: The turns not the solver's are shared by everyone else (several verifiers may each want a draw):
#: they come in slots of this many (odd turn ``t`` is slot ``t // 2 % OTHER_SLOTS``), and a party sends
#: only in the slot of its rank among its rivals in the job's order (:func:`rank`, :class:`Turn`).
OTHER_SLOTS = 3


def in_turn(elapsed: int, *, solver: bool, blocks: bool = False) -> bool:
    """Whether a side may send a call that came due ``elapsed`` seconds (or, ``blocks``, blocks) ago: the
    job's solver in the even turns, everyone else in the odd ones, neither in a turn's last
    :data:`TURN_MARGIN_S`; anyone from turn :data:`FREE_AFTER_TURNS` on, for a call counted in seconds.
    A call counted in blocks is never free: every party sees every block, so each one's turns come
    back (the draw: a party late past its turn waits for the next one, not for a free-for-all where
    late parties meet)."""
    if elapsed < 0:
        return False
    turn, into = divmod(elapsed, TURN_S)
    if turn >= FREE_AFTER_TURNS and not blocks:
        return True
    return turn % 2 == (0 if solver else 1) and into < TURN_S - TURN_MARGIN_S


def party_order(party: Address, job_id: JobId) -> bytes:
    """``party``'s place in ``job_id``'s order (a hash of the two): every party computes the same order
    for a job, and it differs from job to job, so no party is always first."""
    return hashlib.sha256(f"{party.lower()}:{job_id}".encode()).digest()


def rank(me: Address, rivals: Iterable[Address], job_id: JobId) -> int:
    """How many of ``rivals`` (parties that may make the same call) come before ``me`` in ``job_id``'s
    :func:`party_order`: rivals that each know the others' ranks differ."""
    mine = party_order(me, job_id)
    return sum(party_order(rival, job_id) < mine for rival in set(rivals) if rival != me)


@dataclass(frozen=True)
class Turn:
    """When a party may send a call it wants: the job's solver in its side's turns
    (:func:`in_turn`); any other party only from ``wait`` on, and before the free turns only in the odd
    turns of its slot (``spread``, its :func:`rank`, modulo :data:`OTHER_SLOTS`) that begin at or after
    ``wait``, from :data:`TURN_MARGIN_S` into them for ranks 3 to 5. The first three ranks never share
    a turn, so a party that missed its own (busy, slow) does not meet the next rank in the next one;
    ranks 3 to 5 share the first three's turns two seconds behind them, so the later one's estimate
    sees the earlier call in the pool. Slots count from the call's due time, not from each party's
    wait, so parties that wait differently (the job's own verifier, others after a grace) keep them
    apart."""

    solver: bool
    wait: int = 0
    spread: int = 0

    def allows(self, elapsed: int, *, blocks: bool = False) -> bool:
        """Whether this party may send at ``elapsed`` seconds (``blocks``: blocks) after the call came due."""
        if self.solver:
            return in_turn(elapsed, solver=True, blocks=blocks)
        if elapsed < self.wait or not in_turn(elapsed, solver=False, blocks=blocks):
            return False
        turn, into = divmod(elapsed, TURN_S)
        if turn >= FREE_AFTER_TURNS and not blocks:
            return True
        own = turn // 2 % OTHER_SLOTS == self.spread % OTHER_SLOTS and into >= self.spread // OTHER_SLOTS % 2 * TURN_MARGIN_S
        return own and turn * TURN_S >= self.wait  # whole turns only: a partner two seconds behind stays behind

    def first(self, *, blocks: bool = False) -> int:
        """The first moment this turn allows (the solver's: 0)."""
        start = max(0, self.wait)
        return next(e for e in range(start, start + (FREE_AFTER_TURNS + 2 * OTHER_SLOTS + 1) * TURN_S) if self.allows(e, blocks=blocks))


#: The job's solver's turns.
SOLVER_TURN = Turn(solver=True)


@dataclass(frozen=True)
class AssignVerifier(Journaled):
    """Draw the job's verifier (``assignVerifier``), due at block ``ready_block``, in the sender's ``turn``."""

    job_id: JobId
    ready_block: int
    turn: Turn


@dataclass(frozen=True)
class Finalize(Journaled):
    """Finalize the job (``finalize``), due once the block time is past ``deadline``, in the sender's ``turn``."""

    job_id: JobId
    deadline: int
    turn: Turn


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
    """Sends :class:`AssignVerifier` and :class:`Finalize`, each only while the chain's head is in the
    turn the action carries (its sender's)."""

    def __init__(self, calls: TurnCalls, *, logger: logging.Logger) -> None:
        self.calls = calls
        self.log = logger

    def perform(self, action: AssignVerifier | Finalize) -> None:
        calls = self.calls
        head = calls.client.head()
        match action:
            case AssignVerifier(job_id, ready_block, turn):
                elapsed = head - ready_block
                if self._ours(turn.allows(elapsed, blocks=True), elapsed, job_id, "assignVerifier"):
                    log_mined(self.log, "assignVerifier", calls.market.assign_verifier(job_id), job=job_id)
            case Finalize(job_id, deadline, turn):
                elapsed = calls.client.timestamp(head) - deadline - 1  # the contract wants now > deadline
                if self._ours(turn.allows(elapsed), elapsed, job_id, "finalize"):
                    log_mined(self.log, "finalize", calls.market.finalize(job_id), job=job_id)

    def _ours(self, allowed: bool, elapsed: int, job_id: JobId, what: str) -> bool:
        if allowed:
            return True
        self.log.debug("not our turn any more: left to the next tick", extra={"job": job_id, "call": what, "elapsed": elapsed})
        return False
