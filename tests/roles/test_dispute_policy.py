"""The dispute decisions of the solver and verifier policies, from views built by hand: who moves
when, the permissionless calls and their grace, the adversary switches (silent, cheat once), and
the verifier as the defender of its probes in report games (concede a forced error, else defend)
and as a referee of them."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from core.chain import Address
from core.contracts import Ballot, Bytes32, Game, GameId, GameParams, GameStatus, JobId, JobState, TokenAmount
from core.dispute import Action
from rolebase.dispute import vote_from_shape
from rolebase.keygame import DeclineSeat, WrapReferees
from solver.policy import ForfeitUnopened, HeldJob, OpenJob, Phase, SolverConfig, SolverPolicy, SolverView, SpecCheck
from solver.responder import _Defense
from verifier.policy import (
    ConcedeForced,
    GameMove,
    LiveGame,
    OpenGame,
    PendingOpen,
    VerifierConfig,
    VerifierPolicy,
    VerifierView,
)

ME = Address("0x000000000000000000000000000000000000bEEF")
OTHER = Address("0x0000000000000000000000000000000000000777")
T = TokenAmount
Z = Bytes32(b"\x00" * 32)
PARAMS = GameParams(
    T(20), T(10), T(2), clock_time=60, open_window=30, draw_window=20, commit_window=30, reveal_window=30, max_segment_steps=100_000, committee_size=3
)
GID = GameId(4)


def game(
    status: GameStatus,
    *,
    defender: Address = ME,
    challenger: Address = OTHER,
    lo: int = 0,
    hi: int = 20,
    last_move_at: int = 1_000,
    deadline: int = 0,
    anchor_block: int = 0,
    commits: int = 0,
    votes: int = 0,
    on_report: bool = False,
) -> Game:
    return Game(
        defender=defender, job_id=JobId(7), segment=3, by_verifier=True, challenger=challenger, steps=20, on_report=on_report, commits=commits,
        votes_defender_right=votes, votes_defender_wrong=0, status=status, lo=lo, hi=hi, defender_clock=60, challenger_clock=60,
        last_move_at=last_move_at, deadline=deadline, moves=0, anchor_block=anchor_block, agreed_hash=Z, agreed_cid=Z, disputed_hash=Z, mid_hash=Z, mid_cid=Z,
    )  # fmt: skip


def solver_view(now: int, *jobs: HeldJob, **over: Any) -> SolverView:
    base = SolverView(now=now, block=100, me=ME, token_balance=T(0), staked=T(100), free_stake=T(100), min_stake=T(100),
                      open_jobs=(), held_jobs=jobs, forgettable=(), game_params=PARAMS)  # fmt: skip
    return replace(base, **over)


def disputed(g: Game | None, open_deadline: int | None = None) -> HeldJob:
    return HeldJob(JobId(7), JobState.DISPUTED, 5_000, 0, Phase.COMMITTED, GID if g else GameId(0), g, open_deadline)


SOLVER = SolverPolicy(SolverConfig(stake_target=T(0)))


def test_solver_posts_the_midpoint_while_its_clock_runs_then_not_at_all() -> None:
    g = game(GameStatus.DEFENDER_TO_MOVE, lo=8, hi=12)
    assert SOLVER.next_actions(solver_view(1_030, disputed(g))) == [GameMove(GID, Action.POST_MIDPOINT)]
    assert SOLVER.next_actions(solver_view(1_060, disputed(g))) == [GameMove(GID, Action.POST_MIDPOINT)]  # last second
    assert SOLVER.next_actions(solver_view(1_061, disputed(g))) == []  # clock out: the challenger times us out


def test_the_solvers_defense_recomputes_the_games_midpoint_step_of_its_segment() -> None:
    """The solver plays ``postMidpoint`` through the shared :class:`GameMoves`; its side of the move is
    its state ``midpoint(lo, hi)`` steps into the disputed segment, recomputed from that segment's checkpoint."""
    asked: list[tuple[int, int, int]] = []

    class Trainer:
        def midpoint(self, job_id: JobId, segment: int, step: int) -> tuple[Bytes32, str]:
            asked.append((job_id, segment, step))
            return Z, "cid"

    assert _Defense(Trainer()).midpoint(game(GameStatus.DEFENDER_TO_MOVE, lo=8, hi=12)) == (Z, "cid")  # type: ignore[arg-type]
    assert asked == [(7, 3, 10)]


