"""Reading dispute outcomes off the chain for the end-to-end dispute tests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from core.chain import Address
from core.contracts import Event, GameId, JobId, JobState, Protocol, Role
from rolebase.actions import credits_of
from submitter import service
from submitter.demo_job import build_demo_job
from tests.e2e.conftest import Market, wait_for


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


def _in_one_block(protocol: Protocol, read: Callable[[], int]) -> int:
    """``read()`` with every call in it made at one block, the latest when it starts (the daemons run on: a
    credit claimed between reading a contract's balance and its credits counted twice). Pinned, not
    read again until no block came meanwhile: eleven accounts' wealth takes longer than a block of a
    busy chain, and that loop once held a test for 15 minutes."""
    with protocol.client.reading_at(protocol.client.block_number()):
        return read()


def wealth(protocol: Protocol, address: str) -> int:
    """Wallet tokens plus stakes in every role plus what every contract that pays by credit owes
    (the game, the court, the sealed jobs' contract: the daemons claim them), read in one block."""

    def read() -> int:
        credits = sum(credits_of(protocol, Address(address)).values())
        return protocol.token.balance_of(address) + sum(protocol.stakes.stake_of(address, r).staked for r in Role) + credits

    return _in_one_block(protocol, read)


def total_wealth(protocol: Protocol, market: Market, accounts: range) -> int:
    """The accounts' wealth plus what the market and the contracts that pay by credit hold besides the
    credits (counted in the payees' wealth), read in one block: conserved by every call."""

    def read() -> int:
        crediting = (protocol.game, protocol.court, protocol.sealed_jobs, protocol.diloco)
        held = sum(protocol.token.balance_of(c.address) for c in (protocol.market, *crediting))
        owed = sum(c.total_credit() for c in crediting)
        return held - owed + sum(wealth(protocol, market.account(i).address) for i in accounts)

    return _in_one_block(protocol, read)


@dataclass(frozen=True)
class CaughtCheat:
    """A cheating solver's job, its settled game, and everyone's wealth before it all."""

    job_id: JobId
    settled: Event
    before: dict[int, int]
    before_total: int


def catch_cheat(
    market: Market,
    folder: Path,
    cheat: str,
    *,
    solver: int,
    verifier: int,
    referees: tuple[int, ...],
    accounts: range,
    post: Callable[[Market, Path], JobId] = post_tiny,
) -> CaughtCheat:
    """A verifier daemon (account ``verifier``), then a solver daemon playing ``cheat`` (account ``solver``),
    the tiny job posted (by ``post``); once the verifier is drawn, referee daemons join; returns once the game settled."""
    protocol = market.protocol()
    before_total = total_wealth(protocol, market, accounts)
    before = {i: wealth(protocol, market.account(i).address) for i in accounts}
    me = market.account(verifier).address
    market.daemon("verifier", verifier, "verifier", "--stake", "200", "--duty-grace", "5", "--poll", "0.5")
    wait_for("the verifier staked", lambda: protocol.stakes.stake_of(me, Role.VERIFIER).staked > 0, 60, market)
    market.daemon("solver", solver, "cheater", "--cheat", cheat, "--poll", "0.5")
    job_id = post(market, folder)
    wait_for("the verifier drawn", lambda: protocol.market.get_job(job_id).verifier == me, 240, market)
    for i in referees:
        market.daemon("verifier", i, f"referee{i}", "--stake", "200", "--duty-grace", "5", "--poll", "0.5")
    event = wait_for("the game settled", lambda: settled(protocol, job_id), 300, market)
    return CaughtCheat(job_id, event, before, before_total)


def assert_cheater_slashed(market: Market, caught: CaughtCheat, *, solver: int, accounts: range) -> None:
    """The challenger was paid the solver's whole bond plus its challenge bond, less the referees' fees;
    the job reopened with its escrow; tokens conserved; every daemon alive without a traceback."""
    protocol = market.protocol()
    params = protocol.game.params()
    job = protocol.market.get_job(caught.job_id)
    bond, fees = protocol.market.solver_bond(job.reward), params.committee_size * params.referee_fee
    assert caught.settled.args["payout"] == params.challenge_bond + bond - fees
    assert caught.before[solver] - wealth(protocol, market.account(solver).address) == bond, "the solver lost its whole bond"
    assert job.state is JobState.OPEN, "reopened with its escrow for another solver"
    assert total_wealth(protocol, market, accounts) == caught.before_total, "tokens are conserved"
    for process in market.processes:
        assert process.running, process.name
        assert "Traceback" not in process.log_path.read_text(), process.name
