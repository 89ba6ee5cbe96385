"""A sealed job end to end on anvil (issue 30, docs/sealing.md): `submit post --sealed` and `submit
watch` against real solver and verifier daemons; the job is finalized, its key went only where the
chain entitles, and no store holds a byte of its dataset or a checkpoint in the clear; the buyer
opens the model it fetches."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from core.cid import digest_to_cid
from core.contracts import GameId, JobId, JobState, Role, SealingStatus
from core.errors import SealingError
from core.sealing import MAGIC, EncryptionKey, seal_canonical
from deploy.anvil import dev_private_key
from proofs.checkpoint import FORMAT, decode_checkpoint, state_hash
from proofs.manifest import committed_manifest
from proofs.spec import JobSpec, load_spec
from rolebase.inputs import fetch_inputs
from rolebase.keyring import data_key, open_wraps
from submitter import service
from submitter.datakeys import DataKeys
from submitter.demo_job import build_demo_job
from tests.e2e.conftest import Market, wait_for
from tests.e2e.disputes import assert_cheater_slashed, catch_cheat

REPO = Path(__file__).resolve().parents[2]
REFEREES = (3, 4, 5)


class _Kept:
    """Records of a reader that keeps nothing (the keyring's records for a party with no daemon)."""

    def data_key(self, job_id: int) -> bytes | None:
        return None

    def keep_data_key(self, job_id: int, key: bytes) -> None:
        raise AssertionError("a party without a wrap found a key to keep")


def spec_of(market: Market, job_id: JobId) -> JobSpec:
    """The spec job ``job_id`` was posted with, from the store."""
    protocol = market.protocol()
    (posted,) = protocol.market.events("JobPosted", protocol.book.deploy_block, jobId=job_id)
    return load_spec(market.store.get(digest_to_cid(bytes(posted.args["specCid"])), 1 << 20))


def _windows(plaintext: bytes, width: int = 32) -> list[bytes]:
    """The ``width``-byte pieces of ``plaintext`` at a stride of ``width`` that only it would hold: 16
    distinct byte values at least (a run of zeros, which any checkpoint holds, is no leak)."""
    pieces = (plaintext[i : i + width] for i in range(0, len(plaintext) - width + 1, width))
    return [piece for piece in pieces if len(set(piece)) >= 16]


@contextmanager
def _watching(market: Market, data_dir: Path) -> Iterator[tuple[Callable[[Market, Path], JobId], list[subprocess.Popen[bytes]]]]:
    """A poster of the tiny job, sealed from ``data_dir``, that starts `submit watch` on it, and the
    watches it started; each is stopped when the block ends (one that exited keeps its exit code)."""
    watches: list[subprocess.Popen[bytes]] = []

    def post(m: Market, folder: Path) -> JobId:
        job = build_demo_job("tiny", folder)
        submitter = m.protocol(m.account(0))
        posted = service.post_job(submitter, m.store, job.spec_path, job.data_path, job.reward, job.fee, job.commit_window, data_keys=DataKeys.of(data_dir))
        assert posted.sealed
        with (m.root / f"watch-{posted.job_id}.log").open("w") as log:
            watches.append(subprocess.Popen(
                [sys.executable, "-m", "veritrain", "submit", "watch", str(posted.job_id), "--rpc", m.net.rpc_url, "--address-book-dir", str(m.book_dir),
                 "--data-dir", str(data_dir), "--store-dir", str(m.store_dir), "--key-env", "VT_SUBMITTER_KEY", "--poll", "0.5"],
                cwd=REPO, env={**os.environ, "VT_SUBMITTER_KEY": dev_private_key(1)}, stdout=log, stderr=subprocess.STDOUT,
            ))  # fmt: skip
        return posted.job_id

    try:
        yield post, watches
    finally:
        for watch in watches:
            if watch.poll() is None:
                watch.kill()
                watch.wait()


def test_a_sealed_job_is_finalized_by_daemons_and_no_store_holds_its_dataset_in_the_clear(market: Market, tmp_path: Path) -> None:
    market.daemon("verifier", 2, "verifier", "--duty-grace", "5")
    market.daemon("solver", 1, "solver")
    protocol = market.protocol()
    with _watching(market, tmp_path / "submitter") as (post, watches):
        job_id = post(market, tmp_path / "job")
        wait_for("the sealed job finalized", lambda: protocol.market.get_job(job_id).state is JobState.FINALIZED, 300, market)
        (watch,) = watches
        watch.wait(timeout=120)  # it stops once the key bond is back and claimed
    assert watch.returncode == 0, (market.root / f"watch-{job_id}.log").read_text()[-3000:]

    deploy = protocol.book.deploy_block
    solver, verifier = market.account(1).address, market.account(2).address
    sealed = protocol.sealed_jobs
    # the solver asked for the key, read the dataset and only then claimed; its verifier was given the key too
    (asked,) = [r for r in sealed.wrap_requests(job_id, deploy) if r.party == solver]
    (claimed,) = protocol.market.events("JobClaimed", deploy, jobId=job_id)
    assert asked.block_number < claimed.block_number
    assert sealed.wraps_to(job_id, solver, deploy) and sealed.wraps_to(job_id, verifier, deploy)
    assert set(sealed.wrapped(job_id, deploy)) == {solver, verifier}, "the key went to the entitled parties only"
    assert sealed.revealed_key(job_id, deploy) is None
    sealing = sealed.sealing_of(job_id)
    assert sealing.status is SealingStatus.RETURNED and sealed.credit(market.account(0).address) == 0

    # no object in the store holds a 32-byte piece of the plaintext dataset
    plaintext = (tmp_path / "job" / "dataset.safetensors").read_bytes()
    pieces = _windows(plaintext)
    assert len(pieces) >= len(plaintext) // 64, "the dataset is not mostly zeros: its pieces test something"
    stored = [path for path in market.store_dir.rglob("*") if path.is_file()]
    assert stored
    for path in stored:
        content = path.read_bytes()
        assert not any(piece in content for piece in pieces), f"{path} holds plaintext of the sealed dataset"
        assert FORMAT.encode() not in content, f"{path} holds a checkpoint in the clear"

    # its checkpoints and model are stored sealed; the buyer's `submit fetch` opens the model with its key
    done = service.commitment(protocol, job_id, protocol.market.get_job(job_id))
    assert done is not None
    manifest = committed_manifest(market.store.get(done.manifest_cid, 1 << 20), done.trace_root, lambda page: market.store.get(page, 1 << 20))
    assert manifest.final_cid == manifest.checkpoint_cids[-1] == done.final_model_cid
    assert all(market.store.get(cid, 1 << 30)[: len(MAGIC)] == MAGIC for cid in manifest.checkpoint_cids)
    cid, size = service.fetch_model(protocol, market.store, job_id, tmp_path / "model.safetensors", DataKeys.of(tmp_path / "submitter"))
    model = (tmp_path / "model.safetensors").read_bytes()
    assert cid == done.final_model_cid and size == len(model)
    assert state_hash(seal_canonical(DataKeys.of(tmp_path / "submitter").load(spec_of(market, job_id).dataset.cid), model)) == manifest.state_hashes[-1]
    assert decode_checkpoint(model).step == spec_of(market, job_id).steps
    with pytest.raises(SealingError, match="is sealed"):
        service.fetch_model(protocol, market.store, job_id, tmp_path / "other.safetensors")
    for data_dir, code in ((tmp_path / "submitter", 0), (tmp_path / "stranger", 2)):  # `model export` opens it for its buyer only
        exported = subprocess.run(
            [sys.executable, "-m", "veritrain", "model", "export", str(job_id), "--out", str(tmp_path / "exported"), "--rpc-url", market.net.rpc_url,
             "--address-book-dir", str(market.book_dir), "--data-dir", str(data_dir), "--store-dir", str(market.store_dir)],
            cwd=REPO, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert exported.returncode == code, exported.stderr
    assert (tmp_path / "exported" / "weights.safetensors").is_file() and "not posted with --sealed" in exported.stderr

    # a staked party the chain never entitled has no wrap that opens, and cannot read the dataset
    outsider = market.protocol(market.account(3))
    minimum = outsider.stakes.min_stake(Role.WHISTLEBLOWER)
    outsider.token.approve(outsider.stakes.address, minimum)
    outsider.stakes.stake(Role.WHISTLEBLOWER, minimum)
    key = EncryptionKey.generate()
    outsider.keys.register_key(key.public_key)
    found = data_key(protocol.sealed_jobs, _Kept(), job_id, market.account(3).address, key, deploy)
    assert found is None
    spec = spec_of(market, job_id)
    assert spec.dataset.sealed
    with pytest.raises(SealingError):
        fetch_inputs(market.store, spec)


def test_a_cheating_solver_of_a_sealed_job_is_caught_by_referees_that_read_it_and_slashed(market: Market, tmp_path: Path) -> None:
    with _watching(market, tmp_path / "submitter") as (post, _):
        caught = catch_cheat(market, tmp_path / "job", "wrong-lr", solver=1, verifier=2, referees=REFEREES, accounts=range(0, 6), post=post)
    assert_cheater_slashed(market, caught, solver=1, accounts=range(0, 6))
    protocol = market.protocol()
    (opened,) = protocol.game.events("DisputeOpened", protocol.book.deploy_block, jobId=caught.job_id)
    seated = protocol.game.committee(GameId(int(opened.args["gameId"])))
    assert len(seated) == 3
    committed = protocol.sealed_jobs.sealing_of(caught.job_id).key_hash
    for i in REFEREES:  # each referee re-executed the step on the sealed data: a wrap to it opened to the key
        referee = market.account(i).address
        assert referee in seated
        key = EncryptionKey.load(market.root / f"referee{i}" / "encryption-keys" / "verifier")
        assert open_wraps(protocol.sealed_jobs.wraps_to(caught.job_id, referee, protocol.book.deploy_block), key, committed) is not None
    # the game's states (the bisection's midpoints, the agreed state) were stored sealed, as the checkpoints
    stored = [path for path in market.store_dir.rglob("*") if path.is_file()]
    assert stored
    assert not [path for path in stored if FORMAT.encode() in path.read_bytes()], "a state of the sealed job is stored in the clear"
