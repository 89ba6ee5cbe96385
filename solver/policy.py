"""What a solver does about what it sees: pure, no I/O, unit-tested without a chain.

The view is what :mod:`solver.loader` read from the chain, storage and the local
database at one instant; the actions are carried out by :mod:`solver.responder`.
One action per held job per tick, the next stage of that job; a claim only when
there is capacity and stake for its bond.

The solver's advert on chain (its limits, device and measured speed: StakeManager.advertise)
is kept equal to what it offers: sent once staked, and again only when a limit or the device
differs, or the measured speed moved by more than ``SPEED_TOLERANCE`` either way (a speed
measured again at each start is never exactly the same).

Under a disk budget (solver.retention), the checkpoints a drawn verifier will fetch that the budget
dropped are regenerated as soon as the draw is on chain, one a tick, in the order it replays them
(and on through the challenge window: whistleblowers audit the probe segments among them); a dropped
checkpoint someone asked our gateway for goes first.

A job of ours that a challenger disputes is defended: each bisection move posts the state
at the game's midpoint (recomputed from our checkpoint), as long as our clock runs; a
challenger whose clock ran out is timed out, and a failing verifier that never opened its
game forfeits after the open window. A report game on our job (a whistleblower disputing the
verifier's probe) is the verifier's to defend: we only wait for the job to come back.

Sealed jobs (docs/sealing.md): with an encryption key (``--encryption-key``) the solver registers it
once staked, asks for a wrap of an Open sealed job's data key (once per key version) and claims only
once a wrap to it opened to the committed key hash and the dataset opened with that key: the
JobMarket cannot pause a Claimed job, so a claim before that could be run out of time by a submitter
that withholds. From the claim on it holds the key, and wraps it to whoever the chain entitles on its
job (the drawn verifier, the seated referees of a game), once per key version, and answers the
verifier's first demand with a fresh wrap; a second demand only the key itself answers, which would
make the job's data public: that is the submitter's to decide, never the solver's.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, field

from core.agent import Work
from core.chain import Address
from core.contracts import Capabilities, DilocoParams, Game, GameId, GameParams, GameStatus, JobId, JobState, KeyDemand, RegisteredKey, TokenAmount
from core.dispute import Action, next_turn
from core.sealing import EncryptionKey
from proofs.spec import Limits as SpecLimits
from rolebase.actions import ClaimCredit, CreditSource, Forget, GameMove, Journaled, Stake, credit_claims, stake_needed
from rolebase.keygame import AnswerDemand, PublishWraps, RegisterKey, RequestWrap, key_to_register, to_wrap
from rolebase.multiparty import MULTIPARTY_WORK, LiveMultiparty, MultipartyAction, MultipartyMove, Plays, multiparty_moves
from rolebase.turns import SOLVER_TURN, AssignVerifier, Finalize, party_order, rank


class Phase(enum.Enum):
    """How far this solver got with a claimed job, by its own records (solver/state.py)."""

    CLAIMED = "claimed"  # nothing trained yet (or the records were lost)
    TRAINING = "training"  # some checkpoints on disk; training resumes from the latest
    TRAINED = "trained"  # every checkpoint on disk, trace root computed
    UPLOADED = "uploaded"  # checkpoints, final model and manifest in storage
    COMMITTED = "committed"  # commit mined (a hint: while the chain says CLAIMED, the commit is sent again)


@dataclass(frozen=True)
class SpecCheck:
    """Whether this solver can run a job's spec: spec and dataset fetched by CID, the dataset loaded
    against the spec, a few steps dry-run (solver/judge.py, ``SpecJudge``)."""

    runnable: bool
    reason: str = ""  # why not, for the log
    steps: int = 0
    train_s: float = 0.0  # estimated seconds from claim to a trace ready to commit, from this solver's measured speed
    final: bool = True  # False: content not in storage (yet), judged again later
    checkpoints: int = 0  # in the trace: the spec's segments + 1
    checkpoint_bytes: int = 0  # of checkpoint 0, measured in the dry run
    segment_s: float = 0.0  # estimated seconds to train one segment here (what regenerating a checkpoint costs per segment)
    full_replay: bool = False  # the spec needs full replay (proofs.sampling.needs_full_replay): torch numerics or tolerance mode
    memory_bytes: int = (
        0  # training memory estimated from the spec (proofs.spec.training_memory_bytes): what training it, or a duty that recomputes a state of it, holds
    )
    sealed: bool = False  # the spec's dataset is sealed: runnable only as judged with the job's data key, else "no data key yet" (not final)


def fits_flag(check: SpecCheck, posted_full_replay: bool) -> SpecCheck:
    """The spec check of a job: a spec that needs full replay on a job posted without the market's
    full-replay flag is refused for good. Its draws would only sample it, which proves nothing there
    (a cheater may push every segment within the windows), and a verifier's full replay would lack its
    window and its fee (docs/proofs.md, "Full replay and the cheats of few segments")."""
    if check.runnable and check.full_replay and not posted_full_replay:
        return SpecCheck(
            False,
            "the spec needs full replay (torch numerics or tolerance mode) but the job was posted without the full-replay flag",
            check.steps,
            check.train_s,
        )
    return check


def fits_window(check: SpecCheck, commit_window: int, margin_s: int) -> SpecCheck:
    """The spec check of a job: a runnable spec this solver cannot finish within the job's commit
    window (plus ``margin_s`` for the claim and the commit to be mined) is refused for good."""
    if check.runnable and check.train_s + margin_s > commit_window:
        return SpecCheck(False, f"training takes about {check.train_s:.0f} s here, the commit window is {commit_window} s", check.steps, check.train_s)
    return check


#: A measured speed within this factor of the advertised one is the same offer (no new advert).
SPEED_TOLERANCE = 1.5


def same_offer(advertised: Capabilities, offer: Capabilities) -> bool:
    """Whether the advert on chain already says what we offer: the same limits and device, and a speed
    within ``SPEED_TOLERANCE`` of ours either way (never advertised: not the same)."""
    limits = (offer.max_params, offer.max_dataset_bytes, offer.max_steps, offer.device)
    return (
        advertised.advertised_at != 0
        and (advertised.max_params, advertised.max_dataset_bytes, advertised.max_steps, advertised.device) == limits
        and offer.flops <= advertised.flops * SPEED_TOLERANCE
        and advertised.flops <= offer.flops * SPEED_TOLERANCE
    )


@dataclass(frozen=True)
class SealedOpen:
    """Where an Open sealed job's key game stands for us (read only with an encryption key)."""

    active: bool  # its sealing is Active: sealed by its submitter, key bond escrowed, not spent by a forfeit
    key_registered: bool  # the KeyRegistry holds our encryption key for us (a wrap can be made to it)
    key_held: bool  # a wrap to us opened to the committed key hash: the data key is in our records
    asked: bool  # our wrap request at our current key version is on chain


