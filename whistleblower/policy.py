"""What a whistleblower does about what it sees: pure, no I/O, unit-tested without a chain.

Its business is the passing reports whose challenge window is open (docs/incentives.md: the
forced errors are what make auditing pay when everyone is honest). For each such report:

1. **audit** it, with probability ``audit_rate`` (a draw derived from the bot's secret and the
   report, so a restart draws the same and nobody can predict which reports it skips), and only
   while the jackpot income an audit expects, p_f · s · J read from the chain, covers
   ``audit_cost`` (docs/incentives.md, requirement 7: free entry; 0, the default, audits always);
2. **challenge** the first fault the audit found that it has not challenged yet: wrong probes
   first (a report game, ``openOnReport``), then bad segments (a trace game, ``open``).
   A wrong probe costs an unforced verifier its bond whatever the solver does, and a forced one
   pays the jackpot share and resumes the window, in which a bad segment is challenged next; a
   trace game slashes the verifier only by the referees' verdict (a silent solver loses on its
   clock and the verifier goes free). Only one game runs per job, so one challenge at a time.
   No game is opened while no committee could be seated (:func:`committee_seatable`: fewer
   eligible referees than ``committeeSize``, other than the job's parties and us, with the
   referee bond free): the game would end Undecided and the bond go to the jackpot. The report
   is held instead (:class:`HoldChallenge`, logged once) and decided again each tick;
3. **play** its games as the challenger: answer each midpoint, time out a defender whose clock
   ran out, draw the committee, settle: at once, since every one of those pays it
   (``core.dispute.party_move``, the rule the verifier plays its own games by).
4. **time out** a solver that did not publish an item this bot challenged the availability of
   (the audit challenges what it cannot fetch: ``core.availability``): ``timeoutAvailability``
   once the answer deadline passed, which pays the solver's bond to us.

Sealed jobs (docs/sealing.md): a report whose data is sealed is audited once we hold its data key (a
wrap to us that opens to the committed key hash, or the key revealed). The key game is played only for
a report the audit decision above says we audit, since a demand holds the job and stops its challenge
window: a whistleblower that demanded on jobs it never meant to audit would delay every sealed job's
payout at no cost to itself. So, for such a report: ask for a wrap once per key version of ours
(``requestWrap``: the submitter's watch wraps to asking whistleblowers); demand the key ``key_grace_s``
after our request was mined, or once half the challenge window is left, whichever comes first (the
watch answers in a block or two, and a demand holds the job); demand again at once if the wrap that
answered did not open; two demands at most (a second is answered only by the key itself); nothing
while a demand holds the job, and time out one left unanswered past its deadline (the forfeit credits
us the verifier fee and resumes the window). A sealed report we cannot read any more (no encryption
key, the key bond forfeited, our two demands spent) is not audited (:class:`Unreadable`, logged
once): no move of the key game can lose us stake. With an encryption key we register it once staked.

Audit budget: ``budget_steps`` training steps replayed per report (:func:`plan_audit`): a probe
at step m of its segment costs m steps, a segment its k steps. Probes go first (they catch a
report that was never replayed, on any trace), then the segments the verifier says it replayed
(they catch a bad trace it passed), then the bot's own picks in a secret random order (a bad
segment the verifier's sample missed).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from eth_utils import keccak

from core.agent import Work
from core.chain import Address
from core.contracts import Game, GameId, GameParams, JobId, RegisteredKey, ReportSeal, TokenAmount
from core.dispute import Action, Actor, party_move
from core.probe import Bytes32, Probe
from core.sealing import EncryptionKey
from proofs.merkle import hex32, to_bytes32
from rolebase.actions import ClaimCredit, CreditSource, Forget, GameMove, Stake, credit_claims, stake_needed
from rolebase.keygame import MAX_DEMANDS, DemandKey, RegisterKey, RequestWrap, TimeoutDemand, WrapReferees, key_to_register

_DRAW_DOMAIN = b"veritrain/whistleblower-audit-draw/v1"
_PICK_DOMAIN = b"veritrain/whistleblower-own-picks/v1"

#: Default audit budget, in training steps per report: the shipped demo jobs (up to 1000 steps,
#: probes at most one segment each) are replayed in full.
DEFAULT_BUDGET_STEPS = 2_000


class FindingKind(enum.Enum):
    PROBE = "probe"  # a published probe state that replay does not give: report game
    SEGMENT = "segment"  # a committed segment whose replay fails: trace game
    MANIFEST = "manifest"  # a committed manifest that gives no leaves (does not parse, another root): manifest game


@dataclass(frozen=True)
class Finding:
    """A fault an audit proved, with what its challenge needs.

    ``index`` is the probe slot (PROBE) or the segment (SEGMENT). A probe also carries the
    verifier's published ``step`` and (wrong) ``state_hash``, its Merkle ``proof`` under the
    report's probe root, and the report's ``seal`` the audit read that root from, which its report
    game opens against (0x-hex in the JSON the database keeps; ``""`` for no state hash; a record
    kept before findings carried the seal has none, and the challenge reads it from the chain).
    """

    kind: FindingKind
    index: int
    segment: int
    detail: str
    step: int = 0
    state_hash: Bytes32 | None = None
    proof: tuple[Bytes32, ...] = ()
    seal: ReportSeal | None = None

    @property
    def key(self) -> tuple[FindingKind, int]:
        return self.kind, self.index

    def probe(self) -> Probe:
        """The verifier's probe a PROBE finding disputes."""
        if self.kind is not FindingKind.PROBE or self.state_hash is None:
            raise ValueError(f"a {self.kind.value} finding names no probe")
        return Probe(self.index, self.segment, self.step, self.state_hash)

    def to_json(self) -> dict[str, object]:
        return {
            "kind": self.kind.value,
            "index": self.index,
            "segment": self.segment,
            "detail": self.detail,
            "step": self.step,
            "state_hash": "" if self.state_hash is None else hex32(self.state_hash),
            "proof": [hex32(p) for p in self.proof],
            **({} if self.seal is None else {"seal": [hex32(h) for h in self.seal.as_tuple()]}),
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, object]) -> Finding:
        proof, state_hash, seal = raw.get("proof", []), raw.get("state_hash", ""), raw.get("seal")
        assert isinstance(proof, list) and isinstance(state_hash, str) and (seal is None or (isinstance(seal, list) and len(seal) == 3))
        return cls(
            FindingKind(raw["kind"]),
            int(raw["index"]),  # type: ignore[call-overload]
            int(raw["segment"]),  # type: ignore[call-overload]
            str(raw["detail"]),
            int(raw.get("step", 0)),  # type: ignore[call-overload]
            to_bytes32(state_hash, "finding state hash") if state_hash else None,
            tuple(to_bytes32(str(p), "finding proof element") for p in proof),
            None if seal is None else ReportSeal(*(to_bytes32(str(h), "finding seal") for h in seal)),
        )


