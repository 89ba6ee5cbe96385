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
model's test metric, and where the wall time went.

``--cheat STRATEGY`` (a name of ``proofs.strategies.ALL_STRATEGIES``: the six classic cheats
and the adaptive ones, e.g. ``free-start`` and ``coast``) plays a dispute first: a
cheating solver daemon claims the job and commits that adversary's trace, the verifier drawn
for it fails the replay and opens the dispute game, the bisection isolates one step, three
other verifier daemons sit as referees (four verifiers in all: the committee excludes the
solver, the challenger, the job's verifier and the submitter), the cheater is slashed, the
challenger paid and the job reopened; an honest solver daemon, started once the cheater has
claimed, then does the job and it finalizes. The moves are printed with their gas.

``--lazy-verifier`` plays the incentive game instead (docs/incentives.md): the verifier drawn for
the job is lazy (``verifier run --lazy``: passes without replaying, guessing its probes), a
whistleblower daemon audits the report, finds a wrong probe and opens a report game in which the
lazy verifier defends its probe; three honest verifier daemons, started once the lazy one is
drawn, sit as referees; the whistleblower wins, the lazy verifier's bond is slashed, the job goes
back to a verifier draw (the lazy one excluded) and an honest verifier re-verifies it; it finalizes.

The devnet, the store and the daemons are a :mod:`veritrain.localnet` (what ``veritrain up`` runs):
every process it started is stopped on the way out, on Ctrl-C and SIGTERM too (and the daemons die
with it if it is killed: PDEATHSIG). A run that fails (an error, the timeout, Ctrl-C) keeps its
working directory, every daemon's log included, and prints where it is; a successful run in a
temporary directory removes it.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from core.agent import DEADLINE_AT_RISK
from core.chain import Address
from core.contracts import GameId, GameStatus, Job, JobId, JobState, Protocol, Role
from core.errors import VeritrainError
from core.storage import ContentStore, file_cid
from proofs.spec import JobSpec, load_spec
from proofs.strategies import ALL_STRATEGIES, inapplicable
from rolebase.amounts import show_tokens
from rolebase.cli import console, err_console
from rolebase.earnings import jackpot_economics
from rolebase.events import JOB_REFUSED, REPLAY_DONE, SPEC_JUDGED
from submitter import service
from submitter.curve import draw_curve, job_curve
from submitter.timeline import GAME_EVENTS, TimelineEntry, game_timeline, job_timeline
from veritrain.localnet import ROLES, LocalNet, RoleProcess, interrupts_as_keyboard, local_params, start_local_net

if TYPE_CHECKING:
    from submitter.demo_job import DemoJob

__all__ = ["demo", "run_demo"]

#: ``--lazy-verifier``: a whistleblower must fetch the report, replay its probes and segments and
#: open its game inside the challenge window; 8 s is too tight for that on two busy cores, and 30 s
#: once was (a full CI run: its audit alone took 16 s). No forced errors: the demo tells the lazy
#: verifier's story, and a forced draw (1 % on the devnet) told another once in a full test run: the
#: lazy verifier conceded its forced probe, kept its fee and the job finalized on its report (forced
#: errors are played in tests/e2e/test_whistleblower.py).
LAZY_MARKET = {"challengeWindow": 40, "forcedErrorRateBps": 0}

#: The demo's chain: an honest job must end FINALIZED on a slow, busy machine too, so the windows the
#: parties' speed decides are roomy (a report ends its window early: room costs nothing when all goes
#: well), and a job whose commit window the solver finds too short for its measured speed is posted
#: again with one sized from that speed (:func:`_window_for`), up to ``maxCommitWindow``.
DEMO_MARKET = {"maxCommitWindow": 3600, "reportWindow": 600}


# ------------------------------------------------------------------ the demo


@dataclass
class _Party:
    label: str
    address: Address
    role: Role | None = None


def _balances(protocol: Protocol, parties: Sequence[_Party]) -> dict[str, tuple[int, int]]:
    """label -> (wallet tokens, staked tokens in the party's role); the market's balance split into
    the jobs' escrow and the jackpot (seeded by the deployer, fed by the jobs' tax)."""
    out: dict[str, tuple[int, int]] = {}
    for party in parties:
        staked = protocol.stakes.stake_of(party.address, party.role).staked if party.role is not None else 0
        out[party.label] = (protocol.token.balance_of(party.address), staked)
    jackpot = protocol.market.jackpot()
    out["market (escrow)"] = (protocol.token.balance_of(protocol.market.address) - jackpot, 0)
    out["jackpot"] = (jackpot, 0)
    out["dispute game (bonds)"] = (protocol.token.balance_of(protocol.game.address), 0)
    return out


_AMOUNTS = frozenset({"reward", "verifierFee", "bond", "slashed", "refund"})


_AMOUNTS_GAME = frozenset({"payout", "refereeFees", "amount"})


def _print_entry(entry: TimelineEntry, t0: float, names: Mapping[str, str]) -> None:
    details = ", ".join(
        f"{k}={show_tokens(v) + ' VERI' if k in _AMOUNTS | _AMOUNTS_GAME else names.get(str(v), v)}"
        for k, v in entry.args.items()
        if k not in ("submitter", "solver", "verifier")
    )
    who = names.get(entry.sender, entry.sender[:10])
    console.print(
        f"  +{time.monotonic() - t0:6.1f}s  block {entry.block:>4}  [bold]{entry.event:<17}[/] by {who:<11} gas {entry.gas_used:>9,}  {details}",
        highlight=False,
    )


@dataclass(frozen=True)
class _DemoDaemon:
    """One daemon of the demo's cast: its label, role (a daemon command), account (index in ``net.accounts``)
    and flags; ``later`` ones start only once the adversary holds the job (so that it goes first)."""

    label: str
    role: str
    account: int
    extra: tuple[str, ...] = ()
    later: bool = False


#: The adversary of each story: who must hold the job (as its solver or verifier) first.
ADVERSARIES = {"cheater": "a cheating solver", "lazy": "a lazy verifier"}


def _cast(cheat: str | None, lazy_verifier: bool) -> list[_DemoDaemon]:
    """The daemons of a run. A dispute needs the job's verifier plus a committee of three others
    (the committee excludes the solver, the challenger, the job's verifier and the submitter)."""
    duty = ("--duty-grace", "5")
    if cheat:
        return [
            _DemoDaemon("cheater", "solver", 1, ("--cheat", cheat)),
            _DemoDaemon("solver", "solver", 2, later=True),  # joins once the cheater has claimed
            *(_DemoDaemon(f"verifier{i + 1}", "verifier", 3 + i, duty) for i in range(4)),
        ]
    if lazy_verifier:
        return [
            _DemoDaemon("solver", "solver", 1),
            _DemoDaemon("lazy", "verifier", 2, ("--lazy", *duty)),
            # honest: the report game's referees, then the re-draw; they join once the lazy one is drawn
            *(_DemoDaemon(f"verifier{i + 1}", "verifier", 3 + i, duty, later=True) for i in range(3)),
            _DemoDaemon("whistleblower", "whistleblower", 6),
        ]
    return [_DemoDaemon("solver", "solver", 1), _DemoDaemon("verifier", "verifier", 2, duty)]


def _posted_spec(job: DemoJob) -> JobSpec:
    """The demo job's spec as it will be posted (the dataset's CID and size filled in as `submit post` does)."""
    raw = json.loads(job.spec_path.read_text())
    data = job.data_path.read_bytes()
    raw["dataset"] = {**raw["dataset"], "cid": file_cid(data), "size_bytes": len(data)}
    return load_spec(json.dumps(raw))


@dataclass
class _Stage:
    """The demo's network while it runs: the local chain, the submitter's protocol, the parties by
    label and the daemons started so far (with every process id, for the test that none is left)."""

    local: LocalNet
    protocol: Protocol
    cast: list[_DemoDaemon]
    parties: list[_Party]
    cheat: str | None
    pids: list[int]
    max_commit_window: int
    daemons: dict[str, RoleProcess] = field(default_factory=dict)

    @classmethod
    def open(cls, stack: ExitStack, workdir: Path, cast: list[_DemoDaemon], cheat: str | None, lazy_verifier: bool, market: Mapping[str, int]) -> _Stage:
        """Anvil deployed with the demo's windows (a block a second; ``market`` over them), one funded account per party."""
        windows = {**DEMO_MARKET, **(LAZY_MARKET if lazy_verifier else {}), **market}
        params = local_params(windows)
        local = stack.enter_context(start_local_net(workdir, accounts=1 + len(cast), params=params))
        net = local.net
        console.print(f"devnet at {net.rpc_url} (chain {net.client.chain_id}, blocks of {net.client.block_gas_limit():,} gas), contracts deployed")
        submitter = net.accounts[0]
        protocol = net.protocol(submitter)
        console.print(f"jackpot {show_tokens(protocol.market.jackpot())} VERI (seeded by the deployer)")
        parties = [_Party("submitter", submitter.address), *(_Party(member.label, net.accounts[member.account].address, ROLES[member.role]) for member in cast)]
        return cls(local, protocol, cast, parties, cheat, [net.anvil.process.pid], windows["maxCommitWindow"])  # type: ignore[union-attr]

    @property
    def names(self) -> dict[str, str]:
        return {p.address: p.label for p in self.parties}

    def post(self, job: DemoJob) -> service.Posted:
        """Post ``job`` as the submitter; the gpt jobs name torch numerics (docs/demo.md): posted as a
        weaker guarantee, and said so."""
        return service.post_job(self.protocol, self.local.store, job.spec_path, job.data_path, job.reward, job.fee, job.commit_window, allow_tolerance=True)

    def start(self, member: _DemoDaemon) -> None:
        process = self.local.daemon(member.role, member.account, member.label, *member.extra)
        self.daemons[member.label] = process
        self.pids.append(process.pid)
        role = f" ([red]{ADVERSARIES[member.label]}{': ' + self.cheat if self.cheat else ''}[/])" if member.label in ADVERSARIES else ""
        console.print(f"{member.label} daemon pid {process.pid}{role}")

    def start_first(self) -> None:
        """Every daemon of the cast but those that join once the adversary holds the job."""
        for member in self.cast:
            if not member.later:
                self.start(member)
        console.print(f"logs in {self.local.root / 'logs'}")

    def join_later(self, job: Job) -> None:
        """The adversary (if any) holds ``job`` as its solver or verifier: the others join. The demo
        stakes each joiner's minimum itself first, so that it counts (as a referee the report game
        seats, say) from the next block: a daemon stakes only once it has started, 15 s and more on
        two busy cores, and a whistleblower holds its challenge until a committee can be seated,
        which once ran past the lazy verifier's challenge window. The daemon finds its stake there."""
        adversary = next((p.address for p in self.parties if p.label in ADVERSARIES), None)
        if adversary not in (job.solver, job.verifier):
            return
        joining = [member for member in self.cast if member.later and member.label not in self.daemons]
        for member in joining:
            signed = self.local.protocol(self.local.account(member.account))
            role = ROLES[member.role]
            amount = signed.stakes.min_stake(role)
            signed.token.approve(signed.stakes.address, amount)
            signed.stakes.stake(role, amount)
        for member in joining:
            self.start(member)


@dataclass
class _Followed:
    """Where following a job ended: the job as last posted (posted again if its window was too short), its final state, its timeline."""

    job: DemoJob
    posted: service.Posted
    state: JobState
    timeline: list[TimelineEntry]


def _follow(stage: _Stage, job: DemoJob, posted: service.Posted, t_post: float, timeout_s: float) -> _Followed:
    """Print each event of the job (and its games) as it lands until the job is final; post it again
    with a roomier commit window if the solver refuses the window for its measured speed."""
    protocol, names = stage.protocol, stage.names
    seen: set[tuple[str, int]] = set()
    told: set[tuple[str, str]] = set()

    def show_new() -> list[TimelineEntry]:
        entries = sorted(job_timeline(protocol, posted.job_id) + game_timeline(protocol, posted.job_id), key=lambda e: (e.block, e.log_index))
        for entry in entries:
            if (entry.tx_hash, entry.log_index) not in seen:
                seen.add((entry.tx_hash, entry.log_index))
                _print_entry(entry, t_post, names)
        return entries

    moved = time.monotonic()  # when the job (or a game on it) last had a new event
    while True:
        before = len(seen)
        show_new()
        if len(seen) > before:
            moved = time.monotonic()
        job_now = protocol.market.get_job(posted.job_id)
        state = job_now.state
        stage.join_later(job_now)
        if state.final:
            break
        if state is JobState.OPEN:
            window = _tell_refusals(stage.daemons, posted.job_id, told, stage.max_commit_window)
            if window is not None and window > job.commit_window:  # the solver is slower than the window: post again, roomier
                service.cancel_job(protocol, posted.job_id)
                job = replace(job, commit_window=window)
                posted = stage.post(job)
                console.print(f"posted again as job [bold]{posted.job_id}[/] with a commit window of {window} s, sized from the solver's measured speed")
        stage.local.check_running()
        if time.monotonic() - moved > timeout_s:  # a slow machine's long training or replay still ends in an event
            raise VeritrainError(f"job {posted.job_id} had no new event for {timeout_s:.0f}s (state {state.name})")
        time.sleep(0.5)
    return _Followed(job, posted, state, show_new())  # the final event landed after the read above


def _model_figures(
    protocol: Protocol,
    store: ContentStore,
    job: DemoJob,
    posted: service.Posted,
    workdir: Path,
    before_text: str | None,
    curve_png: Path | None,
    score: bool,
) -> dict[str, Any]:
    """The finalized job's model, fetched and checked against its CID, its test metric and text (when
    ``score``), and its committed training curve, drawn."""
    from submitter.demo_job import evaluate_model, sample_text  # here, as in run_demo: the training stack loads in seconds

    model_path = workdir / "model.safetensors"
    cid, size = service.fetch_model(protocol, store, posted.job_id, model_path)
    figures: dict[str, Any] = {"model": {"cid": cid, "bytes": size, **(evaluate_model(job, model_path, posted.dataset_cid) if score else {})}}
    if before_text is not None:
        figures["text"] = {"before": before_text, "after": sample_text(job, posted.dataset_cid, model_path.read_bytes())}
    curve = job_curve(protocol, store, posted.job_id)
    if curve is not None:  # always, once FINALIZED: the trace is committed
        png = draw_curve(
            curve,
            curve_png or workdir / "training_curve.png",
            title=f"demo job {posted.job_id}: mean training loss per segment (committed, replay-checked)",
        )
        figures["curve"] = {"png": str(png), "losses": [p.loss for p in curve.points]}
    return figures


def run_demo(
    workdir: Path,
    timeout_s: float,
    job_name: str,
    cheat: str | None = None,
    lazy_verifier: bool = False,
    curve_png: Path | None = None,
    *,
    steps: int | None = None,
    market: Mapping[str, int] | None = None,
    score: bool = True,
) -> dict[str, Any]:
    """The whole demo in ``workdir``; returns the figures it printed (for ``--json`` and the e2e test).

    The job's committed training curve is drawn to ``curve_png`` (default ``workdir/training_curve.png``).

    ``cheat``: a cheating solver claims the job first and is caught; ``lazy_verifier``: a lazy
    verifier is drawn first, caught by a whistleblower and slashed (see the module docstring);
    ``steps``: the job's steps instead of its default; ``market``: JobMarket parameters over the
    demo's (``bench.gpt2_small``: windows for hours of CPU training and replay); ``score``: the
    model's test metric and its text before and after (False for the 124M bench: a CPU scores 256
    batches of 1,024 tokens at 124M for longer than the whole job took)."""
    from submitter.demo_job import build_demo_job, sample_text  # here, not above: `veritrain --help` and every other command start without torch

    if cheat is not None and cheat not in ALL_STRATEGIES:
        raise VeritrainError(f"no adversary strategy {cheat!r}; choose one of {', '.join(ALL_STRATEGIES)}")
    if cheat is not None and lazy_verifier:
        raise VeritrainError("--cheat and --lazy-verifier tell two stories: choose one")
    t_start = time.monotonic()
    figures: dict[str, Any] = {"cheat": cheat, "lazy_verifier": lazy_verifier}
    title = f": a {cheat} cheater caught" if cheat else ": a lazy verifier caught by a whistleblower" if lazy_verifier else ""
    with ExitStack() as stack, interrupts_as_keyboard():
        console.rule("[bold]veritrain demo" + title)
        job: DemoJob = build_demo_job(job_name, workdir / "job", steps=steps)  # first: a bad name fails before anything starts
        if cheat is not None and (misfit := inapplicable(cheat, _posted_spec(job))) is not None:
            raise VeritrainError(f"--cheat {cheat} on --job {job_name}: {misfit}")
        stage = _Stage.open(stack, workdir, _cast(cheat, lazy_verifier), cheat, lazy_verifier, market or {})
        protocol, store, names = stage.protocol, stage.local.store, stage.names
        before = _balances(protocol, stage.parties)
        figures["pids"] = stage.pids
        stage.start_first()

        t_post = time.monotonic()
        posted = stage.post(job)
        console.print(f"posted job [bold]{posted.job_id}[/]: {job.description}; spec {posted.spec_cid}, dataset {posted.dataset_cid}")
        if posted.weaker is not None:
            console.print(posted.weaker, highlight=False)
        before_text = sample_text(job, posted.dataset_cid) if score else None
        if before_text is not None:
            console.print(f"the model before training writes: [italic]{escape(repr(before_text))}[/]")

        followed = _follow(stage, job, posted, t_post, timeout_s)
        job, posted, state, timeline = followed.job, followed.posted, followed.state, followed.timeline
        t_final = time.monotonic()
        after = _balances(protocol, stage.parties)
        figures["job_id"] = posted.job_id
        figures["state"] = state.name
        figures["gas"] = {e.event: e.gas_used for e in timeline if e.event not in GAME_EVENTS}
        figures["gas"].update({f"{k} (submitter)": r.gas_used for k, r in posted.receipts.items() if k == "approve"})
        figures["balances"] = {k: {"before": before[k], "after": after[k]} for k in before}
        figures["addresses"] = {p.label: p.address for p in stage.parties}
        if cheat or lazy_verifier:
            figures["dispute"] = _dispute_figures(protocol, posted.job_id, timeline, names)
        if lazy_verifier:
            figures["economics"] = jackpot_economics(protocol)
        if state is not JobState.FINALIZED:
            raise VeritrainError(f"job {posted.job_id} ended {state.name}, not FINALIZED")
        figures.update(_model_figures(protocol, store, job, posted, workdir, before_text, curve_png, score))
        figures["timing"] = _timing(list(stage.daemons.values()), t_start, t_post, t_final)
        _report(figures, timeline, before, after, names)
    figures["timing"]["wall_s"] = round(time.monotonic() - t_start, 1)
    console.print(f"all processes stopped; total wall time {figures['timing']['wall_s']} s")
    return figures


def _window_for(train_s: float) -> int:
    """A commit window for a job a solver estimates at ``train_s`` seconds here: twice that and a minute."""
    return int(2 * train_s) + 60


def _tell_refusals(daemons: Mapping[str, RoleProcess], job_id: int, told: set[tuple[str, str]], max_window: int) -> int | None:
    """Print once each party's one-line reason for refusing ``job_id`` (or for a deadline it sees at risk);
    return a commit window sized from the solver's measured speed if it refused the job's window and
    one up to ``max_window`` would do (else None)."""
    window: int | None = None
    for label, process in daemons.items():
        judged: dict[str, float] = {}
        for entry in _json_lines(process.log_path):
            if entry.get("msg") == SPEC_JUDGED and isinstance(entry.get("train_s"), (int, float)):
                judged[str(entry.get("spec"))] = float(entry["train_s"])
            refused = entry.get("msg") == JOB_REFUSED and entry.get("job") == job_id
            at_risk = entry.get("msg") == DEADLINE_AT_RISK and str(entry.get("work", "")).split(":")[1:2] == [str(job_id)]
            if not (refused or at_risk):
                continue
            reason = str(entry.get("reason") or f"{entry.get('work')} due in {entry.get('due_in_s')} s, needs {entry.get('needs_s')} s")
            if (label, reason) not in told:
                told.add((label, reason))
                console.print(
                    f"[yellow]{label} refuses job {job_id}: {escape(reason)}[/]"
                    if entry["msg"] == JOB_REFUSED
                    else f"[yellow]{label}: {escape(entry['msg'])}: {escape(reason)}[/]"
                )
            train_s = judged.get(str(entry.get("spec")))
            if entry["msg"] == JOB_REFUSED and "commit window" in reason and train_s is not None and _window_for(train_s) <= max_window:
                window = _window_for(train_s)
    return window


def _json_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON log lines of a daemon (``--log-json``) so far; a line still being written is skipped."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return out


def _dispute_figures(protocol: Protocol, job_id: JobId, timeline: Sequence[TimelineEntry], names: Mapping[str, str]) -> dict[str, Any]:
    """The game(s) on the job (trace games and report games): outcome, winner, the moves and their gas;
    who claimed and who verified the job, the verifiers slashed by a report game, the jackpot paid."""
    start = protocol.book.deploy_block
    games = []
    for opened in protocol.game.events("DisputeOpened", start, jobId=job_id):
        gid = GameId(int(opened.args["gameId"]))
        game = protocol.game.get_game(gid)
        settled = protocol.game.events("DisputeSettled", start, gameId=gid)
        moves = [(e.event, names.get(e.sender, e.sender), e.gas_used) for e in timeline if e.event in GAME_EVENTS and e.args.get("gameId") == gid]
        games.append(
            {
                "game_id": gid,
                "on_report": game.on_report,
                "segment": game.segment,
                "steps": game.steps,
                "status": GameStatus(game.status).name,
                "reason": int(settled[0].args["reason"]) if settled else None,
                "winner": names.get(settled[0].args["winner"], settled[0].args["winner"]) if settled else None,
                "payout": int(settled[0].args["payout"]) if settled else 0,
                "bisection_moves": game.moves,
                "moves": moves,
                "gas_total": sum(g for _, _, g in moves),
            }
        )
    claims = protocol.market.events("JobClaimed", start, jobId=job_id)
    draws = protocol.market.events("VerifierAssigned", start, jobId=job_id)
    return {
        "games": games,
        "claimed_by": [names.get(e.args["solver"], e.args["solver"]) for e in claims],
        "verified_by": [names.get(e.args["verifier"], e.args["verifier"]) for e in draws],
        "reopened": len(protocol.market.events("JobReopened", start, jobId=job_id)),
        "overturned": [
            {"verifier": names.get(e.args["verifier"], e.args["verifier"]), "slashed": int(e.args["slashed"])}
            for e in protocol.market.events("ReportOverturned", start, jobId=job_id)
        ],
        "jackpot_paid": sum(int(e.args["payout"]) for e in protocol.market.events("ForcedErrorCaught", start, jobId=job_id)),
    }


def _timing(daemons: Sequence[RoleProcess], t_start: float, t_post: float, t_final: float) -> dict[str, float]:
    """Where the time went, from the daemons' own log records (seconds each step took)."""
    totals = {"training_s": 0.0, "upload_s": 0.0, "verification_s": 0.0, "audit_s": 0.0}
    keys = {"training finished": "training_s", "upload finished": "upload_s", REPLAY_DONE: "verification_s", "audit done": "audit_s"}
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


def _report(
    figures: dict[str, Any], timeline: Sequence[TimelineEntry], before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]], names: Mapping[str, str]
) -> None:
    gas = Table("transaction (its events)", "from", "gas used", title="gas of each transaction (dispute moves included)")
    by_tx: dict[str, list[TimelineEntry]] = {}
    for e in timeline:
        by_tx.setdefault(e.tx_hash, []).append(e)
    for entries in by_tx.values():
        gas.add_row(" + ".join(e.event for e in entries), names.get(entries[0].sender, entries[0].sender[:10] + ".."), f"{entries[0].gas_used:,}")
    gas.add_row("[bold]total[/]", "", f"[bold]{sum(entries[0].gas_used for entries in by_tx.values()):,}[/]")
    console.print(gas)
    balances = Table("party", "wallet before", "wallet after", "staked before", "staked after", "change (wallet+stake)", title="VERI balances")
    for label in before:
        (wb, sb), (wa, sa) = before[label], after[label]
        delta = (wa + sa) - (wb + sb)
        balances.add_row(label, show_tokens(wb), show_tokens(wa), show_tokens(sb), show_tokens(sa), ("+" if delta >= 0 else "-") + show_tokens(abs(delta)))
    console.print(balances)
    for game in figures.get("dispute", {}).get("games", []):
        console.print(
            ("report game" if game["on_report"] else "dispute game")
            + f" {game['game_id']} on segment {game['segment']}"
            + (f" (the verifier's probe at step {game['steps']})" if game["on_report"] else "")
            + f": {game['status']}, winner {game['winner']} paid"
            f" {show_tokens(game['payout'])} VERI; {game['bisection_moves']} bisection moves, {len(game['moves'])} game transactions,"
            f" {game['gas_total']:,} gas in all"
        )
    if "dispute" in figures:
        dispute = figures["dispute"]
        console.print(
            f"job claimed by {', '.join(dispute['claimed_by'])}; reopened {dispute['reopened']} time(s); verified by {', '.join(dispute['verified_by'])}"
        )
        for overturned in dispute["overturned"]:
            console.print(
                f"report of {overturned['verifier']} overturned: its verifier bond of {show_tokens(overturned['slashed'])} VERI slashed to the whistleblower's game"
            )
        if dispute["jackpot_paid"]:
            console.print(f"forced errors caught: {show_tokens(dispute['jackpot_paid'])} VERI paid from the jackpot")
    (jackpot_before, _), (jackpot_after, _) = before["jackpot"], after["jackpot"]
    console.print(f"jackpot {show_tokens(jackpot_before)} -> {show_tokens(jackpot_after)} VERI (seeded by the deployer, fed by each finalized job's tax)")
    if "economics" in figures:
        econ = figures["economics"]
        console.print(
            f"a whistleblower's expected jackpot income per audit, p_f s J = {econ['forced_error_rate_bps']} bps x {econ['jackpot_share_bps']} bps"
            f" x {show_tokens(econ['jackpot'])} = {show_tokens(econ['expected_per_audit'])} VERI (docs/incentives.md)"
        )
    model = figures["model"]
    metric = ", ".join(f"{k} {v}" for k, v in model.items() if k not in ("cid", "bytes"))
    console.print(f"trained model {model['cid']} ({model['bytes']:,} bytes, verified against its CID): {metric}")
    if "text" in figures:
        text = figures["text"]
        console.print(f"the trained model writes: [italic]{escape(repr(text['after']))}[/] (before training: {escape(repr(text['before']))})")
    if "curve" in figures:
        losses = figures["curve"]["losses"]
        console.print(f"training curve: mean loss {losses[0]:.4g} -> {losses[-1]:.4g} over {len(losses)} segments, drawn to {figures['curve']['png']}")
    timing = figures["timing"]
    audit = f" + audit {timing['audit_s']}s" if timing["audit_s"] else ""  # a whistleblower ran
    console.print(
        "wall time: setup {setup_s}s; post to final {post_to_final_s}s = training {training_s}s + upload {upload_s}s"
        " + verification {verification_s}s{audit} + chain and waits {chain_and_waits_s}s".format(**timing, audit=audit)
    )


