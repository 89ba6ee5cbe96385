"""What a verifier does about what it sees: pure, no I/O, unit-tested without a chain.

Its own work first: stake, then for each job it was drawn for, replay and report
before the deadline. Then the calls anyone may make (draw a verifier, finalize,
time out a silent party). The job's solver makes the draw and the finalize its own
business at once (its pay depends on them); a verifier that profits too (a draw it
may win, its own fee) follows ``own_grace_s`` later, and only in the turns that are
not the solver's (:mod:`rolebase.turns`), so the two never send one in the same second
and waste gas on a reverted duplicate; any other call waits ``duty_grace_s`` past
due, so the interested parties go first, yet no job stays stuck when they are silent.

Disputes: a verifier whose replay failed opens the game on its first failing segment
within the open window and answers each of the solver's midpoints while its clock runs;
seated on a committee, it commits its vote and reveals it; the game's permissionless
calls (time a silent side out, draw the committee, settle) are made at once by the
game's parties (challenger, or defender of a report game) and by everyone else
``own_grace_s`` (draw, settle) or ``duty_grace_s`` (timeout) past due.

Forced errors (docs/incentives.md): the verifier keeps a forced seed committed on chain
(:func:`seed_moves`: a first one, and a fresh one once a concession revealed the last), and
forgets an old secret once no live job snapshotted it.

Sealed jobs (docs/sealing.md): drawn for a sealed job, the verifier replays it once a wrap to it opens to
the committed key hash (or the key was revealed). The job's solver, and the submitter's watcher, wrap to
it a block or two after the draw, so it demands the key only ``key_grace_s`` after the draw (sooner when
half its report window is gone): a first demand is answered by a wrap, a second only by the key itself,
so it makes two at most. A demand holds the job with our clock paused: nothing to do for it until it is
answered, or its deadline passes unanswered and we time it out (the forfeit pays us the verifier fee).
With an encryption key it registers the key once staked; without one it demands nothing.

Availability court (docs/protocol.md): seated on a case's committee, it fetches every named item and
commits whether all were served, then reveals (:mod:`rolebase.court`); a case it opened it draws and
settles at once, anyone else's ``duty_grace_s`` past due. A whistleblower's report game on one
of its reports is conceded at once when the job was forced on it (the probe was wrong on
purpose), and defended otherwise: each midpoint is the true state, as the solver defends.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

from core.agent import Work
from core.availability import FETCH_DEADLINE_MARGIN_S, FETCH_STALL_S, Fetching
from core.chain import Address
from core.contracts import Ballot, Bytes32, CourtParams, DilocoParams, Game, GameId, GameParams, GameStatus, JobId, JobState, RegisteredKey, TokenAmount
from core.dispute import ZERO32, Action, Actor, next_turn, party_move
from core.sealing import EncryptionKey
from rolebase.actions import ClaimCredit, CreditSource, Forget, GameMove, Journaled, Stake, credit_claims, stake_needed
from rolebase.court import CourtAction, CourtMove, LiveCase, court_moves
from rolebase.keygame import MAX_DEMANDS, DeclineSeat, DemandKey, RegisterKey, TimeoutDemand, WrapReferees, key_to_register
from rolebase.multiparty import MULTIPARTY_WORK, LiveMultiparty, MultipartyMove, Plays, multiparty_moves
from rolebase.turns import AssignVerifier, Finalize, Turn, rank


class Phase(enum.Enum):
    """How far this verifier got with an assignment, by its own records (verifier/state.py)."""

    ASSIGNED = "assigned"  # nothing replayed yet (or the records were lost)
    REPLAYED = "replayed"  # verdict computed and stored, report not yet mined
    REPORTED = "reported"  # a hint: while the chain says VERIFYING, the report is sent again


@dataclass(frozen=True)
class MarketJob:
    """A non-final job, as much as the duties need."""

    job_id: JobId
    state: JobState
    deadline: int  # due time of the current phase (OPEN: claim by; CLAIMED: commit by; ...)
    ready_block: int  # COMMITTED: assignVerifier possible from this block; else 0
    solver: Address
    verifier: Address
    submitter: Address


@dataclass(frozen=True)
class Draw:
    """What the chain fixed when this verifier was drawn for a job (its ``VerifierAssigned`` event),
    and whether that makes the job a forced one for us (known only to us: the loader checks it
    with the secret behind ``forced_commitment``; never in a log line)."""

    assign_seed: Bytes32  # seeds the sampling and fixes the probes
    forced_commitment: Bytes32 = ZERO32  # our forced seed snapshotted at the draw (zero: none)
    forced: bool = False


@dataclass(frozen=True)
class SealedDraw:
    """The key game of a sealed job drawn to us, as it stands for us (docs/sealing.md)."""

    held: bool  # we hold its data key: a wrap to us opened to the committed key hash, or the key was revealed
    drawn_at: int  # when we were drawn: the solver and the submitter wrap to us then
    window: int  # the report window the draw gave us (its deadline less ``drawn_at``)
    demands: int = 0  # our demands for its key so far (``demandsBy``)
    demand_open: bool = False  # a demand holds the job (``demandOf(job).party`` set): one at a time


@dataclass(frozen=True)
class Assignment:
    """A VERIFYING job whose drawn verifier is this account."""

    job_id: JobId
    deadline: int
    phase: Phase
    draw: Draw = Draw(ZERO32)
    fetching: Fetching | None = None  # what our replay worker is fetching for it, and for how long
    sealed: SealedDraw | None = None  # None: its data is not sealed


@dataclass(frozen=True)
class OpenDemand:
    """Our demand for a sealed job's key, holding the job (DataVote, our report clock paused) until ``deadline``."""

    job_id: JobId
    deadline: int


