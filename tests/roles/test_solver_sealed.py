"""The solver's side of sealed jobs (docs/sealing.md): its decisions from views built by hand, the
judge on a sealed dataset, and the claim's last check. No chain."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from core.agent import StopFlag
from core.chain import Address
from core.cid import cid_to_digest
from core.contracts import Bytes32, JobId, JobState, KeyDemand, RegisteredKey, TokenAmount
from core.errors import SealingError
from core.sealing import EncryptionKey, new_data_key, seal
from core.storage import LocalStore, file_cid
from proofs.datasets import reference_job
from proofs.spec import load_spec
from rolebase.keygame import AnswerDemand, PublishWraps, RegisterKey, RequestWrap
from solver.judge import SpecJudge
from solver.policy import (
    Claim,
    HeldJob,
    Limits,
    OpenJob,
    Phase,
    SealedHeld,
    SealedOpen,
    SolverConfig,
    SolverPolicy,
    SolverView,
    SpecCheck,
)
from solver.responder import SolverResponder
from solver.state import SolverDb
from solver.work import JobTrainer
from tests.roles.test_solver_policy import view as plain_view

ME = Address("0x000000000000000000000000000000000000bEEF")
VERIFIER = Address("0x00000000000000000000000000000000000000A1")
REFEREES = (Address("0x00000000000000000000000000000000000000B1"), Address("0x00000000000000000000000000000000000000B2"))
JOB = JobId(7)
T = TokenAmount
MINE = EncryptionKey.generate()
POLICY = SolverPolicy(SolverConfig(stake_target=T(0), encryption_key=MINE))
#: A sealed spec judged without its data key, and one judged with it.
NO_KEY = SpecCheck(False, "the dataset is sealed and we hold no data key for it yet", 100, final=False, sealed=True)
OPENED = SpecCheck(True, "", 100, 10.0, sealed=True)
ASKING = SealedOpen(active=True, key_registered=True, key_held=False, asked=False)
DEP = "31337:0x0000000000000000000000000000000000000001"


def view(**over: Any) -> SolverView:
    """The policy tests' view, with our key registered."""
    return plain_view(**{"registered_key": RegisteredKey(MINE.public_key, 1), **over})


def sealed_job(spec: SpecCheck, sealing: SealedOpen | None) -> OpenJob:
    return OpenJob(JOB, T(10), T(20), 5_000, 600, spec, 0, sealing)


def held(state: JobState, sealing: SealedHeld) -> HeldJob:
    return HeldJob(JOB, state, 2_000, 0, Phase.COMMITTED, sealing=sealing)


def key(version: int = 1) -> RegisteredKey:
    return RegisteredKey(Bytes32(bytes([version]) * 32), version)


def test_the_key_is_registered_once_staked_and_again_only_when_the_chain_holds_another() -> None:
    none = RegisteredKey(Bytes32(bytes(32)), 0)
    assert RegisterKey(MINE.public_key) in POLICY.next_actions(view(registered_key=none))
    assert not any(isinstance(a, RegisterKey) for a in POLICY.next_actions(view(registered_key=none, staked=T(0), free_stake=T(0))))
    assert not any(isinstance(a, RegisterKey) for a in POLICY.next_actions(view()))  # ours already
    assert RegisterKey(MINE.public_key) in POLICY.next_actions(view(registered_key=key(3)))  # another (a rotation elsewhere): ours again
    no_key = SolverPolicy(SolverConfig(stake_target=T(0)))
    assert no_key.next_actions(view(registered_key=None)) == []


def test_a_sealed_job_is_neither_claimed_nor_asked_for_without_an_encryption_key() -> None:
    """The loader leaves a sealing out without a key; even a runnable verdict (a spec judged with
    another job's key) is then no claim."""
    for spec in (NO_KEY, OPENED):
        assert SolverPolicy(SolverConfig(stake_target=T(0))).next_actions(view(open_jobs=(sealed_job(spec, None),), registered_key=None)) == []