def test_a_silent_adversary_does_not_defend() -> None:
    silent = SolverPolicy(SolverConfig(stake_target=T(0), defend=False))
    assert silent.next_actions(solver_view(1_010, disputed(game(GameStatus.DEFENDER_TO_MOVE)))) == []


def test_solver_times_out_a_challenger_out_of_clock_and_forfeits_an_unopened_game() -> None:
    assert SOLVER.next_actions(solver_view(1_061, disputed(game(GameStatus.CHALLENGER_TO_MOVE)))) == [GameMove(GID, Action.TIMEOUT_CLOCK)]
    assert SOLVER.next_actions(solver_view(1_059, disputed(game(GameStatus.CHALLENGER_TO_MOVE)))) == []
    assert SOLVER.next_actions(solver_view(1_030, disputed(None, open_deadline=1_030))) == []
    assert SOLVER.next_actions(solver_view(1_031, disputed(None, open_deadline=1_030))) == [ForfeitUnopened(JobId(7))]


def test_the_solver_leaves_a_report_game_on_its_job_to_the_verifier() -> None:
    report_game = game(GameStatus.DEFENDER_TO_MOVE, defender=OTHER, on_report=True)  # the verifier defends its probe
    assert SOLVER.next_actions(solver_view(1_010, disputed(report_game))) == []
    assert SOLVER.next_actions(solver_view(1_061, disputed(replace(report_game, status=GameStatus.CHALLENGER_TO_MOVE)))) == []


def test_a_cheat_once_solver_claims_no_second_job() -> None:
    once = SolverPolicy(SolverConfig(stake_target=T(0), max_claims=1))
    job = OpenJob(JobId(9), T(10), T(10), 5_000, 600, SpecCheck(True, "", 100))
    assert once.next_actions(solver_view(1_000, open_jobs=(job,))) != []
    assert once.next_actions(solver_view(1_000, open_jobs=(job,), claims_made=1)) == []


def verifier_view(now: int, *games: LiveGame, block: int = 100, **over: Any) -> VerifierView:
    base = VerifierView(now=now, block=block, me=ME, token_balance=T(0), staked=T(100), min_stake=T(100), assignments=(),
                        jobs=(), forgettable=(), games=games, game_params=PARAMS)  # fmt: skip
    return replace(base, **over)


VERIFIER = VerifierPolicy(VerifierConfig(stake_target=T(0), own_grace_s=5, duty_grace_s=30))


def test_failing_verifier_opens_within_the_open_window() -> None:
    pending = PendingOpen(JobId(7), 3, open_deadline=1_030)
    assert VERIFIER.next_actions(verifier_view(1_030, openings=(pending,))) == [OpenGame(JobId(7), 3)]
    assert VERIFIER.next_actions(verifier_view(1_031, openings=(pending,))) == []


def test_challenger_answers_only_its_own_games() -> None:
    mine = LiveGame(GID, game(GameStatus.CHALLENGER_TO_MOVE, defender=OTHER, challenger=ME))
    theirs = LiveGame(GameId(5), game(GameStatus.CHALLENGER_TO_MOVE, defender=OTHER, challenger=OTHER))
    assert VERIFIER.next_actions(verifier_view(1_010, mine, theirs)) == [GameMove(GID, Action.ANSWER_MIDPOINT)]


@pytest.mark.parametrize(("ballot", "commits", "now", "want"), [
    (Ballot.SEATED, 0, 1_100, GameMove(GID, Action.COMMIT_VOTE)),
    (Ballot.COMMITTED, 1, 1_100, None),  # reveals open once all committed or the commit phase ended
    (Ballot.COMMITTED, 3, 1_100, GameMove(GID, Action.REVEAL_VOTE)),
    (Ballot.COMMITTED, 1, 1_121, GameMove(GID, Action.REVEAL_VOTE)),
    (Ballot.VACANT, 0, 1_100, None),
])  # fmt: skip
def test_referee_commits_then_reveals(ballot: Ballot, commits: int, now: int, want: object) -> None:
    g = game(GameStatus.ARBITRATING, defender=OTHER, deadline=1_120, commits=commits)
    assert VERIFIER.next_actions(verifier_view(now, LiveGame(GID, g, ballot))) == ([want] if want else [])


