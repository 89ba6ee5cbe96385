"""The actions the roles share, and how they are carried out: staking, claiming what settlements
credited us, forgetting a final job's records, and the game moves every party makes alike.

A role's policy returns these among its own actions; its responder hands them to :class:`Upkeep`
and :class:`GameMoves`. Every party plays every game move as one :class:`GameMove`, through
:class:`GameMoves`; what differs between the parties is only how it computes its side's state
(:class:`Defender`, :class:`Challenger`). A game move re-reads its game and is skipped if the chain
no longer waits for it. An action that must never be sent twice (one contract call) says so on its
type: it is :class:`Journaled` (rolebase.sent).

The DisputeGame and the AvailabilityCourt pay by credit (pull payments, ``contracts/Credits.sol``):
every role's view carries what each owes it (:func:`credits_of`), and its policy claims it
(:func:`credit_claims`) after its own duties.

Each carrier is handed only the calls it makes (:class:`GameCalls`, :class:`Staking`), not the
chain client: a narrow, structural type that the deployed contracts' wrappers satisfy and a
test's fake implements in a few lines. Each role's responder says the same of its own calls; the shared pieces are in ``core.calls``.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal
from typing import Protocol as Structural

from core.agent import log_mined
from core.calls import CreditCalls, Located, StakeCalls, TokenCalls
from core.chain import Address, Receipt
from core.cid import Cid, cid_to_digest
from core.contracts import Bytes32, Game, GameId, GameParams, GameStatus, JobId, Role, TokenAmount
from core.dispute import Action, midpoint
from proofs.merkle import hex32

log = logging.getLogger(__name__)


class Journaled:
    """The mark on an action's type that it is one contract call that must never be sent twice:
    :class:`Journal` records its transaction before broadcast and asks the chain about it before
    sending the same action again. An action that may be sent again (a game move, which re-reads its
    game first) has no mark."""

    __slots__ = ()


@dataclass(frozen=True)
class Stake(Journaled):
    """Approve and stake ``amount`` more in the role."""

    amount: TokenAmount


#: The contracts that pay by credit, by the name of the ``Protocol`` attribute that holds each.
CreditSource = Literal["game", "court", "sealed_jobs", "diloco"]
CREDIT_SOURCES: tuple[CreditSource, ...] = ("game", "court", "sealed_jobs", "diloco")


@dataclass(frozen=True)
class ClaimCredit(Journaled):
    """Claim all our credit in ``source``: what its settlements owe us (``claimCredit``)."""

    source: CreditSource


@dataclass(frozen=True)
class Forget:
    """Drop the local records (and files) of a job that is final, or was taken from us."""

    job_id: JobId


@dataclass(frozen=True)
class GameMove:
    """One call in a dispute game: ``postMidpoint`` (as its defender: the solver, or the verifier of a
    report game), ``answerMidpoint`` (as its challenger), ``commitVote`` / ``revealVote`` (as a seated
    referee), or a permissionless ``timeoutClock``, ``drawCommittee``, ``settle``."""

    game_id: GameId
    action: Action


class Staking(Structural):
    """What :func:`stake` sends: the token's approval and the stake."""

    @property
    def token(self) -> TokenCalls: ...

    @property
    def stakes(self) -> StakeCalls: ...


class Crediting(Structural):
    """The contracts that pay by credit: what :func:`credits_of` reads and :class:`ClaimCredit` claims."""

    @property
    def game(self) -> CreditCalls: ...

    @property
    def court(self) -> CreditCalls: ...

    @property
    def sealed_jobs(self) -> CreditCalls: ...

    @property
    def diloco(self) -> CreditCalls: ...


class UpkeepCalls(Staking, Crediting, Structural):
    """What :class:`Upkeep` sends."""


class GameCalls(Structural):
    """What :class:`GameMoves` reads and sends: a game, and the moves every party makes alike."""

    def get_game(self, game_id: GameId) -> Game: ...

    def post_midpoint(self, game_id: GameId, state_hash: bytes, cid: bytes) -> Receipt: ...

    def answer_midpoint(self, game_id: GameId, agree: bool) -> Receipt: ...

    def timeout_clock(self, game_id: GameId) -> Receipt: ...

    def draw_committee(self, game_id: GameId) -> Receipt: ...

    def settle(self, game_id: GameId) -> Receipt: ...


class OpeningCalls(GameCalls, Located, Structural):
    """A challenger's: the game's bond (``params``, approved to ``address``) and its openings of a
    trace game, on a segment or on the manifest."""

    def params(self) -> GameParams: ...

    def open(
        self, job_id: JobId, segment: int, steps: int, start_hash: bytes, start_proof: Sequence[bytes], end_hash: bytes, end_proof: Sequence[bytes]
    ) -> tuple[GameId, Receipt]: ...

    def open_on_manifest(self, job_id: JobId) -> tuple[GameId, Receipt]: ...


class _Records(Structural):
    def forget(self, job_id: JobId) -> None: ...

    def forget_sent(self, job_id: int) -> None: ...

    def forget_data_key(self, job_id: int) -> None: ...