@dataclass(frozen=True)
class PendingOpen:
    """A job our failing report disputed, with no game yet: open it on ``segment`` by ``open_deadline``."""

    job_id: JobId
    segment: int
    open_deadline: int


@dataclass(frozen=True)
class LiveGame:
    """A dispute game that is not final; ``ballot`` is ours (VACANT unless we are seated);
    ``forced``: a report game on one of our reports, on a job that was forced on us."""

    game_id: GameId
    game: Game
    ballot: Ballot = Ballot.VACANT
    forced: bool = False
    unwrapped: tuple[Address, ...] = ()  # a sealed job's game we are a party to, holding its key: seated referees with no wrap for their key
    unreadable: bool = False  # seated on a sealed job's game whose key is not public and that no wrap to us opens


@dataclass(frozen=True)
class SeedView:
    """This verifier's forced seed: the commitment on chain (``forcedSeedOf(me)``, zero: none), the
    commitments of the secrets it keeps (the last is the current one), whether the current one
    was ever committed (a ``ForcedSeedCommitted`` event of ours carries it), and the commitments
    that live jobs drawn to us snapshotted (their secrets may still be needed to concede)."""

    on_chain: Bytes32
    kept: tuple[Bytes32, ...]
    current_committed: bool
    snapshotted: frozenset[Bytes32] = frozenset()

    @property
    def current(self) -> Bytes32 | None:
        return self.kept[-1] if self.kept else None


