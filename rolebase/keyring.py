"""A party's data key of a sealed job (issue 30, docs/sealing.md): found once, in a wrap published to
it or in a revealed key, checked against the job's commitment, then kept in its records.

The chain cannot open a wrap, so a published wrap may be to another key version, altered, or of
another key than the one committed: :func:`open_wraps` takes the newest wrap that opens with the
party's encryption key to a data key whose keccak256 is the sealing's ``keyHash``, and nothing else.
A key revealed on chain was checked by the contract; it is checked here again all the same.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol as Structural

from core.chain import Address
from core.contracts import Game, GameId, JobId, Protocol, PublishedWrap, RegisteredKey, Sealing
from core.errors import SealingError
from core.sealing import EncryptionKey, key_hash, unwrap
from rolebase.keygame import to_wrap

__all__ = ["open_wraps", "data_key", "key_finder", "referees_to_wrap", "OwnKey"]


def open_wraps(wraps: Sequence[PublishedWrap], key: EncryptionKey, committed: bytes) -> bytes | None:
    """The data key of the newest of ``wraps`` that opens with ``key`` to the ``committed`` key hash,
    or None when none does (none published, each for another key or altered, or of another key)."""
    for published in reversed(wraps):
        try:
            found = unwrap(published.wrap, key)
        except SealingError:
            continue
        if key_hash(found) == committed:
            return found
    return None


class SealedReads(Structural):
    """What :func:`data_key` reads of ``SealedJobs``."""

    def sealing_of(self, job_id: JobId) -> Sealing: ...

    def wraps_to(self, job_id: JobId, recipient: str, from_block: int = 0) -> list[PublishedWrap]: ...

    def revealed_key(self, job_id: JobId, from_block: int = 0) -> bytes | None: ...


class DataKeyRecords(Structural):
    """Where :func:`data_key` keeps what it found (``rolebase.records.RoleDb``)."""

    def data_key(self, job_id: int) -> bytes | None: ...

    def keep_data_key(self, job_id: int, data_key: bytes) -> None: ...


def data_key(sealed: SealedReads, records: DataKeyRecords, job_id: JobId, me: str, key: EncryptionKey, from_block: int) -> bytes | None:
    """The sealed job's data key for ``me``: from the records, else a revealed key, else the newest wrap
    to ``me`` that opens with ``key`` (kept once found); None while there is none (ask, or demand)."""
    kept = records.data_key(job_id)
    if kept is not None:
        return kept
    committed = sealed.sealing_of(job_id).key_hash
    revealed = sealed.revealed_key(job_id, from_block)
    found = revealed if revealed is not None and key_hash(revealed) == committed else None
    if found is None:
        found = open_wraps(sealed.wraps_to(job_id, me, from_block), key, committed)
    if found is not None:
        records.keep_data_key(job_id, found)
    return found


def referees_to_wrap(protocol: Protocol, game_id: GameId, game: Game) -> tuple[Address, ...]:
    """The referees seated in ``game`` (Arbitrating) that no wrap of its job's key was published to
    for their current key version: a party of the game that holds the key wraps to them."""
    seats = protocol.game.committee(game_id)
    registered = {referee: protocol.keys.key_of(referee) for referee in seats}
    return to_wrap(seats, protocol.sealed_jobs.wrapped(game.job_id, protocol.book.deploy_block), registered)


def key_finder(protocol: Protocol, records: DataKeyRecords, me: Address, key: EncryptionKey | None) -> Callable[[JobId], bytes | None]:
    """A daemon's ``key_of(job)``: a sealed job's data key, from its records, else found now (a wrap to
    ``me`` that opens with ``key``, or the key revealed); without a key, the records alone."""

    def key_of(job_id: JobId) -> bytes | None:
        if key is None:
            return records.data_key(job_id)
        return data_key(protocol.sealed_jobs, records, job_id, me, key, protocol.book.deploy_block)

    return key_of


class KeyReads(Structural):
    """What :class:`OwnKey` reads of the KeyRegistry."""

    def key_of(self, account: str) -> RegisteredKey: ...


class OwnKey:
    """Our encryption key as the KeyRegistry holds it, for a daemon's view: read each tick until it is
    ``key``, then kept, since only our own ``registerKey`` changes it (None: we hold no key, nothing read)."""

    def __init__(self, keys: KeyReads, me: Address, key: EncryptionKey | None) -> None:
        self.keys = keys
        self.me = me
        self.key = key
        self._registered: RegisteredKey | None = None

    def registered(self) -> RegisteredKey | None:
        if self.key is None:
            return None
        if self._registered is None or self._registered.key != self.key.public_key:
            self._registered = self.keys.key_of(self.me)
        return self._registered
