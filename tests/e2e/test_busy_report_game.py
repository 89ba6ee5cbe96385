"""No duty waits behind long work (issue 25), the report game: a verifier replaying a long job concedes a
report game on another job in time.

The chain is deployed with ``forcedErrorRateBps = 10000``: the verifier is forced on every job, so its
report on the short job publishes probe 0 wrong, and a whistleblower's report game on it is conceded
(``concedeForced``: the verifier keeps its bond and fee). Two solvers each take one job at a time: one
the short job, the other a long one (20,000 steps: about a minute to train here, and as long to
replay), which the same verifier is drawn for once the short job is reported. The whistleblower, and
the three verifiers staked for its committee (no daemons: a forced error is conceded before any
committee is drawn), start only once the long job is drawn: the game is opened, and conceded, while
the replay runs on the verifier's worker and its loop answers.
"""

from __future__ import annotations

from pathlib import Path

from core.contracts import GameId, GameStatus, JobState, Role, SettleReason
from rolebase.actions import stake
from rolebase.events import REPLAY_DONE, SEGMENT_REPLAYED
from submitter import service
from submitter.demo_job import build_demo_job
from tests.e2e.conftest import LONG_JOB_WINDOW, Market, wait_for
from tests.e2e.disputes import post_tiny

E2E_ACCOUNTS = 8
SHORT_SOLVER, LONG_SOLVER, VERIFIER, WHISTLEBLOWER, REFEREES = 1, 2, 3, 4, (5, 6, 7)
#: Every seeded verifier forced on every job; a challenge window that outlasts the long job's training.
E2E_MARKET = {"forcedErrorRateBps": 10_000, "challengeWindow": 300, "maxCommitWindow": LONG_JOB_WINDOW}
ZERO = b"\x00" * 32


def test_a_verifier_replaying_a_long_job_concedes_a_report_game_on_another_in_time(market: Market, tmp_path: Path) -> None:
    protocol = market.protocol()
    deploy = protocol.book.deploy_block
    verifier_address = market.account(VERIFIER).address
    verifier = market.daemon("verifier", VERIFIER, "verifier", "--duty-grace", "5", "--poll", "0.5")
    wait_for("the forced seed on chain", lambda: bytes(protocol.market.forced_seed_of(verifier_address).commitment) != ZERO, 90, market)
    for solver in (SHORT_SOLVER, LONG_SOLVER):
        market.daemon("solver", solver, f"solver{solver}", "--max-active", "1", "--poll", "0.5")
    short = post_tiny(market, tmp_path / "short")
    wait_for("the short job's claim", lambda: protocol.market.events("JobClaimed", deploy, jobId=short), 120, market)
    # the other solver takes it (the first holds one job); two segments, each replayed whole
    long_job = build_demo_job("tiny", tmp_path / "long", steps=20_000, checkpoint_interval=10_000)
    submitter = market.protocol(market.account(0))
    long = service.post_job(submitter, market.store, long_job.spec_path, long_job.data_path, long_job.reward, long_job.fee, LONG_JOB_WINDOW).job_id
    wait_for("the short job's report", lambda: protocol.market.events("ReportSubmitted", deploy, jobId=short), 240, market)
    drawn = wait_for("the long job's draw", lambda: protocol.market.events("VerifierAssigned", deploy, jobId=long), 600, market)[0]
    assert drawn.args["verifier"] == verifier_address
    assert protocol.market.get_job(short).state is JobState.VERIFIED  # its challenge window is still open

    minimum = protocol.stakes.min_stake(Role.VERIFIER)
    for i in REFEREES:  # a committee could be seated: the bot opens no game otherwise
        stake(protocol.with_signer(market.account(i)), market.account(i).address, Role.VERIFIER, minimum)
    market.daemon("whistleblower", WHISTLEBLOWER, "whistleblower")
    caught = wait_for("the forced error caught", lambda: protocol.market.events("ForcedErrorCaught", deploy, jobId=short), 240, market)[0]
    assert caught.args["verifier"] == verifier_address and caught.args["whistleblower"] == market.account(WHISTLEBLOWER).address
    (opened,) = protocol.game.events("DisputeOpened", deploy, jobId=short)
    game_id = GameId(int(opened.args["gameId"]))
    game = protocol.game.get_game(game_id)
    assert game.on_report and game.status is GameStatus.CHALLENGER_WON
    settled = protocol.game.events("DisputeSettled", deploy, gameId=game_id)[0]
    assert SettleReason(settled.args["reason"]) is SettleReason.FORCED_ERROR  # conceded, not timed out

    opened_at, conceded_at = (protocol.client.timestamp(e.block_number) for e in (opened, caught))
    replayed = [r for r in verifier.log_records() if r.get("job") == int(long) and r["msg"] in (SEGMENT_REPLAYED, REPLAY_DONE)]
    done = [float(r["ts"]) for r in replayed if r["msg"] == REPLAY_DONE]
    assert protocol.client.timestamp(drawn.block_number) < opened_at, "the long job was drawn before the game opened"
    assert not done or done[0] > conceded_at, "the verifier was still replaying the long job when it conceded"
    print(f"\nreport game conceded {conceded_at - opened_at} s after it opened, while replaying another job")
    assert protocol.market.events("VerifierTimedOut", deploy) == []
    assert protocol.stakes.events("StakeSlashed", deploy, account=verifier_address) == []
    assert protocol.market.get_job(long).state in (JobState.VERIFYING, JobState.VERIFIED)
    for process in market.processes:
        assert process.running, process.name
        assert "Traceback" not in process.log_path.read_text(), process.name
