"""The verifier's decisions on sealed jobs (docs/sealing.md), from views built by hand: it replays once
it holds the data key, demands the key after a grace from the draw (at most twice, never while a demand
holds the job), times out a demand left unanswered, and registers its encryption key once staked."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from core.chain import Address
from core.contracts import Bytes32, JobId, RegisteredKey, TokenAmount
from core.sealing import EncryptionKey
from rolebase.keygame import DemandKey, RegisterKey, TimeoutDemand
from tests.roles.test_verifier_policy import view as plain_view
from verifier.policy import Assignment, Draw, OpenDemand, Phase, Replay, SealedDraw, VerifierConfig, VerifierPolicy, VerifierView

ME = Address("0x000000000000000000000000000000000000bEEF")
T = TokenAmount
KEY = EncryptionKey.generate()
POLICY = VerifierPolicy(VerifierConfig(stake_target=T(0), encryption_key=KEY, key_grace_s=20))
DRAW = Draw(Bytes32(b"\x01" * 32))
DRAWN_AT, WINDOW = 1_000, 600  # the report clock: 600 s from the draw, the grace 20 s of it
JOB = JobId(7)


def view(**over: Any) -> VerifierView:
    """The policy tests' view at the draw, with our key registered."""
    return plain_view(**{"now": DRAWN_AT, "registered_key": RegisteredKey(KEY.public_key, 1), **over})


def drawn(now: int, deadline: int = DRAWN_AT + WINDOW, **sealed: Any) -> VerifierView:
    """A view at ``now`` of the sealed job ``JOB`` drawn to us at ``DRAWN_AT``, its key game as ``sealed`` says."""
    game = SealedDraw(**{"held": False, "drawn_at": DRAWN_AT, "window": WINDOW, **sealed})
    return view(now=now, assignments=(Assignment(JOB, deadline, Phase.ASSIGNED, DRAW, sealed=game),))


def test_no_demand_within_the_grace_after_the_draw_and_no_replay_without_the_key() -> None:
    assert POLICY.next_actions(drawn(DRAWN_AT)) == []
    assert POLICY.next_actions(drawn(DRAWN_AT + 19)) == []


def test_one_demand_once_the_grace_is_over() -> None:
    assert POLICY.next_actions(drawn(DRAWN_AT + 20)) == [DemandKey(JOB)]
    assert POLICY.next_actions(drawn(DRAWN_AT + 300)) == [DemandKey(JOB)]


def test_the_demand_comes_at_half_the_report_window_when_that_is_sooner_than_the_grace() -> None:
    slow = VerifierPolicy(VerifierConfig(stake_target=T(0), encryption_key=KEY, key_grace_s=1_000))
    assert slow.next_actions(drawn(DRAWN_AT + WINDOW // 2 - 1)) == []
    assert slow.next_actions(drawn(DRAWN_AT + WINDOW // 2)) == [DemandKey(JOB)]


def test_no_demand_while_a_demand_holds_the_job() -> None:
    assert POLICY.next_actions(drawn(DRAWN_AT + 60, demand_open=True)) == []
    assert POLICY.next_actions(drawn(DRAWN_AT + 60, demands=1, demand_open=True)) == []


def test_a_second_demand_at_once_when_the_wrap_that_answered_the_first_does_not_open() -> None:
    # the answer resumed the clock (its deadline moved by the time held); the second goes at once
    assert POLICY.next_actions(drawn(DRAWN_AT + 25, deadline=DRAWN_AT + WINDOW + 40, demands=1)) == [DemandKey(JOB)]


def test_no_demand_after_two() -> None:
    assert POLICY.next_actions(drawn(DRAWN_AT + 100, demands=2)) == []


def test_replays_once_the_data_key_is_held_and_demands_nothing() -> None:
    assert POLICY.next_actions(drawn(DRAWN_AT + 100, held=True)) == [Replay(JOB, DRAWN_AT + WINDOW, DRAW)]
    assert POLICY.next_actions(drawn(DRAWN_AT + 100, held=True, demands=1)) == [Replay(JOB, DRAWN_AT + WINDOW, DRAW)]


def test_without_an_encryption_key_a_sealed_job_gets_no_demand_and_no_replay() -> None:
    keyless = VerifierPolicy(VerifierConfig(stake_target=T(0)))
    assert keyless.next_actions(replace(drawn(DRAWN_AT + 300), registered_key=None)) == []


def test_a_demand_past_its_deadline_unanswered_is_timed_out() -> None:
    held = (OpenDemand(JOB, 2_000),)
    assert POLICY.next_actions(view(now=2_000, demands=held)) == []  # the contract wants now > deadline
    assert POLICY.next_actions(view(now=2_001, demands=held)) == [TimeoutDemand(JOB)]


def test_the_encryption_key_is_registered_once_staked() -> None:
    none = RegisteredKey(Bytes32(b"\x00" * 32), 0)
    assert POLICY.next_actions(view(staked=T(0), registered_key=none)) == []  # the registry takes staked accounts only
    assert POLICY.next_actions(view(registered_key=none)) == [RegisterKey(KEY.public_key)]
    assert POLICY.next_actions(view(registered_key=RegisteredKey(Bytes32(b"\x05" * 32), 3))) == [RegisterKey(KEY.public_key)]  # another: ours again
    assert POLICY.next_actions(view()) == []  # ours is registered
    assert VerifierPolicy(VerifierConfig(stake_target=T(0))).next_actions(view(registered_key=None)) == []  # no key: nothing to register