@dataclass(frozen=True)
class OpenJob:
    job_id: JobId
    reward: TokenAmount
    bond: TokenAmount  # solver bond this claim would lock
    expires_at: int
    commit_window: int
    spec: SpecCheck
    opened_at: int = 0  # when it was posted or reopened (its claim deadline less the market's open window)
    sealing: SealedOpen | None = None  # a sealed spec's key game (None: not sealed, or we have no encryption key)


@dataclass(frozen=True)
class Rival:
    """Another staked solver that may claim the jobs we see: its advert (steps, speed) and its free stake."""

    address: Address
    max_steps: int
    flops: int
    free_stake: TokenAmount


@dataclass(frozen=True)
class SealedHeld:
    """A held sealed job's key game: whom the chain entitles to its data now, what was wrapped to them,
    and the open demand of its verifier."""

    key_held: bool  # its data key is in our records (without it we can neither wrap nor answer)
    entitled: tuple[Address, ...] = ()  # the drawn verifier while it verifies, the seated referees of a game on the job
    wrapped: dict[Address, int] = field(default_factory=dict)  # recipient -> newest key version wrapped to (SealedJobs.wrapped)
    registered: dict[Address, RegisteredKey] = field(default_factory=dict)  # the entitled parties' registered keys
    demand: KeyDemand | None = None  # the job's verifier's open demand for the key while it verifies (None: none open)


