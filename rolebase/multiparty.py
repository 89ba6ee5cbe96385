"""Multi-party jobs' duties (issue 28, docs/multiparty.md), shared by the roles that play them: a
solver holds slots (it joins, begins each round's inner job, which it then trains as any job it
holds, and contributes); a verifier aggregates when drawn, checks every committed aggregate (and
challenges a wrong one) and sits on a challenge's committee; either makes the permissionless moves
(close a round, draw, finalize, settle) so that no job waits on anyone in particular.

The shape is the agent's: :class:`MultipartyWatcher` loads the live jobs (loader),
:func:`multiparty_moves` decides (pure), :class:`rolebase.multiparty_duty.MultipartyDuty` performs
(idempotent: every move re-reads its job first; a module of its own, since it loads the training stack). Every input is read by CID (the store checks each block) and checked against
what the chain committed: the global model against its state hash, a contribution against its
keccak256, a trace's final checkpoint against the trace's last leaf; the round is then judged by
:func:`proofs.diloco.judge_round`, the same function for the aggregator, the challenger and every referee.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from core.chain import Address
from core.contracts import (
    Ballot,
    DilocoParams,
    JobId,
    JobState,
    MultipartyAggregate,
    MultipartyContribution,
    MultipartyJob,
    MultipartyPhase,
    Protocol,
)

_ZERO = Address("0x" + "00" * 20)
_SETTLED = (JobState.FINALIZED, JobState.REFUNDED, JobState.CANCELLED, JobState.OPEN)  # what a close does not wait for


class MultipartyAction(enum.Enum):
    FIT = "fit"  # read a job's document and base spec: does a round fit us (work)
    JOIN = "join"
    BEGIN = "begin"  # derive the round's inner job, store its files, post it (work)
    CONTRIBUTE = "contribute"  # compress the committed trace's final checkpoint (work)
    CLOSE = "closeRound"
    DRAW = "drawAggregator"
    AGGREGATE = "commitAggregate"  # judge the round, store the next global model (work)
    TIMEOUT = "timeoutAggregator"
    CHECK = "challenge"  # judge a committed aggregate, challenge it when it is wrong (work)
    DRAW_COMMITTEE = "drawCommittee"
    COMMIT = "commitVote"  # judge the round, commit the vote (work)
    REVEAL = "revealVote"
    SETTLE = "settleChallenge"
    FINALIZE = "finalizeRound"


#: The moves that fetch content and compute: run on a worker, never on the loop.
MULTIPARTY_WORK = frozenset(
    {MultipartyAction.FIT, MultipartyAction.BEGIN, MultipartyAction.CONTRIBUTE, MultipartyAction.AGGREGATE, MultipartyAction.CHECK, MultipartyAction.COMMIT}
)


class Plays(enum.Flag):
    """What a role does in multi-party jobs besides the permissionless moves."""

    KEEPER = enum.auto()  # close, draw, time out, finalize, settle
    PARTY = enum.auto()  # a solver: join, begin, contribute
    JUDGE = enum.auto()  # a verifier: aggregate when drawn, check aggregates, vote when seated


@dataclass(frozen=True)
class RoundFit:
    """A party's verdict on one round of a job (``rolebase.capabilities.round_spec``): why it does not
    fit ("" when it does) and the round's training time as the party estimates it (doubled)."""

    why: str
    train_s: float


@dataclass(frozen=True)
class LiveMultiparty:
    """A multi-party job that is not Finished, as the chain has it now: its slots' parties, the
    current round's contributions and their inner jobs' states (None: not begun), its aggregate and
    our ballot in its challenge (VACANT: not seated, or no committee)."""

    job_id: int
    job: MultipartyJob
    parties: tuple[Address, ...]
    contributions: tuple[MultipartyContribution, ...]
    inner_states: tuple[JobState | None, ...]
    aggregate: MultipartyAggregate
    committee_drawn: bool = False
    ballot: Ballot = Ballot.VACANT
    inner_bond: int = 0  # the JobMarket's solver bond of one inner job
    fit: RoundFit | None = None  # a party's verdict on one round of the job; None: not judged yet

    def slot_of(self, me: Address) -> int | None:
        return next((s for s, p in enumerate(self.parties) if p == me), None)


@dataclass(frozen=True)
class MultipartyMove:
    job_id: int
    action: MultipartyAction
    slot: int = -1
    round: int = 0


class MultipartyWatcher:
    """Reads the multi-party jobs that are not Finished; finished jobs are never read again. ``fits``: a
    party's verdicts on the jobs' slots, by job (``MultipartyDuty.fits``, filled by its fit moves);
    ``finished``: told each job once it is seen Finished (``MultipartyDuty.forget``)."""

    def __init__(
        self,
        protocol: Protocol,
        me: Address,
        max_jobs: int = 1_000,
        fits: Mapping[int, RoundFit] | None = None,
        finished: Callable[[int], None] = lambda _job: None,
    ) -> None:
        self.protocol = protocol
        self.me = me
        self.max_jobs = max_jobs
        self.fits: Mapping[int, RoundFit] = {} if fits is None else fits
        self.finished = finished
        self._final: set[int] = set()
        self._params: DilocoParams | None = None
        self._bonds: dict[int, int] = {}  # job -> the JobMarket's solver bond of its inner jobs (fixed: read once)

    @property
    def params(self) -> DilocoParams:
        """DilocoJobs' parameters (immutable: read once)."""
        if self._params is None:
            self._params = self.protocol.diloco.params()
        return self._params

    def live(self) -> tuple[LiveMultiparty, ...]:
        d, market = self.protocol.diloco, self.protocol.market
        count = d.job_count()
        out: list[LiveMultiparty] = []
        for job_id in range(max(1, count - self.max_jobs + 1), count + 1):
            if job_id in self._final:
                continue
            job = d.get_job(job_id)
            if job.phase is MultipartyPhase.FINISHED:
                self._final.add(job_id)
                self.finished(job_id)
                continue
            parties = tuple(d.party_of(job_id, s) for s in range(job.parties))
            contributions = tuple(d.contribution_of(job_id, job.round, s) for s in range(job.parties))
            states = tuple(market.get_job(JobId(c.inner_job_id)).state if c.inner_job_id else None for c in contributions)
            aggregate = d.aggregate_of(job_id)
            drawn = job.phase is MultipartyPhase.CONTESTED and job.deadline != 0  # Contested has a deadline once its committee is drawn
            ballot = d.ballot_of(aggregate.case_id, self.me)[0] if drawn else Ballot.VACANT
            if job_id not in self._bonds:
                self._bonds[job_id] = market.solver_bond(job.inner_reward)
            bond = self._bonds[job_id]
            out.append(LiveMultiparty(job_id, job, parties, contributions, states, aggregate, drawn, ballot, bond, self.fits.get(job_id)))
        return tuple(out)


