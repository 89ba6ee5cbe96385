"""Pure helpers for the dispute game's clients (verifier, whistleblower, solver, referees).

No I/O here: the chain is read through :class:`core.contracts.DisputeGame`, training states
come from the proofs engine; these functions turn one into the other's arguments::

    from core.dispute import opening, next_turn, isolated_step, vote_commitment, derive_salt

    # challenger: segment j of a committed trace (hashes and tree from the solver's manifest)
    args = opening(manifest.state_hashes, manifest.tree(), j, spec.checkpoint_interval)
    game_id, receipt = proto.game.open(job_id, *args.call_args())

    # whistleblower: probe i of a passing report (its seal and probes read from the chain)
    seal, probes = proto.market.sealed_report(job_id)
    args = opening_on_report(seal, probes[i], ProbeTree(probes).proof(i), manifest.state_hashes, manifest.tree())
    game_id, receipt = proto.game.open_on_report(job_id, *args.call_args())

    # everyone: what the game waits for, from whom, until when
    turn = next_turn(proto.game.get_game(game_id), params, now=client.timestamp(), block=client.block_number())
    if turn.action is Action.POST_MIDPOINT:          # solver
        step = global_step(game, spec.checkpoint_interval, turn.step)   # proofs.state_at(..., step)
    move = party_move(game, params, now, block, Actor.CHALLENGER)   # a party's call now, if any

    # referee: the isolated step and its vote
    task = isolated_step(game, spec.checkpoint_interval, manifest.checkpoint_cids)
    salt = derive_salt(my_secret, game_id)            # re-derivable after a restart
    proto.game.commit_vote(game_id, vote_commitment(game_id, defender_right, salt, me.address))
    proto.game.reveal_vote(game_id, defender_right, salt)

In a REPORT game (``Game.on_report``) the job's verifier defends its probe state (``Game.defender``), so ``Actor.SOLVER`` and a ``DEFENDER_WON`` status name the verifier there. The game
bisects from checkpoint ``segment`` (agreed) to the probe's step ``steps`` (disputed), so the
global step of a position is ``segment * k + step`` as in any game.

The formulas mirror ``contracts/DisputeGame.sol`` and ``contracts/libraries/LibPosition.sol``;
``tests/dispute`` checks them against the deployed contract.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol as Structural

from eth_abi import encode as abi_encode
from eth_utils import keccak, to_checksum_address

from core.chain import Address
from core.cid import Cid, digest_to_cid
from core.contracts import Bytes32, Game, GameId, GameParams, GameStatus, ReportSeal
from core.errors import VeritrainError
from core.probe import Probe

__all__ = [
    "DisputeError",
    "ProofSource",
    "Opening",
    "opening",
    "ReportOpening",
    "opening_on_report",
    "Action",
    "Actor",
    "Turn",
    "next_turn",
    "party_move",
    "midpoint",
    "max_moves",
    "global_step",
    "IsolatedStep",
    "isolated_step",
    "vote_commitment",
    "committed_vote",
    "derive_salt",
    "winner",
    "ZERO32",
]

ZERO32 = Bytes32(b"\x00" * 32)
_SALT_DOMAIN = b"veritrain/referee-vote-salt/v1"


class DisputeError(VeritrainError):
    """Arguments that cannot make a valid dispute move (wrong segment, malformed hash, ...)."""

    exit_code = 2


class ProofSource(Structural):
    """A trace tree that hands out Merkle proofs by checkpoint index (``proofs.TraceTree``)."""

    def proof(self, position: int) -> Sequence[Bytes32]: ...


def _bytes32(value: bytes | str, what: str) -> Bytes32:
    if isinstance(value, str):
        text = value[2:] if value.startswith(("0x", "0X")) else value
        try:
            raw = bytes.fromhex(text)
        except ValueError:
            raise DisputeError(f"{what} is not hex: {value!r}") from None
    else:
        raw = bytes(value)
    if len(raw) != 32:
        raise DisputeError(f"{what} must be 32 bytes, got {len(raw)}")
    return Bytes32(raw)


# ------------------------------------------------------------------ opening (level 1)


@dataclass(frozen=True)
class Opening:
    """The arguments of ``DisputeGame.open`` after the job id."""

    segment: int
    steps: int
    start_hash: Bytes32
    start_proof: tuple[Bytes32, ...]
    end_hash: Bytes32
    end_proof: tuple[Bytes32, ...]

    def call_args(self) -> tuple[int, int, Bytes32, list[Bytes32], Bytes32, list[Bytes32]]:
        """``(segment, steps, startHash, startProof, endHash, endProof)`` for ``game.open(job_id, *args)``."""
        return self.segment, self.steps, self.start_hash, list(self.start_proof), self.end_hash, list(self.end_proof)


def opening(state_hashes: Sequence[Bytes32], tree: ProofSource, segment: int, checkpoint_interval: int) -> Opening:
    """Open segment ``segment`` (checkpoint j -> j + 1) of a trace of ``len(state_hashes) - 1``
    segments of ``checkpoint_interval`` steps: both ends and their proofs from the solver's tree.

    ``steps`` is the spec's k (every proofs-engine segment has exactly k steps); the contract
    cannot read the spec, and referees rule for the solver if it is not the spec's k.
    """
    segments = len(state_hashes) - 1
    if not 0 <= segment < segments:
        raise DisputeError(f"segment {segment} is not in 0..{segments - 1} (a trace of {len(state_hashes)} checkpoints)")
    if checkpoint_interval < 1:
        raise DisputeError(f"a segment has at least one step, got checkpoint interval {checkpoint_interval}")
    return Opening(
        segment=segment,
        steps=checkpoint_interval,
        start_hash=state_hashes[segment],
        start_proof=tuple(tree.proof(segment)),
        end_hash=state_hashes[segment + 1],
        end_proof=tuple(tree.proof(segment + 1)),
    )


@dataclass(frozen=True)
class ReportOpening:
    """The arguments of ``DisputeGame.openOnReport`` after the job id (flattened as
    :meth:`core.contracts.DisputeGame.open_on_report` takes them)."""

    seal: ReportSeal
    index: int
    segment: int
    step: int
    state_hash: Bytes32
    proof: tuple[Bytes32, ...]
    start_hash: Bytes32
    start_proof: tuple[Bytes32, ...]

    def call_args(self) -> tuple[ReportSeal, int, int, int, Bytes32, list[Bytes32], Bytes32, list[Bytes32]]:
        """``(seal, index, segment, step, stateHash, proof, startHash, startProof)`` for
        ``game.open_on_report(job_id, *args)``."""
        return (
            self.seal, self.index, self.segment, self.step, self.state_hash, list(self.proof), self.start_hash, list(self.start_proof)
        )  # fmt: skip


def opening_on_report(seal: ReportSeal | None, probe: Probe, proof: Sequence[Bytes32], state_hashes: Sequence[Bytes32], tree: ProofSource) -> ReportOpening:
    """Dispute ``probe`` of a passing report: the verifier's probe and its ``proof`` from the
    report's probe tree, the agreed start (checkpoint ``segment``) from the solver's trace.

    ``seal`` is the job's (``MarketWatcher.seal``; None means there is no report to dispute). The
    contract checks the probe against the seal and the start against the trace root; the probe's
    step must be inside the segment (1..maxSegmentSteps on chain, 1..k by the spec).
    """
    if seal is None:
        raise DisputeError("the job has no report of its current verifier to dispute")
    index = probe.index
    segments = len(state_hashes) - 1
    if not 0 <= probe.segment < segments:
        raise DisputeError(f"probe {index} is on segment {probe.segment}, not in 0..{segments - 1}")
    if probe.step < 1:
        raise DisputeError(f"probe {index} is at step {probe.step}: a report game needs at least one step")
    return ReportOpening(
        seal=seal,
        index=index,
        segment=probe.segment,
        step=probe.step,
        state_hash=probe.state_hash,
        proof=tuple(proof),
        start_hash=state_hashes[probe.segment],
        start_proof=tuple(tree.proof(probe.segment)),
    )


# ------------------------------------------------------------------ bisection (level 2)


def midpoint(lo: int, hi: int) -> int:
    """``LibPosition.midpoint``: the step whose state the solver posts next."""
    return lo + (hi - lo) // 2


def max_moves(steps: int) -> int:
    """``LibPosition.maxMoves``: ceil(log2 steps), the most answers a segment of ``steps`` takes."""
    if steps < 1:
        raise DisputeError(f"a segment has at least one step, got {steps}")
    return (steps - 1).bit_length()


def global_step(game: Game, checkpoint_interval: int, step: int) -> int:
    """The training step (from the job's start) of ``step`` steps into the game's segment:
    the argument of ``proofs.state_at`` for a midpoint, or the referee's pre-state step."""
    if not 0 <= step <= game.steps:
        raise DisputeError(f"step {step} is outside the game's segment of {game.steps} steps")
    return game.segment * checkpoint_interval + step


class Actor(StrEnum):
    SOLVER = "solver"
    CHALLENGER = "challenger"
    REFEREES = "referees"
    ANYONE = "anyone"
    NOBODY = "nobody"


class Action(StrEnum):
    POST_MIDPOINT = "postMidpoint"
    ANSWER_MIDPOINT = "answerMidpoint"
    TIMEOUT_CLOCK = "timeoutClock"
    DRAW_COMMITTEE = "drawCommittee"
    COMMIT_VOTE = "commitVote"
    REVEAL_VOTE = "revealVote"
    SETTLE = "settle"
    NONE = "none"


@dataclass(frozen=True)
class Turn:
    """What a game waits for at time ``now``: ``action`` by ``actor``.

    ``ready_at`` is the first unix second the call can succeed (and ``ready_block`` the first
    block, for the committee draw); ``deadline`` the last unix second it can (None: no deadline;
    the call that follows then becomes possible). ``step`` is the midpoint of a bisection move.
    """

    action: Action
    actor: Actor
    ready_at: int
    deadline: int | None = None
    ready_block: int | None = None
    step: int | None = None


def next_turn(game: Game, params: GameParams, now: int, block: int | None = None) -> Turn:
    """Who must move next and by when, exactly as the contract's checks decide at ``now``
    (``block``: the latest block number, for the committee draw's readiness). ``Actor.SOLVER`` is
    the defender, ``Game.defender``: the job's verifier in a report game."""
    s = game.status
    if s.final or s is GameStatus.NONE:
        return Turn(Action.NONE, Actor.NOBODY, ready_at=now)
    if s.bisecting:
        solver = s is GameStatus.DEFENDER_TO_MOVE
        expires_at = game.last_move_at + (game.defender_clock if solver else game.challenger_clock)
        if now > expires_at:  # timeoutClock: block.timestamp > expiresAt
            return Turn(Action.TIMEOUT_CLOCK, Actor.ANYONE, ready_at=now)
        return Turn(
            Action.POST_MIDPOINT if solver else Action.ANSWER_MIDPOINT,
            Actor.SOLVER if solver else Actor.CHALLENGER,
            ready_at=now,
            deadline=expires_at,  # a move reverts ClockRanOut once now - lastMoveAt > clock
            step=midpoint(game.lo, game.hi),
        )
    if s is GameStatus.ISOLATED:
        draw_deadline = game.last_move_at + params.draw_window
        if now > draw_deadline:
            return Turn(Action.SETTLE, Actor.ANYONE, ready_at=now)
        ready_block = game.anchor_block + 2  # seed blockhash(anchor + 1) must exist
        return Turn(Action.DRAW_COMMITTEE, Actor.ANYONE, ready_at=now, deadline=draw_deadline, ready_block=ready_block)
    # Arbitrating: game.deadline is the end of the commit phase
    commit_end = game.deadline
    reveal_end = commit_end + params.reveal_window
    size = params.committee_size
    all_committed = game.commits >= size
    all_revealed = game.votes_defender_right + game.votes_defender_wrong >= size
    if now <= commit_end and not all_committed:
        return Turn(Action.COMMIT_VOTE, Actor.REFEREES, ready_at=now, deadline=commit_end)
    if now <= reveal_end and not all_revealed:
        return Turn(Action.REVEAL_VOTE, Actor.REFEREES, ready_at=now, deadline=reveal_end)
    return Turn(Action.SETTLE, Actor.ANYONE, ready_at=now)


def party_move(game: Game, params: GameParams, now: int, block: int, party: Actor) -> Action | None:
    """The call a party of ``game`` makes now, if any (``party``: ``Actor.SOLVER``, the defender, or
    ``Actor.CHALLENGER``): its own bisection move, or a permissionless call that pays it (time the
    other side out, draw the committee, settle), at once since each does. Never a timeout of its
    own clock (the other side's business) and never a vote (parties are not seated)."""
    turn = next_turn(game, params, now, block)
    match turn.action:
        case Action.POST_MIDPOINT | Action.ANSWER_MIDPOINT:
            return turn.action if turn.actor is party else None
        case Action.TIMEOUT_CLOCK:
            out_of_time = Actor.SOLVER if game.status is GameStatus.DEFENDER_TO_MOVE else Actor.CHALLENGER
            return turn.action if out_of_time is not party else None
        case Action.DRAW_COMMITTEE:
            assert turn.ready_block is not None
            return turn.action if block >= turn.ready_block else None
        case Action.SETTLE:
            return turn.action  # next_turn says SETTLE only once the contract accepts it
        case _:
            return None


# ------------------------------------------------------------------ arbitration (level 3)


@dataclass(frozen=True)
class IsolatedStep:
    """The one step a referee re-executes: from the agreed state at ``step`` of the segment
    (``pre_hash``, stored at ``pre_cid``) to the solver's claimed ``post_hash``."""

    segment: int
    step: int
    global_step: int
    """Training steps done by the pre-state (its checkpoint's ``step``)."""
    pre_hash: Bytes32
    pre_cid: Cid
    post_hash: Bytes32


def isolated_step(game: Game, checkpoint_interval: int, checkpoint_cids: Sequence[str]) -> IsolatedStep:
    """The isolated step of a game in Isolated or Arbitrating. A zero pre-state CID on chain means
    the pre-state is checkpoint j itself, whose CID is in the manifest (``checkpoint_cids``): in a
    report game too, which starts from the solver's checkpoint j (the defender's ``post_hash`` is
    then the verifier's state, and ``defender_right`` in the vote means "the defender is right")."""
    if game.status not in (GameStatus.ISOLATED, GameStatus.ARBITRATING) and not (game.status.final and game.hi - game.lo == 1):
        raise DisputeError(f"game is {game.status.name}: no step isolated yet")
    if bytes(game.agreed_cid) == ZERO32:
        if not 0 <= game.segment < len(checkpoint_cids):
            raise DisputeError(f"no checkpoint CID for segment {game.segment} in {len(checkpoint_cids)} CIDs")
        pre_cid = Cid(checkpoint_cids[game.segment])
    else:
        pre_cid = digest_to_cid(bytes(game.agreed_cid))
    return IsolatedStep(
        segment=game.segment,
        step=game.lo,
        global_step=global_step(game, checkpoint_interval, game.lo),
        pre_hash=Bytes32(bytes(game.agreed_hash)),
        pre_cid=pre_cid,
        post_hash=Bytes32(bytes(game.disputed_hash)),
    )


def vote_commitment(game_id: GameId | int, defender_right: bool, salt: bytes | str, referee: str) -> Bytes32:
    """``keccak256(abi.encode(gameId, defenderRight, salt, referee))``, what ``revealVote`` checks."""
    encoded = abi_encode(
        ["uint256", "bool", "bytes32", "address"],
        [int(game_id), bool(defender_right), _bytes32(salt, "salt"), to_checksum_address(referee)],
    )
    return Bytes32(keccak(encoded))


def committed_vote(commitment: bytes, case_id: GameId | int, salt: bytes, member: str) -> bool | None:
    """The vote ``commitment`` holds under ``salt``: True or False, None when neither matches (the salt
    secret was lost). The formula is :func:`vote_commitment`'s, which the AvailabilityCourt's and
    DilocoJobs' ballots share (``core.contracts.court_commitment``), so one reveal serves all three."""
    return next((vote for vote in (True, False) if vote_commitment(case_id, vote, salt, member) == bytes(commitment)), None)


def derive_salt(secret: bytes, game_id: GameId | int) -> Bytes32:
    """A vote salt a referee can re-derive after a restart from one ``secret`` it keeps (at least
    32 random bytes, never published): keccak256(domain || secret || gameId). Salts of different
    games are unrelated to anyone without the secret."""
    if len(secret) < 32:
        raise DisputeError(f"a salt secret needs at least 32 bytes, got {len(secret)}")
    return Bytes32(keccak(_SALT_DOMAIN + bytes(secret) + int(game_id).to_bytes(32, "big")))


def winner(game: Game) -> Address | None:
    """The winner of a settled game (None while it runs or if Undecided)."""
    if game.status is GameStatus.DEFENDER_WON:
        return game.defender
    if game.status is GameStatus.CHALLENGER_WON:
        return game.challenger
    return None
