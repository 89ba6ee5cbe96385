"""`veritrain demo`: one real training job bought, done, verified and paid, on a local chain.

What runs, each for real:

* a devnet: anvil on a free loopback port, the compiled contracts deployed with short
  windows (a few seconds of challenge window instead of minutes), mining a block a second;
* the embedded content store (a directory every process shares);
* a solver daemon and a verifier daemon, each its own process (``python -m veritrain solver run``),
  with its own key (from an environment variable) and its own state directory;
* the submitter, in this process: it uploads a dataset the proofs engine ships, posts the
  job and follows it to finalization, printing each event with its gas as it lands.

At the end: the timeline, the gas of each call, balances before and after, the trained
model's test metric, and where the wall time went. Every process it started is stopped
on the way out, on Ctrl-C too (and the daemons die with it if it is killed: PDEATHSIG).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Annotated, Any

import typer
from rich.table import Table

from core.anvil import dev_private_key
from core.chain import Address
from core.contracts import JobState, Protocol, Role
from core.errors import VeritrainError
from core.storage import LocalStore
from deploy.deployer import DeployParams
from deploy.devnet import Devnet, start_devnet
from submitter import service
from submitter.amounts import show_tokens
from submitter.demo_job import DemoJob, build_demo_job, evaluate_model
from submitter.timeline import TimelineEntry, job_timeline
from veritrain.options import console

__all__ = ["demo", "RoleProcess", "daemon_argv", "demo_params"]

#: Windows short enough for a demo that finishes in minutes; everything else as on the devnet.
DEMO_MARKET = {
    "openWindow": 900,
    "maxCommitWindow": 900,
    "reportWindow": 180,
    "challengeWindow": 8,
    "disputeWindow": 120,
}


def demo_params() -> DeployParams:
    base = DeployParams.devnet()
    return base.model_copy(update={"market": {**base.market, **DEMO_MARKET}, "unbonding_delay": 60})


# ------------------------------------------------------------------ role processes


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the demo dies, however it dies (Linux)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def daemon_argv(
    role: str,
    *,
    rpc_url: str,
    book_dir: Path,
    data_dir: Path,
    store_dir: Path,
    key_env: str,
    extra: Sequence[str] = (),
) -> list[str]:
    """The command line of a role daemon (``solver`` or ``verifier``), logging JSON lines."""
    return [
        sys.executable, "-m", "veritrain", role, "run",
        "--rpc", rpc_url,
        "--address-book-dir", str(book_dir),
        "--data-dir", str(data_dir),
        "--store-dir", str(store_dir),
        "--key-env", key_env,
        "--log-json",
        *extra,
    ]  # fmt: skip


@dataclass
class RoleProcess:
    """One daemon process: started with its key in its environment, logs to a file, stopped for sure."""

    name: str
    argv: list[str]
    env: dict[str, str]
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    _log: IO[bytes] | None = field(default=None, repr=False)

    def start(self) -> RoleProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "ab")
        self.process = subprocess.Popen(
            self.argv,
            env={**os.environ, **self.env},
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            preexec_fn=_die_with_parent,
        )
        return self

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """SIGKILL, as a crash would: no cleanup runs in the daemon."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self, timeout: float = 15.0) -> int | None:
        """SIGTERM (graceful), then SIGKILL after ``timeout``; returns the exit code. Idempotent."""
        process = self.process
        if process is not None:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        if self._log is not None:
            self._log.close()
            self._log = None
        return None if process is None else process.returncode

    def log_records(self) -> list[dict[str, Any]]:
        """The daemon's JSON log lines (other lines, e.g. a traceback, are skipped)."""
        records = []
        if self.log_path.exists():
            for line in self.log_path.read_text(errors="replace").splitlines():
                if line.startswith("{"):
                    try:
                        records.append(json.loads(line))
                    except json.JSONDecodeError:
                        continue
        return records


# ------------------------------------------------------------------ the demo


@dataclass
class _Party:
    label: str
    address: Address


def _balances(protocol: Protocol, parties: Sequence[_Party]) -> dict[str, tuple[int, int]]:
    """label -> (wallet tokens, staked tokens in the party's role)."""
    out: dict[str, tuple[int, int]] = {}
    roles = {"solver": Role.SOLVER, "verifier": Role.VERIFIER}
    for party in parties:
        staked = protocol.stakes.stake_of(party.address, roles[party.label]).staked if party.label in roles else 0
        out[party.label] = (protocol.token.balance_of(party.address), staked)
    out["market (escrow)"] = (protocol.token.balance_of(protocol.market.address), 0)
    return out