def multiparty_moves(
    now: int,
    block: int,
    me: Address,
    jobs: Sequence[LiveMultiparty],
    params: DilocoParams,
    plays: Plays,
    grace_s: int,
    free_stake: int = 0,
    busy_s: float = 0.0,
) -> list[MultipartyMove]:
    """What to do about the live multi-party jobs. A party begins and contributes within the round's
    window and joins one vacant slot when its free stake covers the slot bond and an inner job's bond
    and a round fits it (judged first: its limits, memory and measured speed against the work window);
    it joins and begins a round only while its estimated training, after the ``busy_s`` seconds of
    training it already owes (jobs train one after another), still ends by the deadline (a late begin
    would time out its inner job and cost its bond: the slot is left instead, unslashed);
    the drawn aggregator commits; a judge checks each committed aggregate once and votes where seated;
    the permissionless moves are made at once by whoever waits on them (a party on its round's close,
    the aggregator on its finalize, the challenger on its case) and ``grace_s`` late by anyone else."""
    moves: list[MultipartyMove] = []
    joined = False
    for live in jobs:
        j, a, r = live.job, live.aggregate, live.job.round
        mine = live.slot_of(me)

        def move(action: MultipartyAction, slot: int = -1, *, r: int = r, job_id: int = live.job_id) -> None:
            moves.append(MultipartyMove(job_id, action, slot, r))

        if j.phase is MultipartyPhase.WORKING:
            if Plays.PARTY in plays and now <= j.deadline:
                if mine is not None:
                    c, state = live.contributions[mine], live.inner_states[mine]
                    if c.inner_job_id == 0:
                        if live.fit is None:
                            move(MultipartyAction.FIT, mine)
                        elif not live.fit.why and now + busy_s + live.fit.train_s <= j.deadline:
                            move(MultipartyAction.BEGIN, mine)
                            busy_s += live.fit.train_s
                    elif state not in (None, JobState.OPEN, JobState.CLAIMED) and not any(c.cid):
                        move(MultipartyAction.CONTRIBUTE, mine)
                elif not joined and _ZERO in live.parties and free_stake >= j.slot_bond + live.inner_bond:
                    if live.fit is None:
                        move(MultipartyAction.FIT)
                    elif not live.fit.why and now + busy_s + live.fit.train_s <= j.deadline:
                        move(MultipartyAction.JOIN, live.parties.index(_ZERO))
                        joined = True  # one slot a tick: the next view has the stake it left
            late = 0 if mine is not None else grace_s
            contributed = [s for s, c in zip(live.inner_states, live.contributions) if any(c.cid)]
            settled = all(s in _SETTLED for s in contributed)
            everyone = len(contributed) == j.parties  # the round may close before its deadline
            due = now > j.deadline + late or (everyone and now >= j.deadline - j.work_window + late)
            if Plays.KEEPER in plays and due and (settled or now > j.deadline + j.verify_window):
                move(MultipartyAction.CLOSE)
        elif j.phase is MultipartyPhase.DRAWING:
            if Plays.KEEPER in plays and block >= j.anchor_block + 2:
                move(MultipartyAction.DRAW)
        elif j.phase is MultipartyPhase.AGGREGATING:
            if a.aggregator == me and Plays.JUDGE in plays and now <= j.deadline:
                move(MultipartyAction.AGGREGATE)
            elif Plays.KEEPER in plays and now > j.deadline + grace_s:
                move(MultipartyAction.TIMEOUT)
        elif j.phase is MultipartyPhase.PROPOSED:
            if Plays.JUDGE in plays and a.aggregator != me and now <= j.deadline:
                move(MultipartyAction.CHECK)
            if Plays.KEEPER in plays and now > j.deadline + (0 if a.aggregator == me or mine is not None else grace_s):
                move(MultipartyAction.FINALIZE)
        elif j.phase is MultipartyPhase.CONTESTED:
            late = 0 if me in (a.challenger, a.aggregator) else grace_s
            if not live.committee_drawn:
                if Plays.KEEPER in plays and block >= j.anchor_block + 2:
                    move(MultipartyAction.DRAW_COMMITTEE)
                continue
            reveal_end = j.deadline + params.reveal_window
            if live.ballot is Ballot.SEATED and now <= j.deadline:
                move(MultipartyAction.COMMIT)
            elif live.ballot is Ballot.COMMITTED and (now > j.deadline or a.commits >= params.committee_size) and now <= reveal_end:
                move(MultipartyAction.REVEAL)
            elif Plays.KEEPER in plays and (now > reveal_end + late or a.votes_right + a.votes_wrong >= params.committee_size):
                move(MultipartyAction.SETTLE)
    return moves
