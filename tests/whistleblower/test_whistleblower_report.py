"""Reading a passing report's JSON before an audit: only its claimed segments are used (the probes come from the chain)."""

from __future__ import annotations

import json

import pytest

from whistleblower.audit import MalformedReport, parse_segments


def report(**over: object) -> bytes:
    body: dict[str, object] = {"passed": True, "probes": [], "probe_root": "0x" + "00" * 32, "segments": [0, 3, 9]}
    body.update(over)
    return json.dumps(body).encode()


def test_the_claimed_segments_of_a_passing_report_parse() -> None:
    assert parse_segments(report(), segments=10) == (0, 3, 9)
    assert parse_segments(json.dumps({"passed": True}).encode(), segments=10) == ()  # none claimed


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"{not json", "not valid JSON"),
        (b"\xff\xfe", "not valid JSON"),
        (b"[]", "not a passing report"),
        (report(passed=False), "not a passing report"),
        (report(segments=[10]), "segments"),
        (report(segments=[True]), "segments"),
        (report(segments="all"), "segments"),
    ],
)
def test_a_report_without_usable_segments_is_malformed(data: bytes, why: str) -> None:
    with pytest.raises(MalformedReport, match=why):
        parse_segments(data, segments=10)