_AMOUNTS = frozenset({"reward", "verifierFee", "bond", "slashed", "refund"})


def _print_entry(entry: TimelineEntry, t0: float) -> None:
    details = ", ".join(
        f"{k}={show_tokens(v) + ' VERI' if k in _AMOUNTS else v}" for k, v in entry.args.items() if k not in ("submitter", "solver", "verifier")
    )
    console.print(f"  +{time.monotonic() - t0:6.1f}s  block {entry.block:>4}  [bold]{entry.event:<17}[/] gas {entry.gas_used:>9,}  {details}", highlight=False)


@contextmanager
def _interrupts_as_keyboard() -> Iterator[None]:
    """SIGTERM ends the demo like Ctrl-C does (through the same cleanup)."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_demo(workdir: Path, timeout_s: float, job_name: str) -> dict[str, Any]:
    """The whole demo in ``workdir``; returns the figures it printed (for ``--json`` and the e2e test)."""
    t_start = time.monotonic()
    figures: dict[str, Any] = {}
    with ExitStack() as stack, _interrupts_as_keyboard():
        console.rule("[bold]veritrain demo")
        job: DemoJob = build_demo_job(job_name, workdir / "job")  # first: a bad name fails before anything starts
        net: Devnet = stack.enter_context(start_devnet(book_dir=workdir / "deployments", accounts=3, params=demo_params()))
        net.client.rpc("evm_setIntervalMining", [1])  # a block a second, as a real chain would
        console.print(f"devnet at {net.rpc_url} (chain {net.client.chain_id}), contracts deployed")
        store_dir = workdir / "store"
        store = LocalStore(store_dir)
        submitter, solver, verifier = net.accounts[0], net.accounts[1], net.accounts[2]
        protocol = net.protocol(submitter)
        parties = [_Party("submitter", submitter.address), _Party("solver", solver.address), _Party("verifier", verifier.address)]
        before = _balances(protocol, parties)

        daemons = []
        for role, index in (("solver", 2), ("verifier", 3)):
            key_env = f"VERITRAIN_DEMO_{role.upper()}_KEY"
            process = RoleProcess(
                role,
                daemon_argv(role, rpc_url=net.rpc_url, book_dir=workdir / "deployments", data_dir=workdir / role, store_dir=store_dir, key_env=key_env, extra=("--poll", "0.5")),
                {key_env: dev_private_key(index)},  # dev account i+1 is net.accounts[i]
                workdir / "logs" / f"{role}.log",
            ).start()
            stack.callback(process.stop)
            daemons.append(process)
        figures["pids"] = [net.anvil.process.pid, *(d.process.pid for d in daemons)]  # type: ignore[union-attr]
        console.print(f"solver daemon pid {daemons[0].process.pid}, verifier daemon pid {daemons[1].process.pid}; logs in {workdir / 'logs'}")  # type: ignore[union-attr]

        t_post = time.monotonic()
        posted = service.post_job(protocol, store, job.spec_path, job.data_path, job.reward, job.fee, job.commit_window)
        console.print(f"posted job [bold]{posted.job_id}[/]: {job.description}; spec {posted.spec_cid}, dataset {posted.dataset_cid}")

        seen = 0
        state = JobState.OPEN
        while True:
            timeline = job_timeline(protocol, posted.job_id)
            for entry in timeline[seen:]:
                _print_entry(entry, t_post)
            seen = len(timeline)
            state = protocol.market.get_job(posted.job_id).state
            if state.final:
                timeline = job_timeline(protocol, posted.job_id)  # the final event landed after the read above
                for entry in timeline[seen:]:
                    _print_entry(entry, t_post)
                break
            for d in daemons:
                if not d.running:
                    raise VeritrainError(f"the {d.name} daemon exited ({d.process.returncode if d.process else '?'}): see {d.log_path}")
            if time.monotonic() - t_post > timeout_s:
                raise VeritrainError(f"job {posted.job_id} not final after {timeout_s:.0f}s (state {state.name}); logs in {workdir / 'logs'}")
            time.sleep(0.5)
        t_final = time.monotonic()
        after = _balances(protocol, parties)
        figures["job_id"] = posted.job_id
        figures["state"] = state.name
        figures["gas"] = {e.event: e.gas_used for e in timeline}
        figures["gas"].update({f"{k} (submitter)": r.gas_used for k, r in posted.receipts.items() if k == "approve"})
        figures["balances"] = {k: {"before": before[k], "after": after[k]} for k in before}
        if state is not JobState.FINALIZED:
            raise VeritrainError(f"job {posted.job_id} ended {state.name}, not FINALIZED; logs in {workdir / 'logs'}")

        model_path = workdir / "model.safetensors"
        cid, size = service.fetch_model(protocol, store, posted.job_id, model_path)
        metric = evaluate_model(job, model_path, posted.dataset_cid)
        figures["model"] = {"cid": cid, "bytes": size, **metric}
        figures["timing"] = _timing(daemons, t_start, t_post, t_final)
        _report(figures, timeline, before, after)
    figures["timing"]["wall_s"] = round(time.monotonic() - t_start, 1)
    console.print(f"all processes stopped; total wall time {figures['timing']['wall_s']} s")
    return figures


def _timing(daemons: Sequence[RoleProcess], t_start: float, t_post: float, t_final: float) -> dict[str, float]:
    """Where the time went, from the daemons' own log records (seconds each step took)."""
    totals = {"training_s": 0.0, "upload_s": 0.0, "verification_s": 0.0}
    keys = {"training finished": "training_s", "upload finished": "upload_s", "replay done": "verification_s"}
    for d in daemons:
        for record in d.log_records():
            key = keys.get(str(record.get("msg")))
            if key is not None and isinstance(record.get("seconds"), (int, float)):
                totals[key] += float(record["seconds"])
    post_to_final = t_final - t_post
    work = sum(totals.values())
    return {
        "setup_s": round(t_post - t_start, 1),
        "post_to_final_s": round(post_to_final, 1),
        **{k: round(v, 1) for k, v in totals.items()},
        "chain_and_waits_s": round(max(0.0, post_to_final - work), 1),
    }


