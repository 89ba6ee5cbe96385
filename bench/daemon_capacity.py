"""Daemon capacity: how many concurrent jobs one solver and one verifier daemon handle.

    .venv/bin/python -m bench.daemon_capacity --quick     # N = 1, 2, 4 (under 2 minutes)
    .venv/bin/python -m bench.daemon_capacity             # N = 1, 2, 4, ..., 64 (stops at the first miss)
    .venv/bin/python -m bench.daemon_capacity --n 8 --n 16 --max-active 4
    .venv/bin/python -m bench.daemon_capacity --n 8 --pairs 2   # 2 solvers and 2 verifiers competing

What runs, as in ``veritrain demo`` and ``veritrain up`` (through ``veritrain.localnet``): a devnet (anvil, the
local market parameters: commit window of the job, report window 180 s, challenge
window 8 s; one block a second), the embedded store, and one solver daemon and one
verifier daemon as real processes (``python -m veritrain solver run ...``), both started
once and kept for the whole sweep. For each N, N copies of a tiny job (``tiny``: the
MLP on spirals, 200 steps, a checkpoint every 20) are posted at once (the chain
switched to automine while posting, so all N land within a second or two), and the
batch is followed until every job is final.

Measured per batch: time from the first post to the last final state, throughput
(FINALIZED jobs a minute),
each job's latency (its post to its final state, seen by polling every 0.25 s),
the daemons' CPU seconds (utime + stime from /proc/<pid>/stat, the batch's delta) and
peak RSS (VmRSS sampled every 0.25 s), missed deadlines (a job that ended anything but
FINALIZED, or saw SolverTimedOut / VerifierTimedOut), and the least slack left on the
commit deadline (claim + commit window) and the report deadline (draw + report window),
from the block timestamps of the job's events: the deadline a larger N would miss first; and the
transactions mined reverted in the batch's blocks, by function (wasted gas: a claim collision, a
duplicate ``assignVerifier`` or ``finalize``). ``--pairs K`` runs K solver and K verifier daemons (CPU
seconds summed per role, RSS the largest of a role's).

The daemon flags are set explicitly: ``--max-active`` (jobs a solver trains at once,
claimed but not committed), ``--stake`` for both sized so that stake never limits a
batch (a solver bond per held job, a verifier bond per assignment), ``--poll 0.5`` and
``--duty-grace 30`` as in the demo.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.procstatus import memory_mb
from core.contracts import JobId, JobState, Protocol, RefundReason, Role
from deploy.build import build
from submitter import service
from submitter.demo_job import DemoJob, build_demo_job
from submitter.timeline import job_timeline
from veritrain.localnet import LocalNet, start_local_net

_TICK_S = 0.25
_SLASHING_EVENTS = ("SolverTimedOut", "VerifierTimedOut")
_CLK_TCK = os.sysconf("SC_CLK_TCK")


def _cpu_seconds(pid: int) -> float:
    """utime + stime of a process, in seconds (/proc/<pid>/stat fields 14 and 15)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    return statistics.quantiles(ordered, n=100, method="inclusive")[round(q) - 1]


@dataclass(frozen=True)
class Batch:
    n: int
    wall_s: float
    latencies: tuple[float, ...]
    finalized: int
    cpu_s: dict[str, float]
    peak_rss_mb: dict[str, float]
    missed: tuple[str, ...]  # "job 7: REFUNDED (VerifierTimedOut)" ...
    unfinished: int
    commit_slack_s: int | None  # least seconds left before a commit deadline
    report_slack_s: int | None  # least seconds left before a report deadline
    reverted: Counter[str]  # transactions mined reverted in the batch's blocks, by function

    @property
    def ok(self) -> bool:
        return not self.missed and not self.unfinished


