"""The submitter's side of a sealed job on anvil (issue 30, docs/sealing.md): `submit post --sealed`
uploads only ciphertext, keeps the data key before the post and seals the job; ticks of `submit watch`
(``submitter.sealed.Watch``) wrap the key to an asking solver and the drawn verifier, answer the
verifier's first demand with a wrap and its second with the key itself; after a cancel the key bond
comes back and is claimed."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from core.contracts import JobId, JobState, Protocol, Role, SealingStatus, TokenAmount
from core.sealing import EncryptionKey, key_hash, open_sealed
from core.storage import LocalStore
from deploy.anvil import dev_private_key
from deploy.devnet import Devnet
from proofs.spec import load_spec
from rolebase.keygame import AnswerDemand, PublishWraps, ReturnBond
from rolebase.keyring import open_wraps
from submitter import service
from submitter.datakeys import DataKeys
from submitter.demo_job import build_demo_job
from submitter.sealed import Watch
from tests.chain.test_lifecycle import FEE, MANIFEST, MODEL, REWARD, ROOT, stake

if TYPE_CHECKING:
    from core.chain import Signer
    from tests.conftest import Parties

REPO = Path(__file__).resolve().parents[2]


def _register(proto: Protocol, who: Signer, role: Role) -> EncryptionKey:
    """``who`` staked in ``role`` with a fresh encryption key registered."""
    stake(proto, who, role)
    key = EncryptionKey.generate()
    proto.with_signer(who).keys.register_key(key.public_key)
    return key


def _post_sealed(devnet: Devnet, parties: Parties, tmp_path: Path) -> tuple[Protocol, LocalStore, DataKeys, JobId]:
    job = build_demo_job("tiny", tmp_path / "job")
    proto, store, keys = devnet.protocol(parties.submitter), LocalStore(tmp_path / "store"), DataKeys.of(tmp_path / "data")
    posted = service.post_job(proto, store, job.spec_path, job.data_path, TokenAmount(REWARD), TokenAmount(FEE), None, data_keys=keys)
    assert posted.sealed and "seal" in posted.receipts
    return proto, store, keys, posted.job_id


def _opened_wrap(proto: Protocol, job_id: JobId, me: str, key: EncryptionKey) -> bytes:
    found = open_wraps(proto.sealed_jobs.wraps_to(job_id, me, proto.book.deploy_block), key, proto.sealed_jobs.sealing_of(job_id).key_hash)
    assert found is not None, f"no wrap to {me} opens"
    return found


def test_post_sealed_uploads_only_ciphertext_keeps_the_key_and_seals_the_job(devnet: Devnet, parties: Parties, tmp_path: Path) -> None:
    job = build_demo_job("tiny", tmp_path / "job")
    book_dir, data_dir, store_dir = tmp_path / "deployments", tmp_path / "data", tmp_path / "store"
    book_dir.mkdir()
    devnet.book.save(book_dir / f"{devnet.client.chain_id}.json")
    assert devnet.accounts[0].address == parties.submitter.address
    common = ["--rpc", devnet.rpc_url, "--address-book-dir", str(book_dir), "--data-dir", str(data_dir), "--store-dir", str(store_dir)]
    command = [sys.executable, "-m", "veritrain", "submit", "post", str(job.spec_path), "--data", str(job.data_path), "--sealed", "--json"]
    env = {**os.environ, "VT_SUBMITTER_KEY": dev_private_key(1)}
    result = subprocess.run([*command, *common, "--key-env", "VT_SUBMITTER_KEY"], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["sealed"] is True and set(out["gas"]) >= {"postJob", "seal"}
    job_id = JobId(out["job_id"])

    proto = devnet.protocol()
    key_file = data_dir / "data-keys" / out["dataset_cid"]
    data_key = key_file.read_bytes()
    assert len(data_key) == 32
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600 and stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700
    sealing = proto.sealed_jobs.sealing_of(job_id)
    assert (sealing.status, sealing.key_hash, sealing.submitter, sealing.bond) == (
        SealingStatus.ACTIVE,
        key_hash(data_key),
        parties.submitter.address,
        12 * 10**18,
    )  # the CLI default reward 10 + fee 2

    store = LocalStore(store_dir)
    spec = load_spec(service.fetch_spec(proto, store, job_id))
    assert spec.dataset.sealed and spec.dataset.cid == out["dataset_cid"]
    plaintext = job.data_path.read_bytes()
    sealed_bytes = store.get(out["dataset_cid"], spec.dataset.size_bytes)
    assert len(sealed_bytes) == spec.dataset.size_bytes and open_sealed(data_key, sealed_bytes) == plaintext
    windows = [plaintext[i : i + 32] for i in range(0, len(plaintext) - 32, max(1, len(plaintext) // 16))]
    stored = [p.read_bytes() for p in store_dir.rglob("*") if p.is_file()]
    assert stored and not any(w in blob for blob in stored for w in windows), "a plaintext byte run of the dataset is in the store"

    again = subprocess.run(
        [sys.executable, "-m", "veritrain", "submit", "seal", str(job_id), *common, "--key-env", "VT_SUBMITTER_KEY"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert again.returncode != 0 and f"job {job_id} is sealed already (ACTIVE)" in again.stderr


def test_watch_wraps_to_the_asking_solver_and_the_verifier_and_answers_demands_with_a_wrap_then_the_key(
    devnet: Devnet, parties: Parties, tmp_path: Path
) -> None:
    proto, store, keys, job_id = _post_sealed(devnet, parties, tmp_path)
    sol, other, ver = parties.solver, parties.solver2, parties.verifier
    solver_key = _register(proto, sol, Role.SOLVER)
    _register(proto, other, Role.SOLVER)
    verifier_key = _register(proto, ver, Role.VERIFIER)
    data_key = keys.load(load_spec(service.fetch_spec(proto, store, job_id)).dataset.cid)
    watch = Watch(proto, store, keys, [job_id], max_readers=1)

    proto.with_signer(sol).sealed_jobs.request_wrap(job_id)
    proto.with_signer(other).sealed_jobs.request_wrap(job_id)
    assert watch.tick() == [PublishWraps(job_id, (sol.address,))], "one reader before a claim (--max-readers 1)"
    assert _opened_wrap(proto, job_id, sol.address, solver_key) == data_key
    assert watch.tick() == [], "a wrap per key version: nothing again"
    assert set(proto.sealed_jobs.wrapped(job_id, proto.book.deploy_block)) == {sol.address}

    solver = proto.with_signer(sol).market
    solver.claim(job_id)
    solver.commit(job_id, ROOT, 5, MODEL, MANIFEST)
    devnet.chain.mine(2)
    proto.with_signer(parties.outsider).market.assign_verifier(job_id)
    assert proto.market.get_job(job_id).verifier == ver.address
    assert watch.tick() == [PublishWraps(job_id, (ver.address,))], "the drawn verifier is wrapped to; the other asker no more"
    assert _opened_wrap(proto, job_id, ver.address, verifier_key) == data_key

    as_verifier = proto.with_signer(ver).sealed_jobs
    as_verifier.demand_key(job_id)
    assert proto.market.get_job(job_id).state is JobState.DATA_VOTE
    assert watch.tick() == [AnswerDemand(job_id, ver.address)]
    assert not proto.sealed_jobs.demand_of(job_id).open and proto.market.get_job(job_id).state is JobState.VERIFYING
    assert [w.publisher for w in proto.sealed_jobs.wraps_to(job_id, ver.address, proto.book.deploy_block)] == [parties.submitter.address] * 2

    as_verifier.demand_key(job_id)  # its wrap "did not open": only the key answers now
    assert proto.sealed_jobs.demand_of(job_id).key_only
    assert watch.tick() == [AnswerDemand(job_id, ver.address)]
    assert proto.sealed_jobs.revealed_key(job_id, proto.book.deploy_block) == data_key
    assert proto.sealed_jobs.sealing_of(job_id).status is SealingStatus.REVEALED
    assert proto.market.get_job(job_id).state is JobState.VERIFYING
    assert watch.tick() == [] and watch.jobs == [job_id], "watched until it settles"


def test_watch_returns_and_claims_the_key_bond_after_a_cancel_then_stops(devnet: Devnet, parties: Parties, tmp_path: Path) -> None:
    proto, store, keys, job_id = _post_sealed(devnet, parties, tmp_path)
    watch = Watch(proto, store, keys, [job_id])
    assert watch.tick() == [] and watch.jobs == [job_id]
    service.cancel_job(proto, job_id)
    me = parties.submitter.address
    before = proto.token.balance_of(me)
    assert watch.tick() == [ReturnBond(job_id)]
    assert proto.sealed_jobs.sealing_of(job_id).status is SealingStatus.RETURNED
    watch.tick()
    assert watch.jobs == []
    assert proto.token.balance_of(me) == before + REWARD + FEE and proto.sealed_jobs.credit(me) == 0

    restarted = Watch(proto, store, keys, [job_id])  # a restart reads the chain: nothing left to do
    assert restarted.tick() == [] and restarted.jobs == []
