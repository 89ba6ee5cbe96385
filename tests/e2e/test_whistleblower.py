"""A real whistleblower daemon on anvil catches forced errors, is paid from the jackpot, and survives kill -9.

The chain is deployed with ``forcedErrorRateBps = 10000``: an honest verifier daemon that has
committed its forced seed before the draw is forced on every job, so it publishes probe 0 wrong
(and its true verdict). The whistleblower audits the report, finds probe 0 wrong, opens a report
game; the verifier concedes by revealing its secret; the whistleblower gets ``jackpot * share /
1e4`` plus its bond back, the verifier keeps its bond and fee, the challenge window resumes and
the job finalizes. The challenge window is 45 s: room to audit, and for a restart mid-audit.
Three more verifiers stake (no daemons: a forced error is conceded before any committee is drawn)
once the job's verifier is drawn, so that a committee could be seated: the bot opens no game
otherwise (docs/roles.md, "No game without a committee"); they unstake when the test ends.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from core.agent import mined
from core.cid import digest_to_cid
from core.contracts import GameId, GameStatus, JobId, JobState, Protocol, Role, SettleReason
from proofs.manifest import MANIFEST_BLOCK, load_manifest
from rolebase.actions import stake
from rolebase.events import AUDIT_RECORDED, JACKPOT_INCOME
from submitter import service
from submitter.demo_job import build_demo_job
from tests.e2e.conftest import DripGateway, Market, wait_for
from tests.e2e.disputes import post_tiny, wealth

E2E_ACCOUNTS = 7
SOLVER, VERIFIER, WHISTLEBLOWER, REFEREES = 1, 2, 3, (4, 5, 6)
ZERO = b"\x00" * 32
E2E_MARKET = {"forcedErrorRateBps": 10_000, "challengeWindow": 45}  # every seeded verifier forced on every job; time to audit


def _start_verifier(market: Market, protocol: Protocol) -> None:
    """The verifier first, until its forced seed is on chain (a draw counts it only if set by its anchor)."""
    market.daemon("verifier", VERIFIER, "verifier", "--duty-grace", "5")
    verifier = market.account(VERIFIER).address
    wait_for("the verifier's forced seed on chain", lambda: bytes(protocol.market.forced_seed_of(verifier).commitment) != ZERO, 90, market)


@contextmanager
def _referees_once_drawn(market: Market, protocol: Protocol, job_id: JobId) -> Iterator[None]:
    """Once the job's verifier is drawn (they must not be drawn themselves: no daemon runs them),
    three verifiers stake the minimum, enough for a committee; they unstake on the way out."""
    wait_for("the job's verifier drawn", lambda: protocol.market.get_job(job_id).verifier == market.account(VERIFIER).address, 120, market)
    minimum = protocol.stakes.min_stake(Role.VERIFIER)
    for i in REFEREES:
        stake(protocol.with_signer(market.account(i)), market.account(i).address, Role.VERIFIER, minimum)
    try:
        yield
    finally:
        for i in REFEREES:
            protocol.with_signer(market.account(i)).stakes.request_unstake(Role.VERIFIER, minimum)


def _our_games(protocol: Protocol, job_id: JobId, whistleblower: str) -> list[GameId]:
    return [GameId(int(e.args["gameId"])) for e in protocol.game.events("DisputeOpened", protocol.book.deploy_block, jobId=job_id, challenger=whistleblower)]


def test_a_forced_error_is_caught_and_the_whistleblower_paid_from_the_jackpot(market: Market, tmp_path: Path) -> None:
    protocol = market.protocol()
    deploy = protocol.book.deploy_block
    verifier, whistleblower = market.account(VERIFIER).address, market.account(WHISTLEBLOWER).address
    _start_verifier(market, protocol)
    wb = market.daemon("whistleblower", WHISTLEBLOWER, "whistleblower")
    wait_for("the whistleblower staked", lambda: protocol.stakes.stake_of(whistleblower, Role.WHISTLEBLOWER).staked > 0, 90, market)
    market.daemon("solver", SOLVER, "solver")
    before = {a: wealth(protocol, a) for a in (verifier, whistleblower)}
    jackpot = protocol.market.jackpot()
    share = protocol.market.params().jackpot_share_bps
    job_id = post_tiny(market, tmp_path / "job")
    with _referees_once_drawn(market, protocol, job_id):
        caught = wait_for("the forced error caught", lambda: protocol.market.events("ForcedErrorCaught", deploy, jobId=job_id), 150, market)
    assert caught[0].args["whistleblower"] == whistleblower and caught[0].args["verifier"] == verifier
    payout = jackpot * share // 10_000
    assert caught[0].args["payout"] == payout > 0
    (game_id,) = _our_games(protocol, job_id, whistleblower)
    game = protocol.game.get_game(game_id)
    assert game.on_report and game.status is GameStatus.CHALLENGER_WON
    settled = protocol.game.events("DisputeSettled", deploy, gameId=game_id)[0]
    assert SettleReason(settled.args["reason"]) is SettleReason.FORCED_ERROR
    opened = protocol.game.events("ReportDisputeOpened", deploy, gameId=game_id)[0]
    assert opened.args["probeIndex"] == 0  # the forced probe

    wait_for("the job finalized in the resumed window", lambda: protocol.market.get_job(job_id).state is JobState.FINALIZED, 120, market)
    job = protocol.market.get_job(job_id)
    assert wealth(protocol, whistleblower) - before[whistleblower] == payout  # its bond back, plus the jackpot share
    assert wealth(protocol, verifier) - before[verifier] == job.verifier_fee  # not slashed: bond kept, fee paid
    assert _our_games(protocol, job_id, whistleblower) == [game_id]  # one challenge, none in the resumed window
    assert protocol.market.events("ReportOverturned", deploy, jobId=job_id) == []
    records = wb.log_records()
    assert any(r["msg"] == JACKPOT_INCOME and int(r["jackpot"]) == jackpot for r in records)
    assert "Traceback" not in wb.log_path.read_text()

    def status() -> dict[str, Any]:
        done = subprocess.run(
            [sys.executable, "-m", "veritrain", "whistleblower", "status", "--rpc", market.net.rpc_url, "--address-book-dir", str(market.book_dir),
             "--data-dir", str(market.root / "whistleblower"), "--address", whistleblower, "--json"],
            cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout))

    def forgotten() -> dict[str, Any] | None:  # the audit is forgotten on a tick after the job is final
        report = status()
        return report if report["audits"] == [] else None

    report = wait_for("the audit forgotten once the job is final", forgotten, 120, market)
    assert report["daemon"]["ticks"] > 0 and report["economics"]["jackpot_share_bps"] == share
    earned = report["earnings"]
    assert (earned["games_opened"], earned["games_won"]) == (1, 1)
    assert earned["jackpot_paid"] == str(payout) and earned["net"] == str(payout)  # --json: base units


def test_the_whistleblower_killed_mid_audit_redoes_it_after_a_restart_and_challenges_once(market: Market, tmp_path: Path, drip: DripGateway) -> None:
    """Killed (SIGKILL) in the middle of an audit, the whistleblower records nothing; restarted, it audits
    the report again and challenges it once. The first run's own store lacks the job's checkpoints and
    its peer is a gateway that drips (:class:`tests.e2e.conftest.DripGateway`): its audit is held at its
    first checkpoint fetch, so the kill lands mid-audit whatever the probes' steps."""
    protocol = market.protocol()
    deploy = protocol.book.deploy_block
    whistleblower = market.account(WHISTLEBLOWER).address
    _start_verifier(market, protocol)
    market.daemon("solver", SOLVER, "solver")
    job = build_demo_job("tiny", tmp_path / "job")
    job_id = service.post_job(market.protocol(market.account(0)), market.store, job.spec_path, job.data_path, job.reward, job.fee, job.commit_window).job_id
    with _referees_once_drawn(market, protocol, job_id):
        reported = wait_for("the report", lambda: protocol.market.events("ReportSubmitted", deploy, jobId=job_id), 120, market)[0]
        # the first run's store: everything the job's parties stored but its checkpoints (an earlier
        # test trained the same spec, so they are dropped by the manifest's list, not by age)
        own = tmp_path / "whistleblower-store"
        shutil.copytree(market.store_dir, own)
        committed = protocol.market.events("TraceCommitted", deploy, jobId=job_id)[0]
        manifest = load_manifest(market.store.get(digest_to_cid(committed.args["manifestCid"]), MANIFEST_BLOCK))
        for cid in manifest.checkpoint_cids:
            (own / "blobs" / cid).unlink(missing_ok=True)
        first = market.daemon("whistleblower", WHISTLEBLOWER, "whistleblower", "--store-dir", str(own), "--peer", drip.url)
        wait_for("the first run's audit held at a checkpoint fetch", lambda: drip.requests >= 1, 90, market)
        records = first.log_records()
        assert any(r["msg"] == "audit started" and int(r["job"]) == job_id for r in records)
        first.kill()  # SIGKILL mid-audit: nothing recorded
        assert not [r for r in first.log_records() if r["msg"] == AUDIT_RECORDED and int(r["job"]) == job_id]
        assert _our_games(protocol, job_id, whistleblower) == []
        second = market.daemon("whistleblower", WHISTLEBLOWER, "whistleblower", run=2)
        caught = wait_for("the forced error caught", lambda: protocol.market.events("ForcedErrorCaught", deploy, jobId=job_id), 120, market)[0]
    used = protocol.client.timestamp(caught.block_number) - protocol.client.timestamp(reported.block_number)
    print(f"\ncaught {used} s into the {protocol.market.params().challenge_window} s challenge window, a restart included")
    wait_for("the job finalized", lambda: protocol.market.get_job(job_id).state is JobState.FINALIZED, 120, market)
    assert len(_our_games(protocol, job_id, whistleblower)) == 1, "challenged once, before and after the restart"
    records = [r for r in second.log_records() if r.get("job") is not None and int(r["job"]) == job_id]
    assert [r["msg"] for r in records if r["msg"] in ("audit started", AUDIT_RECORDED)] == ["audit started", AUDIT_RECORDED]  # redone once
    assert any(r["msg"] == mined("openOnReport") for r in records)
