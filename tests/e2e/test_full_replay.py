"""A fully replayed job catches ``dead-units`` on anvil (issue 31).

The market chooses every commit for full replay (``fullReplayRateBps`` = 10000 here, 2500 in
deploy/params/public.json) and escrows a replay fee of the reward. A cheating solver daemon commits
the ``dead-units`` trace of the tiny MLP job: one faked segment (0) jumps into a network one unit wide,
whose every later segment is honest training that replays bit for bit, so that the cheat saves most
of the job's compute with one bad segment in ten. The verifier daemon replays every segment from the
seeded initialization, fetching no checkpoint, stops at the first committed leaf its replay does not
reproduce, fails its report and opens the trace game there; the cheater loses its whole bond, the
job reopens with its escrow, replay fee included.
"""

from __future__ import annotations

import json
from pathlib import Path

from core.cid import digest_to_cid
from core.contracts import GameId
from tests.e2e.conftest import Market, wait_for
from tests.e2e.disputes import CaughtCheat, assert_cheater_slashed, post_tiny, settled, total_wealth, wealth

E2E_ACCOUNTS = 6  # the submitter, the cheater, four verifiers (the drawn one and a committee of three)
E2E_MARKET = {"fullReplayRateBps": 10_000, "fullReplayFeeBps": 10_000}
SOLVER = 1
VERIFIERS = range(2, 6)


def test_a_full_replay_catches_dead_units_and_the_cheater_loses_its_bond(market: Market, tmp_path: Path) -> None:
    protocol, everyone = market.protocol(), range(E2E_ACCOUNTS)
    before_total = total_wealth(protocol, market, everyone)
    before = {i: wealth(protocol, market.account(i).address) for i in everyone}
    for i in VERIFIERS:  # all staked before the job: any of them may be drawn, the others referee
        market.daemon("verifier", i, f"verifier{i}", "--stake", "200", "--duty-grace", "5", "--poll", "0.5")
    market.wait_staked(300)
    market.daemon("solver", SOLVER, "cheater", "--cheat", "dead-units", "--poll", "0.5")
    job_id = post_tiny(market, tmp_path)
    event = wait_for("the game settled", lambda: settled(protocol, job_id), 700, market)
    caught = CaughtCheat(job_id, event, before, before_total)
    assert_cheater_slashed(market, caught, solver=SOLVER, accounts=everyone)
    start = protocol.book.deploy_block
    assert protocol.market.events("FullReplayChosen", start, jobId=job_id), "the draw chose a full replay"
    assert not protocol.market.is_full_replay(job_id), "cleared with the reopened commit"
    assigned = protocol.market.events("VerifierAssigned", start, jobId=job_id)[0]
    window = protocol.market.params().report_window + protocol.market.get_job(job_id).commit_window
    assert int(assigned.args["deadline"]) == protocol.client.timestamp(assigned.block_number) + window
    reported = protocol.market.events("ReportSubmitted", start, jobId=job_id)[0]
    report = json.loads(market.store.get(digest_to_cid(reported.args["reportCid"]), 1 << 20))
    assert report["full_replay"] is True and not report["passed"]
    assert [v["segment"] for v in report["verdicts"]] == [0], "stopped at the faked segment 0"
    assert not report["verdicts"][0]["passed"]
    game = protocol.game.get_game(GameId(int(event.args["gameId"])))
    assert game.segment == 0 and game.by_verifier and game.challenger == assigned.args["verifier"], "the trace game opened at the first mismatch"
