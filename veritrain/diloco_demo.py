"""`veritrain demo --job diloco`: a multi-party job (issue 28, docs/multiparty.md) on a local chain.

Four solver daemons run with ``--multiparty`` take the job's four slots; one of them cheats
(``--cheat STRATEGY``, default ``wrong-lr``: its inner traces follow that adversary; or
``copy-contribution``: it trains honestly and commits another slot's contribution, which the
aggregator calls wrong, so the copier loses its slot bond and its slot). Four verifier
daemons verify every inner job as any job: the cheater's trace fails its replay, the dispute game
isolates one step, a committee of the other verifiers rules, and the cheater is slashed; its inner job
never reaches Finalized, so its contribution cannot enter the round's aggregate, which a verifier drawn
as aggregator computes from the three honest contributions and commits, and anyone could challenge in
one step. The rounds go on with the honest parties and the job finishes with their model: the printed
state hash of each round is the one every party, the aggregator and a referee recompute.

Everything runs for real: anvil, the contracts, the content store, eight daemon processes; the
submitter posts in this process and follows the job's events. A failed run keeps its working
directory, every daemon's log included.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from core.contracts import MultipartyPhase, Role, TokenAmount
from core.errors import VeritrainError
from proofs.strategies import ALL_STRATEGIES
from rolebase.amounts import show_tokens
from rolebase.cli import console
from veritrain.localnet import interrupts_as_keyboard, local_params, start_local_net

__all__ = ["run_diloco_demo", "DILOCO_PARTIES", "MULTIPARTY_CHEATS"]

#: The demo's shape: four parties, two rounds; the quorum is its honest parties (a cheater's contribution never counts).
DILOCO_PARTIES, DILOCO_ROUNDS, DILOCO_INNER_STEPS = 4, 2, 20
#: Room for a dispute game on a cheater's inner trace inside a round: the close waits for every
#: contribution's inner job to settle, up to the verify window.
_WORK_WINDOW, _VERIFY_WINDOW = 600, 900
#: The adversaries a party of the demo may be: a trace adversary (its inner traces lose their games)
#: or ``copy-contribution`` (its contribution is another slot's: called wrong, its slot bond slashed).
MULTIPARTY_CHEATS = (*ALL_STRATEGIES, "copy-contribution")
_E18 = 10**18
_SHOWN = (
    "RoundOpened",
    "InnerJobBegun",
    "ContributionCommitted",
    "RoundClosed",
    "AggregatorDrawn",
    "AggregateCommitted",
    "RoundFinalized",
    "SlotVacated",
    "MultipartyJobFinished",
)


def _label(names: Mapping[str, str], value: object) -> object:
    return names.get(str(value), value)


def _show(event: Any, t0: float, names: Mapping[str, str]) -> None:
    args = {k: v for k, v in event.args.items() if k not in ("jobId", "globalCid", "stateCid", "cid")}
    details = ", ".join(f"{k}={'0x' + bytes(v).hex()[:12] if isinstance(v, bytes) else _label(names, v)}" for k, v in args.items())
    console.print(f"  +{time.monotonic() - t0:6.1f}s  block {event.block_number:>4}  [bold]{event.name:<22}[/] {details}", highlight=False)


def run_diloco_demo(workdir: Path, timeout_s: float, cheats: Sequence[str] = ("wrong-lr",), keep: float | None = None) -> dict[str, Any]:
    """The whole multi-party demo in ``workdir``; returns its figures (for ``--json`` and the e2e test).
    ``cheats``: the strategies of the last parties (a trace adversary, or ``copy-contribution``); the
    quorum is the honest parties. ``keep``: top-k contributions with error feedback (None: dense int8)."""
    from proofs.diloco import MultipartyConfig
    from submitter.curve import committed_curve
    from submitter.demo_job import build_demo_job
    from submitter.multiparty import MultipartyPay, post_multiparty
    from submitter.multiparty_report import multiparty_report, read_facts

    if not 1 <= len(cheats) < DILOCO_PARTIES - 1:
        raise VeritrainError(f"the demo's {DILOCO_PARTIES} parties hold one or two cheaters, not {len(cheats)}")
    if unknown := [c for c in cheats if c not in MULTIPARTY_CHEATS]:
        raise VeritrainError(f"no multi-party adversary {unknown[0]!r}; choose one of {', '.join(MULTIPARTY_CHEATS)}")
    t_start = time.monotonic()
    with ExitStack() as stack, interrupts_as_keyboard():
        console.rule(f"[bold]veritrain demo: a multi-party job; cheating parties: {', '.join(cheats)}")
        job = build_demo_job("tiny", workdir / "job")
        parties = [f"party{i}" for i in range(1, DILOCO_PARTIES + 1)]
        cheaters = dict(zip(parties[len(parties) - len(cheats) :], cheats, strict=True))
        verifiers = [f"verifier{i}" for i in range(1, 5)]
        local = stack.enter_context(start_local_net(workdir, accounts=1 + len(parties) + len(verifiers), params=local_params({"maxCommitWindow": 3600})))
        net = local.net
        names: dict[str, str] = {net.accounts[0].address: "submitter"}
        for i, label in enumerate([*parties, *verifiers], start=1):
            names[net.accounts[i].address] = label
        duty = ("--duty-grace", "5")
        for i, label in enumerate(parties, start=1):
            extra = ("--multiparty", *duty, *(("--cheat", cheaters[label]) if label in cheaters else ()))
            local.daemon("solver", i, label, *extra)
        for i, label in enumerate(verifiers, start=1 + len(parties)):
            local.daemon("verifier", i, label, *duty)
        deploy = local.protocol().book.deploy_block
        told = ", ".join(f"{label} cheats: {strategy}" for label, strategy in cheaters.items())
        console.print(f"devnet at {net.rpc_url}; {len(parties)} solver daemons (--multiparty; {told}), {len(verifiers)} verifier daemons")
        local.wait_staked(300)
        protocol = local.protocol(net.accounts[0])
        quorum = DILOCO_PARTIES - len(cheats)
        cfg = MultipartyConfig(DILOCO_PARTIES, DILOCO_ROUNDS, DILOCO_INNER_STEPS, block_size=64, keep=keep, quorum=quorum)
        pay = MultipartyPay(
            TokenAmount(5 * _E18), TokenAmount(_E18), TokenAmount(10 * _E18), TokenAmount(2 * _E18), TokenAmount(20 * _E18), _WORK_WINDOW, _VERIFY_WINDOW
        )
        t_post = time.monotonic()
        posted = post_multiparty(protocol, local.store, job.spec_path, job.data_path, cfg, pay)
        console.print(
            f"posted multi-party job [bold]{posted.job_id}[/]: {DILOCO_PARTIES} parties (quorum {quorum}) x {DILOCO_ROUNDS} rounds x {DILOCO_INNER_STEPS} "
            f"inner steps of {job.description}; escrow {show_tokens(posted.escrow)} VERI",
            highlight=False,
        )
        d = protocol.diloco
        seen: set[tuple[str, int]] = set()
        moved = time.monotonic()
        while True:
            events = sorted((e for name in _SHOWN for e in d.events(name, deploy, jobId=posted.job_id)), key=lambda e: (e.block_number, e.log_index))
            for event in events:
                if (event.tx_hash, event.log_index) not in seen:
                    seen.add((event.tx_hash, event.log_index))
                    _show(event, t_post, names)
                    moved = time.monotonic()
            if d.get_job(posted.job_id).phase is MultipartyPhase.FINISHED:
                break
            local.check_running()
            if time.monotonic() - moved > timeout_s:
                raise VeritrainError(f"multi-party job {posted.job_id} had no new event for {timeout_s:.0f}s")
            time.sleep(1.0)
        report = multiparty_report(read_facts(protocol, posted.job_id), lambda done: committed_curve(local.store, done))
        shown = report.to_json(str)
        games = {g.game_id for r in report.rounds for s in r.slots for g in s.games if g.status is not None}
        holders = {int(e.args["slot"]): names.get(str(e.args["party"]), str(e.args["party"])) for e in d.events("SlotJoined", deploy, jobId=posted.job_id)}
        figures: dict[str, Any] = {
            "job_id": posted.job_id,
            "spec_cid": posted.spec_cid,
            "store_dir": str(local.store_dir),
            "rounds": shown["history"],
            "slots": holders,
            "complete": report.job.round == DILOCO_ROUNDS,
            "global_hash": shown["global_hash"],
            "games_on_inner_jobs": len(games),
            "cheaters": {},
            "report": shown,
            "wall_s": 0.0,
        }
        for label, strategy in cheaters.items():
            address = net.accounts[parties.index(label) + 1].address
            # a daemon tops its stake up again after a slash: the slashes are the StakeManager's events
            slashed = sum(int(e.args["amount"]) for e in protocol.stakes.events("StakeSlashed", deploy, account=address, role=int(Role.SOLVER)))
            paid = sum(1 for r in shown["history"] for slot in r["paid"] if holders.get(slot) == label)
            figures["cheaters"][label] = {"strategy": strategy, "slashed": slashed, "paid": paid}
        console.rule("[bold]result")
        for r in shown["history"]:
            paid_to = ", ".join(holders.get(s, f"slot {s}") for s in r["paid"]) or "nobody"
            cut = ", ".join(holders.get(s, f"slot {s}") for s in r["cut_out"])
            console.print(
                f"round {r['round']}: aggregate by {names.get(r['aggregator'], r['aggregator'])}, paid {paid_to}"
                + (f", cut out (slot bond slashed) {cut}" if cut else "")
                + f"; state {r['state_hash'][:18]}",
                highlight=False,
            )
        for t in report.parties:
            label = names.get(t.party, t.party)
            console.print(
                f"{label}{f' ({cheaters[label]})' if label in cheaters else ''}: {t.accepted} of {t.contributions} contribution(s) paid, "
                f"games on its traces won {t.games_won} lost {t.games_lost}, earned {show_tokens(t.earned)} VERI, slashed {show_tokens(t.slashed)} VERI",
                highlight=False,
            )
        console.print(
            f"{len(games)} dispute game(s) on inner traces settled; the job {'finished every round' if figures['complete'] else 'ended early'} "
            f"with global model {shown['global_cid']}",
            highlight=False,
        )
        figures["wall_s"] = round(time.monotonic() - t_start, 1)
        console.print(f"total wall time {figures['wall_s']} s")
    return figures
