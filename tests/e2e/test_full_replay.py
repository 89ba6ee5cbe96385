"""A fully replayed job catches a one-segment cheat on anvil (issue 31).

The market chooses every commit for full replay (``fullReplayRateBps`` = 10000 here, 2500 in
deploy/params/public.json) and escrows a replay fee of the reward. A cheating solver daemon fakes one
segment of the tiny job (``wrong-lr`` on segment 5 of 10: ``dead-units`` is the attack engineer's and
is not on main yet; any single faked segment is the class a full replay exists for). The verifier
daemon replays every segment from the seeded initialization, fetching no checkpoint, stops at the
first committed leaf its replay does not reproduce, fails its report and opens the trace game there;
the cheater loses its whole bond, the job reopens with its escrow, replay fee included.
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


def test_a_full_replay_catches_a_one_segment_cheat_and_the_cheater_loses_its_bond(market: Market, tmp_path: Path) -> None:
    protocol, everyone = market.protocol(), range(E2E_ACCOUNTS)
    before_total = total_wealth(protocol, market, everyone)
    before = {i: wealth(protocol, market.account(i).address) for i in everyone}
    for i in VERIFIERS:  # all staked before the job: any of them may be drawn, the others referee
        market.daemon("verifier", i, f"verifier{i}", "--stake", "200", "--duty-grace", "5", "--poll", "0.5")
    market.wait_staked(300)
    market.daemon("solver", SOLVER, "cheater", "--cheat", "wrong-lr", "--poll", "0.5")
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
    assert [v["segment"] for v in report["verdicts"]] == list(range(6)), "replayed in order up to the faked segment 5"
    assert report["verdicts"][-1]["reason"] == "state-mismatch"
    game = protocol.game.get_game(GameId(int(event.args["gameId"])))
    assert game.segment == 5 and game.by_verifier and game.challenger == assigned.args["verifier"], "the trace game opened at the first mismatch"