@dataclass(frozen=True)
class HeldJob:
    """A job whose solver on chain is this account and that is not final."""

    job_id: JobId
    state: JobState
    deadline: int  # of the current phase (commit, report, challenge window, dispute)
    ready_block: int  # block from which assignVerifier can be called (COMMITTED only)
    phase: Phase  # local progress; CLAIMED when there is no record
    game_id: GameId = GameId(0)  # DISPUTED: the job's active game (0: not opened yet)
    game: Game | None = None
    open_deadline: int | None = None  # DISPUTED by its verifier, no game yet: open by then
    challenged_item: int | None = None  # DATA_CHALLENGED: the item to publish (a checkpoint, or the manifest)
    train_s: float = 0.0  # CLAIMED: its spec's estimated training time (what it still needs of this solver)
    regenerate: tuple[int, ...] = ()  # VERIFYING, VERIFIED: checkpoints the verifier's draw needs that the disk budget dropped, ascending
    requested: tuple[int, ...] = ()  # VERIFYING, VERIFIED: dropped checkpoints someone asked our gateway for, ascending
    memory_bytes: int = 0  # its spec's training memory (SpecCheck.memory_bytes): what training it or recomputing a state of it holds
    sealing: SealedHeld | None = None  # a sealed job's key game (None: not sealed, no encryption key, or nobody to wrap to now)


@dataclass(frozen=True)
class SolverView:
    now: int  # latest block timestamp
    block: int  # latest block number
    me: Address
    token_balance: TokenAmount
    staked: TokenAmount
    free_stake: TokenAmount
    min_stake: TokenAmount
    open_jobs: tuple[OpenJob, ...]
    held_jobs: tuple[HeldJob, ...]
    forgettable: tuple[JobId, ...]  # jobs in the local records that are final or no longer ours; final jobs whose data key we keep
    game_params: GameParams | None = None  # the dispute game's (immutable) parameters
    claims_made: int = 0  # jobs this solver ever claimed (its records)
    advertised: Capabilities | None = None  # our advert on chain (advertised_at 0: none yet)
    offer: Capabilities | None = None  # what we advertise: our limits, device and measured speed (None: nothing)
    rivals: tuple[Rival, ...] = ()  # the other staked advertisers (read while jobs are open)
    credits: dict[CreditSource, TokenAmount] = field(default_factory=dict)  # what the game, the court and the sealed jobs' contract owe us (claimable)
    registered_key: RegisteredKey | None = None  # our encryption key in the KeyRegistry (None: we have none to register)
    multiparty: tuple[LiveMultiparty, ...] = ()  # the multi-party jobs that are not finished
    multiparty_params: DilocoParams | None = None


@dataclass(frozen=True)
class Limits:
    """This solver's own bounds on what it accepts: by default the protocol's (``proofs.spec.Limits``);
    what really bounds a job is the time it takes here against its commit window."""

    max_steps: int = SpecLimits.STEPS
    max_params: int = SpecLimits.PARAMS
    max_dataset_bytes: int = SpecLimits.DATASET_BYTES
    #: Training memory (``proofs.spec.training_memory_bytes``, from the spec alone) this solver gives a job.
    max_memory_bytes: int = SpecLimits.MEMORY_BYTES
    new_specs_per_tick: int = 2  # specs fetched, loaded and dry-run per tick (a flood of new jobs is judged a few at a time)