class Rig:
    """A local network with ``pairs`` solver daemons and as many verifier daemons, started once."""

    def __init__(self, local: LocalNet, job: DemoJob, *, max_active: int, max_n: int, pairs: int = 1) -> None:
        self.local = local
        self.pairs = pairs
        self.job = job
        self.store = local.store
        self.protocol: Protocol = local.protocol(local.account(0))
        params = self.protocol.market.params()
        self.commit_window = job.commit_window
        self.report_window = params.report_window
        min_solver = int(self.protocol.stakes.min_stake(Role.SOLVER))
        min_verifier = int(self.protocol.stakes.min_stake(Role.VERIFIER))
        solver_bond = max(int(params.min_solver_bond), int(job.reward) * params.solver_bond_bps // 10_000)
        verifier_bond = max(int(params.min_verifier_bond), int(job.reward) * params.verifier_bond_bps // 10_000)
        self.stakes = {
            "solver": max(min_solver, max_n * solver_bond),
            "verifier": max(min_verifier, max_n * verifier_bond),
        }
        flags = {
            "solver": ("--stake", str(self.stakes["solver"] // 10**18), "--max-active", str(max_active), "--poll", "0.5", "--no-progress"),
            "verifier": ("--stake", str(self.stakes["verifier"] // 10**18), "--duty-grace", "30", "--poll", "0.5"),
        }
        self.flags = flags

    def start(self) -> float:
        """Start the daemons; seconds until all hold their stake (start-up: imports, approve, stake)."""
        for i in range(self.pairs):
            for role, account in (("solver", 1 + 2 * i), ("verifier", 2 + 2 * i)):
                name = role if i == 0 else f"{role}{i + 1}"
                self.local.daemon(role, account, name, *self.flags[role])
        stakes = {p.name: self.stakes[p.role] for p in self.local.processes}
        return self.local.wait_staked(300, at_least=stakes)  # four daemons starting on busy cores take minutes

    def pids(self) -> dict[str, int]:
        self.local.check_running()
        return {process.name: process.pid for process in self.local.processes}

    def role_of(self, name: str) -> str:
        return name.rstrip("0123456789")

    def reverted(self, first: int, last: int) -> Counter[str]:
        """Transactions mined reverted in blocks ``first..last``, by the protocol function they called, the
        daemon that sent it and, for a call on a job, the daemon whose same call went through and how many
        blocks before (``assignVerifier by verifier (verifier2's 0 blocks before)``): which race it lost."""
        client = self.protocol.client
        senders = {p.address.lower(): p.name for p in self.local.processes if p.address is not None}
        contracts = {w.address.lower(): w.contract for w in (self.protocol.market, self.protocol.game, self.protocol.stakes, self.protocol.token)}
        mined: dict[tuple[str, int], tuple[str, int]] = {}  # (function, job) -> (sender, block) of the call that went through
        lost: list[tuple[str, str, int | None, int]] = []  # (function, sender, job, block) of each reverted call
        for number in range(first, last + 1):
            for tx in client.w3.eth.get_block(number, full_transactions=True)["transactions"]:
                assert not isinstance(tx, bytes)
                contract = contracts.get(str(tx.get("to") or "").lower())
                called, args = contract.decode_function_input(tx["input"]) if contract is not None else (None, {})
                name = called.fn_name if called is not None else "other"
                job = int(args["jobId"]) if "jobId" in args else None
                sender = senders.get(str(tx["from"]).lower(), "another account")
                if int(client.w3.eth.get_transaction_receipt(tx["hash"])["status"]) == 1:
                    if job is not None:
                        mined.setdefault((name, job), (sender, number))
                else:
                    lost.append((name, sender, job, number))
        found: Counter[str] = Counter()
        for name, sender, job, number in lost:
            winner = mined.get((name, job)) if job is not None else None
            against = f" ({winner[0]}'s {number - winner[1]} blocks before)" if winner is not None else ""
            found[f"{name} by {self.role_of(sender)}{against}"] += 1
        return found

    def run_batch(self, n: int, timeout_s: float) -> Batch:
        pids = self.pids()
        cpu0 = {name: _cpu_seconds(pid) for name, pid in pids.items()}
        peak = {name: memory_mb(pid).get("VmRSS", 0.0) for name, pid in pids.items()}
        client = self.local.net.client
        t0 = time.monotonic()
        first_block = client.block_number() + 1
        client.rpc("evm_setAutomine", [True])  # all N posts land at once, not one block a second each
        try:
            posted: dict[JobId, float] = {}
            for _ in range(n):
                job_id = service.post_job(
                    self.protocol, self.store, self.job.spec_path, self.job.data_path, self.job.reward, self.job.fee, self.job.commit_window
                ).job_id
                posted[job_id] = time.monotonic()
        finally:
            client.rpc("evm_setIntervalMining", [1])
        done: dict[JobId, tuple[float, JobState]] = {}
        while len(done) < n and time.monotonic() - t0 < timeout_s:
            for job_id in posted.keys() - done.keys():
                state = self.protocol.market.get_job(job_id).state
                if state.final:
                    done[job_id] = (time.monotonic(), state)
            for name, pid in self.pids().items():
                peak[name] = max(peak[name], memory_mb(pid).get("VmRSS", 0.0))
            time.sleep(_TICK_S)
        wall = (max(t for t, _ in done.values()) if done else time.monotonic()) - t0
        cpu = {role: 0.0 for role in ("solver", "verifier")}
        rss = {role: 0.0 for role in ("solver", "verifier")}
        for name, pid in pids.items():
            cpu[self.role_of(name)] += _cpu_seconds(pid) - cpu0[name]
            rss[self.role_of(name)] = max(rss[self.role_of(name)], peak[name])
        missed: list[str] = []
        commit_slack: list[int] = []
        report_slack: list[int] = []
        for job_id in posted:
            timeline = {e.event: e for e in job_timeline(self.protocol, job_id)}
            slashed = [e for e in _SLASHING_EVENTS if e in timeline]
            final_state = done[job_id][1] if job_id in done else None
            if (final_state is not None and final_state is not JobState.FINALIZED) or slashed:
                refund = timeline.get("JobRefunded")
                why = ", ".join(slashed) or (f"refunded: {RefundReason(int(refund.args['reason'])).name}" if refund else "no timeout event")
                missed.append(f"job {job_id}: {final_state.name if final_state else 'not final'} ({why})")
            if "JobClaimed" in timeline and "TraceCommitted" in timeline:
                commit_slack.append(timeline["JobClaimed"].timestamp + self.commit_window - timeline["TraceCommitted"].timestamp)
            if "VerifierAssigned" in timeline and "ReportSubmitted" in timeline:
                report_slack.append(timeline["VerifierAssigned"].timestamp + self.report_window - timeline["ReportSubmitted"].timestamp)
        return Batch(
            n=n,
            wall_s=wall,
            latencies=tuple(t - posted[j] for j, (t, _) in done.items()),
            finalized=sum(1 for _, state in done.values() if state is JobState.FINALIZED),
            cpu_s=cpu,
            peak_rss_mb=rss,
            missed=tuple(missed),
            unfinished=n - len(done),
            commit_slack_s=min(commit_slack, default=None),
            report_slack_s=min(report_slack, default=None),
            reverted=self.reverted(first_block, client.block_number()),
        )


def _print_table(batches: Sequence[Batch]) -> None:
    head = f"{'N':>3} {'all final s':>11} {'final/min':>9} {'p50 s':>6} {'p95 s':>6} {'solver cpu s':>12} {'verif cpu s':>11} {'solver RSS MB':>13} {'verif RSS MB':>12} {'commit slack s':>14} {'report slack s':>14} {'missed':>6} {'reverted':>8}"
    print(head)
    print("-" * len(head))
    for b in batches:
        lat = b.latencies or (float("nan"),)
        throughput = 60 * b.finalized / b.wall_s if b.wall_s else float("nan")
        missed = f"{len(b.missed)}" + (f"+{b.unfinished}?" if b.unfinished else "")
        print(
            f"{b.n:>3} {b.wall_s:>11.1f} {throughput:>9.1f} {_percentile(lat, 50):>6.1f} {_percentile(lat, 95):>6.1f}"
            f" {b.cpu_s['solver']:>12.1f} {b.cpu_s['verifier']:>11.1f} {b.peak_rss_mb['solver']:>13.0f} {b.peak_rss_mb['verifier']:>12.0f}"
            f" {_opt(b.commit_slack_s):>14} {_opt(b.report_slack_s):>14} {missed:>6} {sum(b.reverted.values()):>8}"
        )
    for b in batches:
        reasons = Counter(line.split(": ", 1)[1] for line in b.missed)
        for reason, count in reasons.most_common():
            jobs = [line.split(":", 1)[0] for line in b.missed if line.endswith(reason)]
            print(f"  N={b.n}: {count} missed deadline(s), {reason}: {', '.join(jobs[:5])}{' ...' if count > 5 else ''}")
        if b.unfinished:
            print(f"  N={b.n}: {b.unfinished} job(s) not final within the batch timeout")
        if b.reverted:
            print(f"  N={b.n}: reverted transactions: {', '.join(f'{name} {count}' for name, count in b.reverted.most_common())}")


def _opt(value: int | None) -> str:
    return "-" if value is None else str(value)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="N = 1, 2, 4 only (under 2 minutes)")
    parser.add_argument("--n", type=int, action="append", help="batch sizes to run, in order (repeatable); default 1 2 4 8 16 32 64")
    parser.add_argument("--job", default="tiny", help="shipped demo job posted N times (default tiny: 200 steps, k=20)")
    parser.add_argument("--max-active", type=int, default=16, help="solver --max-active: jobs claimed and trained at once (1..16), default 16")
    parser.add_argument("--batch-timeout", type=float, default=900.0, help="give up on a batch after this many seconds, default 900")
    parser.add_argument("--keep-going", action="store_true", help="run larger N after a batch that missed a deadline")
    parser.add_argument("--pairs", type=int, default=1, choices=range(1, 5), help="solver daemons, and as many verifier daemons (1..4), default 1")
    args = parser.parse_args(argv)
    sizes = args.n or ([1, 2, 4] if args.quick else [1, 2, 4, 8, 16, 32, 64])
    build()
    t_start = time.monotonic()
    batches: list[Batch] = []
    with tempfile.TemporaryDirectory(prefix="veritrain-capacity-") as tmp:
        root = Path(tmp)
        job = build_demo_job(args.job, root / "job")
        with start_local_net(root, accounts=1 + 2 * args.pairs) as local:
            rig = Rig(local, job, max_active=args.max_active, max_n=max(sizes), pairs=args.pairs)
            startup = rig.start()
            print(
                f"{os.cpu_count()} CPUs; job {args.job!r} x N; commit window {rig.commit_window} s, report window {rig.report_window} s, challenge window {rig.protocol.market.params().challenge_window} s, 1 block/s"
            )
            print(
                f"{args.pairs} solver(s), {args.pairs} verifier(s); solver flags: {' '.join(rig.flags['solver'])}; verifier flags: {' '.join(rig.flags['verifier'])}; daemons staked {startup:.1f} s after start"
            )
            for n in sizes:
                batch = rig.run_batch(n, args.batch_timeout)
                batches.append(batch)
                print(f"  N={n}: all final in {batch.wall_s:.1f} s, {len(batch.missed)} missed, {batch.unfinished} unfinished", flush=True)
                if not batch.ok and not args.keep_going:
                    break
    print()
    _print_table(batches)
    good = [b.n for b in batches if b.ok]
    bad = [b for b in batches if not b.ok]
    print()
    print(
        f"largest N with no missed deadline: {max(good) if good else 'none'}" + (f"; first miss at N={bad[0].n}" if bad else f" (no miss up to N={max(sizes)})")
    )
    print(f"sweep wall time {time.monotonic() - t_start:.0f} s")


if __name__ == "__main__":
    main(sys.argv[1:])
