"""What the daemons keep locally for disputes survives a restart: the referee's salt secret, the
failing segment, and the solver's lifetime claims."""

from __future__ import annotations

from pathlib import Path

from core.contracts import JobId
from core.dispute import derive_salt
from solver.state import SolverDb
from verifier.state import VerifierDb


def test_the_referee_salt_secret_is_made_once_and_kept(tmp_path: Path) -> None:
    db = VerifierDb(tmp_path / "state.sqlite")
    secret = db.salt_secret()
    assert len(secret) == 32 and db.salt_secret() == secret
    db.close()
    reopened = VerifierDb(tmp_path / "state.sqlite")
    assert reopened.salt_secret() == secret
    assert derive_salt(reopened.salt_secret(), 3) == derive_salt(secret, 3) != derive_salt(secret, 4)
    assert VerifierDb(tmp_path / "other.sqlite").salt_secret() != secret


def test_a_failing_verdict_keeps_its_first_failing_segment(tmp_path: Path) -> None:
    db = VerifierDb(tmp_path / "state.sqlite")
    db.set_verdict(JobId(1), False, "QmReport", "9/10 segments ok; ...", failed_segment=4)
    db.set_verdict(JobId(2), True, "QmReport2", "10/10 segments ok")
    assert db.assignment(JobId(1)).failed_segment == 4  # type: ignore[union-attr]
    assert db.assignment(JobId(2)).failed_segment is None  # type: ignore[union-attr]


def test_claims_are_counted_after_the_job_is_forgotten(tmp_path: Path) -> None:
    db = SolverDb(tmp_path / "state.sqlite")
    db.start_job(JobId(5), "QmSpec")
    db.start_job(JobId(5), "QmSpec")
    db.forget(JobId(5))
    assert db.job(JobId(5)) is None and db.claimed() == {5}
