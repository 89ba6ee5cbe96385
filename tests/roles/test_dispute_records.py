"""What the daemons keep locally for disputes survives a restart: the referee's salt secret, the
verifier's forced secrets, the failing segment, the probes and seal parts of its report, and the
solver's lifetime claims."""

from __future__ import annotations

import stat
from pathlib import Path

from core.contracts import Bytes32, JobId
from core.dispute import ZERO32, derive_salt
from core.localdb import LocalDb
from core.probe import Probe
from proofs.probes import forced_commitment
from solver.state import SolverDb
from verifier.policy import Draw, Phase
from verifier.state import MIGRATIONS, VerifierDb

ME = "0x000000000000000000000000000000000000bEEF"
ROOT = b"\x07" * 32
DRAW = Draw(Bytes32(b"\x01" * 32), Bytes32(b"\x02" * 32))
PROBES = [Probe(0, 3, 5, Bytes32(b"\x09" * 32)), Probe(1, 0, 1, Bytes32(b"\x0a" * 32))]


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
    db.set_verdict(JobId(1), False, "QmReport", "9/10 segments ok; ...", ZERO32, failed_segment=4, draw=DRAW)
    db.set_verdict(JobId(2), True, "QmReport2", "10/10 segments ok", ROOT, draw=DRAW, probes=PROBES)
    db.close()
    db = VerifierDb(tmp_path / "state.sqlite")
    failed, passed = db.assignment(JobId(1)), db.assignment(JobId(2))
    assert failed is not None and passed is not None
    assert (failed.failed_segment, failed.probes, failed.draw) == (4, (), DRAW)  # a fail publishes no probes
    assert passed.failed_segment is None
    # the report after a restart is the same: its probes (report() takes them), seal parts and root
    assert (passed.probes, passed.draw, passed.probe_root) == (tuple(PROBES), DRAW, ROOT)


def test_a_verdict_recorded_before_the_probes_were_kept_is_replayed_again(tmp_path: Path) -> None:
    """Schema 4 kept only the probe root; report() now needs the probes: such a verdict goes back to
    ASSIGNED (replayed again), a reported one stays as it was."""
    old = LocalDb(tmp_path / "state.sqlite", MIGRATIONS[:4])
    for job_id, phase in ((1, Phase.REPLAYED), (2, Phase.REPORTED)):
        old.execute(
            "INSERT INTO assignments (job_id, phase, passed, report_cid, summary, probe_root, updated_at) VALUES (?, ?, 1, 'Qm', 's', ?, 0)",
            (job_id, phase.value, ROOT),
        )
    old.close()
    db = VerifierDb(tmp_path / "state.sqlite")
    replayed, reported = db.assignment(JobId(1)), db.assignment(JobId(2))
    assert replayed is not None and (replayed.phase, replayed.probes, replayed.draw) == (Phase.ASSIGNED, None, None)
    assert reported is not None and reported.phase is Phase.REPORTED


def test_claims_are_counted_after_the_job_is_forgotten(tmp_path: Path) -> None:
    db = SolverDb(tmp_path / "state.sqlite")
    db.start_job(JobId(5), "QmSpec")
    db.start_job(JobId(5), "QmSpec")
    db.forget(JobId(5))
    assert db.job(JobId(5)) is None and db.claimed() == {5}


def test_forced_secrets_are_kept_by_commitment_the_newest_current_in_a_private_file(tmp_path: Path) -> None:
    home = tmp_path / "verifier-0xbeef"
    db = VerifierDb(home / "state.sqlite")
    first = db.new_forced_secret(ME)
    second = db.new_forced_secret(ME)
    assert db.forced_commitments() == [first, second]  # the last is the current one
    secret = db.forced_secret(second)
    assert secret is not None and len(secret) == 32 and forced_commitment(secret, ME) == second
    assert db.forced_secret(ZERO32) is None  # a job that snapshotted no seed is nobody's forced job
    db.close()
    reopened = VerifierDb(home / "state.sqlite")
    assert reopened.forced_commitments() == [first, second] and reopened.forced_secret(second) == secret
    reopened.forget_forced_secret(first)
    assert reopened.forced_commitments() == [second] and reopened.forced_secret(first) is None
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert stat.S_IMODE((home / "state.sqlite").stat().st_mode) == 0o600
