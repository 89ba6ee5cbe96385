"""The actions the roles share, and how they are carried out: staking, forgetting a final job's
records, and the game moves every party makes alike.

A role's policy returns these among its own actions; its responder hands them to :class:`Upkeep`
and :class:`GameMoves`. A game move re-reads its game and is skipped if the chain no longer waits for it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Protocol as Structural

from core.agent import log_mined
from core.chain import Address
from core.contracts import Game, GameId, GameStatus, JobId, Protocol, Role, TokenAmount
from core.dispute import Action, midpoint

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Stake:
    """Approve and stake ``amount`` more in the role."""

    amount: TokenAmount


@dataclass(frozen=True)
class Forget:
    """Drop the local records (and files) of a job that is final, or was taken from us."""

    job_id: JobId


@dataclass(frozen=True)
class GameMove:
    """One call in a dispute game: ``answerMidpoint`` (as its challenger), ``postMidpoint`` (as the
    defender of a report game), ``commitVote`` / ``revealVote`` (as a seated referee), or a
    permissionless ``timeoutClock``, ``drawCommittee``, ``settle``."""

    game_id: GameId
    action: Action


class _Records(Structural):
    def forget(self, job_id: JobId) -> None: ...

    def forget_sent(self, job_id: int) -> None: ...


class _Challenger(Structural):
    """Our answer at a game's midpoint (:meth:`rolebase.dispute.DisputeReplayer.answer`)."""

    def answer(self, game_id: GameId, game: Game) -> bool: ...


class Upkeep:
    """Carries out :class:`Stake` and :class:`Forget` for one role, logging on the role's logger."""

    def __init__(self, protocol: Protocol, role: Role, me: Address, records: _Records, logger: logging.Logger) -> None:
        self.protocol = protocol
        self.role = role
        self.me = me
        self.records = records
        self.log = logger

    def perform(self, action: Stake | Forget) -> None:
        match action:
            case Stake(amount):
                stake(self.protocol, self.me, self.role, amount)
            case Forget(job_id):
                self.records.forget(job_id)
                self.records.forget_sent(job_id)
                self.log.info("job forgotten", extra={"job": job_id})


class GameMoves:
    """Carries out the game moves every party makes alike: ``answerMidpoint`` as the challenger (the
    replayer's answer) and the permissionless ``timeoutClock``, ``drawCommittee`` and ``settle``."""

    def __init__(self, protocol: Protocol, replayer: _Challenger, logger: logging.Logger) -> None:
        self.protocol = protocol
        self.replayer = replayer
        self.log = logger

    def perform(self, move: GameMove) -> None:
        p = self.protocol
        match move:
            case GameMove(game_id, Action.ANSWER_MIDPOINT):
                game = p.game.get_game(game_id)
                if game.status is GameStatus.CHALLENGER_TO_MOVE:
                    agree = self.replayer.answer(game_id, game)
                    log_mined(self.log, "answerMidpoint", p.game.answer_midpoint(game_id, agree), game=game_id, step=midpoint(game.lo, game.hi), agree=agree)
            case GameMove(game_id, what):
                call = {Action.TIMEOUT_CLOCK: p.game.timeout_clock, Action.DRAW_COMMITTEE: p.game.draw_committee, Action.SETTLE: p.game.settle}[what]
                log_mined(self.log, what.value, call(game_id), game=game_id)


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
