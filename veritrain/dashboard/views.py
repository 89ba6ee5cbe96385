"""The dashboard's pages as JSON: what the browser renders, built from the index, the chain's views
and the content store (specs, manifests and reports, each verified against its CID and bounded).

Amounts are VERI strings (``show_tokens``), times unix seconds, addresses checksummed. Each page's
slow parts (a job's timeline with gas, an account's earnings) are cached by what they depend on:
a job's event count, the head block.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

from core.bounded import load_json
from core.chain import Address
from core.cid import digest_to_cid
from core.contracts import JobId, Role, TraceCommitment
from core.errors import VeritrainError
from core.storage import ContentStore
from proofs.manifest import MANIFEST_BLOCK, load_manifest
from proofs.sampling import needs_full_replay
from proofs.spec import Limits, load_spec
from rolebase.amounts import show_tokens
from rolebase.capabilities import job_size
from rolebase.earnings import balances, earnings_of
from rolebase.guarantee import guarantee
from submitter.curve import TrainingCurve, committed_curve, replay_checked
from submitter.multiparty_report import multiparty_report
from submitter.timeline import TimelineEntry, game_timeline, job_timeline, readable_args
from veritrain.dashboard.index import ChainIndex, GameRow

#: Jobs listed on the network page (the counts by state cover them all).
RECENT_JOBS = 100
RECENT_SLASHES = 20
MAX_REPORT_BYTES = 1 << 20

T = TypeVar("T")


def _entry(entry: TimelineEntry) -> dict[str, Any]:
    """A timeline entry as JSON, its arguments for people (amounts in VERI, dates, probes: ``readable_args``)."""
    shown = entry.to_json()
    shown["args"] = readable_args(shown["args"])
    return shown


class Views:
    """Page data over one :class:`ChainIndex`; ``store`` (None: no content store) gives specs, manifests, reports."""

    def __init__(self, index: ChainIndex, store: ContentStore | None) -> None:
        self.index = index
        self.protocol = index.protocol
        self.store = store
        self._cache: dict[tuple[Any, ...], Any] = {}
        self._cache_lock = threading.Lock()

    def _cached(self, key: tuple[Any, ...], make: Callable[[], T], keep: Callable[[T], bool] = lambda _: True) -> T:
        """``make()`` once per ``key``; a value ``keep`` refuses is made again next time (one that may change
        with no event: content a gateway did not serve yet)."""
        with self._cache_lock:
            if key in self._cache:
                cached: T = self._cache[key]
                return cached
        value = make()
        if not keep(value):
            return value
        with self._cache_lock:
            if len(self._cache) > 4096:  # bounded: old keys (older heads) are simply dropped
                self._cache.clear()
            self._cache[key] = value
        return value

    # ------------------------------------------------------------------ network

    def network(self, state: str | None = None) -> dict[str, Any]:
        snap = self.index.snapshot()
        counts: dict[str, int] = {}
        for job in snap.jobs.values():
            counts[job.state.name] = counts.get(job.state.name, 0) + 1
        listed = sorted((j for j, job in snap.jobs.items() if state is None or job.state.name == state), reverse=True)[:RECENT_JOBS]
        actors: dict[str, list[dict[str, Any]]] = {r.name.lower(): [] for r in Role}
        for (account, role), info in sorted(snap.stakes.items()):
            if info.staked > 0:
                actors[role.name.lower()].append({"address": account, "staked": show_tokens(info.staked), "locked": show_tokens(info.locked)})
        slashes = [
            {
                "block": e.block_number,
                "time": self.index.timestamp(e.block_number),
                "account": e.args["account"],
                "role": Role(int(e.args["role"])).name.lower(),
                "amount": show_tokens(int(e.args["amount"])),
                "recipient": e.args["recipient"],
            }
            for e in reversed(snap.slashes[-RECENT_SLASHES:])
        ]
        jobs = [
            {
                "id": int(j),
                "state": snap.jobs[j].state.name,
                "reward": show_tokens(snap.jobs[j].reward),
                "submitter": snap.jobs[j].submitter,
                "solver": snap.jobs[j].solver,
                "posted_block": snap.posted_at.get(j),
            }
            for j in listed
        ]
        multiparty = [
            {
                "id": j,
                "phase": job.phase.name,
                "round": job.round,
                "rounds": job.rounds,
                "parties": job.parties,
                "submitter": job.submitter,
                "funds": show_tokens(job.funds),
            }
            for j, job in sorted(snap.multiparty.items(), reverse=True)[:RECENT_JOBS]
        ]
        return {
            "head": snap.head,
            "jackpot": show_tokens(snap.jackpot),
            "total_jobs": len(snap.jobs),
            "counts": counts,
            "jobs": jobs,
            "filter": state,
            "actors": actors,
            "slashes": slashes,
            "multiparty": multiparty,
            "total_multiparty": len(snap.multiparty),
        }

    # ------------------------------------------------------------------ job

    def job(self, job_id: JobId) -> dict[str, Any] | None:
        found = self.index.job(job_id)
        if found is None:
            return None
        job, events, games = found
        by_name = {e.name: e for e in events}  # the last of each name
        timeline = self._cached(("timeline", job_id, len(events)), lambda: [_entry(e) for e in job_timeline(self.protocol, job_id)])
        page: dict[str, Any] = {
            "id": int(job_id),
            "head": self.index.head,
            "state": job.state.name,
            "submitter": job.submitter,
            "solver": job.solver,
            "verifier": job.verifier,
            "reward": show_tokens(job.reward),
            "fee": show_tokens(job.verifier_fee),
            "deadline": job.deadline,
            "timeline": timeline,
            "games": [self._game(row) for row in games],
        }
        posted = by_name.get("JobPosted")
        if posted is not None:
            cid = digest_to_cid(bytes(posted.args["specCid"]))
            page["spec"] = {"cid": cid, **self._cached(("spec", cid), lambda: self._spec(cid))}
            page["full_replay"] = bool(posted.args["fullReplay"])  # posted for full replay: every draw replays it whole
        committed = by_name.get("TraceCommitted")
        if committed is not None:
            manifest_cid = digest_to_cid(bytes(committed.args["manifestCid"]))
            model_cid = digest_to_cid(bytes(committed.args["finalModelCid"]))
            page["curve"] = {
                "cid": manifest_cid,
                "replay_checked": replay_checked(job.state),
                **self._cached(("manifest", manifest_cid), lambda: self._curve(manifest_cid)),
            }
            page["model"] = {"cid": model_cid, "fetchable": self.store is not None and self.store.has(model_cid), "final": job.state.name == "FINALIZED"}
        reported = by_name.get("ReportSubmitted")
        if reported is not None:
            report_cid = digest_to_cid(bytes(reported.args["reportCid"]))
            page["verification"] = {
                "cid": report_cid,
                "passed": bool(reported.args["passed"]),
                "verifier": reported.args["verifier"],
                **self._cached(("report", report_cid), lambda: self._report(report_cid)),
            }
        return page

    # ------------------------------------------------------------------ multi-party job

    def multiparty(self, job_id: int) -> dict[str, Any] | None:
        """A multi-party job's report (``submitter.multiparty_report``, amounts in VERI), cached by the
        count of the events it is computed from (unless a curve could not be read: asked again next
        time); each inner trace's curve cached by its manifest."""
        facts = self.index.multiparty_facts(job_id)
        if facts is None:
            return None
        curve_of = None if self.store is None else partial(self._trace_curve, self.store)
        seen = (len(facts.events), len(facts.slashes), sum(len(i.events) + sum(map(len, i.games)) for i in facts.inner.values()))
        report = self._cached(
            ("multiparty", job_id, *seen),
            lambda: multiparty_report(facts, curve_of).to_json(show_tokens),
            keep=lambda shown: not any(s["curve_error"] for r in shown["history"] for s in r["slots"]),
        )
        return {**report, "head": self.index.head}

    def _trace_curve(self, store: ContentStore, done: TraceCommitment) -> TrainingCurve:
        return self._cached(("trace curve", done.manifest_cid, done.trace_root), lambda: committed_curve(store, done))

    def _game(self, row: GameRow) -> dict[str, Any]:
        game = self.protocol.game.get_game(row.game_id)
        defender_left, challenger_left = self.protocol.game.clocks(row.game_id) if not game.status.final else (game.defender_clock, game.challenger_clock)
        moves = self._cached(
            ("moves", row.job_id, len(row.events)),
            lambda: [_entry(e) for e in game_timeline(self.protocol, row.job_id) if e.args.get("gameId") == row.game_id],
        )
        settled = next((e.args for e in row.events if e.name == "DisputeSettled"), None)
        return {
            "id": int(row.game_id),
            "status": game.status.name,
            "on_report": game.on_report,
            "segment": game.segment,
            "steps": game.steps,
            "lo": game.lo,
            "hi": game.hi,
            "moves_made": game.moves,
            "defender": game.defender,
            "challenger": game.challenger,
            "referees": list(row.referees),
            "clocks": {"defender": defender_left, "challenger": challenger_left},
            "payout": show_tokens(int(settled["payout"])) if settled else None,
            "winner": settled["winner"] if settled else None,
            "moves": moves,
        }

    def _fetch(self, cid: str, max_bytes: int) -> bytes:
        if self.store is None:
            raise VeritrainError("no content store given (--store-dir or --ipfs-api)")
        return self.store.get(cid, max_bytes)  # verified against the CID by the store

    def _spec(self, cid: str) -> dict[str, Any]:
        try:
            spec = load_spec(self._fetch(cid, Limits.SPEC_BYTES))
            return {
                "kind": spec.model.kind,
                "size": job_size(spec),
                "guarantee": guarantee(spec),
                "weaker": needs_full_replay(spec),
                "fields": spec.model_dump(mode="json"),
            }
        except VeritrainError as exc:
            return {"error": str(exc)}

    def _curve(self, cid: str) -> dict[str, Any]:
        """The manifest's per-segment series: the committed mean training loss (which verifiers check on
        every segment they replay) and the committed update norm, each drawn on its own labelled axis;
        and the final model's held-out loss when the spec holds out a split (checked by every verifier)."""
        try:
            manifest = load_manifest(self._fetch(cid, MANIFEST_BLOCK), lambda page: self._fetch(page, MANIFEST_BLOCK))
        except VeritrainError as exc:
            return {"error": str(exc)}
        series = {"mean training loss": list(manifest.losses), "update norm": list(manifest.update_norms)}
        return {"segments": manifest.segments, "checkpoint_interval": manifest.checkpoint_interval, "series": series, "held_out_loss": manifest.held_out_loss}

    def _report(self, cid: str) -> dict[str, Any]:
        try:
            report = load_json(self._fetch(cid, MAX_REPORT_BYTES), max_bytes=MAX_REPORT_BYTES, what="verifier report")
        except VeritrainError as exc:
            return {"error": str(exc)}
        if not isinstance(report, dict):
            return {"error": "the report is not a JSON object"}
        listed = report.get("verdicts")
        verdicts = listed if isinstance(listed, list) else []
        return {"summary": str(report.get("summary", "")), "verdicts": [v for v in verdicts if isinstance(v, dict)][:256]}

    # ------------------------------------------------------------------ address

    def address(self, account: Address) -> dict[str, Any]:
        head = self.index.head
        earned = self._cached(("earnings", account, head), lambda: earnings_of(self.protocol, account))
        held = self._cached(("balances", account, head), lambda: balances(self.protocol, account))
        total = 0
        entries = []
        for entry in earned:
            amount = int(entry["amount"])
            total += amount
            block = entry["block"]
            entries.append(
                {
                    **entry,
                    "amount": show_tokens(abs(amount)),
                    "sign": -1 if amount < 0 else 1,
                    "time": self.index.timestamp(block),
                    "net": float(show_tokens(total)),
                }
            )
        stakes = held["stakes"]
        return {
            "address": account,
            "head": head,
            "since": self.protocol.book.deploy_block,
            "veri": show_tokens(int(held["veri"])),
            "stakes": {
                role: {
                    "staked": show_tokens(int(info["staked"])),
                    "locked": show_tokens(int(info["locked"])),
                    "unbonding": show_tokens(int(info["unbonding"])),
                    "release_at": info["release_at"],
                }
                for role, info in stakes.items()
            },
            "earnings": entries,
            "net": ("-" if total < 0 else "") + show_tokens(abs(total)),
            "jobs": {k: [int(j) for j in v] for k, v in self.index.jobs_of(account).items()},
            "games": self.index.games_of(account),
        }
