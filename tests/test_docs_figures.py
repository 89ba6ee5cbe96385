"""The gas figures the docs quote are the committed snapshots' (issue 16, items 9 and 10).

``make test`` runs the forge gas suites under ``--isolate`` before pytest, and they rewrite
``snapshots/*.json``. A change in gas therefore fails here until the table that quotes it is
updated. Each check names a table (the first after a line of the doc), a row of it by its first cell,
and the snapshot keys its figure cells hold, in order (a cell such as ``9 / 6`` holds two).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_NUMBER = re.compile(r"\d{1,3}(?:,\d{3})+|\d+")

_HONEST = ("docs/contracts.md", "node_modules/.bin/forge test --offline --isolate --match-contract GasSnapshotTest")
_ISSUE5 = ("docs/contracts.md", "Issue-5 calls (same steady state;")
_GAME = ("docs/dispute.md", "node_modules/.bin/forge test --offline --isolate --match-contract DisputeGameGasTest")
_COURT = ("docs/protocol.md", "**Gas** (`node_modules/.bin/forge test --offline --isolate --match-contract AvailabilityCourtGasTest`,")
_FULL = ("docs/contracts.md", "node_modules/.bin/forge test --offline --isolate --match-contract FullReplayGasSnapshotTest")

#: ((doc, the line the table follows), first cell of the row, snapshot file, the keys its figure
#: cells quote, how many cells)
CHECKS: list[tuple[tuple[str, str], str, str, tuple[str, ...], int]] = [
    (("README.md", "## Figures and where they are measured"), "gas of one honest job (6 calls, steady state)", "JobMarketGas", ("honestLifecycleTotal",), 1),
    *(
        (_HONEST, call, "JobMarketGas", (key,), 1)
        for call, key in [
            ("postJob", "postJob"),
            ("claim", "claim"),
            ("commit", "commit"),
            ("assignVerifier", "assignVerifier"),
            ("report (4 probes on chain)", "report"),
            ("finalize", "finalize"),
            ("**honest lifecycle total**", "honestLifecycleTotal"),
        ]
    ),
    (_ISSUE5, "commitForcedSeed (first / replacing)", "JobMarketGas", ("commitForcedSeedFirst", "commitForcedSeedReplace"), 1),
    (_ISSUE5, "fundJackpot", "JobMarketGas", ("fundJackpot",), 1),
    *(
        (_ISSUE5, call, "JobMarketGas", (f"reportGame_{key}",), 1)
        for call, key in [
            ("openOnReport (whistleblower: seal + probe proof + checkpoint proof, `openDispute`, bond)", "openOnReport"),
            ("postMidpoint (report game)", "postMidpoint"),
            ("answerMidpoint (report game)", "answerMidpoint"),
            ("timeoutClock, verifier loses (bond slashed to the winner, job re-drawn, payout)", "timeoutClockVerifierSlashed"),
            ("concedeForced (seal + secret checked, jackpot paid, bond back, window resumed)", "concedeForced"),
        ]
    ),
    (_FULL, "postJob (the replay fee escrowed with the rest: one transfer)", "FullReplayGas", ("full_postJob",), 1),
    (
        _FULL,
        "assignVerifier, sampled / chosen for full replay (a fresh slot and the event)",
        "FullReplayGas",
        ("sampled_assignVerifier", "full_assignVerifier"),
        1,
    ),
    (
        _FULL,
        "finalize, sampled (the replay fee refunded: a third transfer) / full (fee and replay fee to the verifier)",
        "FullReplayGas",
        ("sampled_finalize", "full_finalize"),
        1,
    ),
    *(
        (_GAME, call, "DisputeGameGas", tuple(f"k{k}_{key}" for k in (50, 1000) for key in keys), 2)
        for call, keys in [
            ("open (failing verifier; a whistleblower's adds `openDispute` + `isEligible`: below)", ("open",)),
            ("postMidpoint (max)", ("postMidpointMax",)),
            ("answerMidpoint (max)", ("answerMidpointMax",)),
            ("bisection moves (solver posts = challenger answers)", ("moves",)),
            ("drawCommittee (3 seats)", ("drawCommittee3",)),
            ("commitVote (max)", ("commitVoteMax",)),
            ("revealVote (max)", ("revealVoteMax",)),
            ("settle (verdict, JobMarket reopen + 3 referees)", ("settleVerdict",)),
            ("claimCredit (the winner's payout)", ("claimCredit",)),
            ("transactions: challenger (open + answers + draw + settle) / solver", ("txChallenger", "txSolver")),
            ("whole dispute, upper bound (every move at its max)", ("wholeDisputeUpperBound",)),
        ]
    ),
    *(
        (_COURT, call, "AvailabilityCourtGas", (f"c21_{key}", f"c10000_{key}"), 2)
        for call, key in [
            ("challenge (bitmap, deposit, hold)", "challenge"),
            ("drawCommittee (3 seats)", "drawCommittee3"),
            ("commitVote (max)", "commitVoteMax"),
            ("revealVote (max)", "revealVoteMax"),
            ("settle (served: 3 members paid, job resumed)", "settleServed"),
            ("whole case", "wholeCase"),
        ]
    ),
]


def _row(table: tuple[str, str], first_cell: str) -> list[str]:
    """The cells after the first of the row whose first cell is ``first_cell``, in the first table
    after the line of ``table[0]`` that starts with ``table[1]`` (each must be there once: a check
    that matched two rows would check neither)."""
    doc, after = table
    lines = (ROOT / doc).read_text().splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip().startswith(after)]
    assert len(starts) == 1, f"{doc}: {len(starts)} lines start with {after!r}"
    i = starts[0] + 1
    while i < len(lines) and not lines[i].startswith("|"):
        i += 1
    rows = []
    while i < len(lines) and lines[i].startswith("|"):
        cells = [c.strip() for c in lines[i].strip().strip("|").split("|")]
        if cells[0] == first_cell:
            rows.append(cells[1:])
        i += 1
    assert len(rows) == 1, f"{doc}: {len(rows)} rows {first_cell!r} in the table after {after!r}"
    return rows[0]


def _quoted(cells: list[str]) -> list[int]:
    """Every figure in the cells: a number, or ``a / b``; words after the figures are ignored
    (``9 / 6 (goal 9)`` quotes 9 and 6)."""
    out = []
    for cell in cells:
        head = cell.replace("*", "").split("(")[0]
        out += [int(n.replace(",", "")) for n in _NUMBER.findall(head)]
    return out


@pytest.mark.parametrize(("table", "first_cell", "snapshot", "keys", "cells"), CHECKS, ids=[f"{c[0][0]}:{c[1][:40]}" for c in CHECKS])
def test_quoted_gas_is_the_snapshot(table: tuple[str, str], first_cell: str, snapshot: str, keys: tuple[str, ...], cells: int) -> None:
    figures = json.loads((ROOT / "snapshots" / f"{snapshot}.json").read_text())
    expected = [int(figures[key]) for key in keys]
    assert _quoted(_row(table, first_cell)[:cells]) == expected, f"{table[0]} quotes other gas for {first_cell!r} than snapshots/{snapshot}.json"


def test_a_changed_figure_is_caught() -> None:
    """The parser reads what a table says: a figure one gas off, or a cell with an extra figure,
    reads back as different."""
    assert _quoted(["526,909"]) == [526909]
    assert _quoted(["**526,910**"]) != [526909]
    assert _quoted(["9 / 6 (goal 9)", "13 / 10 (goal 13)"]) == [9, 6, 13, 10]
    assert _quoted(["68,091 / 33,903"]) == [68091, 33903]
