"""rolebase.keyring: which published wrap a party takes, and what it keeps (no chain: the reads are
given; tests/chain/test_sealed_jobs.py reads them from anvil)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from core.chain import Address, BlockNumber
from core.contracts import JobId, PublishedWrap, Sealing, SealingStatus, TokenAmount
from core.sealing import EncryptionKey, key_hash, new_data_key, wrap
from rolebase.keyring import data_key, open_wraps
from solver.state import SolverDb
from verifier.state import VerifierDb
from whistleblower.state import WhistleblowerDb

JOB = JobId(7)
ME = "0x" + "11" * 20
FROM = Address("0x" + "22" * 20)


def _published(wrapped: bytes, block: int = 1) -> PublishedWrap:
    return PublishedWrap(wrapped, 1, FROM, BlockNumber(block))


def test_the_newest_wrap_that_opens_to_the_committed_key_is_taken() -> None:
    mine, other = EncryptionKey.generate(), EncryptionKey.generate()
    committed, stranger = new_data_key(), new_data_key()
    altered = bytearray(wrap(committed, mine.public_key))
    altered[-1] ^= 1
    wraps = [
        _published(wrap(committed, mine.public_key), 1),  # good, but older
        _published(wrap(stranger, mine.public_key), 2),  # opens, to a key that is not the committed one
        _published(wrap(committed, other.public_key), 3),  # to another party's key
        _published(bytes(altered), 4),  # altered on the way
    ]
    assert open_wraps(wraps, mine, key_hash(committed)) == committed
    assert open_wraps(wraps[1:], mine, key_hash(committed)) is None, "nothing else is taken for the key"
    assert open_wraps([], mine, key_hash(committed)) is None


@dataclass
class _Chain:
    """The reads of SealedJobs, counted."""

    committed: bytes
    wraps: list[PublishedWrap] = field(default_factory=list)
    revealed: bytes | None = None
    reads: int = 0

    def sealing_of(self, job_id: JobId) -> Sealing:
        self.reads += 1
        return Sealing(key_hash(self.committed), Address(FROM), TokenAmount(1), SealingStatus.ACTIVE)

    def wraps_to(self, job_id: JobId, recipient: str, from_block: int = 0) -> list[PublishedWrap]:
        self.reads += 1
        return self.wraps if recipient == ME else []

    def revealed_key(self, job_id: JobId, from_block: int = 0) -> bytes | None:
        self.reads += 1
        return self.revealed


@dataclass
class _Records:
    kept: dict[int, bytes] = field(default_factory=dict)

    def data_key(self, job_id: int) -> bytes | None:
        return self.kept.get(job_id)

    def keep_data_key(self, job_id: int, data_key: bytes) -> None:
        self.kept[job_id] = data_key


def test_a_key_found_in_a_wrap_is_kept_and_not_looked_for_again() -> None:
    mine, committed = EncryptionKey.generate(), new_data_key()
    chain, records = _Chain(committed), _Records()
    assert data_key(chain, records, JOB, ME, mine, 0) is None, "no wrap yet"
    assert records.kept == {}
    chain.wraps.append(_published(wrap(committed, mine.public_key)))
    assert data_key(chain, records, JOB, ME, mine, 0) == committed
    assert records.kept == {JOB: committed}
    reads = chain.reads
    assert data_key(chain, records, JOB, ME, mine, 0) == committed
    assert chain.reads == reads, "read from the records, not the chain"


def test_a_revealed_key_is_taken_only_if_it_is_the_committed_one() -> None:
    mine, committed = EncryptionKey.generate(), new_data_key()
    chain, records = _Chain(committed, revealed=new_data_key()), _Records()
    assert data_key(chain, records, JOB, ME, mine, 0) is None, "a revealed key that is not the committed one"
    chain.revealed = committed
    assert data_key(chain, records, JOB, ME, mine, 0) == committed, "no wrap needed once the key is public"
    assert records.kept == {JOB: committed}


def test_every_role_forgets_a_final_jobs_data_key_whatever_else_it_holds_of_it(tmp_path: Path) -> None:
    """A referee's kept key, or a solver's that asked and did not claim, is in no other record of its
    role: each role's records name it for forgetting once the job is final (``RoleDb.keyed_final``),
    and the upkeep's forget drops it."""
    for db in (VerifierDb(tmp_path / "verifier.sqlite"), SolverDb(tmp_path / "solver.sqlite"), WhistleblowerDb(tmp_path / "whistleblower.sqlite")):
        db.keep_data_key(7, new_data_key())
        db.keep_data_key(8, new_data_key())
        db.mark_final([8, 9])
        assert db.keyed_final() == {8}  # 7 is live, 9 was never keyed
        db.forget_data_key(8)
        assert db.keyed_final() == set() and db.data_key(7) is not None
