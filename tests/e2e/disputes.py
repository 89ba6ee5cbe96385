"""Reading dispute outcomes off the chain for the end-to-end dispute tests."""

from __future__ import annotations

from pathlib import Path

from core.contracts import Event, GameId, JobId, Protocol, Role
from submitter import service
from submitter.demo_job import build_demo_job
from tests.e2e.conftest import Market


def post_tiny(market: Market, folder: Path) -> JobId:
    """The demo's tiny job (mlp-spirals, 200 steps, k = 20: 10 segments, 5 bisection moves)."""
    job = build_demo_job("tiny", folder)
    submitter = market.protocol(market.account(0))
    return service.post_job(submitter, market.store, job.spec_path, job.data_path, job.reward, job.fee, job.commit_window).job_id


def settled(protocol: Protocol, job_id: JobId) -> Event | None:
    """The DisputeSettled event of the (first) game on ``job_id``, once there is one."""
    start = protocol.book.deploy_block
    opened = protocol.game.events("DisputeOpened", start, jobId=job_id)
    if not opened:
        return None
    done = protocol.game.events("DisputeSettled", start, gameId=GameId(int(opened[0].args["gameId"])))
    return done[0] if done else None


def wealth(protocol: Protocol, address: str) -> int:
    """Wallet tokens plus stakes in every role."""
    return protocol.token.balance_of(address) + sum(protocol.stakes.stake_of(address, r).staked for r in Role)


def total_wealth(protocol: Protocol, market: Market, accounts: range) -> int:
    """The accounts' wealth plus what the market and the game hold: conserved by every call."""
    held = protocol.token.balance_of(protocol.market.address) + protocol.token.balance_of(protocol.game.address)
    return held + sum(wealth(protocol, market.account(i).address) for i in accounts)
