"""The roles' decisions in the data-availability game (pure policies, no chain): the solver publishes
what its verifier challenged while the answer window runs, and never after; the verifier that
challenged times the silent solver out as its own business, a bystander only after the duty grace."""

from __future__ import annotations

from core.chain import Address
from core.contracts import MANIFEST_ITEM, JobId, JobState, TokenAmount
from solver.policy import AnswerAvailability, HeldJob, Phase, SolverConfig, SolverPolicy, SolverView
from verifier.policy import MarketJob, Timeout, TimeoutKind, VerifierConfig, VerifierPolicy, VerifierView

ME = Address("0x000000000000000000000000000000000000bEEF")
OTHER = Address("0x0000000000000000000000000000000000000F00")
SOLVER = Address("0x0000000000000000000000000000000000000050")
SUBMITTER = Address("0x000000000000000000000000000000000000005B")
T = TokenAmount


def _solver(now: int, item: int | None) -> list[object]:
    held = HeldJob(JobId(1), JobState.DATA_CHALLENGED, 2_000, 0, Phase.COMMITTED, challenged_item=item)
    view = SolverView(
        now=now, block=50, me=ME, token_balance=T(0), staked=T(100), free_stake=T(100), min_stake=T(100),
        open_jobs=(), held_jobs=(held,), forgettable=(),
    )  # fmt: skip
    return list(SolverPolicy(SolverConfig(stake_target=T(0))).next_actions(view))


def test_the_solver_publishes_the_challenged_item_until_the_answer_deadline() -> None:
    assert _solver(1_999, 3) == [AnswerAvailability(JobId(1), 3)]
    assert _solver(2_000, MANIFEST_ITEM) == [AnswerAvailability(JobId(1), MANIFEST_ITEM)]  # the contract takes now <= deadline
    assert _solver(2_001, 3) == [], "too late: the chain refuses it, the bond is lost"


def _verifier(now: int, verifier: Address) -> list[object]:
    job = MarketJob(JobId(1), JobState.DATA_CHALLENGED, 900, 0, SOLVER, verifier, SUBMITTER)
    view = VerifierView(
        now=now, block=100, me=ME, token_balance=T(0), staked=T(100), min_stake=T(100),
        assignments=(), jobs=(job,), forgettable=(),
    )  # fmt: skip
    return list(VerifierPolicy(VerifierConfig(stake_target=T(0), own_grace_s=5, duty_grace_s=30)).next_actions(view))


def test_the_challenger_times_the_silent_solver_out_first() -> None:
    timeout = Timeout(JobId(1), TimeoutKind.AVAILABILITY)
    assert _verifier(905, ME) == []
    assert _verifier(906, ME) == [timeout], "ours: after the own grace"
    assert _verifier(906, OTHER) == [], "a bystander waits the duty grace"
    assert _verifier(931, OTHER) == [timeout]
