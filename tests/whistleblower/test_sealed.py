"""The whistleblower's key game on sealed reports, from views built by hand (docs/sealing.md): a wrap
asked for once per key version, the key demanded only after the grace (or at half the window), again
at once when the answering wrap did not open, never while a demand holds the job nor after two, an
unanswered demand timed out; the audit once the key is held; and no move at all on a report we would
not audit, since a demand holds the job."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from core.chain import Address
from core.contracts import Bytes32, JobId, RegisteredKey, TokenAmount
from core.sealing import EncryptionKey
from rolebase.keygame import DemandKey, RegisterKey, RequestWrap, TimeoutDemand
from whistleblower.policy import (
    Audit,
    OpenDemand,
    OpenReport,
    SealedReport,
    Unreadable,
    WhistleblowerAction,
    WhistleblowerConfig,
    WhistleblowerPolicy,
    WhistleblowerView,
    audit_draw,
)

ME = Address("0x000000000000000000000000000000000000bEEF")
T = TokenAmount
ROOT = Bytes32(b"\x0a" * 32)
SECRET = b"\x11" * 32
KEY = EncryptionKey.generate()
NOW = 10_000
WINDOW = 1_000  # the challenge window's length
GRACE = 20
POLICY = WhistleblowerPolicy(WhistleblowerConfig(stake_target=T(0), encryption_key=KEY, key_grace_s=GRACE))


def sealed(**over: Any) -> SealedReport:
    """Not held, sealing Active, asked for a wrap just now, no demand yet."""
    return replace(SealedReport(held=False, live=True, asked_at=NOW, window=WINDOW), **over)


def report(seal: SealedReport | None, *, job: int = 7, window_end: int = NOW + 900) -> OpenReport:
    return OpenReport(JobId(job), f"Qm{job}", window_end, ROOT, None, sealed=seal)


def view(*reports: OpenReport, now: int = NOW, **over: Any) -> WhistleblowerView:
    base = WhistleblowerView(
        now=now, block=100, me=ME, token_balance=T(0), staked=T(50), min_stake=T(50), secret=SECRET, reports=reports,
        registered_key=RegisteredKey(Bytes32(KEY.public_key), 1),
    )  # fmt: skip
    return replace(base, **over)


def key_moves(actions: Any) -> list[WhistleblowerAction]:
    return [a for a in actions if isinstance(a, RequestWrap | DemandKey | TimeoutDemand | Audit | Unreadable | RegisterKey)]


def test_a_wrap_is_asked_for_once_and_not_again_while_our_request_at_our_key_version_is_on_chain() -> None:
    assert key_moves(POLICY.next_actions(view(report(sealed(asked_at=None))))) == [RequestWrap(JobId(7))]
    assert key_moves(POLICY.next_actions(view(report(sealed(asked_at=NOW))))) == []


def test_no_demand_within_the_grace_after_our_request_then_the_demand() -> None:
    asked = NOW - GRACE + 1
    assert key_moves(POLICY.next_actions(view(report(sealed(asked_at=asked))))) == []
    assert key_moves(POLICY.next_actions(view(report(sealed(asked_at=asked)), now=NOW + GRACE - 1))) == [DemandKey(JobId(7))]


def test_the_demand_comes_at_half_the_window_left_even_within_the_grace() -> None:
    half = report(sealed(asked_at=NOW), window_end=NOW + WINDOW // 2)  # just asked, half the window left
    assert key_moves(POLICY.next_actions(view(half))) == [DemandKey(JobId(7))]
    more = report(sealed(asked_at=NOW), window_end=NOW + WINDOW // 2 + 1)
    assert key_moves(POLICY.next_actions(view(more))) == []


def test_nothing_while_a_demand_holds_the_job() -> None:
    for demands in (1, 2):
        assert key_moves(POLICY.next_actions(view(report(sealed(asked_at=NOW - 600, demands=demands, demand_open=True))))) == []


def test_a_second_demand_at_once_when_the_wrap_that_answered_the_first_did_not_open() -> None:
    assert key_moves(POLICY.next_actions(view(report(sealed(asked_at=NOW, demands=1))))) == [DemandKey(JobId(7))]


def test_no_third_demand_the_report_is_left_unaudited() -> None:
    (move,) = key_moves(POLICY.next_actions(view(report(sealed(asked_at=NOW - 600, demands=2)))))
    assert isinstance(move, Unreadable) and move.job_id == 7 and "2 demands" in move.reason


def test_an_unanswered_demand_is_timed_out_only_past_its_deadline() -> None:
    demand = OpenDemand(JobId(7), NOW)
    assert key_moves(POLICY.next_actions(view(demands=(demand,)))) == []
    assert key_moves(POLICY.next_actions(view(demands=(demand,), now=NOW + 1))) == [TimeoutDemand(JobId(7))]


def test_audited_once_the_key_is_held() -> None:
    assert key_moves(POLICY.next_actions(view(report(SealedReport(held=True))))) == [Audit(JobId(7), "Qm7", NOW + 900, ROOT)]


def test_a_forfeited_sealing_or_no_encryption_key_leaves_the_report_unaudited_with_no_move() -> None:
    (forfeited,) = key_moves(POLICY.next_actions(view(report(sealed(live=False, asked_at=None)))))
    assert isinstance(forfeited, Unreadable) and "forfeited" in forfeited.reason
    keyless = WhistleblowerPolicy(WhistleblowerConfig(stake_target=T(0)))
    (unread,) = key_moves(keyless.next_actions(view(report(sealed(asked_at=None)), registered_key=None)))
    assert isinstance(unread, Unreadable) and "--encryption-key" in unread.reason


def test_the_key_is_registered_once_staked_and_nothing_is_asked_before_it_is_ours_on_chain() -> None:
    ask = report(sealed(asked_at=None))
    assert key_moves(POLICY.next_actions(view(ask, registered_key=RegisteredKey(Bytes32(b"\x00" * 32), 0)))) == [RegisterKey(Bytes32(KEY.public_key))]
    other = RegisteredKey(Bytes32(b"\x01" * 32), 1)  # a key of ours rotated away from this one: wraps to it are not ours to open
    assert key_moves(POLICY.next_actions(view(ask, registered_key=other))) == [RegisterKey(Bytes32(KEY.public_key))]
    assert key_moves(POLICY.next_actions(view(ask, staked=T(0), registered_key=RegisteredKey(Bytes32(b"\x00" * 32), 0)))) == []


def test_no_request_nor_demand_on_a_report_we_would_not_audit() -> None:
    due = report(sealed(asked_at=NOW - 600))  # a demand would be due
    fresh = report(sealed(asked_at=None), job=8)  # a request would be due
    skipping = WhistleblowerPolicy(WhistleblowerConfig(stake_target=T(0), audit_rate=0.0, encryption_key=KEY))
    assert key_moves(skipping.next_actions(view(due, fresh))) == []
    draw = audit_draw(SECRET, 7, "Qm7")
    below = WhistleblowerPolicy(WhistleblowerConfig(stake_target=T(0), audit_rate=draw, encryption_key=KEY))  # the draw is not below the rate
    assert key_moves(below.next_actions(view(due))) == []
    costly = WhistleblowerPolicy(WhistleblowerConfig(stake_target=T(0), audit_cost=T(5), encryption_key=KEY))  # the jackpot does not pay an audit
    assert key_moves(costly.next_actions(view(due, fresh, expected_per_audit=T(4)))) == []
    assert key_moves(POLICY.next_actions(view(due, fresh, staked=T(49)))) == []  # no eligible stake: no audit, no key game
    assert key_moves(POLICY.next_actions(view(due, fresh))) == [DemandKey(JobId(7)), RequestWrap(JobId(8))]
    assert key_moves(POLICY.next_actions(view(replace(due, window_end=NOW)))) == []  # its window closed