@dataclass(frozen=True)
class VerifierView:
    now: int
    block: int
    me: Address
    token_balance: TokenAmount
    staked: TokenAmount
    min_stake: TokenAmount
    assignments: tuple[Assignment, ...]
    jobs: tuple[MarketJob, ...]  # every non-final job (for the duties)
    forgettable: tuple[JobId, ...]  # jobs in the local records that are final; final jobs whose data key we keep (a referee's)
    openings: tuple[PendingOpen, ...] = ()
    games: tuple[LiveGame, ...] = ()
    game_params: GameParams | None = None
    seed: SeedView | None = None  # None: forced errors left alone (not loaded)
    cases: tuple[LiveCase, ...] = ()  # the availability court's live cases
    court_params: CourtParams | None = None
    credits: dict[CreditSource, TokenAmount] = field(default_factory=dict)  # what the game, the court and the sealed jobs' contract owe us (claimable)
    multiparty: tuple[LiveMultiparty, ...] = ()  # the multi-party jobs that are not finished
    multiparty_params: DilocoParams | None = None
    rivals: tuple[Address, ...] = ()  # the other staked verifiers, while a job waits for a draw or a finalize (rolebase.turns.rank)
    demands: tuple[OpenDemand, ...] = ()  # our open demands for sealed jobs' keys
    registered_key: RegisteredKey | None = None  # our encryption key in the KeyRegistry (None: not read, we have none)


@dataclass(frozen=True)
class VerifierConfig:
    stake_target: TokenAmount  # stake up to this much (0: the chain minimum)
    duties: bool = True  # make the anyone-may calls at all
    own_grace_s: int = 5  # past due before a call that pays us (the solver usually makes it first)
    duty_grace_s: int = 30  # past due before a call that does not pay us
    encryption_key: EncryptionKey | None = None  # --encryption-key: what opens wraps to us (None: sealed jobs drawn to us are not replayed)
    key_grace_s: int = 20  # past a sealed job's draw before we demand its key (its solver and submitter wrap to us at the draw)


# --------------------------------------------------------------------- actions


@dataclass(frozen=True)
class Replay:
    job_id: JobId
    deadline: int
    draw: Draw


@dataclass(frozen=True)
class Report(Journaled):
    job_id: JobId


@dataclass(frozen=True)
class ChallengeStalled(Journaled):
    """Challenge the availability of ``item``, whose fetch has stalled (or still runs near our deadline):
    decided by the loop, whatever the fetch does, so the report clock stops in time."""

    job_id: JobId
    item: int


class TimeoutKind(enum.Enum):
    EXPIRE = "expire"  # Open past expiresAt
    SOLVER = "timeoutSolver"  # Claimed past the commit deadline
    VERIFIER = "timeoutVerifier"  # Verifying past the report deadline
    DISPUTE = "timeoutDispute"  # Disputed past the dispute deadline
    AVAILABILITY = "timeoutAvailability"  # DataChallenged past the answer deadline


@dataclass(frozen=True)
class Timeout(Journaled):
    job_id: JobId
    kind: TimeoutKind


@dataclass(frozen=True)
class OpenGame:
    job_id: JobId
    segment: int


@dataclass(frozen=True)
class ConcedeForced:
    """Reveal the forced secret of ``job_id`` in its report game: the whistleblower is paid from the
    jackpot, we keep bond and fee."""

    game_id: GameId
    job_id: JobId


@dataclass(frozen=True)
class CommitForcedSeed(Journaled):
    """Commit the current forced secret's commitment; ``fresh``: make a new secret first (the
    current one was committed once and is no longer on chain: a concession revealed it)."""

    fresh: bool


@dataclass(frozen=True)
class ForgetForcedSecret:
    """Drop an old forced secret that no live job snapshotted."""

    commitment: Bytes32


VerifierAction = (
    Stake | ClaimCredit | CommitForcedSeed | ForgetForcedSecret | Replay | Report | ChallengeStalled | AssignVerifier | Finalize | Timeout
    | Forget
    | OpenGame | GameMove | ConcedeForced | CourtMove | MultipartyMove
    | RegisterKey | DemandKey | TimeoutDemand | WrapReferees | DeclineSeat
)  # fmt: skip

#: Where ``concedeForced`` is accepted (else the contract reverts ``NotConcedable``).
CONCEDABLE = frozenset({GameStatus.DEFENDER_TO_MOVE, GameStatus.CHALLENGER_TO_MOVE, GameStatus.ISOLATED})

