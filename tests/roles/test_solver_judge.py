"""A hostile submitter cannot drain a solver: jobs it cannot run are refused before any claim.

Each hostile job is posted on anvil the way a submitter who skips the CLI's checks would: a
dataset whose tensors do not fit the model, an npz of object arrays (a pickle), a dataset CID no
store has, a commit window shorter than the training. The solver daemon (in process, real chain,
real store) never claims them (not even one another solver claimed and let reopen), is never
slashed, remembers them across a restart, and still claims a good job posted after them.
"""

from __future__ import annotations

import io
import logging
import math
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from safetensors.numpy import save as save_safetensors

from core.agent import Bell, LoopSettings
from core.chain import Signer
from core.cid import cid_to_digest
from core.config import Settings
from core.contracts import Capabilities, Device, JobId, JobState, Protocol, Role, TokenAmount
from core.gas import max_published_checkpoint_bytes
from core.storage import ContentStore, LocalStore, file_cid
from deploy.devnet import Devnet
from proofs.data import load_dataset
from proofs.datasets import reference_job
from proofs.numerics import profile
from proofs.spec import load_spec, training_memory_bytes
from proofs.train import Runtime
from rolebase.actions import stake
from rolebase.capabilities import misfit
from solver import daemon, judge
from solver.judge import SpecJudge
from solver.policy import Limits, SolverConfig, fits_flag
from solver.state import SolverDb

if TYPE_CHECKING:
    from tests.conftest import Parties

DEP = "31337:0x0000000000000000000000000000000000000001"
#: A chain of 30M-gas blocks, as mainnet and anvil by default.
BLOCK_GAS_30M = 30_000_000


TOKEN = 10**18


def _spec_bytes(dataset: bytes, fmt: str = "safetensors", store: ContentStore | None = None, numerics: str | None = None) -> bytes:
    """The canonical bytes of a small mlp-spirals spec over ``dataset`` (stored when ``store`` is given)."""
    ref = reference_job("mlp-spirals", steps=40, checkpoint_interval=20)
    raw: dict[str, Any] = ref.spec(file_cid(ref.dataset)).to_json_dict()
    raw["dataset"] = {**raw["dataset"], "cid": file_cid(dataset), "size_bytes": len(dataset), "format": fmt}
    if numerics is not None:
        raw["numerics"] = numerics
    if store is not None:
        store.put(dataset)
    return load_spec(raw).canonical_bytes()


def _dataset(width: int = 2, seed: int = 0) -> bytes:
    """64 examples of ``width`` features and 3 classes (the mlp takes 2 features)."""
    rng = np.random.default_rng(seed)
    return save_safetensors({"x": rng.normal(size=(64, width)).astype(np.float32), "y": rng.integers(0, 3, 64).astype(np.int64)})


def _misfit() -> bytes:
    return _dataset(width=3)


def _pickled() -> bytes:
    """An npz whose tensors are object arrays: loading them means unpickling."""
    buf = io.BytesIO()
    np.savez(buf, x=np.array([[0.0, 1.0]] * 64, dtype=object), y=np.array([0] * 64, dtype=object))
    return buf.getvalue()