def test_the_wrap_is_asked_for_once_and_the_claim_comes_only_once_it_opened() -> None:
    asked = POLICY.next_actions(view(open_jobs=(sealed_job(NO_KEY, ASKING),)))
    assert asked == [RequestWrap(JOB)]
    waiting = POLICY.next_actions(view(open_jobs=(sealed_job(NO_KEY, replace(ASKING, asked=True)),)))
    assert waiting == []  # our request is on chain: not again, and no claim before the key
    # a verdict runnable from another job of the same spec, but no wrap to us opened for this one: no claim
    assert POLICY.next_actions(view(open_jobs=(sealed_job(OPENED, replace(ASKING, asked=True)),))) == []
    claimed = POLICY.next_actions(view(open_jobs=(sealed_job(OPENED, replace(ASKING, key_held=True)),)))
    assert claimed == [Claim(JOB)]


def test_no_ask_and_no_claim_on_a_sealing_not_active_or_without_our_key_registered() -> None:
    for sealing in (replace(ASKING, active=False), replace(ASKING, key_registered=False)):
        assert POLICY.next_actions(view(open_jobs=(sealed_job(NO_KEY, sealing),))) == []
    spent = SealedOpen(active=False, key_registered=True, key_held=True, asked=False)  # reopened after a forfeit: no solver trains it again
    assert POLICY.next_actions(view(open_jobs=(sealed_job(OPENED, spent),))) == []


def test_no_ask_for_a_job_we_would_not_take() -> None:
    assert POLICY.next_actions(view(free_stake=T(19), open_jobs=(sealed_job(NO_KEY, ASKING),))) == []  # no stake for its bond
    assert POLICY.next_actions(view(now=4_996, open_jobs=(sealed_job(NO_KEY, ASKING),))) == []  # about to expire
    picky = SolverPolicy(SolverConfig(stake_target=T(0), encryption_key=MINE, min_reward=T(11)))
    assert picky.next_actions(view(open_jobs=(sealed_job(NO_KEY, ASKING),))) == []


def test_the_drawn_verifier_is_wrapped_to_once_per_key_version() -> None:
    drawn = SealedHeld(key_held=True, entitled=(VERIFIER,), registered={VERIFIER: key(1)})
    assert POLICY.next_actions(view(held_jobs=(held(JobState.VERIFYING, drawn),))) == [PublishWraps(JOB, (VERIFIER,))]
    wrapped = replace(drawn, wrapped={VERIFIER: 1})
    assert POLICY.next_actions(view(held_jobs=(held(JobState.VERIFYING, wrapped),))) == []
    rotated = replace(wrapped, registered={VERIFIER: key(2)})
    assert POLICY.next_actions(view(held_jobs=(held(JobState.VERIFYING, rotated),))) == [PublishWraps(JOB, (VERIFIER,))]
    unregistered = replace(drawn, registered={VERIFIER: RegisteredKey(Bytes32(bytes(32)), 0)})
    assert POLICY.next_actions(view(held_jobs=(held(JobState.VERIFYING, unregistered),))) == []
    keyless = replace(drawn, key_held=False)  # records lost and no wrap to us found again: nothing to wrap
    assert POLICY.next_actions(view(held_jobs=(held(JobState.VERIFYING, keyless),))) == []


def test_seated_referees_are_wrapped_to_those_not_wrapped_yet() -> None:
    seated = SealedHeld(
        key_held=True,
        entitled=REFEREES,
        wrapped={REFEREES[0]: 1},
        registered={REFEREES[0]: key(1), REFEREES[1]: key(1)},
    )
    assert POLICY.next_actions(view(held_jobs=(held(JobState.DISPUTED, seated),))) == [PublishWraps(JOB, (REFEREES[1],))]


def test_the_verifiers_first_demand_is_answered_and_its_second_is_not() -> None:
    first = KeyDemand(VERIFIER, 3_000, key_only=False, verifying=True)
    demanded = SealedHeld(key_held=True, entitled=(VERIFIER,), wrapped={VERIFIER: 1}, registered={VERIFIER: key(1)}, demand=first)
    assert POLICY.next_actions(view(held_jobs=(held(JobState.DATA_VOTE, demanded),))) == [AnswerDemand(JOB, VERIFIER)]
    # its demand before we wrapped: the answer is the wrap, not a second one beside it
    unwrapped = replace(demanded, wrapped={})
    assert POLICY.next_actions(view(held_jobs=(held(JobState.DATA_VOTE, unwrapped),))) == [AnswerDemand(JOB, VERIFIER)]
    second = replace(demanded, demand=replace(first, key_only=True))
    assert POLICY.next_actions(view(held_jobs=(held(JobState.DATA_VOTE, second),))) == []


