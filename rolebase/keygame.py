"""The sealed-job moves the roles share (issue 30, docs/sealing.md), and how they are carried out:
registering our encryption key, asking for a wrap, publishing wraps, demanding the key, answering a
demand, returning the key bond.

A role's policy decides these from its view with the pure functions below (:func:`key_to_register`,
:func:`to_wrap`); its responder hands them to :class:`KeyGame`. The data key a party wraps or
reveals comes from ``key_of`` (the submitter's file, a daemon's records: ``rolebase.keyring``), never
from the action, so no action in a journal or a log carries a key.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol as Structural

from core.agent import log_mined
from core.chain import Address, Receipt
from core.contracts import Bytes32, GameId, JobId, KeyDemand, RegisteredKey
from core.sealing import wrap
from rolebase.actions import Journaled

__all__ = [
    "RegisterKey",
    "RequestWrap",
    "PublishWraps",
    "WrapReferees",
    "DeclineSeat",
    "DemandKey",
    "AnswerDemand",
    "TimeoutDemand",
    "ReturnBond",
    "KeyGameAction",
    "KeyGame",
    "MAX_DEMANDS",
    "key_to_register",
    "to_wrap",
]


#: Demands a party may make on a job (``SealedJobs``): a wrap answers the first, only the key itself the second.
MAX_DEMANDS = 2


@dataclass(frozen=True)
class RegisterKey(Journaled):
    """Register ``key`` (our encryption key's public half) in the KeyRegistry: none is registered, or another."""

    key: Bytes32


@dataclass(frozen=True)
class RequestWrap(Journaled):
    """Ask for a wrap of the sealed job's key (an eligible solver while it is Open, a whistleblower while Verified)."""

    job_id: JobId


@dataclass(frozen=True)
class PublishWraps(Journaled):
    """Wrap the job's data key to each of ``recipients``' registered keys and publish the wraps (as the
    submitter, or the job's solver); a recipient with no registered key is left out."""

    job_id: JobId
    recipients: tuple[Address, ...]


@dataclass(frozen=True)
class WrapReferees(Journaled):
    """As a party of dispute game ``game_id`` on ``job_id`` (its defender or challenger), wrap the job's
    data key to ``referees`` seated in it: a referee re-executes the step on the job's data, and no
    party that withholds may leave it unable to (a seated referee that does not vote is slashed)."""

    job_id: JobId
    game_id: GameId
    referees: tuple[Address, ...]


@dataclass(frozen=True)
class DeclineSeat(Journaled):
    """Give up our seat in dispute game ``game_id`` on a sealed job whose key no wrap to us opens: a
    referee that cannot re-execute the step cannot vote, and a seat that does not vote is slashed."""

    game_id: GameId


@dataclass(frozen=True)
class DemandKey(Journaled):
    """Demand the key of a sealed job we are entitled to and hold no wrap of that opens."""

    job_id: JobId


@dataclass(frozen=True)
class AnswerDemand:
    """Answer the open demand of ``party`` on the job: a wrap to it if it is its first, else the key itself.
    Re-reads the demand first: skipped if it is no longer open (answered, or timed out)."""

    job_id: JobId
    party: Address


@dataclass(frozen=True)
class TimeoutDemand(Journaled):
    """Forfeit the key bond of a demand left unanswered past its deadline (anyone may; the demander is credited)."""

    job_id: JobId


@dataclass(frozen=True)
class ReturnBond(Journaled):
    """Credit the key bond of a settled sealed job back to its submitter (anyone may)."""

    job_id: JobId


KeyGameAction = RegisterKey | RequestWrap | PublishWraps | WrapReferees | DeclineSeat | DemandKey | AnswerDemand | TimeoutDemand | ReturnBond


class KeyCalls(Structural):
    """What :class:`KeyGame` reads and sends of the KeyRegistry."""

    def key_of(self, account: str) -> RegisteredKey: ...

    def register_key(self, key: bytes) -> Receipt: ...


class SealedCalls(Structural):
    """What :class:`KeyGame` reads and sends of ``SealedJobs``."""

    def demand_of(self, job_id: JobId) -> KeyDemand: ...

    def request_wrap(self, job_id: JobId) -> Receipt: ...

    def publish_wraps(self, job_id: JobId, recipients: Sequence[str], wraps: Sequence[bytes]) -> Receipt: ...

    def wrap_for_referees(self, game_id: GameId, referees: Sequence[str], wraps: Sequence[bytes]) -> Receipt: ...

    def decline_seat(self, game_id: GameId) -> Receipt: ...

    def demand_key(self, job_id: JobId) -> Receipt: ...

    def reveal_key(self, job_id: JobId, data_key: bytes) -> Receipt: ...

    def timeout_demand(self, job_id: JobId) -> Receipt: ...

    def return_bond(self, job_id: JobId) -> Receipt: ...


class KeyGameCalls(Structural):
    """What :class:`KeyGame` is handed (``core.contracts.Protocol`` satisfies it)."""

    @property
    def keys(self) -> KeyCalls: ...

    @property
    def sealed_jobs(self) -> SealedCalls: ...


def key_to_register(mine: Bytes32 | None, registered: RegisteredKey | None, staked: bool) -> RegisterKey | None:
    """Register our key once we have stake (the registry takes keys of staked accounts only) and
    the chain holds none of ours, or another; ``mine`` None: we have no encryption key (no sealed jobs)."""
    if mine is None or not staked or registered is None or registered.key == mine:
        return None
    return RegisterKey(mine)


def to_wrap(entitled: Iterable[Address], wrapped: Mapping[Address, int], registered: Mapping[Address, RegisteredKey]) -> tuple[Address, ...]:
    """Which of ``entitled`` to wrap to now: those with a registered key whose current version no wrap
    was published for (``wrapped``: recipient -> newest version wrapped to, ``SealedJobs.wrapped``).
    One wrap per key version: whether it opens only its recipient can tell, and one that does not is
    answered through a demand, never by wrapping again unasked."""
    out: list[Address] = []
    for party in entitled:
        key = registered.get(party)
        if key is not None and key.registered and wrapped.get(party, 0) < key.version and party not in out:
            out.append(party)
    return tuple(out)


class KeyGame:
    """Carries out the key game's moves for one party. ``key_of(job)`` is the job's data key as this
    party holds it (None if it holds none: it cannot wrap or answer)."""

    def __init__(self, calls: KeyGameCalls, me: Address, key_of: Callable[[JobId], bytes | None], logger: logging.Logger) -> None:
        self.calls = calls
        self.me = me
        self.key_of = key_of
        self.log = logger

    def _data_key(self, job_id: JobId) -> bytes:
        data_key = self.key_of(job_id)
        if data_key is None:
            raise LookupError(f"job {job_id}: we hold no data key to wrap or reveal")  # a policy's error: it decides from our records
        return data_key

    def perform(self, action: KeyGameAction) -> None:
        sealed = self.calls.sealed_jobs
        match action:
            case RegisterKey(key):
                log_mined(self.log, "registerKey", self.calls.keys.register_key(key), key="0x" + key.hex())
            case RequestWrap(job_id):
                log_mined(self.log, "requestWrap", sealed.request_wrap(job_id), job=job_id)
            case PublishWraps(job_id, recipients):
                self._publish(job_id, recipients)
            case WrapReferees(job_id, game_id, referees):
                self._publish(job_id, referees, game_id)
            case DeclineSeat(game_id):
                log_mined(self.log, "declineSeat", sealed.decline_seat(game_id), game=game_id)
            case DemandKey(job_id):
                log_mined(self.log, "demandKey", sealed.demand_key(job_id), job=job_id)
            case AnswerDemand(job_id, party):
                demand = sealed.demand_of(job_id)
                if demand.party != party:
                    self.log.info("demand no longer open", extra={"job": job_id, "party": party})
                elif demand.key_only:  # its second demand: only the key answers it, and makes the job's data public
                    log_mined(self.log, "revealKey", sealed.reveal_key(job_id, self._data_key(job_id)), job=job_id, party=party)
                else:
                    self._publish(job_id, (party,))
            case TimeoutDemand(job_id):
                log_mined(self.log, "timeoutDemand", sealed.timeout_demand(job_id), job=job_id)
            case ReturnBond(job_id):
                log_mined(self.log, "returnBond", sealed.return_bond(job_id), job=job_id)

    def _publish(self, job_id: JobId, recipients: Sequence[Address], game_id: GameId | None = None) -> None:
        """Wrap the job's key to each recipient's registered key and publish: as a key holder of the job
        (``publishWraps``), or as a party of game ``game_id`` to its referees (``wrapForReferees``)."""
        data_key = self._data_key(job_id)
        keys = {party: self.calls.keys.key_of(party) for party in recipients}
        to = [party for party in recipients if keys[party].registered]
        if not to:
            self.log.info("no wrap published: no recipient has a registered key", extra={"job": job_id, "recipients": list(recipients)})
            return
        wraps = [wrap(data_key, keys[party].key) for party in to]
        sealed = self.calls.sealed_jobs
        if game_id is None:
            log_mined(self.log, "publishWraps", sealed.publish_wraps(job_id, to, wraps), job=job_id, recipients=to)
        else:
            log_mined(self.log, "wrapForReferees", sealed.wrap_for_referees(game_id, to, wraps), job=job_id, game=game_id, referees=to)
