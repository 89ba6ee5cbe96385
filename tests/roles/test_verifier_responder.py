"""The verifier's forced-error transactions, the chain stood in for by a stub: a fresh seed is
recorded before its commitment is sent, a concession reveals the secret behind the job's seal,
and no secret ever reaches a log line."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from core.contracts import Bytes32, GameId, GameStatus, JobId, ReportSeal
from core.dispute import ZERO32
from proofs.probes import forced_commitment
from verifier.policy import CommitForcedSeed, ConcedeForced
from verifier.responder import VerifierResponder
from verifier.state import VerifierDb

ME = "0x000000000000000000000000000000000000bEEF"
RECEIPT = SimpleNamespace(gas_used=50_000, tx_hash="0x" + "ab" * 32)


class _Chain:
    """Records the calls the responder makes; the game is in ``status``."""

    def __init__(self, seal: ReportSeal | None = None, status: GameStatus = GameStatus.DEFENDER_TO_MOVE) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []
        self.market = SimpleNamespace(commit_forced_seed=self._call("commitForcedSeed"))
        self.watcher = SimpleNamespace(seal=lambda job_id: seal)  # what the logs say
        self.game = SimpleNamespace(concede_forced=self._call("concedeForced"), get_game=lambda game_id: SimpleNamespace(status=status))
        self.book = SimpleNamespace(deploy_block=0)

    def _call(self, name: str) -> Any:
        def send(*args: Any) -> Any:
            self.calls.append((name, args))
            return RECEIPT

        return send


@pytest.fixture
def db(tmp_path: Path) -> Any:
    records = VerifierDb(tmp_path / "verifier" / "state.sqlite")
    yield records
    records.close()


def _responder(chain: _Chain, db: VerifierDb) -> VerifierResponder:
    return VerifierResponder(chain, db, trace_verifier=SimpleNamespace(watcher=chain.watcher), replayer=None, me=ME, multiparty=None)  # type: ignore[arg-type]


def _secrets(db: VerifierDb) -> list[str]:
    return [bytes(db.forced_secret(c) or b"").hex() for c in db.forced_commitments()]


def test_a_fresh_seed_is_recorded_then_committed_and_the_current_one_recommitted(db: VerifierDb, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    chain = _Chain()
    _responder(chain, db).perform(CommitForcedSeed(fresh=True))
    (first,) = db.forced_commitments()
    _responder(chain, db).perform(CommitForcedSeed(fresh=False))  # e.g. after a crash before the first was mined
    _responder(chain, db).perform(CommitForcedSeed(fresh=True))  # the first was revealed: a new secret
    assert db.forced_commitments()[0] == first and len(db.forced_commitments()) == 2
    assert chain.calls == [("commitForcedSeed", (first,)), ("commitForcedSeed", (first,)), ("commitForcedSeed", (db.forced_commitments()[1],))]
    assert not any(secret in caplog.text for secret in _secrets(db))


def test_a_concession_reveals_the_secret_behind_the_job_s_seal(db: VerifierDb, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    commitment = Bytes32(db.new_forced_secret(ME))
    db.new_forced_secret(ME)  # rotated since the draw: the job's snapshot is the older one
    seal = ReportSeal(Bytes32(b"\x01" * 32), commitment, Bytes32(b"\x02" * 32))
    chain = _Chain(seal)
    _responder(chain, db).perform(ConcedeForced(GameId(4), JobId(7)))
    ((name, (game_id, secret, sent_seal)),) = chain.calls
    assert (name, game_id, sent_seal) == ("concedeForced", GameId(4), seal) and forced_commitment(secret, ME) == commitment
    assert not any(s in caplog.text for s in _secrets(db))


@pytest.mark.parametrize(("seal", "status"), [
    (ReportSeal(Bytes32(b"\x01" * 32), ZERO32, Bytes32(b"\x02" * 32)), GameStatus.DEFENDER_TO_MOVE),  # no seed snapshotted
    (ReportSeal(Bytes32(b"\x01" * 32), Bytes32(b"\x03" * 32), Bytes32(b"\x02" * 32)), GameStatus.DEFENDER_TO_MOVE),  # not ours
    (None, GameStatus.DEFENDER_TO_MOVE),  # no report
    (None, GameStatus.ARBITRATING),  # too late: not sent to revert
])  # fmt: skip
def test_no_concession_without_a_secret_of_ours_or_past_isolation(db: VerifierDb, seal: ReportSeal | None, status: GameStatus) -> None:
    db.new_forced_secret(ME)
    chain = _Chain(seal, status)
    _responder(chain, db).perform(ConcedeForced(GameId(4), JobId(7)))
    assert chain.calls == []