class _Sealed:
    """SealedJobs as the responder sees it: its demand, and every call recorded."""

    def __init__(self, demand: KeyDemand) -> None:
        self.demand = demand
        self.sent: list[str] = []

    def demand_of(self, job_id: JobId) -> KeyDemand:
        return self.demand

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any) -> None:
            self.sent.append(name)

        return call


def test_a_demand_that_became_a_second_one_since_the_view_is_left_to_the_submitter(tmp_path: Path) -> None:
    """The view saw a first demand; by the time the answer is sent the party demanded again: only the
    key answers that, and the solver never reveals it."""
    db = SolverDb(tmp_path / "state.sqlite")
    db.keep_data_key(JOB, new_data_key())
    sealed = _Sealed(KeyDemand(VERIFIER, 3_000, key_only=True, verifying=True))
    calls = SimpleNamespace(sealed_jobs=sealed, keys=SimpleNamespace(key_of=lambda a: key(1)), game=None, stakes=None, market=None, token=None, court=None)
    responder = SolverResponder(cast(Any, calls), db, cast(Any, SimpleNamespace(store=None)), cast(Any, None), ME, cast(Any, None))
    responder.perform(AnswerDemand(JOB, VERIFIER))
    assert sealed.sent == []  # neither revealKey nor publishWraps
    db.close()


def _sealed_spec(store: LocalStore, data_key: bytes) -> bytes:
    """A small mlp-spirals spec whose dataset is stored sealed under ``data_key``; its digest."""
    ref = reference_job("mlp-spirals", steps=40, checkpoint_interval=20)
    sealed = seal(data_key, ref.dataset)
    raw: dict[str, Any] = ref.spec(file_cid(ref.dataset)).to_json_dict()
    raw["dataset"] = {**raw["dataset"], "cid": store.put(sealed), "size_bytes": len(sealed), "sealed": True}
    return cid_to_digest(store.put(load_spec(raw).canonical_bytes()))


def test_the_judge_opens_a_sealed_dataset_only_with_its_key(tmp_path: Path) -> None:
    store = LocalStore(tmp_path / "store")
    db = SolverDb(tmp_path / "state.sqlite")
    judge = SpecJudge(store, db, Limits(new_specs_per_tick=10), DEP)
    data_key = new_data_key()
    digest = _sealed_spec(store, data_key)

    unopened = judge.check(digest)
    assert (unopened.runnable, unopened.final, unopened.sealed) == (False, False, True)  # asked for, not refused
    opened = judge.check(digest, data_key)
    assert opened.runnable and opened.sealed and opened.train_s > 0
    other = judge.check(digest, new_data_key())  # the same spec under another commitment: its key does not open it
    assert not other.runnable and other.final and "SealingError" in other.reason
    assert judge.check(digest, data_key).runnable and not judge.check(digest).runnable  # each verdict kept under its own key
    db.close()


def test_no_claim_is_sent_on_a_sealed_dataset_that_does_not_open(tmp_path: Path) -> None:
    """The claim's last check: the responder pins the inputs before it claims, and a sealed dataset
    is opened with the job's data key first; without it, or with another, the claim is not sent."""
    store = LocalStore(tmp_path / "store")
    db = SolverDb(tmp_path / "state.sqlite")
    data_key = new_data_key()
    digest = _sealed_spec(store, data_key)
    watcher = cast(Any, SimpleNamespace(spec_cid=lambda job_id: digest))
    claims: list[JobId] = []

    def claim(job_id: JobId) -> Any:
        claims.append(job_id)
        return SimpleNamespace(gas_used=1, tx_hash="0x01")

    calls = SimpleNamespace(market=SimpleNamespace(claim=claim), sealed_jobs=None, keys=None, game=None, stakes=None, token=None, court=None)
    trainer = JobTrainer(cast(Any, None), store, db, watcher, tmp_path / "jobs", StopFlag())
    responder = SolverResponder(cast(Any, calls), db, trainer, watcher, ME, cast(Any, None))
    with pytest.raises(SealingError):
        responder.perform(Claim(JOB))
    db.keep_data_key(JOB, new_data_key())
    with pytest.raises(SealingError):
        responder.perform(Claim(JOB))
    assert claims == [] and db.job(JOB) is None
    db.keep_data_key(JOB, data_key)
    responder.perform(Claim(JOB))
    assert claims == [JOB] and db.job(JOB) is not None
    db.close()