def test_permissionless_game_calls_the_challenger_first_others_after_grace() -> None:
    isolated = game(GameStatus.ISOLATED, defender=OTHER, challenger=ME, anchor_block=90, last_move_at=1_000)
    assert VERIFIER.next_actions(verifier_view(1_005, LiveGame(GID, isolated), block=92)) == [GameMove(GID, Action.DRAW_COMMITTEE)]
    bystander = replace(isolated, challenger=OTHER)
    assert VERIFIER.next_actions(verifier_view(1_005, LiveGame(GID, bystander), block=92)) == []
    assert VERIFIER.next_actions(verifier_view(1_005, LiveGame(GID, bystander), block=97)) == [GameMove(GID, Action.DRAW_COMMITTEE)]
    silent_solver = game(GameStatus.DEFENDER_TO_MOVE, defender=OTHER, challenger=ME)
    assert VERIFIER.next_actions(verifier_view(1_061, LiveGame(GID, silent_solver))) == [GameMove(GID, Action.TIMEOUT_CLOCK)]
    my_clock_out = game(GameStatus.CHALLENGER_TO_MOVE, defender=OTHER, challenger=ME)
    assert VERIFIER.next_actions(verifier_view(1_200, LiveGame(GID, my_clock_out))) == []  # never times itself out
    other_game = replace(silent_solver, challenger=OTHER)
    assert VERIFIER.next_actions(verifier_view(1_061, LiveGame(GID, other_game))) == []
    assert VERIFIER.next_actions(verifier_view(1_091, LiveGame(GID, other_game))) == [GameMove(GID, Action.TIMEOUT_CLOCK)]
    done = game(GameStatus.ARBITRATING, defender=OTHER, challenger=OTHER, deadline=1_120, commits=3, votes=3)
    assert VERIFIER.next_actions(verifier_view(1_130, LiveGame(GID, done))) == []  # all revealed: the challenger settles
    assert VERIFIER.next_actions(verifier_view(1_130, LiveGame(GID, replace(done, challenger=ME)))) == [GameMove(GID, Action.SETTLE)]
    assert VERIFIER.next_actions(verifier_view(1_156, LiveGame(GID, done))) == [GameMove(GID, Action.SETTLE)]


# ------------------------------------------------------------------ report games (the verifier defends its probe)


@pytest.mark.parametrize("status", [GameStatus.DEFENDER_TO_MOVE, GameStatus.CHALLENGER_TO_MOVE, GameStatus.ISOLATED])
def test_a_forced_verifier_concedes_its_report_game_at_once(status: GameStatus) -> None:
    forced = LiveGame(GID, game(status, on_report=True, deadline=90), forced=True)
    assert VERIFIER.next_actions(verifier_view(1_001, forced)) == [ConcedeForced(GID, JobId(7))]
    assert VERIFIER.next_actions(verifier_view(1_200, forced)) == [ConcedeForced(GID, JobId(7))]  # whatever the clocks say


def test_a_forced_flag_means_nothing_outside_our_own_report_games() -> None:
    theirs = LiveGame(GID, game(GameStatus.DEFENDER_TO_MOVE, defender=OTHER, on_report=True), forced=True)
    assert VERIFIER.next_actions(verifier_view(1_010, theirs)) == []
    arbitrating = LiveGame(GID, game(GameStatus.ARBITRATING, on_report=True, deadline=1_120), forced=True)
    assert VERIFIER.next_actions(verifier_view(1_100, arbitrating)) == []  # too late to concede: the referees decide