@dataclass(frozen=True)
class SolverConfig:
    """The operator's choices (not protocol parameters: those come from the chain)."""

    stake_target: TokenAmount  # stake up to this much solver stake (0: the chain minimum)
    max_active: int = 1  # claimed-but-uncommitted jobs at once
    min_reward: TokenAmount = TokenAmount(0)
    commit_margin_s: int = 5  # do not start a claim with less than this left before expiry
    defend: bool = True  # answer disputes (False: a test adversary that goes silent)
    max_claims: int | None = None  # claims in this solver's lifetime (1: a test adversary that cheats once)
    disk_budget: int | None = None  # bytes of checkpoints kept per job (None: every checkpoint, solver.retention)
    memory_bytes: int | None = None  # memory this solver's work may hold at once (None: not reserved; the CLI gives its --max-memory-gib)
    encryption_key: EncryptionKey | None = None  # --encryption-key: what opens wraps to us (None: no sealed job is taken)
    multiparty: bool = False  # --multiparty: take vacant slots of multi-party jobs (a slot held is played either way)
    duty_grace_s: int = 30  # past due before a multi-party job's permissionless move that does not wait on us


# --------------------------------------------------------------------- actions


@dataclass(frozen=True)
class Advertise(Journaled):
    """Publish ``offer`` as our capabilities (the chain stamps the time)."""

    offer: Capabilities


@dataclass(frozen=True)
class Claim(Journaled):
    job_id: JobId


@dataclass(frozen=True)
class Train:
    job_id: JobId
    deadline: int  # commit deadline: training stops early if the chain passes it


@dataclass(frozen=True)
class Upload:
    job_id: JobId


@dataclass(frozen=True)
class Commit(Journaled):
    job_id: JobId


@dataclass(frozen=True)
class TimeoutVerifier(Journaled):
    job_id: JobId


@dataclass(frozen=True)
class ForfeitUnopened(Journaled):
    job_id: JobId


@dataclass(frozen=True)
class Regenerate:
    """Regenerate checkpoint ``index``, which the disk budget dropped and someone needs; ``held``: the
    verifier's draw needs it, so it is kept until the job is final (else it takes a serving slot)."""

    job_id: JobId
    index: int
    held: bool


@dataclass(frozen=True)
class AnswerAvailability:
    """Publish ``item`` of our trace on chain: the verifier could not fetch it (it pays a deposit to us)."""

    job_id: JobId
    item: int


SolverAction = (
    Stake
    | ClaimCredit
    | Advertise
    | Claim
    | Train
    | Upload
    | Commit
    | AssignVerifier
    | TimeoutVerifier
    | Finalize
    | GameMove
    | ForfeitUnopened
    | AnswerAvailability
    | Regenerate
    | Forget
    | MultipartyMove
    | RegisterKey
    | RequestWrap
    | PublishWraps
    | AnswerDemand
)


#: Seconds between two claim turns on one job: a block for the earlier solver's claim to be mined and
#: a tick to read it, so the later solver sees the job taken and sends nothing that would revert.
CLAIM_TURN_S = 4
#: The last turn: a job waits at most this many turns for rivals that do not claim it (busy, or
#: refusing what their advert does not show), so a claim is late by at most 12 s.
MAX_CLAIM_TURN = 3


def claim_turn(me: Address, job: OpenJob, rivals: Sequence[Rival], my_flops: int | None) -> int:
    """How many turns ``job`` waits before we claim it: the rivals that could claim it (free stake for
    its bond, its steps, its training within the commit window at their advertised speed, our
    estimate scaled by the two speeds) and come before us in the job's order (:func:`rolebase.turns.rank`), at most
    :data:`MAX_CLAIM_TURN`. Each solver computes the same order, so competing honest solvers claim a
    job one after another, never at once (issue 25: 7 of 50 claims reverted with two solvers). A
    courtesy, not a rule: a solver that claims out of turn wins the job or loses only its gas."""
    able = [
        rival.address
        for rival in rivals
        if rival.free_stake >= job.bond
        and rival.max_steps >= job.spec.steps
        and not (my_flops and rival.flops and job.spec.train_s * my_flops / rival.flops > job.commit_window)
    ]
    return min(rank(me, able, job.job_id), MAX_CLAIM_TURN)