def _report(figures: dict[str, Any], timeline: Sequence[TimelineEntry], before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> None:
    gas = Table("call (event)", "from", "gas used", title="gas of each call")
    for e in timeline:
        gas.add_row(e.event, e.sender[:10] + "..", f"{e.gas_used:,}")
    gas.add_row("[bold]total[/]", "", f"[bold]{sum(e.gas_used for e in timeline):,}[/]")
    console.print(gas)
    balances = Table("party", "wallet before", "wallet after", "staked before", "staked after", "change (wallet+stake)", title="VERI balances")
    for label in before:
        (wb, sb), (wa, sa) = before[label], after[label]
        delta = (wa + sa) - (wb + sb)
        balances.add_row(label, show_tokens(wb), show_tokens(wa), show_tokens(sb), show_tokens(sa), ("+" if delta >= 0 else "-") + show_tokens(abs(delta)))
    console.print(balances)
    model = figures["model"]
    metric = ", ".join(f"{k} {v}" for k, v in model.items() if k not in ("cid", "bytes"))
    console.print(f"trained model {model['cid']} ({model['bytes']:,} bytes, verified against its CID): {metric}")
    timing = figures["timing"]
    console.print(
        "wall time: setup {setup_s}s; post to final {post_to_final_s}s = training {training_s}s + upload {upload_s}s"
        " + verification {verification_s}s + chain and waits {chain_and_waits_s}s".format(**timing)
    )


def demo(
    workdir: Annotated[Path | None, typer.Option(help="keep everything (chain data, store, logs, model) here instead of a temporary directory")] = None,
    job: Annotated[str, typer.Option(help="which shipped demo job to post: mlp-spirals, char-text, cnn-shapes, tiny")] = "mlp-spirals",
    timeout: Annotated[float, typer.Option(help="give up if the job is not final after this many seconds", min=10)] = 600.0,
    json_out: Annotated[bool, typer.Option("--json", help="also print the figures as one JSON object at the end")] = False,
) -> None:
    """Run the whole protocol once on a local chain: post a real training job, watch it solved, verified and paid.

    Starts anvil, deploys, starts a solver daemon and a verifier daemon as separate
    processes, posts a small job from the proofs engine's shipped datasets, follows it to
    finalization, and prints the timeline, gas, balances, the model's test metric and timings.
    Leaves no process behind.

    Examples:

      veritrain demo

      veritrain demo --workdir /tmp/vt-demo --json
    """
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
        figures = run_demo(workdir.resolve(), timeout, job)
    else:
        with tempfile.TemporaryDirectory(prefix="veritrain-demo-") as tmp:
            figures = run_demo(Path(tmp), timeout, job)
    if json_out:
        print(json.dumps(figures, default=str))