class CountingStore:
    """A store that counts reads (to see what a judge fetched)."""

    def __init__(self, inner: LocalStore) -> None:
        self.inner = inner
        self.gets = 0

    def get(self, cid: str, max_size: int) -> bytes:
        self.gets += 1
        return self.inner.get(cid, max_size)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_judge_loads_the_dataset_and_refuses_what_does_not_fit(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    db = SolverDb(tmp_path / "state.sqlite")
    judge = SpecJudge(store, db, Limits(new_specs_per_tick=10), DEP)
    ref = reference_job("mlp-spirals", steps=40, checkpoint_interval=20)

    good = judge.check(cid_to_digest(store.put(_spec_bytes(ref.dataset, store=store))))
    assert good.runnable and good.train_s > 0 and good.steps == 40

    misfit = judge.check(cid_to_digest(store.put(_spec_bytes(_misfit(), store=store))))
    assert not misfit.runnable and misfit.final and "does not fit" in misfit.reason and "features" in misfit.reason

    pickled = judge.check(cid_to_digest(store.put(_spec_bytes(_pickled(), "npz", store=store))))
    assert not pickled.runnable and pickled.final and "object" in pickled.reason

    missing = judge.check(cid_to_digest(store.put(_spec_bytes(b"never stored anywhere"))))
    assert not missing.runnable and not missing.final and "not in storage" in missing.reason
    db.close()


def test_a_background_verdict_rings_the_loops_bell_once_it_is_in_the_records(tmp_path: Path) -> None:
    """The daemon judges on a thread of its own; the verdict landing rings the bell that is part of the
    loop's pulse (core.agent.Bell), so the claim does not wait for the next block."""
    store = LocalStore(tmp_path / "store")
    db = SolverDb(tmp_path / "state.sqlite")
    bell = Bell()
    judge = SpecJudge(store, db, Limits(new_specs_per_tick=10), DEP, background=True, judged=bell.ring)
    ref = reference_job("mlp-spirals", steps=40, checkpoint_interval=20)
    digest = cid_to_digest(store.put(_spec_bytes(ref.dataset, store=store)))
    first = judge.check(digest)
    assert not first.runnable and not first.final and first.reason == "being judged" and bell.rings == 0
    deadline = time.monotonic() + 300  # a liveness bound, not a timing claim
    while bell.rings == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert bell.rings == 1 and judge.check(digest).runnable  # rung after the verdict was recorded
    db.close()


@pytest.mark.skipif(profile("repro-v1").fault("cuda") is None, reason="this machine runs repro-v1 on cuda")
def test_judge_refuses_a_job_whose_numerics_cannot_run_on_the_solvers_device(tmp_path: Path) -> None:
    """``--device cuda`` and a repro-v1 job on a machine where numba's CUDA target finds no GPU: refused
    for good before any claim, the reason naming the numerics; the same job is runnable on the CPU.
    (No GPU is needed: the judge refuses before it trains anything.)"""
    store = LocalStore(tmp_path / "store")
    db = SolverDb(tmp_path / "state.sqlite")
    ref = reference_job("mlp-spirals", steps=40, checkpoint_interval=20)
    digest = cid_to_digest(store.put(_spec_bytes(ref.dataset, store=store)))
    on_gpu = SpecJudge(store, db, Limits(new_specs_per_tick=10), DEP, rt=Runtime(device="cuda")).check(digest)
    assert not on_gpu.runnable and on_gpu.final and on_gpu.reason.startswith("numerics repro-v1 cannot run on cuda here: ")
    assert SpecJudge(store, db, Limits(new_specs_per_tick=10), DEP).check(digest).runnable  # verdicts are kept per device
    db.close()


def test_judge_refuses_a_job_whose_training_needs_more_memory_than_it_gives(tmp_path: Path) -> None:
    """``--max-memory-gib``: the estimate from the spec alone (proofs.spec.training_memory_bytes)
    refuses the job for good before its dataset is fetched, in one line with both figures."""
    store = LocalStore(tmp_path / "store")
    db = SolverDb(tmp_path / "state.sqlite")
    ref = reference_job("mlp-spirals", steps=40, checkpoint_interval=20)
    digest = cid_to_digest(store.put(_spec_bytes(ref.dataset, store=store)))
    need = training_memory_bytes(ref.spec("QmData"))
    small = SpecJudge(store, db, Limits(new_specs_per_tick=10, max_memory_bytes=need - 1), DEP).check(digest)
    assert not small.runnable and small.final
    assert small.reason == f"gives a job at most {(need - 1) / 2**30:,.1f} GiB of memory (training needs about {need / 2**30:,.1f} GiB)"
    db.close()
    fresh = SolverDb(tmp_path / "fresh.sqlite")  # a verdict is kept: another solver's records
    assert SpecJudge(store, fresh, Limits(new_specs_per_tick=10, max_memory_bytes=need), DEP).check(digest).runnable
    fresh.close()


def test_judge_refuses_data_on_which_honest_training_does_no_learning_work(tmp_path: Path) -> None:
    """All-zero features give the first layer's weight an exactly zero gradient at every step:
    every verifier fails such steps (``no-work``), so claiming the job would cost the solver its bond."""
    store = LocalStore(tmp_path / "store")
    db = SolverDb(tmp_path / "state.sqlite")
    judge = SpecJudge(store, db, Limits(new_specs_per_tick=10), DEP)
    zeros = save_safetensors({"x": np.zeros((64, 2), np.float32), "y": np.random.default_rng(0).integers(0, 3, 64).astype(np.int64)})
    idle = judge.check(cid_to_digest(store.put(_spec_bytes(zeros, store=store))))
    assert not idle.runnable and idle.final
    assert idle.reason == "training does no learning work, which verifiers fail: layers.0.weight has an exactly zero gradient in a dry-run step"
    db.close()


def test_judge_refuses_a_learning_rate_that_leaves_the_parameters_unchanged(tmp_path: Path) -> None:
    """A learning rate that underflows (1e-30) gives every tensor a gradient and still leaves every
    parameter bit-identical; with plain SGD the slots do not move either, so every verifier would
    fail the honest solver's segments (``no-work``). The dry run refuses it in one line; the same
    spec at an ordinary learning rate is taken."""
    store = LocalStore(tmp_path / "store")
    db = SolverDb(tmp_path / "state.sqlite")
    judge = SpecJudge(store, db, Limits(new_specs_per_tick=10), DEP)
    data = _dataset()
    raw = load_spec(_spec_bytes(data, store=store)).to_json_dict()
    checks = {}
    for lr in (1e-30, 0.05):
        raw["optimizer"] = {"kind": "sgd", "lr": lr, "momentum": 0.0, "dampening": 0.0, "nesterov": False, "weight_decay": 0.0}
        checks[lr] = judge.check(cid_to_digest(store.put(load_spec(raw).canonical_bytes())))
    assert not checks[1e-30].runnable and checks[1e-30].final
    assert checks[1e-30].reason == (
        "training does no learning work, which verifiers fail: 3 dry-run steps leave every parameter bit-identical (learning rate 1e-30 underflows)"
    )
    assert checks[0.05].runnable, checks[0.05].reason
    db.close()


def test_judge_takes_checkpoints_of_any_size_and_manifests_of_any_length(tmp_path: Path) -> None:
    """A challenged checkpoint is answered through the availability court, at any size: a job whose
    checkpoints no 30M-gas block could carry is claimable. A manifest of any length is published block
    by block (its root on chain, proofs.manifest), so a long job is not refused either."""
    store = LocalStore(tmp_path / "store")
    db = SolverDb(tmp_path / "state.sqlite")
    judge = SpecJudge(store, db, Limits(new_specs_per_tick=10), DEP)
    ref = reference_job("mlp-spirals", steps=40, checkpoint_interval=20)
    store.put(ref.dataset)
    raw: dict[str, Any] = ref.spec(file_cid(ref.dataset)).to_json_dict()

    wide = {**raw, "model": {**raw["model"], "hidden": [512, 512]}}  # ~265k parameters with momentum: ~2.1 MB a checkpoint
    check = judge.check(cid_to_digest(store.put(load_spec(wide).canonical_bytes())))
    assert check.runnable and check.checkpoint_bytes > max_published_checkpoint_bytes(BLOCK_GAS_30M), check.reason

    long = {**raw, "steps": 2000, "checkpoint_interval": 1}  # 2001 checkpoints: a manifest of pages, each one block
    check = judge.check(cid_to_digest(store.put(load_spec(long).canonical_bytes())))
    assert check.runnable, check.reason
    db.close()


def test_fits_means_the_solver_claims_it(tmp_path: Path) -> None:
    """Issue 26 item 8: what ``submit post --dry-run`` says of a solver's advert (rolebase.capabilities.misfit)
    is what the solver decides before a claim: the same reason when it refuses, a runnable job when the
    advert fits (its speed fast enough for the window). Checkpoints over what a 30M-gas block carries,
    a manifest of any length and either numerics fit; a limit does not."""
    store = LocalStore(tmp_path / "store")
    db = SolverDb(tmp_path / "state.sqlite")
    limits = Limits(max_steps=20000, new_specs_per_tick=10)
    judge = SpecJudge(store, db, limits, DEP)
    advert = Capabilities(limits.max_params, limits.max_dataset_bytes, limits.max_steps, 10**15, Device.CPU, advertised_at=1)
    ref = reference_job("mlp-spirals", steps=40, checkpoint_interval=20)
    store.put(ref.dataset)
    raw: dict[str, Any] = ref.spec(file_cid(ref.dataset)).to_json_dict()
    variants = {
        "fits": raw,
        "checkpoints over a 30M-gas block": {**raw, "model": {**raw["model"], "hidden": [512, 512]}},
        "10,000 checkpoints (a manifest of pages)": {**raw, "steps": 10000, "checkpoint_interval": 1},
        "over the solver's steps": {**raw, "steps": 20040},
        "torch numerics": {**raw, "numerics": "torch"},
    }
    said: dict[str, str] = {}
    for name, body in variants.items():
        spec = load_spec(body)
        said[name] = misfit(advert, spec, 10**6)
        check = judge.check(cid_to_digest(store.put(spec.canonical_bytes())))
        assert check.runnable == (said[name] == ""), (name, said[name], check.reason)
        assert check.runnable or check.reason == said[name], (name, said[name], check.reason)
    assert [n for n in variants if said[n]] == ["over the solver's steps"], said
    db.close()


def test_verdicts_survive_a_restart_per_deployment_and_missing_content_is_looked_for_at_a_backoff(tmp_path: Path) -> None:
    inner = LocalStore(tmp_path / "store")
    misfit = cid_to_digest(inner.put(_spec_bytes(_misfit(), store=inner)))
    absent_data = _dataset(seed=1)  # posted before it was uploaded
    late = cid_to_digest(inner.put(_spec_bytes(absent_data)))
    now = [1_000.0]
    store = CountingStore(inner)
    db = SolverDb(tmp_path / "state.sqlite")
    judge = SpecJudge(store, db, Limits(new_specs_per_tick=10), DEP, clock=lambda: now[0])
    assert not judge.check(misfit).runnable and not judge.check(late).runnable
    fetched = store.gets
    db.close()

    db = SolverDb(tmp_path / "state.sqlite")  # a restart: same records, nothing fetched again
    judge = SpecJudge(store, db, Limits(new_specs_per_tick=10), DEP, clock=lambda: now[0])
    assert not judge.check(misfit).runnable and not judge.check(late).final
    assert store.gets == fetched
    now[0] += 31  # past the first backoff: the missing dataset is looked for again, and now it is there
    inner.put(absent_data)
    judge.new_tick()
    assert judge.check(late).runnable and store.gets > fetched
    # another deployment (a redeployed devnet reuses job ids and CIDs): judged afresh
    other = SpecJudge(store, db, Limits(new_specs_per_tick=10), "31337:0x0000000000000000000000000000000000000002")
    before = store.gets
    assert not other.check(misfit).runnable and store.gets > before
    db.close()


def test_the_verdict_says_whether_the_spec_needs_full_replay_and_keeps_it(tmp_path: Path) -> None:
    """A torch-numerics spec is runnable, its verdict marked as needing full replay, across a restart
    of the records too; a repro-v1 spec's is not. The job's flag is what refuses it (fits_flag)."""
    store = LocalStore(tmp_path / "store")
    ref = reference_job("mlp-spirals", steps=40, checkpoint_interval=20)
    exact = cid_to_digest(store.put(_spec_bytes(ref.dataset, store=store)))
    torch_spec = cid_to_digest(store.put(_spec_bytes(ref.dataset, store=store, numerics="torch")))
    db = SolverDb(tmp_path / "state.sqlite")
    judge = SpecJudge(store, db, Limits(new_specs_per_tick=10), DEP)
    assert not judge.check(exact).full_replay
    first = judge.check(torch_spec)
    assert first.runnable and first.full_replay
    db.close()
    db = SolverDb(tmp_path / "state.sqlite")
    kept = SpecJudge(store, db, Limits(new_specs_per_tick=10), DEP).check(torch_spec)
    assert kept == first
    refused = fits_flag(kept, posted_full_replay=False)
    assert not refused.runnable and refused.final and "posted without the full-replay flag" in refused.reason
    assert fits_flag(kept, posted_full_replay=True) == kept
    db.close()


def test_a_flood_of_new_specs_is_judged_a_few_per_tick(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    db = SolverDb(tmp_path / "state.sqlite")
    judge = SpecJudge(store, db, Limits(new_specs_per_tick=1), DEP)
    specs = [cid_to_digest(store.put(_spec_bytes(f"absent {i}".encode()))) for i in range(3)]
    first = [judge.check(s) for s in specs]
    assert ["not judged yet" in c.reason for c in first] == [False, True, True]
    judge.new_tick()
    assert "not judged yet" not in judge.check(specs[1]).reason
    db.close()


# ------------------------------------------------------------------ on anvil, the daemon in process


def _post(protocol: Protocol, store: LocalStore, spec: bytes, commit_window: int, *, full_replay: bool = False) -> JobId:
    job_id, _ = protocol.market.post_job(cid_to_digest(store.put(spec)), TOKEN, TOKEN, commit_window, full_replay=full_replay)
    return job_id


def _solver(devnet: Devnet, tmp_path: Path, store: LocalStore, signer: Signer) -> daemon.SolverDaemon:
    book_dir = tmp_path / "deployments"
    book_dir.mkdir(exist_ok=True)
    devnet.book.save(book_dir / f"{devnet.client.chain_id}.json")
    settings = Settings(rpc_url=devnet.rpc_url, address_book_dir=book_dir, data_dir=tmp_path / "data")
    return daemon.build(settings, signer, store, SolverConfig(stake_target=TokenAmount(0)), loop=LoopSettings(poll_interval_s=0.05))


def test_a_hostile_submitter_cannot_make_the_solver_claim_what_it_cannot_run(
    devnet: Devnet, parties: Parties, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = LocalStore(tmp_path / "store")
    submitter = devnet.protocol(parties.submitter)
    submitter.token.approve(submitter.market.address, 100 * TOKEN)
    ref = reference_job("mlp-spirals", steps=40, checkpoint_interval=20)
    hostile = [
        _post(submitter, store, _spec_bytes(_misfit(), store=store), 600),
        _post(submitter, store, _spec_bytes(_pickled(), "npz", store=store), 600),
        _post(submitter, store, _spec_bytes(b"a dataset no store has"), 600),
        _post(submitter, store, _spec_bytes(ref.dataset, store=store), 1),
    ]
    solver = _solver(devnet, tmp_path, store, parties.solver)
    me = parties.solver.address
    with caplog.at_level(logging.WARNING, logger="solver.loader"):
        for _ in range(6):
            solver.agent.tick()
        staked = devnet.protocol().stakes.stake_of(me, Role.SOLVER).staked
        assert staked > 0  # it staked, and had the stake to claim every job
        solver.db.close()
        # another solver claims the misfit job, misses its commit, and the job reopens
        other = devnet.protocol(parties.solver2)
        stake(other, parties.solver2.address, Role.SOLVER, other.stakes.min_stake(Role.SOLVER))
        other.market.claim(hostile[0])
        devnet.chain.increase_time(601)
        other.market.timeout_solver(hostile[0])
        assert other.market.get_job(hostile[0]).state is JobState.OPEN
        solver = _solver(devnet, tmp_path, store, parties.solver)  # a restart: the refusals are remembered
        for _ in range(3):
            solver.agent.tick()
        good = _post(submitter, store, _spec_bytes(ref.dataset, store=store), 600)
        market = devnet.protocol().market
        for _ in range(6):
            solver.agent.tick()
            if market.get_job(good).solver == me:
                break
    solver.db.close()
    deploy = devnet.book.deploy_block
    assert market.get_job(good).solver == me  # the good job after them is claimed
    assert [e.args["solver"] for j in hostile for e in market.events("JobClaimed", deploy, jobId=j)] == [parties.solver2.address]
    assert devnet.protocol().stakes.stake_of(me, Role.SOLVER).staked == staked  # never slashed
    refusals = [r for r in caplog.records if r.getMessage().startswith("job refused")]
    # once each, across the restart and the reopen: the three unusable specs and the window too short (the CID
    # nobody has is looked for again later, not refused for good)
    assert sorted(int(r.__dict__["job"]) for r in refusals) == sorted(hostile[i] for i in (0, 1, 3))


def test_a_step_too_long_to_dry_run_is_extrapolated_from_one_example(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stranger's spec must not stall the solver: full steps are dry-run only when one example's
    step times the batch size says they are short."""
    ref = reference_job("mlp-spirals", steps=40, checkpoint_interval=20)
    spec = load_spec(_spec_bytes(ref.dataset))
    dataset = load_dataset(spec, ref.dataset)
    ran: list[int] = []

    class Recording(judge.Trainer):
        def run(self, steps: int, *args: Any, **kwargs: Any) -> list[float]:
            ran.append(self.spec.batch_size)
            return super().run(steps, *args, **kwargs)

    monkeypatch.setattr(judge, "Trainer", Recording)
    # each branch forced by the cap, not by this machine's speed (a loaded machine's one-example step,
    # times the batch, once passed the 10 s cap and skipped the full steps)
    monkeypatch.setattr(judge, "DRY_RUN_STEP_CAP_S", math.inf)
    assert judge._estimate(spec, dataset).train_s > 0 and spec.batch_size in ran
    ran.clear()
    monkeypatch.setattr(judge, "DRY_RUN_STEP_CAP_S", 0.0)
    assert judge._estimate(spec, dataset).train_s > 0 and set(ran) == {1}


def test_a_spec_that_needs_full_replay_is_claimed_only_on_a_job_posted_with_the_flag(
    devnet: Devnet, parties: Parties, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A torch-numerics spec posted straight to the market without the full-replay flag (no ``submit
    post``, which sets it) would only be sampled: the solver refuses it for good in one line; the same
    spec posted with the flag is claimed."""
    store = LocalStore(tmp_path / "store")
    submitter = devnet.protocol(parties.submitter)
    submitter.token.approve(submitter.market.address, 100 * TOKEN)
    ref = reference_job("mlp-spirals", steps=40, checkpoint_interval=20)
    spec = _spec_bytes(ref.dataset, store=store, numerics="torch")
    unflagged = _post(submitter, store, spec, 600)
    flagged = _post(submitter, store, spec, 600, full_replay=True)
    market = devnet.protocol().market
    assert market.is_full_replay(flagged) and not market.is_full_replay(unflagged)
    solver = _solver(devnet, tmp_path, store, parties.solver)
    me = parties.solver.address

    def refusals() -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.getMessage().startswith("job refused") and getattr(r, "job", None) == unflagged]

    with caplog.at_level(logging.WARNING, logger="solver.loader"):
        # the spec is judged on a thread of its own: its verdict may land between the two jobs' checks
        # of one tick, so the refusal may come a tick after the claim (a liveness bound, not a timing claim)
        deadline = time.monotonic() + 300
        while not (market.get_job(flagged).solver == me and refusals()) and time.monotonic() < deadline:
            solver.agent.tick()
            time.sleep(0.05)
        for _ in range(3):  # refused for good: never logged again
            solver.agent.tick()
    solver.db.close()
    assert market.get_job(flagged).solver == me
    assert not market.events("JobClaimed", devnet.book.deploy_block, jobId=unflagged)
    (refusal,) = refusals()
    assert "posted without the full-replay flag" in getattr(refusal, "reason", "")