def _owed_training(view: SolverView) -> float:
    """Seconds of training we already owe: the held jobs claimed and not yet trained (one train lane)."""
    return sum(j.train_s for j in view.held_jobs if j.state is JobState.CLAIMED and j.phase in (Phase.CLAIMED, Phase.TRAINING))


class SolverPolicy:
    def __init__(self, config: SolverConfig) -> None:
        self.config = config

    def next_actions(self, view: SolverView) -> Sequence[SolverAction]:
        actions: list[SolverAction] = []
        stake = self._stake(view)
        if stake is not None:
            actions.append(stake)
        advertise = self._advertise(view)
        if advertise is not None:
            actions.append(advertise)
        mine = self.config.encryption_key.public_key if self.config.encryption_key is not None else None
        register = key_to_register(mine, view.registered_key, view.staked > 0)
        if register is not None:
            actions.append(register)
        for job in sorted(view.held_jobs, key=lambda j: j.job_id):
            step = self._advance(view, job)
            if step is not None:
                actions.append(step)
            if job.sealing is not None:  # beside the job's stage: a verifier or referee without the key cannot start
                actions.extend(_key_moves(job.job_id, job.sealing))
        if stake is None:
            actions.extend(self._requests(view))
            actions.extend(self._claims(view))
        if view.multiparty_params is not None:  # our slots' rounds; a vacant slot only with --multiparty
            owed = _owed_training(view) + self.config.commit_margin_s
            moves = multiparty_moves(
                view.now,
                view.block,
                view.me,
                view.multiparty,
                view.multiparty_params,
                Plays.PARTY | Plays.KEEPER,
                self.config.duty_grace_s,
                view.free_stake,
                owed,
            )
            taking = self.config.multiparty and stake is None
            # a vacant slot is judged (a fit move names no slot) and joined only with --multiparty; one held is played either way
            actions.extend(m for m in moves if taking or not (m.action is MultipartyAction.JOIN or (m.action is MultipartyAction.FIT and m.slot < 0)))
        actions.extend(credit_claims(view.credits))
        actions.extend(Forget(job_id) for job_id in sorted(view.forgettable))
        return actions

    def _stake(self, view: SolverView) -> Stake | None:
        amount = stake_needed(self.config.stake_target, view.min_stake, view.staked, view.token_balance)
        return None if amount is None else Stake(amount)

    def _advertise(self, view: SolverView) -> Advertise | None:
        if view.offer is None or view.staked < view.min_stake:  # the chain takes adverts from eligible solvers only
            return None
        if view.advertised is not None and same_offer(view.advertised, view.offer):
            return None
        return Advertise(view.offer)

    def _advance(self, view: SolverView, job: HeldJob) -> SolverAction | None:
        if job.state is JobState.CLAIMED:
            if view.now >= job.deadline:
                return None  # missed: the timeout is someone else's call, and costs us
            if job.phase in (Phase.CLAIMED, Phase.TRAINING):
                return Train(job.job_id, job.deadline)
            if job.phase is Phase.TRAINED:
                return Upload(job.job_id)
            # COMMITTED in our records yet CLAIMED on chain: the chain rules (our commit was rolled back
            # or reorged out; if it is only pending, or mined past the view's block, the journal waits for it)
            return Commit(job.job_id)
        if job.state is JobState.COMMITTED and SOLVER_TURN.allows(view.block - job.ready_block, blocks=True):
            return AssignVerifier(job.job_id, job.ready_block, SOLVER_TURN)  # we want a verifier: it is how we get paid (in our turns: rolebase.turns)
        if job.state is JobState.VERIFYING and view.now > job.deadline:  # the contract wants now > deadline
            return TimeoutVerifier(job.job_id)  # its slashed bond comes to us
        if job.state is JobState.VERIFIED and SOLVER_TURN.allows(view.now - job.deadline - 1):  # the contract wants now > deadline
            return Finalize(job.job_id, job.deadline, SOLVER_TURN)
        if job.state in (JobState.VERIFYING, JobState.DATA_VOTE, JobState.VERIFIED) and job.requested:
            return Regenerate(job.job_id, job.requested[0], held=job.requested[0] in job.regenerate)  # someone is waiting for it
        if job.state in (JobState.VERIFYING, JobState.DATA_VOTE, JobState.VERIFIED) and job.regenerate:
            return Regenerate(job.job_id, job.regenerate[0], held=True)  # one a tick, in the order the verifier replays
        if job.state is JobState.DATA_CHALLENGED and job.challenged_item is not None and view.now <= job.deadline:
            return AnswerAvailability(job.job_id, job.challenged_item)  # else our whole bond goes to the verifier
        if job.state is JobState.DISPUTED:
            return self._defend(view, job)
        return None

    def _defend(self, view: SolverView, job: HeldJob) -> SolverAction | None:
        if job.game is None:
            if job.open_deadline is not None and view.now > job.open_deadline:
                return ForfeitUnopened(job.job_id)  # the failing verifier never opened: its bond is ours
            return None
        if view.game_params is None or job.game.defender != view.me:
            return None  # a report game: the job's verifier defends its probe, not us
        turn = next_turn(job.game, view.game_params, view.now, view.block)
        if turn.action is Action.POST_MIDPOINT and self.config.defend:
            return GameMove(job.game_id, Action.POST_MIDPOINT)
        if turn.action is Action.TIMEOUT_CLOCK and job.game.status is GameStatus.CHALLENGER_TO_MOVE:
            return GameMove(job.game_id, Action.TIMEOUT_CLOCK)  # the challenger ran out of time: we win
        return None

    def _claims(self, view: SolverView) -> list[Claim]:
        active = sum(1 for j in view.held_jobs if j.state is JobState.CLAIMED)
        room = self.config.max_active - active
        if self.config.max_claims is not None:
            room = min(room, self.config.max_claims - view.claims_made)
        if room <= 0:
            return []
        free = int(view.free_stake)
        busy = _owed_training(view)  # jobs train one after another: a claim must finish after the training already owed
        training = [j.memory_bytes for j in view.held_jobs if j.state is JobState.CLAIMED]
        held = [j.memory_bytes for j in view.held_jobs]
        claims: list[Claim] = []
        candidates = sorted((j for j in view.open_jobs if self._claimable(view, j)), key=lambda j: (-j.reward, party_order(view.me, j.job_id)))
        for job in candidates:
            if len(claims) == room:
                break
            fits_memory = (
                self.config.memory_bytes is None or peak_memory([*training, job.spec.memory_bytes], [*held, job.spec.memory_bytes]) <= self.config.memory_bytes
            )
            if job.bond <= free and busy + job.spec.train_s + self.config.commit_margin_s <= job.commit_window and fits_memory:
                claims.append(Claim(job.job_id))
                free -= int(job.bond)
                busy += job.spec.train_s
                training.append(job.spec.memory_bytes)
                held.append(job.spec.memory_bytes)
        return claims

    def _requests(self, view: SolverView) -> list[RequestWrap]:
        """Ask for the data key of each Open sealed job we would take, once per key version: the
        judge could check its spec against our limits but not its dataset, which opens only with it."""
        return [
            RequestWrap(job.job_id)
            for job in sorted(view.open_jobs, key=lambda j: j.job_id)
            if job.sealing is not None
            and job.sealing.active
            and job.sealing.key_registered
            and not job.sealing.key_held
            and not job.sealing.asked
            and job.reward >= self.config.min_reward
            and job.bond <= view.free_stake
            and view.now + self.config.commit_margin_s < job.expires_at
        ]

    def _claimable(self, view: SolverView, job: OpenJob) -> bool:
        if not (job.spec.runnable and job.reward >= self.config.min_reward and view.now + self.config.commit_margin_s < job.expires_at):
            return False
        if job.spec.sealed and not (job.sealing is not None and job.sealing.active and job.sealing.key_held):
            return False  # a claim starts a clock nothing pauses: only with the key in hand, on a sealing not spent
        my_flops = view.offer.flops if view.offer is not None else None
        return view.now >= job.opened_at + claim_turn(view.me, job, view.rivals, my_flops) * CLAIM_TURN_S