def demo(
    workdir: Annotated[Path | None, typer.Option(help="keep everything (chain data, store, logs, model) here instead of a temporary directory")] = None,
    job: Annotated[
        str,
        typer.Option(
            help="which shipped demo job to post: mlp-spirals, char-text, cnn-shapes, gpt-mini (a 10M GPT on Shakespeare, a few minutes), tiny; "
            "or diloco: a multi-party job of four solver daemons, one of them cheating (--cheat, default wrong-lr), caught and cut out"
        ),
    ] = "mlp-spirals",
    timeout: Annotated[float, typer.Option(help="give up if the job has no new event for this many seconds", min=10)] = 600.0,
    cheat: Annotated[
        str | None,
        typer.Option(
            help=f"play a dispute first: a cheating solver (demo adversary: {', '.join(ALL_STRATEGIES)}) claims the job, is caught and slashed, an honest one then does it;"
            " with --job diloco, the cheating party's strategy (those, or copy-contribution)"
        ),
    ] = None,
    lazy_verifier: Annotated[
        bool,
        typer.Option(
            "--lazy-verifier",
            help="a lazy verifier (passes without replaying) is drawn first; a whistleblower daemon catches its wrong probe, it is slashed, an honest verifier re-verifies",
        ),
    ] = False,
    curve: Annotated[Path, typer.Option(help="where to draw the job's training curve (mean loss per segment, from the committed manifest)")] = Path(
        "veritrain-demo-curve.png"
    ),
    keep: Annotated[
        float | None,
        typer.Option(help="with --job diloco: top-k contributions, this fraction of each tensor's values, the rest fed back (default: dense int8)"),
    ] = None,
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

      veritrain demo --curve /tmp/curve.png      (the job's training curve, drawn where you say)

      veritrain demo --job gpt-mini      (a 10M-parameter GPT on the shipped Shakespeare: text before and after)

      veritrain demo --cheat wrong-lr --job tiny

      veritrain demo --cheat coast --job tiny      (an adaptive cheater: coasts through zero-work states)

      veritrain demo --cheat dead-units --job tiny      (one faked segment, then a one-unit-wide net: caught when segment 0 is replayed)

      veritrain demo --lazy-verifier --job tiny

      veritrain demo --job diloco      (four parties train one model, DiLoCo-style; one cheats, is slashed and cut out)

      veritrain demo --job diloco --keep 0.25      (the same with top-25 % contributions and error feedback)
    """
    if workdir is not None:
        workdir.mkdir(parents=True, exist_ok=True)
        root = workdir.resolve()
    else:
        root = Path(tempfile.mkdtemp(prefix="veritrain-demo-"))
    try:
        if job == "diloco":
            if lazy_verifier:
                raise VeritrainError("--job diloco tells the story of a cheating party: --lazy-verifier is not part of it")
            from veritrain.diloco_demo import run_diloco_demo

            figures = run_diloco_demo(root, timeout, (cheat or "wrong-lr",), keep)
        else:
            if keep is not None:
                raise VeritrainError("--keep compresses a multi-party job's contributions: it goes with --job diloco")
            figures = run_demo(root, timeout, job, cheat, lazy_verifier, curve_png=curve.resolve())
    except BaseException:  # an error, a timeout, Ctrl-C or SIGTERM: what happened is in the logs
        err_console.print(f"demo failed; its workdir, every daemon's log in logs/, is kept: {root}", highlight=False, soft_wrap=True)
        raise
    if workdir is None:
        shutil.rmtree(root, ignore_errors=True)
    if json_out:
        print(json.dumps(figures, default=str))
