"""How long a reader waits for a missing item before it challenges (``core.availability``): the time
a failed fetch itself took counts, so a gateway that holds a fetch until the fetcher's deadline does
not buy a second wait as long (issue 25: the drip test's challenge came after two 30 s fetches)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

import core.availability as availability
from core.availability import AVAILABILITY_WAIT_S, Availability, ContentPending, ContentUnavailable
from core.contracts import JobId
from core.storage import ContentNotFound

CID = "QmRLTGJCsDZknGUWZHuqKen3xuXtrGd81naaGSTHCo78mP"


class _Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


class _Missing:
    """A store without the item, whose every fetch takes ``fetch_s`` of the clock before it fails."""

    def __init__(self, clock: _Clock, fetch_s: float) -> None:
        self.clock, self.fetch_s = clock, fetch_s

    def get(self, cid: str, limit: int) -> bytes:
        self.clock.now += self.fetch_s
        raise ContentNotFound(cid, "a gateway that held the fetch")


def _reader(clock: _Clock, fetch_s: float, monkeypatch: pytest.MonkeyPatch) -> Availability:
    monkeypatch.setattr(availability.time, "monotonic", clock)
    market = SimpleNamespace(is_published=lambda job, item: False, published=lambda job, item, block: [])
    protocol: Any = SimpleNamespace(market=market, book=SimpleNamespace(deploy_block=0), client=SimpleNamespace(timestamp=lambda: 0))
    return Availability(protocol, _Missing(clock, fetch_s))  # type: ignore[arg-type]


def test_a_fetch_held_past_the_wait_is_challenged_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    reader = _reader(_Clock(), availability.FETCH_STALL_S, monkeypatch)
    with pytest.raises(ContentUnavailable, match="not served"):
        reader.fetch(JobId(1), 0, CID, 1 << 20, deadline=10_000, what="checkpoint 0")


def test_an_item_not_found_at_once_is_retried_for_the_wait_then_challenged(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    reader = _reader(clock, 0.0, monkeypatch)
    with pytest.raises(ContentPending):
        reader.fetch(JobId(1), 0, CID, 1 << 20, deadline=10_000, what="checkpoint 0")
    clock.now += AVAILABILITY_WAIT_S - 1
    with pytest.raises(ContentPending):
        reader.fetch(JobId(1), 0, CID, 1 << 20, deadline=10_000, what="checkpoint 0")
    clock.now += 1
    with pytest.raises(ContentUnavailable):
        reader.fetch(JobId(1), 0, CID, 1 << 20, deadline=10_000, what="checkpoint 0")
