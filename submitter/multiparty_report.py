"""A multi-party job as the chain and the store hold it (issue 28, docs/multiparty.md, "Seeing a job"):
every round's aggregate and each slot's contribution (its party, inner job and that job's state, its
contribution's CID, whether it was paid or cut out, the dispute games on its inner trace, its pay), each
party's totals, and the per-round training curve from the inner traces' committed manifests.

Two steps. :func:`read_facts` (the CLI's) or the dashboard's index gathers :class:`MultipartyFacts`:
the job's DilocoJobs events, its inner jobs' JobMarket records and events and their dispute games'
events, and the parties' solver-stake slashes. :func:`multiparty_report` is then a pure function of
those facts and a curve reader (:func:`submitter.curve.committed_curve` over a store: every fetched
byte checked against its CID, every manifest bounded)::

    report = multiparty_report(read_facts(protocol, job_id), lambda done: committed_curve(store, done))
    report.to_json(str)            # base units (``submit multiparty-show --json``)
    report.to_json(show_tokens)    # VERI (the dashboard)

Pay per slot and round: the job's contribution reward when the round's final aggregate included the
slot (DilocoJobs credits it to the slot's party at ``finalizeRound``), plus the inner job's reward when
the JobMarket finalized that job with the party as its solver (``JobFinalized``). A party's slashes are
its solver-stake ``StakeSlashed`` events sent in a transaction about this job (a slot bond at
``finalizeRound``, an inner bond in a game on its trace or at a timeout). Rounds past the latest
:data:`ROUNDS_SHOWN` are counted in the totals and not listed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from core.chain import Address
from core.cid import Cid, digest_to_cid
from core.contracts import Event, GameStatus, Job, JobId, JobState, MultipartyJob, MultipartyPhase, Protocol, Role, TraceCommitment
from core.errors import VeritrainError
from submitter.curve import TrainingCurve, replay_checked
from submitter.timeline import JOB_EVENTS

__all__ = [
    "ROUNDS_SHOWN",
    "REPORT_EVENTS",
    "InnerJob",
    "MultipartyFacts",
    "read_facts",
    "GameOnTrace",
    "SlotRound",
    "MeanPoint",
    "RoundRow",
    "PartyTotals",
    "MultipartyReport",
    "multiparty_report",
]

#: Rounds listed (the latest ones) with their slots, inner jobs' states and curves; the totals count every round.
ROUNDS_SHOWN = 100
#: DilocoJobs events the report reads: each carries the job id as an indexed topic.
REPORT_EVENTS = ("SlotJoined", "SlotVacated", "InnerJobBegun", "ContributionCommitted", "AggregateCommitted", "RoundFinalized")
#: DisputeGame events the report reads of a game on an inner trace.
GAME_EVENTS = ("DisputeOpened", "DisputeSettled")
#: Job ids (or accounts) per filtered log query: one topic list of bounded size.
_PER_QUERY = 100
_ZERO = Address("0x" + "00" * 20)

T = TypeVar("T")


@dataclass(frozen=True)
class InnerJob:
    """A party's round on the JobMarket: its stored job (None past :data:`ROUNDS_SHOWN`: not read), its
    JobMarket events, and the events of each dispute game opened on it (each game's in chain order)."""

    job: Job | None
    events: tuple[Event, ...]
    games: tuple[tuple[Event, ...], ...]


@dataclass(frozen=True)
class MultipartyFacts:
    """What the report is computed from: the job, its DilocoJobs events (at least :data:`REPORT_EVENTS`),
    its inner jobs by id, and the ``StakeSlashed`` events of its parties' solver stakes (any job's:
    matched to this one by transaction)."""

    job_id: int
    job: MultipartyJob
    events: tuple[Event, ...]
    inner: Mapping[int, InnerJob]
    slashes: tuple[Event, ...]


def _chain_order(events: Iterable[Event]) -> tuple[Event, ...]:
    return tuple(sorted(events, key=lambda e: (e.block_number, e.log_index)))


def _in_chunks(values: Sequence[T], query: Callable[[list[T]], list[Event]]) -> list[Event]:
    """``query`` over ``values`` in topic lists of :data:`_PER_QUERY` (none for no values)."""
    return [e for at in range(0, len(values), _PER_QUERY) for e in query(list(values[at : at + _PER_QUERY]))]


def read_facts(protocol: Protocol, job_id: int) -> MultipartyFacts:
    """The report's facts from the chain: the job's DilocoJobs events (a query per name), its inner jobs'
    JobMarket events and games (queries over topic lists of inner job ids), the stored inner jobs of the
    latest :data:`ROUNDS_SHOWN` rounds, and the parties' solver-stake slashes."""
    d, market, game = protocol.diloco, protocol.market, protocol.game
    start = protocol.book.deploy_block
    job = d.get_job(job_id)
    events = _chain_order(e for name in REPORT_EVENTS for e in d.events(name, start, jobId=job_id))
    begun = {int(e.args["innerJobId"]): int(e.args["round"]) for e in events if e.name == "InnerJobBegun"}
    ids = sorted(begun)
    market_events = _in_chunks(ids, lambda chunk: [e for name in JOB_EVENTS for e in market.events(name, start, jobId=chunk)])
    game_events = _in_chunks(ids, lambda chunk: [e for name in GAME_EVENTS for e in game.events(name, start, jobId=chunk)])
    first = _first_shown(job, events)
    inner = {
        i: InnerJob(
            market.get_job(JobId(i)) if begun[i] >= first else None,
            _chain_order(e for e in market_events if int(e.args["jobId"]) == i),
            _games(e for e in game_events if int(e.args["jobId"]) == i),
        )
        for i in ids
    }
    parties = sorted({str(e.args["party"]) for e in events if e.name == "SlotJoined"})
    slashes = _in_chunks(parties, lambda chunk: protocol.stakes.events("StakeSlashed", start, account=chunk, role=int(Role.SOLVER)))
    return MultipartyFacts(job_id, job, events, inner, _chain_order(slashes))


def _games(events: Iterable[Event]) -> tuple[tuple[Event, ...], ...]:
    """Events grouped by game, the games in the order they opened."""
    by_game: dict[int, list[Event]] = {}
    for e in _chain_order(events):
        by_game.setdefault(int(e.args["gameId"]), []).append(e)
    return tuple(tuple(g) for g in by_game.values())


def _last_round(job: MultipartyJob, events: Iterable[Event]) -> int:
    """The job's latest round with anything in it: the current one while the job runs (-1: none yet)."""
    live = job.phase is not MultipartyPhase.FINISHED and job.round < job.rounds
    begun = [int(e.args["round"]) for e in events if e.name in ("InnerJobBegun", "RoundFinalized")]
    return max([job.round - 1, *begun, *([job.round] if live else [])])


def _first_shown(job: MultipartyJob, events: Iterable[Event]) -> int:
    return max(0, _last_round(job, events) - ROUNDS_SHOWN + 1)


# ------------------------------------------------------------------ the report


@dataclass(frozen=True)
class GameOnTrace:
    """A dispute game opened on an inner trace: the party's side in it (``defender``: its trace was
    challenged; ``challenger``; ``neither``: a report game between a whistleblower and the inner job's
    verifier), its status and, once settled, its winner and payout (base units)."""

    game_id: int
    side: str
    defender: Address
    challenger: Address
    status: GameStatus | None  # None while the game runs (the report reads its events, not its stored state)
    winner: Address | None
    payout: int | None

    @property
    def won(self) -> bool:
        return self.side != "neither" and self.winner is not None and self.winner == (self.defender if self.side == "defender" else self.challenger)

    @property
    def lost(self) -> bool:
        return self.side != "neither" and self.winner is not None and self.winner != _ZERO and not self.won

    @property
    def outcome(self) -> str:
        """``open``, ``won`` or ``lost`` (for the party), else the settled status (``undecided``; a game it did not play: who won)."""
        if self.status is None:
            return "open"
        return "won" if self.won else "lost" if self.lost else self.status.name.lower()

    def to_json(self, amount: Callable[[int], str]) -> dict[str, Any]:
        return {
            "game": self.game_id,
            "side": self.side,
            "defender": self.defender,
            "challenger": self.challenger,
            "status": None if self.status is None else self.status.name,
            "winner": self.winner,
            "payout": None if self.payout is None else amount(self.payout),
            "outcome": self.outcome,
        }


@dataclass(frozen=True)
class SlotRound:
    """Slot ``slot`` in one round: its party then (None: vacant), its inner job, that job's state (None
    while not read), its contribution's CID, whether the final aggregate included it (paid) or called it
    wrong (cut out: its slot bond slashed), the games on its inner trace, its pay (base units: the
    contribution reward and the inner job's reward) and its inner trace's committed curve (or why
    there is none)."""

    slot: int
    party: Address | None
    inner_job: int | None
    inner_state: JobState | None
    contribution: Cid | None
    included: bool
    cut_out: bool
    games: tuple[GameOnTrace, ...]
    contribution_pay: int
    inner_pay: int
    curve: TrainingCurve | None = None
    curve_checked: bool = False
    curve_error: str | None = None

    @property
    def pay(self) -> int:
        return self.contribution_pay + self.inner_pay

    @property
    def trace_steps(self) -> int:
        """The inner trace's length in steps (H for a trace of the round's derived spec); 0 without a curve."""
        return self.curve.points[-1].last_step if self.curve is not None and self.curve.points else 0

    def to_json(self, amount: Callable[[int], str], round_: int) -> dict[str, Any]:
        curve = None
        if self.curve is not None:
            curve = self.curve.to_json() | {"replay_checked": self.curve_checked, "first_global_step": round_ * self.trace_steps}
        return {
            "slot": self.slot,
            "party": self.party,
            "inner_job": self.inner_job,
            "inner_state": None if self.inner_state is None else self.inner_state.name,
            "contribution": self.contribution,
            "included": self.included,
            "cut_out": self.cut_out,
            "games": [g.to_json(amount) for g in self.games],
            "contribution_pay": amount(self.contribution_pay),
            "inner_pay": amount(self.inner_pay),
            "pay": amount(self.pay),
            "curve": curve,
            "curve_error": self.curve_error,
        }


@dataclass(frozen=True)
class MeanPoint:
    """Segment ``segment`` of a round: the mean of the included parties' committed losses (each a
    float32; the mean a float64 computed here) at the global step ``r * H + last step``; ``checked``
    when every one of them is replay-checked."""

    segment: int
    global_step: int
    loss: float
    parties: int
    checked: bool

    def to_json(self) -> dict[str, Any]:
        return {"segment": self.segment, "global_step": self.global_step, "loss": self.loss, "parties": self.parties, "replay_checked": self.checked}


@dataclass(frozen=True)
class RoundRow:
    """Round ``round``: final once its aggregate is (then its aggregator, paid and cut-out slots and
    state hash, zero for a void round), each slot's :class:`SlotRound` and the round's mean curve."""

    round: int
    final: bool
    aggregator: Address | None
    paid: tuple[int, ...]
    cut_out: tuple[int, ...]
    state_hash: str | None
    slots: tuple[SlotRound, ...]
    mean_curve: tuple[MeanPoint, ...]

    def to_json(self, amount: Callable[[int], str]) -> dict[str, Any]:
        return {
            "round": self.round,
            "final": self.final,
            "aggregator": self.aggregator,
            "paid": list(self.paid),
            "cut_out": list(self.cut_out),
            "state_hash": self.state_hash,
            "slots": [s.to_json(amount, self.round) for s in self.slots],
            "mean_curve": [p.to_json() for p in self.mean_curve],
        }


@dataclass
class PartyTotals:
    """One party over every round of the job: the slots it held, its contributions committed and
    accepted (paid), the games on its inner traces it won and lost, what it earned (contribution
    rewards and inner rewards) and what was slashed from its solver stake (base units)."""

    party: Address
    slots: set[int] = field(default_factory=set)
    contributions: int = 0
    accepted: int = 0
    games_won: int = 0
    games_lost: int = 0
    earned: int = 0
    slashed: int = 0

    def to_json(self, amount: Callable[[int], str]) -> dict[str, Any]:
        return {
            "party": self.party,
            "slots": sorted(self.slots),
            "contributions": self.contributions,
            "accepted": self.accepted,
            "games_won": self.games_won,
            "games_lost": self.games_lost,
            "earned": amount(self.earned),
            "slashed": amount(self.slashed),
        }


@dataclass(frozen=True)
class MultipartyReport:
    """The whole report: the job's state and terms, its rounds (the latest :data:`ROUNDS_SHOWN`, oldest
    first), its parties' totals over every round, and each slot's current party."""

    job_id: int
    job: MultipartyJob
    rounds: tuple[RoundRow, ...]
    rounds_not_shown: int
    parties: tuple[PartyTotals, ...]
    holders: tuple[Address | None, ...]

    def party_curves(self) -> dict[Address, list[tuple[int, float, bool]]]:
        """Each party's committed losses over the job: (global step ``r * H + step``, loss, replay-checked)."""
        curves: dict[Address, list[tuple[int, float, bool]]] = {}
        for row in self.rounds:
            for s in row.slots:
                if s.curve is not None and s.party is not None:
                    offset = row.round * s.trace_steps
                    curves.setdefault(s.party, []).extend((offset + p.last_step, p.loss, s.curve_checked) for p in s.curve.points)
        return curves

    def mean_curve(self) -> list[MeanPoint]:
        """Every listed round's mean curve, in order."""
        return [p for row in self.rounds for p in row.mean_curve]

    def to_json(self, amount: Callable[[int], str]) -> dict[str, Any]:
        """The report as JSON, amounts through ``amount`` (``str``: base units; ``show_tokens``: VERI)."""
        job = self.job
        return {
            "job_id": self.job_id,
            "submitter": job.submitter,
            "round": job.round,
            "rounds": job.rounds,
            "parties": job.parties,
            "quorum": job.min_parties,
            "phase": job.phase.name.lower(),
            "global_hash": _hex(bytes(job.global_hash)),
            "global_cid": digest_to_cid(job.global_cid),
            "funds": amount(job.funds),
            "terms": {
                "inner_reward": amount(job.inner_reward),
                "inner_fee": amount(job.inner_fee),
                "contribution_reward": amount(job.contribution_reward),
                "aggregator_fee": amount(job.aggregator_fee),
                "slot_bond": amount(job.slot_bond),
            },
            "history": [r.to_json(amount) for r in self.rounds],
            "rounds_not_shown": self.rounds_not_shown,
            "totals": [p.to_json(amount) for p in self.parties],
            "slots": [{"slot": s, "party": p} for s, p in enumerate(self.holders)],
            "curve": {
                "parties": {party: [list(point) for point in points] for party, points in self.party_curves().items()},
                "mean": [[p.global_step, p.loss, p.checked] for p in self.mean_curve()],
            },
        }


def _hex(value: bytes) -> str:
    return "0x" + value.hex()


def _slots(mask: int) -> tuple[int, ...]:
    return tuple(s for s in range(16) if mask >> s & 1)


def _party(value: object) -> Address | None:
    address = Address(str(value))
    return None if int(address, 16) == 0 else address


def multiparty_report(facts: MultipartyFacts, curve_of: Callable[[TraceCommitment], TrainingCurve] | None) -> MultipartyReport:
    """The report of ``facts``; ``curve_of`` reads a commitment's curve (None: no store, so no curves).
    A curve that cannot be read (not served, not the committed root, malformed) is shown with its reason."""
    job = facts.job
    holders: list[Address | None] = [None] * job.parties
    party_at: dict[tuple[int, int], Address | None] = {}  # (round, slot) -> the party that began it
    inner_at: dict[tuple[int, int], int] = {}
    contributions: dict[tuple[int, int], Cid] = {}
    aggregators: dict[int, Address] = {}
    finalized: dict[int, Event] = {}
    events = _chain_order(facts.events)
    for e in events:
        a = e.args
        if e.name == "SlotJoined":
            holders[int(a["slot"])] = _party(a["party"])
        elif e.name == "SlotVacated":
            holders[int(a["slot"])] = None
        elif e.name == "InnerJobBegun":
            key = (int(a["round"]), int(a["slot"]))
            party_at[key], inner_at[key] = holders[key[1]], int(a["innerJobId"])
        elif e.name == "ContributionCommitted":
            contributions[(int(a["round"]), int(a["slot"]))] = digest_to_cid(bytes(a["cid"]))
        elif e.name == "AggregateCommitted":
            aggregators[int(a["round"])] = Address(str(a["aggregator"]))  # the last one of a round is the final one's
        elif e.name == "RoundFinalized":
            finalized[int(a["round"])] = e
    last = _last_round(job, events)
    first = _first_shown(job, events)
    totals: dict[Address, PartyTotals] = {}
    rows = []
    for r in range(last + 1):
        done = finalized.get(r)
        paid = _slots(int(done.args["paid"])) if done else ()
        cut = _slots(int(done.args["slashed"])) if done else ()
        slots = []
        for s in range(job.parties):
            party = party_at.get((r, s), holders[s] if r == job.round and done is None else None)
            inner_id = inner_at.get((r, s))
            inner = facts.inner.get(inner_id) if inner_id is not None else None
            games = tuple(_game(g, party) for g in inner.games) if inner and party else ()
            inner_pay = _inner_pay(inner, party)
            row = SlotRound(
                s,
                party,
                inner_id,
                inner.job.state if inner and inner.job else None,
                contributions.get((r, s)),
                s in paid,
                s in cut,
                games,
                job.contribution_reward if s in paid else 0,
                inner_pay,
            )
            if party is not None:
                t = totals.setdefault(party, PartyTotals(party))
                t.slots.add(s)
                t.contributions += (r, s) in contributions
                t.accepted += s in paid
                t.games_won += sum(g.won for g in games)
                t.games_lost += sum(g.lost for g in games)
                t.earned += row.pay
            slots.append(_with_curve(row, inner, curve_of) if r >= first else row)
        if r >= first:
            aggregator = aggregators.get(r) if done else None
            state_hash = _hex(bytes(done.args["globalHash"])) if done else None
            rows.append(RoundRow(r, done is not None, aggregator, paid, cut, state_hash, tuple(slots), _mean_curve(r, slots, paid)))
    for party, amount in _slashed(facts, set(totals)).items():
        totals[party].slashed = amount
    return MultipartyReport(facts.job_id, job, tuple(rows), first, tuple(totals.values()), tuple(holders))


def _game(events: tuple[Event, ...], party: Address) -> GameOnTrace:
    opened = next(e.args for e in events if e.name == "DisputeOpened")
    settled = next((e.args for e in events if e.name == "DisputeSettled"), None)
    defender, challenger = Address(str(opened["defender"])), Address(str(opened["challenger"]))
    side = "defender" if defender == party else "challenger" if challenger == party else "neither"
    if settled is None:
        return GameOnTrace(int(opened["gameId"]), side, defender, challenger, None, None, None)
    return GameOnTrace(
        int(opened["gameId"]), side, defender, challenger, GameStatus(int(settled["status"])), Address(str(settled["winner"])), int(settled["payout"])
    )


def _inner_pay(inner: InnerJob | None, party: Address | None) -> int:
    """The inner job's reward when the JobMarket finalized it with ``party`` as its solver."""
    if inner is None or party is None:
        return 0
    return sum(int(e.args["reward"]) for e in inner.events if e.name == "JobFinalized" and e.args["solver"] == party)


def _with_curve(row: SlotRound, inner: InnerJob | None, curve_of: Callable[[TraceCommitment], TrainingCurve] | None) -> SlotRound:
    """``row`` with the committed curve of its party's inner trace (its last commitment), or the reason it has none."""
    if inner is None or row.party is None:
        return row
    commits = [c for c in map(TraceCommitment.of, (e for e in inner.events if e.name == "TraceCommitted")) if c.solver == row.party]
    if not commits:
        return row
    done = commits[-1]
    if curve_of is None:
        return replace(row, curve_error="no content store given (--store-dir or --ipfs-api)")
    try:
        curve = curve_of(done)
    except VeritrainError as exc:
        return replace(row, curve_error=f"the committed manifest {done.manifest_cid} cannot be read: {exc}")
    stored = inner.job
    checked = stored is not None and replay_checked(stored.state) and stored.solver == row.party and stored.trace_root == done.trace_root
    return replace(row, curve=curve, curve_checked=checked)


def _mean_curve(r: int, slots: list[SlotRound], paid: tuple[int, ...]) -> tuple[MeanPoint, ...]:
    """The round's mean curve over its included slots, when each has a curve of the same segments (a
    trace of the round's derived spec: the aggregate's inputs are checked to be); else none."""
    curves = [(curve, slots[s].curve_checked) for s in paid if (curve := slots[s].curve) is not None]
    if not curves or len(curves) != len(paid) or len({tuple((p.first_step, p.last_step) for p in c.points) for c, _ in curves}) != 1:
        return ()
    shape = curves[0][0].points
    steps = shape[-1].last_step
    checked = all(ok for _, ok in curves)
    return tuple(
        MeanPoint(i, r * steps + p.last_step, sum(c.points[i].loss for c, _ in curves) / len(curves), len(curves), checked) for i, p in enumerate(shape)
    )


def _slashed(facts: MultipartyFacts, parties: set[Address]) -> dict[Address, int]:
    """Each party's solver-stake slashes in transactions about this job: one that emitted a DilocoJobs
    event of the job, or a JobMarket or DisputeGame event about one of its inner jobs."""
    txs = {e.tx_hash for e in facts.events}
    for inner in facts.inner.values():
        txs |= {e.tx_hash for e in inner.events} | {e.tx_hash for g in inner.games for e in g}
    slashed: dict[Address, int] = {}
    for e in facts.slashes:
        account = Address(str(e.args["account"]))
        if account in parties and int(e.args["role"]) == Role.SOLVER and e.tx_hash in txs:
            slashed[account] = slashed.get(account, 0) + int(e.args["amount"])
    return slashed