def _key_moves(job_id: JobId, sealing: SealedHeld) -> list[SolverAction]:
    """Our key-game moves on a sealed job of ours: the verifier's first demand answered with a fresh
    wrap (never its second: only the key answers that, the submitter's to give), and a wrap to each
    entitled party not wrapped to at its current key version (the demander's comes with its answer)."""
    if not sealing.key_held:
        return []
    demand = sealing.demand
    answer = demand.party if demand is not None and not demand.key_only else None
    moves: list[SolverAction] = [] if answer is None else [AnswerDemand(job_id, answer)]
    recipients = to_wrap([party for party in sealing.entitled if party != answer], sealing.wrapped, sealing.registered)
    if recipients:
        moves.append(PublishWraps(job_id, recipients))
    return moves


def peak_memory(training: Sequence[int], held: Sequence[int]) -> int:
    """The most memory this solver's work may hold at once: one job training (the largest of the
    claimed ones: they train one after another) and, beside it, a duty on each worker of the duty
    lane (an availability answer that regenerates a checkpoint, a midpoint recomputed from one), each
    holding its job's training memory (the largest of the held jobs). A claim that would raise it
    above the solver's memory is not made: a duty that could not run beside training would miss its
    deadline, and the bond of a job already committed is at stake in it (issue 25)."""
    return max(training, default=0) + sum(sorted(held, reverse=True)[: LANES["duty"]])


