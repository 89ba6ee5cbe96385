"""The availability court's pure decisions (:func:`rolebase.court.court_moves`) and the bitmap a case
names its items by (:func:`core.contracts.lacking_bitmap`): no chain (the chain paths are
tests/chain/test_availability_court.py and tests/forge/AvailabilityCourt.t.sol)."""

from __future__ import annotations

import pytest

from core.chain import Address
from core.contracts import MANIFEST_ITEM, Ballot, Bytes32, Case, CaseStatus, CourtParams, JobId, TokenAmount, lacking_bitmap, lacking_items
from rolebase.court import CourtAction, CourtMove, LiveCase, court_moves

ME = Address("0x00000000000000000000000000000000000000A1")
OTHER = Address("0x00000000000000000000000000000000000000B2")
PARAMS = CourtParams(TokenAmount(10), TokenAmount(2), TokenAmount(1), draw_window=20, fetch_window=60, reveal_window=20, committee_size=3)
OPENED = 1_000


def _case(status: CaseStatus, *, deadline: int = 0, anchor: int = 0, challenger: Address = OTHER, commits: int = 0, served: int = 0, withheld: int = 0) -> Case:
    return Case(JobId(1), challenger, status, commits, served, withheld, deadline, anchor, OPENED, 2, TokenAmount(8), Bytes32(b"\x01" * 32))


def _moves(now: int, block: int, live: LiveCase, grace: int = 30) -> list[CourtMove]:
    return court_moves(now, block, ME, [live], PARAMS, grace)


def test_the_draw_waits_for_its_entropy_block_and_the_challenger_goes_first() -> None:
    drawing = LiveCase(7, _case(CaseStatus.DRAWING, anchor=50))
    assert _moves(OPENED + 1, 51, drawing) == [], "blockhash(anchor + 1) does not exist yet"
    assert _moves(OPENED + 1, 52, drawing) == [], "anyone else waits its grace"
    assert _moves(OPENED + 1, 52, drawing, grace=0) == [CourtMove(7, CourtAction.DRAW)]
    own = LiveCase(7, _case(CaseStatus.DRAWING, anchor=50, challenger=ME))
    assert _moves(OPENED + 1, 52, own) == [CourtMove(7, CourtAction.DRAW)], "our own case: at once"
    assert _moves(OPENED + PARAMS.draw_window + 1, 60, own) == [CourtMove(7, CourtAction.SETTLE)], "no committee in time: undecided"


def test_a_seated_member_commits_in_the_fetch_window_then_reveals_then_anyone_settles() -> None:
    end = OPENED + 100  # the commit deadline
    seated = LiveCase(3, _case(CaseStatus.VOTING, deadline=end), Ballot.SEATED)
    assert _moves(end, 0, seated) == [CourtMove(3, CourtAction.COMMIT)]
    assert _moves(end + 1, 0, seated) == [], "too late to commit: its bond is lost, nothing to send"
    committed = LiveCase(3, _case(CaseStatus.VOTING, deadline=end, commits=2), Ballot.COMMITTED)
    assert _moves(end, 0, committed) == [], "no reveal while a member may still commit"
    assert _moves(end + 1, 0, committed) == [CourtMove(3, CourtAction.REVEAL)]
    everyone = LiveCase(3, _case(CaseStatus.VOTING, deadline=end, commits=3), Ballot.COMMITTED)
    assert _moves(end - 10, 0, everyone) == [CourtMove(3, CourtAction.REVEAL)], "all committed: reveal at once"
    revealed = LiveCase(3, _case(CaseStatus.VOTING, deadline=end, commits=3, served=2, withheld=1), Ballot.REVEALED_DEFENDER_RIGHT)
    assert _moves(end - 10, 0, revealed) == [CourtMove(3, CourtAction.SETTLE)], "all revealed: settle"
    bystander = LiveCase(3, _case(CaseStatus.VOTING, deadline=end, commits=1))
    assert _moves(end + PARAMS.reveal_window + 1, 0, bystander) == [], "within its grace, a bystander waits"
    assert _moves(end + PARAMS.reveal_window + 31, 0, bystander) == [CourtMove(3, CourtAction.SETTLE)]


@pytest.mark.parametrize("count", [1, 7, 8, 9, 10_000])
def test_the_bitmap_names_checkpoints_and_the_manifest_and_reads_back(count: int) -> None:
    items = sorted({0, count - 1, count // 2})
    bitmap = lacking_bitmap(count, [*items, MANIFEST_ITEM])
    assert len(bitmap) == count // 8 + 1, "the length the court requires"
    assert lacking_items(count, bitmap) == [*items, MANIFEST_ITEM]
    assert bitmap[-1] >> (count % 8) & 1, "the manifest is bit count"
    with pytest.raises(ValueError):
        lacking_bitmap(count, [count])