def challenge_order(findings: Sequence[Finding]) -> list[Finding]:
    """Probes before segments, lowest index first (see the module doc for why); a manifest finding
    is an audit's only one (nothing else can be read without leaves)."""
    rank = {FindingKind.PROBE: 0, FindingKind.SEGMENT: 1, FindingKind.MANIFEST: 2}
    return sorted(findings, key=lambda f: (rank[f.kind], f.index))


# --------------------------------------------------------------------- the bot's own randomness


def _derive(domain: bytes, secret: bytes, job_id: int, report_cid: str) -> bytes:
    return keccak(domain + secret + int(job_id).to_bytes(32, "big") + report_cid.encode())


def audit_draw(secret: bytes, job_id: int, report_cid: str) -> float:
    """A uniform number in [0, 1) for this report; the report is audited iff it is below the rate."""
    return int.from_bytes(_derive(_DRAW_DOMAIN, secret, job_id, report_cid)[:8], "big") / 2**64


def own_picks_seed(secret: bytes, job_id: int, report_cid: str) -> bytes:
    """The seed of the bot's own segment order for this report (``proofs.choose_segments``)."""
    return _derive(_PICK_DOMAIN, secret, job_id, report_cid)


# --------------------------------------------------------------------- the audit budget


@dataclass(frozen=True)
class AuditPlan:
    """What one audit replays: probe slots and segments, the training steps that costs, what the budget left out."""

    probes: tuple[int, ...]
    segments: tuple[int, ...]
    steps: int
    left_out: int