def test_an_unforced_verifier_defends_its_probe_while_its_clock_runs() -> None:
    defended = LiveGame(GID, game(GameStatus.DEFENDER_TO_MOVE, on_report=True, lo=8, hi=12))
    assert VERIFIER.next_actions(verifier_view(1_060, defended)) == [GameMove(GID, Action.POST_MIDPOINT)]
    assert VERIFIER.next_actions(verifier_view(1_061, defended)) == []  # clock out: never times itself out
    waiting = LiveGame(GID, game(GameStatus.CHALLENGER_TO_MOVE, on_report=True))
    assert VERIFIER.next_actions(verifier_view(1_030, waiting)) == []
    assert VERIFIER.next_actions(verifier_view(1_061, waiting)) == [GameMove(GID, Action.TIMEOUT_CLOCK)]  # at once: it pays us


def test_the_verifier_posts_midpoints_only_in_its_own_report_games() -> None:
    trace_game = LiveGame(GID, game(GameStatus.DEFENDER_TO_MOVE))  # the solver's to defend, from its checkpoints
    other_defender = LiveGame(GameId(5), game(GameStatus.DEFENDER_TO_MOVE, defender=OTHER, on_report=True))
    assert VERIFIER.next_actions(verifier_view(1_010, trace_game, other_defender)) == []


def test_the_defender_makes_the_permissionless_calls_of_its_game_at_once() -> None:
    isolated = game(GameStatus.ISOLATED, on_report=True, anchor_block=90, last_move_at=1_000)
    assert VERIFIER.next_actions(verifier_view(1_005, LiveGame(GID, isolated), block=92)) == [GameMove(GID, Action.DRAW_COMMITTEE)]
    done = game(GameStatus.ARBITRATING, on_report=True, deadline=1_120, commits=3, votes=3)
    assert VERIFIER.next_actions(verifier_view(1_130, LiveGame(GID, done))) == [GameMove(GID, Action.SETTLE)]


@pytest.mark.parametrize(("on_report", "steps", "probe_step", "want"), [
    (False, 20, None, None),  # a trace game at the spec's k: the isolated step decides
    (False, 19, None, True),  # a trace game at another k: the challenger tries to frame the solver
    (True, 7, 7, None),  # a report game at the probe's step: the isolated step decides
    (True, 8, 7, False),  # a probe leaf at another step than the draw fixed: the defender is wrong
])  # fmt: skip
def test_the_referee_rule_by_the_game_s_steps(on_report: bool, steps: int, probe_step: int | None, want: bool | None) -> None:
    g = replace(game(GameStatus.ARBITRATING, on_report=on_report), steps=steps)
    assert vote_from_shape(g, 20, probe_step) is want


def test_a_party_of_a_sealed_jobs_game_wraps_the_key_to_its_unwrapped_referees_beside_its_move() -> None:
    referees = (Address("0x" + "a1" * 20), Address("0x" + "a2" * 20))
    arbitrating = game(GameStatus.ARBITRATING, defender=OTHER, challenger=ME, deadline=1_100)
    actions = VERIFIER.next_actions(verifier_view(1_005, LiveGame(GID, arbitrating, unwrapped=referees)))
    assert WrapReferees(JobId(7), GID, referees) in actions
    assert VERIFIER.next_actions(verifier_view(1_005, LiveGame(GID, arbitrating))) == [a for a in actions if not isinstance(a, WrapReferees)]


def test_a_referee_that_cannot_read_a_sealed_job_waits_for_a_wrap_then_declines_its_seat_in_time() -> None:
    # the commit phase ends at 1_100 and lasts 30 s: the referee waits for a wrap until 15 s are left
    seated = game(GameStatus.ARBITRATING, defender=OTHER, challenger=OTHER, deadline=1_100)
    unreadable = LiveGame(GID, seated, Ballot.SEATED, unreadable=True)
    assert VERIFIER.next_actions(verifier_view(1_084, unreadable)) == []
    assert VERIFIER.next_actions(verifier_view(1_085, unreadable)) == [DeclineSeat(GID)]
    assert VERIFIER.next_actions(verifier_view(1_085, LiveGame(GID, seated, Ballot.SEATED))) == [GameMove(GID, Action.COMMIT_VOTE)]
    assert VERIFIER.next_actions(verifier_view(1_085, LiveGame(GID, seated, Ballot.COMMITTED, unreadable=True))) == []
