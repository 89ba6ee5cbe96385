"""The whistleblower's decisions from views built by hand: stake, which reports to audit (rate,
window), which fault to challenge and never twice, its moves in its own games; the audit budget."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, TypedDict

import pytest

from core.chain import Address
from core.contracts import Bytes32, Game, GameId, GameParams, GameStatus, JobId, TokenAmount
from core.dispute import Action
from rolebase.actions import ClaimCredit
from rolebase.earnings import expected_jackpot_per_audit
from rolebase.keygame import WrapReferees
from whistleblower.policy import (
    Audit,
    Challenge,
    Finding,
    FindingKind,
    Forget,
    GameMove,
    HoldChallenge,
    OpenReport,
    OwnGame,
    Stake,
    TimeoutAvailability,
    WhistleblowerConfig,
    WhistleblowerPolicy,
    WhistleblowerView,
    audit_draw,
    challenge_order,
    plan_audit,
)

ME = Address("0x000000000000000000000000000000000000bEEF")
OTHER = Address("0x0000000000000000000000000000000000000777")
T = TokenAmount
Z = Bytes32(b"\x00" * 32)
ROOT = Bytes32(b"\x0a" * 32)  # the committed trace root the view read
SECRET = b"\x11" * 32
PARAMS = GameParams(
    T(20), T(10), T(2), clock_time=60, open_window=30, draw_window=20, commit_window=30, reveal_window=30, max_segment_steps=100_000, committee_size=3
)
POLICY = WhistleblowerPolicy(WhistleblowerConfig(stake_target=T(0)))
PROBE = Finding(FindingKind.PROBE, 0, 4, "probe 0 wrong", 7, Bytes32(b"\xab" * 32), (Bytes32(b"\xcd" * 32),))
SEGMENT = Finding(FindingKind.SEGMENT, 2, 2, "segment 2 fails")


def view(*reports: OpenReport, now: int = 1_000, **over: Any) -> WhistleblowerView:
    base = WhistleblowerView(now=now, block=100, me=ME, token_balance=T(0), staked=T(50), min_stake=T(50), secret=SECRET, reports=reports, game_params=PARAMS)
    return replace(base, **over)


def report(
    job: int = 7,
    *,
    findings: tuple[Finding, ...] | None = None,
    challenged: frozenset[tuple[FindingKind, int]] = frozenset(),
    window_end: int = 1_010,
    referees: int = 3,
) -> OpenReport:
    return OpenReport(JobId(job), f"Qm{job}", window_end, ROOT, findings, challenged, referees)


class GameFields(TypedDict, total=False):
    deadline: int
    anchor_block: int
    hi: int


def game(
    status: GameStatus, *, challenger: Address = ME, lo: int = 0, hi: int = 7, last_move_at: int = 1_000, deadline: int = 0, anchor_block: int = 0
) -> Game:
    return Game(
        defender=OTHER, job_id=JobId(7), segment=4, by_verifier=False, challenger=challenger, steps=7, on_report=True, commits=0,
        votes_defender_right=0, votes_defender_wrong=0, status=status, lo=lo, hi=hi, defender_clock=60, challenger_clock=60,
        last_move_at=last_move_at, deadline=deadline, moves=0, anchor_block=anchor_block, agreed_hash=Z, agreed_cid=Z, disputed_hash=Z, mid_hash=Z, mid_cid=Z,
    )  # fmt: skip


def test_stakes_to_the_minimum_and_audits_nothing_until_eligible() -> None:
    unstaked = view(report(), staked=T(0), token_balance=T(500))
    assert POLICY.next_actions(unstaked) == [Stake(T(50))]
    assert POLICY.next_actions(view(report())) == [Audit(JobId(7), "Qm7", 1_010, ROOT)]


def test_audits_nearest_window_first_and_not_once_the_window_closed() -> None:
    late, soon, closed = report(7, window_end=1_050), report(8, window_end=1_020), report(9, window_end=1_000)
    assert POLICY.next_actions(view(late, soon, closed)) == [Audit(JobId(8), "Qm8", 1_020, ROOT), Audit(JobId(7), "Qm7", 1_050, ROOT)]


def test_the_audit_rate_draw_is_the_same_for_the_same_report_and_about_the_rate() -> None:
    draws = [audit_draw(SECRET, job, f"Qm{job}") for job in range(2_000)]
    assert draws == [audit_draw(SECRET, job, f"Qm{job}") for job in range(2_000)]  # a restart draws the same
    assert 0.45 < sum(d < 0.5 for d in draws) / len(draws) < 0.55
    assert audit_draw(SECRET, 7, "Qm7") != audit_draw(b"\x22" * 32, 7, "Qm7")  # another secret, another draw
    half = WhistleblowerPolicy(WhistleblowerConfig(stake_target=T(0), audit_rate=0.5))
    actions = half.next_actions(view(*(report(j) for j in range(200))))
    assert all(isinstance(a, Audit) for a in actions)  # only audits here
    audited = {a.job_id for a in actions if isinstance(a, Audit)}
    assert audited == {JobId(j) for j in range(200) if audit_draw(SECRET, j, f"Qm{j}") < 0.5}
    never = WhistleblowerPolicy(WhistleblowerConfig(stake_target=T(0), audit_rate=0.0))
    assert never.next_actions(view(report())) == []


def test_audits_only_while_the_expected_jackpot_income_covers_the_audit_cost() -> None:
    thrifty = WhistleblowerPolicy(WhistleblowerConfig(stake_target=T(0), audit_cost=T(5)))
    assert thrifty.next_actions(view(report(), expected_per_audit=T(4))) == []
    assert thrifty.next_actions(view(report(), expected_per_audit=T(5))) == [Audit(JobId(7), "Qm7", 1_010, ROOT)]
    found = report(findings=(PROBE,))  # a fault already found is challenged whatever the jackpot
    assert thrifty.next_actions(view(found, expected_per_audit=T(0))) == [Challenge(JobId(7), "Qm7", PROBE)]


def test_challenges_probes_before_segments_and_each_fault_once() -> None:
    both = (SEGMENT, PROBE)
    assert challenge_order(both) == [PROBE, SEGMENT]
    assert POLICY.next_actions(view(report(findings=both))) == [Challenge(JobId(7), "Qm7", PROBE)]
    after_probe = report(findings=both, challenged=frozenset({PROBE.key}))
    assert POLICY.next_actions(view(after_probe)) == [Challenge(JobId(7), "Qm7", SEGMENT)]
    assert POLICY.next_actions(view(report(findings=both, challenged=frozenset({PROBE.key, SEGMENT.key})))) == []
    assert POLICY.next_actions(view(report(findings=()))) == []  # audited, clean
    assert POLICY.next_actions(view(report(findings=both, window_end=1_000))) == []  # too late


@pytest.mark.parametrize(
    ("status", "now", "block", "kwargs", "want"),
    [
        (GameStatus.CHALLENGER_TO_MOVE, 1_030, 100, {}, Action.ANSWER_MIDPOINT),
        (GameStatus.DEFENDER_TO_MOVE, 1_030, 100, {}, None),  # the defender's turn
        (GameStatus.DEFENDER_TO_MOVE, 1_061, 100, {}, Action.TIMEOUT_CLOCK),  # its clock ran out: at once
        (GameStatus.CHALLENGER_TO_MOVE, 1_061, 100, {}, None),  # our own clock: not ours to call
        (GameStatus.ISOLATED, 1_005, 91, {"anchor_block": 90, "hi": 1}, None),  # seed block not mined yet
        (GameStatus.ISOLATED, 1_005, 92, {"anchor_block": 90, "hi": 1}, Action.DRAW_COMMITTEE),
        (GameStatus.ISOLATED, 1_021, 92, {"anchor_block": 90, "hi": 1}, Action.SETTLE),  # draw window over
        (GameStatus.ARBITRATING, 1_031, 100, {"deadline": 1_030, "hi": 1}, None),  # reveals running
        (GameStatus.ARBITRATING, 1_061, 100, {"deadline": 1_030, "hi": 1}, Action.SETTLE),
        (GameStatus.CHALLENGER_WON, 1_061, 100, {}, None),
    ],
)
def test_plays_its_own_games_at_once(status: GameStatus, now: int, block: int, kwargs: GameFields, want: Action | None) -> None:
    got = POLICY.next_actions(view(now=now, block=block, games=(OwnGame(GameId(4), game(status, **kwargs)),)))
    assert got == ([GameMove(GameId(4), want)] if want else [])


def test_forgets_final_jobs() -> None:
    assert POLICY.next_actions(view(forgettable=(JobId(3), JobId(1)))) == [Forget(JobId(1)), Forget(JobId(3))]


def test_claims_what_the_game_and_the_court_owe_after_its_duties() -> None:
    actions = POLICY.next_actions(view(forgettable=(JobId(2),), credits={"game": T(7), "court": T(0)}))
    assert actions == [ClaimCredit("game"), Forget(JobId(2))]
    both = POLICY.next_actions(view(credits={"game": T(1), "court": T(3)}))
    assert both == [ClaimCredit("game"), ClaimCredit("court")]


def test_budget_takes_probes_then_the_verifiers_segments_then_own_picks() -> None:
    everything = plan_audit([(0, 7), (1, 19)], [9, 3], [3, 5, 0], k=20, budget=10_000)
    assert everything.probes == (0, 1) and everything.segments == (0, 3, 5, 9) and everything.steps == 26 + 80 and everything.left_out == 0
    tight = plan_audit([(0, 7), (1, 19)], [9, 3], [3, 5, 0], k=20, budget=50)
    assert tight.probes == (0, 1) and tight.segments == (9,) and tight.steps == 46 and tight.left_out == 3  # the verifier's first, then no room
    cheap_first = plan_audit([(0, 30), (1, 5)], [], [], k=20, budget=10)
    assert cheap_first.probes == (1,) and cheap_first.left_out == 1  # a probe that does not fit is skipped, the next tried
    assert plan_audit([(0, 7)], [2], [], k=20, budget=27).segments == (2,)


def test_expected_jackpot_per_audit_is_pf_s_j() -> None:
    assert expected_jackpot_per_audit(1_000 * 10**18, 2_000, 100) == 2 * 10**18  # 1 % x 20 % x 1000
    assert expected_jackpot_per_audit(0, 2_000, 100) == 0


def test_no_game_is_opened_while_no_committee_can_be_seated() -> None:
    """Fewer eligible referees than committeeSize (3): the game would end Undecided and the bond go
    to the jackpot; the fault is held, and challenged once the pool can seat a committee."""
    assert POLICY.next_actions(view(report(findings=(SEGMENT,), referees=2))) == [HoldChallenge(JobId(7), "Qm7", 2, 3)]
    assert POLICY.next_actions(view(report(findings=(PROBE, SEGMENT), referees=0))) == [HoldChallenge(JobId(7), "Qm7", 0, 3)]
    assert POLICY.next_actions(view(report(findings=(SEGMENT,), referees=3))) == [Challenge(JobId(7), "Qm7", SEGMENT)]
    assert POLICY.next_actions(view(report(findings=(SEGMENT,), referees=0, challenged=frozenset({SEGMENT.key})))) == [], "nothing left to hold"
    assert POLICY.next_actions(view(report(referees=0))) == [Audit(JobId(7), "Qm7", 1_010, ROOT)], "auditing needs no committee"


def test_a_solver_silent_on_our_availability_challenge_is_timed_out_after_its_deadline() -> None:
    challenges = ((JobId(4), 1_000), (JobId(3), 999))
    assert POLICY.next_actions(view(data_challenges=challenges, now=999)) == []
    assert POLICY.next_actions(view(data_challenges=challenges, now=1_000)) == [TimeoutAvailability(JobId(3))], "the contract wants now > deadline"
    assert POLICY.next_actions(view(data_challenges=challenges, now=1_001)) == [TimeoutAvailability(JobId(3)), TimeoutAvailability(JobId(4))]


def test_wraps_the_key_of_a_sealed_job_to_its_games_unwrapped_referees_beside_its_move() -> None:
    referees = (Address("0x" + "a1" * 20), Address("0x" + "a2" * 20))
    arbitrating = game(GameStatus.ARBITRATING, deadline=1_030, hi=1)
    got = POLICY.next_actions(view(now=1_061, games=(OwnGame(GameId(4), arbitrating, referees),)))
    assert got == [WrapReferees(arbitrating.job_id, GameId(4), referees), GameMove(GameId(4), Action.SETTLE)]
    assert POLICY.next_actions(view(now=1_061, games=(OwnGame(GameId(4), arbitrating),))) == [GameMove(GameId(4), Action.SETTLE)]