def plan_audit(probe_steps: Sequence[tuple[int, int]], reported: Sequence[int], own_order: Sequence[int], k: int, budget: int) -> AuditPlan:
    """Greedy in priority order (probes, the verifier's segments, own picks); a unit that does not
    fit the remaining budget is left out and the next, maybe cheaper, one is tried.

    ``probe_steps``: ``(probe index, step inside its segment)``; ``k``: steps per segment.
    """
    left = budget
    probes: list[int] = []
    segments: list[int] = []
    left_out = 0
    for index, step in probe_steps:
        if step <= left:
            probes.append(index)
            left -= step
        else:
            left_out += 1
    seen: set[int] = set()
    for segment in [*reported, *own_order]:
        if segment in seen:
            continue
        seen.add(segment)
        if k <= left:
            segments.append(segment)
            left -= k
        else:
            left_out += 1
    return AuditPlan(tuple(probes), tuple(sorted(segments)), budget - left, left_out)


def committee_seatable(referees: int, committee_size: int) -> bool:
    """Whether a game's committee can be seated: ``DisputeGame.drawCommittee`` needs
    ``committee_size`` distinct eligible referees besides the parties (else Undecided)."""
    return referees >= committee_size


# --------------------------------------------------------------------- the view


@dataclass(frozen=True)
class SealedReport:
    """The key game of a sealed job's report, as it stands for us (docs/sealing.md)."""

    held: bool  # we hold its data key: a wrap to us opened to the committed key hash, or the key was revealed
    live: bool = True  # its sealing is Active: a wrap may still be asked for and the key demanded (Forfeited: never again)
    asked_at: int | None = None  # block time of our first wrap request at our current key version (None: none on chain)
    window: int = 0  # the challenge window's length (``MarketParams.challenge_window``)
    demands: int = 0  # our demands for its key so far (``demandsBy``)
    demand_open: bool = False  # a demand holds the job (``demandOf(job).party`` set): one at a time


@dataclass(frozen=True)
class OpenReport:
    """A Verified job's passing report, its challenge window open until ``window_end``, on the trace
    committed under ``trace_root``."""

    job_id: JobId
    report_cid: str
    window_end: int
    trace_root: Bytes32
    findings: tuple[Finding, ...] | None  # None: not audited yet
    challenged: frozenset[tuple[FindingKind, int]] = frozenset()  # faults of this report we opened a game on (chain)
    referees: int = 0  # verifiers a committee could seat now: eligible, bond free, none of the job's parties nor us
    sealed: SealedReport | None = None  # None: its data is not sealed, or it was audited already


@dataclass(frozen=True)
class OpenDemand:
    """Our demand for a sealed job's key, holding the job (DataVote, its challenge window paused) until ``deadline``."""

    job_id: JobId
    deadline: int


@dataclass(frozen=True)
class OwnGame:
    """A game this bot opened that is not final; ``unwrapped``: on a sealed job whose key we hold, its
    seated referees with no wrap for their key."""

    game_id: GameId
    game: Game
    unwrapped: tuple[Address, ...] = ()


