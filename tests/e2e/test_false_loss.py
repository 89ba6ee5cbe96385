"""A solver that trains honestly but commits a prettier training curve loses its bond in the trace game.

The solver daemon (``--cheat false-loss``, proofs.strategies.FALSE_CLAIMS) trains every segment as
the spec says and commits the second half of its curve at 0.8x the mean losses training computed.
The honest verifier's replay reproduces every state and fails those segments as ``wrong-loss``
(its report lists the loss it replayed); it opens the trace game on the first of them. Every state
the solver defends with is true, so the verifier agrees with every midpoint and the game isolates the
segment's last step, which holds; the referees (three other verifier daemons) then replay the
segment's k steps from its checkpoint, find the committed loss false and vote against the solver.
"""

from __future__ import annotations

import json
from pathlib import Path

from core.cid import digest_to_cid
from core.contracts import GameId, GameStatus, SettleReason
from proofs.manifest import MAX_MANIFEST_BYTES, parse_manifest
from tests.e2e.conftest import Market
from tests.e2e.disputes import assert_cheater_slashed, catch_cheat

E2E_ACCOUNTS = 6
SUBMITTER, SOLVER, VERIFIER, REFEREES = 0, 1, 2, (3, 4, 5)
EVERYONE = range(0, 6)


def test_a_false_training_curve_is_caught_and_the_referees_rule_on_the_loss(market: Market, tmp_path: Path) -> None:
    protocol = market.protocol()
    deploy = protocol.book.deploy_block
    verifier = market.account(VERIFIER).address
    caught = catch_cheat(market, tmp_path / "job", "false-loss", solver=SOLVER, verifier=VERIFIER, referees=REFEREES, accounts=EVERYONE)
    job_id, event = caught.job_id, caught.settled
    (committed,) = protocol.market.events("TraceCommitted", deploy, jobId=job_id)
    manifest = parse_manifest(market.store.get(digest_to_cid(committed.args["manifestCid"]), MAX_MANIFEST_BYTES))
    n, k = manifest.segments, manifest.checkpoint_interval
    (report,) = protocol.market.events("ReportSubmitted", deploy, jobId=job_id)
    body = json.loads(market.store.get(digest_to_cid(report.args["reportCid"]), 1 << 20))
    failed = [v for v in body["verdicts"] if not v["passed"]]
    assert not report.args["passed"] and failed and {v["reason"] for v in failed} == {"wrong-loss"}
    assert all(v["segment"] >= n // 2 and v["replayed_loss"] != manifest.losses[v["segment"]] for v in failed), "only the lied-about half"
    assert all(v["replayed_loss"] == manifest.losses[v["segment"]] for v in body["verdicts"] if v["passed"])

    game = protocol.game.get_game(GameId(int(event.args["gameId"])))
    assert (game.status, game.segment, game.by_verifier, game.challenger) == (GameStatus.CHALLENGER_WON, failed[0]["segment"], True, verifier)
    assert (game.lo, game.hi) == (k - 1, k), "the verifier agreed with every (true) midpoint"
    assert SettleReason(event.args["reason"]) is SettleReason.VERDICT, "the referees voted, the solver defended"
    assert_cheater_slashed(market, caught, solver=SOLVER, accounts=EVERYONE)