_TIMEOUTS = {
    JobState.OPEN: TimeoutKind.EXPIRE,
    JobState.CLAIMED: TimeoutKind.SOLVER,
    JobState.VERIFYING: TimeoutKind.VERIFIER,
    JobState.DISPUTED: TimeoutKind.DISPUTE,
    JobState.DATA_CHALLENGED: TimeoutKind.AVAILABILITY,
}


class VerifierPolicy:
    def __init__(self, config: VerifierConfig) -> None:
        self.config = config

    def next_actions(self, view: VerifierView) -> Sequence[VerifierAction]:
        actions: list[VerifierAction] = []
        stake = self._stake(view)
        if stake is not None:
            actions.append(stake)
        mine = self.config.encryption_key.public_key if self.config.encryption_key is not None else None
        register = key_to_register(mine, view.registered_key, view.staked > 0)
        if register is not None:
            actions.append(register)
        if view.seed is not None:
            actions.extend(seed_moves(view.seed))
        for a in sorted(view.assignments, key=lambda a: a.deadline):  # nearest deadline first
            if view.now >= a.deadline:
                continue  # missed; our bond pays for it
            if a.sealed is not None and not a.sealed.held:  # nothing to replay before its data key opens
                demand = self._demand(view, a, a.sealed)
                if demand is not None:
                    actions.append(demand)
            elif a.phase is Phase.ASSIGNED and a.fetching is not None and stalled(a.fetching, a.deadline - view.now):
                actions.append(ChallengeStalled(a.job_id, a.fetching.item))
            elif a.phase is Phase.ASSIGNED:
                actions.append(Replay(a.job_id, a.deadline, a.draw))
            else:  # REPLAYED, or REPORTED in our records while the chain still says VERIFYING: it rules
                actions.append(Report(a.job_id))
        # unanswered past its deadline: the forfeit credits us the fee and reopens the job (the contract wants now > deadline)
        actions.extend(TimeoutDemand(d.job_id) for d in sorted(view.demands, key=lambda d: d.job_id) if view.now > d.deadline)
        for pending in view.openings:
            if view.now <= pending.open_deadline:
                actions.append(OpenGame(pending.job_id, pending.segment))
        if view.game_params is not None:
            for live in sorted(view.games, key=lambda g: g.game_id):
                if live.unwrapped:  # whoever else withholds, our referees can re-execute the step
                    actions.append(WrapReferees(live.game.job_id, live.game_id, live.unwrapped))
                move = self._game(view, view.game_params, live)
                if move is not None:
                    actions.append(move)
        if view.court_params is not None:  # seated: fetch and vote; our own cases: draw and settle
            moves = court_moves(view.now, view.block, view.me, view.cases, view.court_params, self.config.duty_grace_s)
            actions.extend(m for m in moves if self.config.duties or m.action in (CourtAction.COMMIT, CourtAction.REVEAL) or _own(view, m))
        if view.multiparty_params is not None:  # drawn: aggregate; every aggregate checked; seated: vote
            plays = Plays.JUDGE | (Plays.KEEPER if self.config.duties else Plays(0))
            actions.extend(multiparty_moves(view.now, view.block, view.me, view.multiparty, view.multiparty_params, plays, self.config.duty_grace_s))
        if self.config.duties:
            for job in sorted(view.jobs, key=lambda j: j.job_id):
                duty = self._duty(view, job)
                if duty is not None:
                    actions.append(duty)
        actions.extend(credit_claims(view.credits))
        actions.extend(Forget(job_id) for job_id in sorted(view.forgettable))
        return actions

    def _stake(self, view: VerifierView) -> Stake | None:
        amount = stake_needed(self.config.stake_target, view.min_stake, view.staked, view.token_balance)
        return None if amount is None else Stake(amount)

    def _demand(self, view: VerifierView, a: Assignment, sealed: SealedDraw) -> DemandKey | None:
        """Demand the key of a sealed job drawn to us whose data key we do not hold: the first demand
        ``key_grace_s`` after the draw (the wraps made at the draw land first), or once half the report
        window is gone, whichever comes first; a second at once (the wrap that answered the first did not
        open); none without an encryption key, while a demand holds the job, or after two."""
        if self.config.encryption_key is None or sealed.demand_open or sealed.demands >= MAX_DEMANDS:
            return None
        due = min(sealed.drawn_at + self.config.key_grace_s, a.deadline - sealed.window // 2)
        return DemandKey(a.job_id) if sealed.demands > 0 or view.now >= due else None

    def _game(self, view: VerifierView, params: GameParams, live: LiveGame) -> VerifierAction | None:
        game = live.game
        defender = game.on_report and game.defender == view.me  # a report game on our report
        if defender and live.forced and game.status in CONCEDABLE:
            return ConcedeForced(live.game_id, game.job_id)  # the probe was wrong on purpose: nothing to defend
        challenger = game.challenger == view.me
        if defender or challenger:
            move = party_move(game, params, view.now, view.block, Actor.SOLVER if defender else Actor.CHALLENGER)
            return None if move is None else GameMove(live.game_id, move)
        return self._bystander(view, params, live)

    def _bystander(self, view: VerifierView, params: GameParams, live: LiveGame) -> GameMove | DeclineSeat | None:
        """A game we are no party to: our votes when seated; the permissionless calls only with
        duties on, after a grace, so the parties (paid by them) go first."""
        game = live.game
        turn = next_turn(game, params, view.now, view.block)
        match turn.action:
            case Action.COMMIT_VOTE if live.ballot is Ballot.SEATED and live.unreadable:
                # no key to re-execute with: wait for a wrap (the parties and the submitter wrap at the
                # draw) until half the commit window is left, then give the seat up rather than be slashed
                return DeclineSeat(live.game_id) if view.now >= game.deadline - params.commit_window // 2 else None
            case Action.COMMIT_VOTE:
                return GameMove(live.game_id, turn.action) if live.ballot is Ballot.SEATED else None
            case Action.REVEAL_VOTE:
                return GameMove(live.game_id, turn.action) if live.ballot is Ballot.COMMITTED else None
        if not self.config.duties:
            return None
        match turn.action:
            case Action.TIMEOUT_CLOCK:
                clock = game.defender_clock if game.status is GameStatus.DEFENDER_TO_MOVE else game.challenger_clock
                due, wait = game.last_move_at + clock, self.config.duty_grace_s
            case Action.DRAW_COMMITTEE:
                assert turn.ready_block is not None
                ready = view.block >= turn.ready_block + self.config.own_grace_s
                return GameMove(live.game_id, Action.DRAW_COMMITTEE) if ready else None
            case Action.SETTLE:
                isolated = game.status is GameStatus.ISOLATED
                due = game.last_move_at + params.draw_window if isolated else game.deadline + params.reveal_window
                wait = self.config.own_grace_s
            case _:
                return None
        return GameMove(live.game_id, turn.action) if view.now > due + wait else None

    def _duty(self, view: VerifierView, job: MarketJob) -> AssignVerifier | Finalize | Timeout | None:
        grace, own = self.config.duty_grace_s, self.config.own_grace_s
        if job.state is JobState.COMMITTED:
            # a draw we may win (not as the job's solver or submitter: they are excluded)
            pays = view.staked >= view.min_stake and view.me not in (job.solver, job.submitter)
            turn = Turn(solver=False, wait=own if pays else grace, spread=_rank(view, job))
            if turn.allows(view.block - job.ready_block, blocks=True):  # due at a block: its turns count blocks
                return AssignVerifier(job.job_id, job.ready_block, turn)
            return None
        if job.state is JobState.VERIFIED:
            # the job's verifier (its fee) ranks first; the others after it, after the grace
            turn = Turn(solver=False, wait=own, spread=0) if job.verifier == view.me else Turn(solver=False, wait=grace, spread=1 + _rank(view, job))
            if turn.allows(view.now - job.deadline - 1):  # the contract wants now > deadline
                return Finalize(job.job_id, job.deadline, turn)
            return None
        kind = _TIMEOUTS.get(job.state)
        if kind is None:
            return None
        if kind is TimeoutKind.VERIFIER and job.verifier == view.me:
            return None  # never time ourselves out
        if kind is TimeoutKind.AVAILABILITY and job.verifier == view.me:
            grace = self.config.own_grace_s  # we challenged: the solver's bond comes to us
        if view.now > job.deadline + grace:
            return Timeout(job.job_id, kind)
        return None


def stalled(fetching: Fetching, left_s: float) -> bool:
    """Whether a fetch our replay waits for is to be given up and its item challenged: it has run
    :data:`~core.availability.FETCH_STALL_S`, or it still runs with our deadline
    :data:`~core.availability.FETCH_DEADLINE_MARGIN_S` away."""
    return fetching.seconds >= FETCH_STALL_S or left_s <= FETCH_DEADLINE_MARGIN_S


def seed_moves(seed: SeedView) -> list[CommitForcedSeed | ForgetForcedSecret]:
    """Keep a forced seed of ours on chain, and no secret longer than a live job may need it.

    Only this account commits its seed, and the market clears it only when a concession revealed
    it: so a current commitment that was on chain once and is not now was revealed, and a new
    secret is made (committing a revealed one again would let anyone tell our forced jobs). One
    that was never committed (first start, or a crash before the commit was mined) is committed
    as it is. An old secret is forgotten once no live job snapshotted its commitment.
    """
    moves: list[CommitForcedSeed | ForgetForcedSecret] = []
    current = seed.current
    if current is None:
        moves.append(CommitForcedSeed(fresh=True))
    elif seed.on_chain != current:
        moves.append(CommitForcedSeed(fresh=seed.current_committed))
    moves.extend(ForgetForcedSecret(c) for c in seed.kept[:-1] if c not in seed.snapshotted)
    return moves


def _rank(view: VerifierView, job: MarketJob) -> int:
    """Our rank among the staked verifiers that may make the same call on ``job`` (the job's own parties
    are none of them): verifiers that may make it send in turns of their own (rolebase.turns)."""
    return rank(view.me, (r for r in view.rivals if r not in (job.solver, job.submitter, job.verifier)), job.job_id)


def _own(view: VerifierView, move: CourtMove) -> bool:
    """A court move on a case we opened (our deposit and our report clock wait on it)."""
    return any(c.case_id == move.case_id and c.case.challenger == view.me for c in view.cases)


#: Workers per lane (core.agent.Workers): one replay at a time, and two workers for the dispute moves
#: that compute (an opening, a midpoint answered or posted, a referee's step), so a replay never holds them.
LANES = {"replay": 1, "duty": 2}


def work(view: VerifierView, action: VerifierAction) -> Work | None:
    """How the loop runs ``action``: a replay and the game moves that recompute a state on workers,
    every transaction alone in the loop (None). A replay's group is its job: the same job drawn again,
    or its deadline moved by an availability challenge, supersedes a replay stuck on a fetch."""
    match action:
        case Replay(job_id, deadline):
            return Work("replay", group=f"replay:{job_id}", due_in_s=deadline - view.now)
        case OpenGame(job_id):
            opening = next((o for o in view.openings if o.job_id == job_id), None)
            return Work("duty", due_in_s=None if opening is None else opening.open_deadline - view.now)
        case GameMove(_, Action.POST_MIDPOINT | Action.ANSWER_MIDPOINT | Action.COMMIT_VOTE):
            return Work("duty")
        case MultipartyMove(action=a) if a in MULTIPARTY_WORK:
            return Work("duty")
    return None
