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
"""

from __future__ import annotations

#: Seconds (or blocks) per turn.
TURN_S = 6
#: The end of each turn nobody sends in: the time a call takes from the view that decided it to the pool.
TURN_MARGIN_S = 2


def in_turn(elapsed: int, *, solver: bool) -> bool:
    """Whether a party may send a call that came due ``elapsed`` seconds (or blocks) ago: the job's
    solver in the even turns, any other party in the odd ones, neither in a turn's last
    :data:`TURN_MARGIN_S`."""
    if elapsed < 0:
        return False
    turn, into = divmod(elapsed, TURN_S)
    return turn % 2 == (0 if solver else 1) and into < TURN_S - TURN_MARGIN_S