#: Workers per lane (core.agent.Workers): jobs train one at a time (the claim rule counts the training
#: already owed, one job after another), and the duties of committed jobs (an availability answer, a
#: dispute move, a regeneration) keep lanes of their own, so no training ever holds them.
LANES = {"train": 1, "upload": 1, "regenerate": 1, "duty": 2, "fit": 1}


def work(view: SolverView, action: SolverAction) -> Work | None:
    """How the loop runs ``action``: on a worker (training, upload, regeneration, and the duties that
    compute: an availability answer may regenerate a checkpoint, a midpoint is recomputed), or in the
    loop (None: a transaction alone)."""
    held = {j.job_id: j for j in view.held_jobs}
    match action:
        case Train(job_id, deadline):
            job = held.get(job_id)
            return Work("train", due_in_s=deadline - view.now, needs_s=job.train_s if job is not None else 0.0)
        case Upload():
            return Work("upload")
        case Regenerate(job_id):
            job = held.get(job_id)
            return Work("regenerate", due_in_s=None if job is None else job.deadline - view.now)
        case AnswerAvailability(job_id):
            job = held.get(job_id)
            return Work("duty", due_in_s=None if job is None else job.deadline - view.now)
        case MultipartyMove(action=MultipartyAction.FIT):
            return Work("fit")  # a stranger's gateway may stall it: never ahead of a duty with a clock
        case MultipartyMove(action=a) if a in MULTIPARTY_WORK:
            return Work("duty")
        case GameMove(game_id, Action.POST_MIDPOINT):  # the midpoint is recomputed from a checkpoint
            job = next((j for j in view.held_jobs if j.game_id == game_id), None)
            return Work("duty", due_in_s=None if job is None else job.deadline - view.now)
    return None