@dataclass(frozen=True)
class WhistleblowerView:
    now: int
    block: int
    me: Address
    token_balance: TokenAmount
    staked: TokenAmount
    min_stake: TokenAmount
    secret: bytes
    reports: tuple[OpenReport, ...]
    expected_per_audit: TokenAmount = TokenAmount(0)  # p_f s J at this block
    games: tuple[OwnGame, ...] = ()
    game_params: GameParams | None = None
    forgettable: tuple[JobId, ...] = ()  # audited jobs that are final; final jobs whose data key we keep
    data_challenges: tuple[tuple[JobId, int], ...] = ()  # (job, answer deadline): our availability challenges not answered
    credits: dict[CreditSource, TokenAmount] = field(default_factory=dict)  # what the game, the court and the sealed jobs' contract owe us (claimable)
    demands: tuple[OpenDemand, ...] = ()  # our open demands for sealed jobs' keys
    registered_key: RegisteredKey | None = None  # our encryption key in the KeyRegistry (None: not read, we have none)


@dataclass(frozen=True)
class WhistleblowerConfig:
    stake_target: TokenAmount  # stake up to this much (0: the chain minimum)
    audit_rate: float = 1.0  # probability of auditing a report
    budget_steps: int = DEFAULT_BUDGET_STEPS  # training steps replayed per report at most
    audit_cost: TokenAmount = TokenAmount(0)  # audit only while p_f s J >= this
    encryption_key: EncryptionKey | None = None  # --encryption-key: what opens wraps to us (None: sealed reports are not audited)
    key_grace_s: int = 20  # past our wrap request before we demand a sealed job's key (the submitter's watch wraps to us in a block or two)


# --------------------------------------------------------------------- actions


@dataclass(frozen=True)
class Audit:
    """Audit a report: what the view read of its job (the window's end, the committed root) travels
    with it, so that the audit reads the job no more."""

    job_id: JobId
    report_cid: str
    window_end: int
    trace_root: Bytes32


@dataclass(frozen=True)
class Challenge:
    job_id: JobId
    report_cid: str
    finding: Finding


@dataclass(frozen=True)
class HoldChallenge:
    """A fault not challenged: no committee could be seated (``referees`` of ``needed``)."""

    job_id: JobId
    report_cid: str
    referees: int
    needed: int


@dataclass(frozen=True)
class TimeoutAvailability:
    """The solver did not publish the item we challenged in time: its bond comes to us."""

    job_id: JobId


@dataclass(frozen=True)
class Unreadable:
    """A sealed report we would audit and cannot read any more (``reason``): it is not audited."""

    job_id: JobId
    report_cid: str
    reason: str


WhistleblowerAction = (
    Stake | ClaimCredit | Audit | Challenge | HoldChallenge | TimeoutAvailability | GameMove | Forget
    | RegisterKey | RequestWrap | DemandKey | TimeoutDemand | WrapReferees | Unreadable
)  # fmt: skip