class Challenger(Structural):
    """Our answer at a game's midpoint (:meth:`rolebase.dispute.DisputeReplayer.answer`)."""

    def answer(self, game_id: GameId, game: Game) -> bool: ...


class Defender(Structural):
    """Our state at a game's midpoint, stored where the challenger and referees fetch it: ``(state
    hash, CID)``. The solver recomputes it from its checkpoint; a report game's verifier replays it
    (:meth:`rolebase.dispute.DisputeReplayer.midpoint`)."""

    def midpoint(self, game: Game) -> tuple[Bytes32, Cid]: ...


class Upkeep:
    """Carries out :class:`Stake`, :class:`ClaimCredit` and :class:`Forget` for one role, logging on the
    role's logger."""

    def __init__(self, calls: UpkeepCalls, role: Role, me: Address, records: _Records, logger: logging.Logger) -> None:
        self.calls = calls
        self.role = role
        self.me = me
        self.records = records
        self.log = logger

    def perform(self, action: Stake | ClaimCredit | Forget) -> None:
        match action:
            case Stake(amount):
                stake(self.calls, self.me, self.role, amount)
            case ClaimCredit(source):
                log_mined(self.log, "claimCredit", creditor(self.calls, source).claim_credit(self.me), source=source)
            case Forget(job_id):
                self.records.forget(job_id)
                self.records.forget_sent(job_id)
                self.records.forget_data_key(job_id)
                self.log.info("job forgotten", extra={"job": job_id})


class GameMoves:
    """Carries out the game moves of both sides, each once the re-read game still waits for it:
    ``postMidpoint`` as its defender (``defender``'s state), ``answerMidpoint`` as its challenger
    (``challenger``'s answer), and the permissionless ``timeoutClock``, ``drawCommittee`` and
    ``settle``. A party that never plays a side has none for it. The referees' votes, which hold a
    secret salt, stay with the verifier's responder."""

    def __init__(self, game: GameCalls, me: Address, logger: logging.Logger, *, challenger: Challenger | None = None, defender: Defender | None = None) -> None:
        self.game = game
        self.me = me
        self.challenger = challenger
        self.defender = defender
        self.log = logger

    def perform(self, move: GameMove) -> None:
        calls = self.game
        match move:
            case GameMove(game_id, Action.POST_MIDPOINT):
                game = calls.get_game(game_id)
                if game.status is GameStatus.DEFENDER_TO_MOVE and game.defender == self.me and self.defender is not None:
                    state_hash, cid = self.defender.midpoint(game)
                    receipt = calls.post_midpoint(game_id, state_hash, cid_to_digest(cid))
                    log_mined(
                        self.log, "postMidpoint", receipt, job=game.job_id, game=game_id, step=midpoint(game.lo, game.hi), state_hash=hex32(state_hash), cid=cid
                    )
            case GameMove(game_id, Action.ANSWER_MIDPOINT):
                game = calls.get_game(game_id)
                if game.status is GameStatus.CHALLENGER_TO_MOVE and game.challenger == self.me and self.challenger is not None:
                    agree = self.challenger.answer(game_id, game)
                    log_mined(self.log, "answerMidpoint", calls.answer_midpoint(game_id, agree), game=game_id, step=midpoint(game.lo, game.hi), agree=agree)
            case GameMove(game_id, what):
                call = {Action.TIMEOUT_CLOCK: calls.timeout_clock, Action.DRAW_COMMITTEE: calls.draw_committee, Action.SETTLE: calls.settle}[what]
                log_mined(self.log, what.value, call(game_id), game=game_id)


def creditor(calls: Crediting, source: CreditSource) -> CreditCalls:
    """The contract that pays by credit named ``source``."""
    return {"game": calls.game, "court": calls.court, "sealed_jobs": calls.sealed_jobs, "diloco": calls.diloco}[source]


def credits_of(calls: Crediting, me: Address) -> dict[CreditSource, TokenAmount]:
    """What each contract that pays by credit owes ``me`` (a loader's read: one call each)."""
    return {source: creditor(calls, source).credit(me) for source in CREDIT_SOURCES}


def credit_claims(credits: dict[CreditSource, TokenAmount]) -> list[ClaimCredit]:
    """A claim of every credit owed: a policy's last duty, after its moves and answers."""
    return [ClaimCredit(source) for source in CREDIT_SOURCES if credits.get(source, 0) > 0]


def stake_needed(target: int, min_stake: int, staked: int, balance: int) -> TokenAmount | None:
    """How much more to stake to hold ``max(target, min_stake)``; None if nothing useful can be staked."""
    missing = max(target, min_stake) - staked
    if missing <= 0:
        return None
    amount = min(missing, balance)
    if amount <= 0 or staked + amount < min_stake:
        return None  # cannot reach the minimum: nothing useful to stake
    return TokenAmount(amount)


def stake(staking: Staking, me: Address, role: Role, amount: int) -> None:
    """Approve (if needed) and stake ``amount`` in ``role``, logging each mined call."""
    if staking.token.allowance(me, staking.stakes.address) < amount:
        log_mined(log, "approve", staking.token.approve(staking.stakes.address, amount))
    log_mined(log, "stake", staking.stakes.stake(role, amount), amount=amount)