class WhistleblowerPolicy:
    def __init__(self, config: WhistleblowerConfig) -> None:
        self.config = config

    def next_actions(self, view: WhistleblowerView) -> Sequence[WhistleblowerAction]:
        actions: list[WhistleblowerAction] = []
        amount = stake_needed(self.config.stake_target, view.min_stake, view.staked, view.token_balance)
        if amount is not None:
            actions.append(Stake(amount))
        mine = self.config.encryption_key.public_key if self.config.encryption_key is not None else None
        register = key_to_register(mine, view.registered_key, view.staked > 0)
        if register is not None:
            actions.append(register)
        if view.staked >= view.min_stake:  # a challenge needs an eligible stake: no audit without one
            for report in sorted(view.reports, key=lambda r: (r.window_end, r.job_id)):  # nearest window end first
                action = self._report(view, report)
                if action is not None:
                    actions.append(action)
        if view.game_params is not None:
            for own in sorted(view.games, key=lambda g: g.game_id):
                if own.unwrapped:  # whoever else withholds, our referees can re-execute the step
                    actions.append(WrapReferees(own.game.job_id, own.game_id, own.unwrapped))
                move = party_move(own.game, view.game_params, view.now, view.block, Actor.CHALLENGER)
                if move is not None:
                    actions.append(GameMove(own.game_id, move))
        actions.extend(TimeoutAvailability(job_id) for job_id, deadline in sorted(view.data_challenges) if view.now > deadline)
        # unanswered past its deadline: the forfeit credits us the fee and resumes the window (the contract wants now > deadline)
        actions.extend(TimeoutDemand(d.job_id) for d in sorted(view.demands, key=lambda d: d.job_id) if view.now > d.deadline)
        actions.extend(credit_claims(view.credits))
        actions.extend(Forget(job_id) for job_id in sorted(view.forgettable))
        return actions

    def _report(self, view: WhistleblowerView, report: OpenReport) -> Audit | Challenge | HoldChallenge | RequestWrap | DemandKey | Unreadable | None:
        if view.now >= report.window_end:
            return None  # closed: nothing to challenge any more
        if report.findings is None:
            pays = view.expected_per_audit >= self.config.audit_cost
            if not pays or audit_draw(view.secret, report.job_id, report.report_cid) >= self.config.audit_rate:
                return None  # not audited: nor is its key asked for or demanded (a demand holds the job)
            if report.sealed is not None and not report.sealed.held:
                return self._key(view, report, report.sealed)
            return Audit(report.job_id, report.report_cid, report.window_end, report.trace_root)
        pending = [f for f in challenge_order(report.findings) if f.key not in report.challenged]
        if not pending:
            return None
        needed = view.game_params.committee_size if view.game_params is not None else 0
        if not committee_seatable(report.referees, needed):
            return HoldChallenge(report.job_id, report.report_cid, report.referees, needed)
        return Challenge(report.job_id, report.report_cid, pending[0])

    def _key(self, view: WhistleblowerView, report: OpenReport, sealed: SealedReport) -> RequestWrap | DemandKey | Unreadable | None:
        """The key game of a sealed report we audit and cannot read yet: ask for a wrap once per key
        version of ours; demand the key ``key_grace_s`` after our request was mined (the watch's wrap lands
        first), or once half the challenge window is left, whichever comes first; a second demand at once
        (the wrap that answered the first did not open). Nothing before our key is registered (the contract
        wants one, and a wrap to another key is not ours to open) and nothing while a demand holds the job."""
        mine = self.config.encryption_key
        if mine is None:
            return Unreadable(report.job_id, report.report_cid, "no --encryption-key to open a wrap with")
        if sealed.demand_open or view.registered_key is None or view.registered_key.key != mine.public_key:
            return None
        if not sealed.live:
            return Unreadable(report.job_id, report.report_cid, "its key bond was forfeited: no wrap may be asked for, nor the key demanded")
        if sealed.demands >= MAX_DEMANDS:
            return Unreadable(report.job_id, report.report_cid, f"no wrap opened after our {sealed.demands} demands")
        if sealed.demands > 0:
            return DemandKey(report.job_id)
        if sealed.asked_at is None:
            return RequestWrap(report.job_id)
        due = min(sealed.asked_at + self.config.key_grace_s, report.window_end - sealed.window // 2)
        return DemandKey(report.job_id) if view.now >= due else None


#: Workers per lane (core.agent.Workers): one audit at a time, and two workers for the challenges and
#: moves that recompute a state (an opening, an answer), so that an audit never holds a game of ours.
LANES = {"audit": 1, "duty": 2}


def work(view: WhistleblowerView, action: WhistleblowerAction) -> Work | None:
    """How the loop runs ``action``: an audit, a challenge (its opening replays) and an answer at a
    midpoint on workers; every other transaction alone in the loop (None)."""
    windows = {r.job_id: r.window_end for r in view.reports}
    match action:
        case Audit(job_id, _, window_end):
            return Work("audit", group=f"audit:{job_id}", due_in_s=window_end - view.now)
        case Challenge(job_id):
            return Work("duty", due_in_s=windows[job_id] - view.now if job_id in windows else None)
        case GameMove(_, Action.ANSWER_MIDPOINT):
            return Work("duty")
    return None
