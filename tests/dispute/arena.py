"""A dispute arena on a real anvil: real contracts, real training states, real content ids.

:class:`TrainedJob` is one tiny job trained by the proofs engine, with every intermediate state
of its steps (``proofs.state_at``) and, for any step ``b`` of the disputed segment, a cheating
solver's states that go wrong at step ``b`` only (a perturbed state there, honest training from
it afterwards), so the bisection has one real divergence.

:class:`Arena` plays parties against each other through the typed client (``core.contracts``)
and the pure helpers (``core.dispute``): job set-up to Verified (a whistleblower challenges) or
Disputed (a failing verifier challenges), a passing report committing to probes of the verifier's
states (honest, lazy or forced), opening (on a segment, or on a probe: a report game with the
verifier as the defender), bisection with per-move strategies, the
committee draw, referees re-executing the isolated step with ``proofs.execute_step`` and voting
by commit-reveal, and settlement; it books every party's wealth so tests check conservation
and exact payouts.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from core.chain import Address, Receipt, Signer
from core.cid import Cid, cid_to_digest
from core.contracts import Bytes32, Game, GameId, GameParams, GameStatus, JobId, JobState, Protocol, Role, TokenAmount
from core.dispute import Action, derive_salt, isolated_step, next_turn, opening, opening_on_report, vote_commitment
from core.reverts import revert_class
from core.storage.local import LocalStore
from deploy.devnet import Devnet
from proofs.checkpoint import decode_checkpoint, encode_checkpoint, state_hash
from proofs.data import Dataset, load_dataset
from proofs.datasets import reference_job
from proofs.merkle import TraceTree
from proofs.probes import Probe, ProbeTree, probe_positions
from proofs.spec import JobSpec
from proofs.steps import execute_step, state_at
from proofs.train import Trainer

VERI = 10**18
REWARD = 100 * VERI
FEE = 10 * VERI
STEPS, K = 32, 16  # two segments of k = 16 steps: 4 bisection moves
SEGMENT = 1  # the disputed segment (checkpoint 1 -> 2)
MAX_STATE_BYTES = 1 << 20

ClockRanOut = revert_class("ClockRanOut")

# Per-move strategies. Challenger: "truth" answers agree iff the posted state is the true one;
# "lie" answers the opposite; "agree" / "disagree" always; "slow" tells the truth after spending a
# third of its clock; "late" tries after its clock ran out (reverts ClockRanOut, then anyone
# times it out); "silent" never answers. Solver: "trace" posts its own trace's state (honest or
# cheating), "honest" the true state, "random" a made-up state, "slow", "late", "silent" as above.
CHALLENGER_MOVES = ("truth", "lie", "agree", "disagree", "slow", "late", "silent")
SOLVER_MOVES = ("trace", "honest", "random", "slow", "late", "silent")


def _tamper(data: bytes, spec: JobSpec) -> bytes:
    """The same state with one parameter moved by 1e-3: a wrong result of one training step."""
    ckpt = decode_checkpoint(data, expect_spec=spec.spec_hash())
    tensors = {k: v.clone() for k, v in ckpt.tensors.items()}
    first = sorted(k for k in tensors if k.startswith("param."))[0]
    tensors[first].view(-1)[0] += 1e-3
    return encode_checkpoint(ckpt.step, tensors, spec.spec_hash())


@dataclass(eq=False)  # hashed by identity: cheating() caches per instance
class TrainedJob:
    """A tiny reference job, every state of its training, and cheating variants of segment 1."""

    spec: JobSpec
    dataset: Dataset
    honest: tuple[bytes, ...]  # honest[s] = state after s steps, s = 0..STEPS

    @classmethod
    def train(cls) -> TrainedJob:
        job = reference_job("mlp-spirals", steps=STEPS, checkpoint_interval=K)
        spec = job.spec("QmWvQxBLsmXh3mxoVLPKhshqDfK8Ydj2ZVTqKQ3pL8n1z4")
        dataset = load_dataset(spec, job.dataset)
        states = [Trainer(spec, dataset).to_bytes()]  # state 0: the seeded initialization
        for step in range(1, STEPS + 1):
            states.append(state_at(spec, dataset, states[-1], step))
        return cls(spec, dataset, tuple(states))

    def checkpoints(self, states: Sequence[bytes]) -> list[bytes]:
        return [states[i * K] for i in range(STEPS // K + 1)]

    @functools.cache  # noqa: B019 - one TrainedJob per test module, a handful of variants
    def cheating(self, bad: int) -> tuple[bytes, ...]:
        """A solver's states that are wrong from step ``bad`` of segment 1 on (1 <= bad <= K):
        the transition ``bad - 1 -> bad`` is the only wrong one, training is honest after it."""
        assert 1 <= bad <= K
        first_bad = SEGMENT * K + bad
        states = list(self.honest[:first_bad])
        states.append(_tamper(self.honest[first_bad], self.spec))
        for step in range(first_bad + 1, STEPS + 1):
            states.append(state_at(self.spec, self.dataset, states[-1], step))
        return tuple(states)


@dataclass
class Played:
    """The record of one dispute: its game, the gas of each call, the final state."""

    job_id: JobId
    game_id: GameId
    by_verifier: bool
    gas: list[tuple[str, int]] = field(default_factory=list)
    game: Game | None = None
    silent_referees: int = 0
    majority_referees: int = 0


class Arena:
    """Parties on one devnet: submitter, solver, whistleblower, four verifiers (one is drawn for
    the job, the other three form every committee), an outsider who calls permissionless steps."""

    def __init__(self, net: Devnet, store: LocalStore, trained: TrainedJob) -> None:
        self.net, self.store, self.trained = net, store, trained
        (self.submitter, self.solver, self.whistleblower, *self.verifiers, self.outsider) = net.accounts[:8]
        self.by_address = {s.address: s for s in net.accounts}
        self.base = net.protocol()
        self.params: GameParams = self.base.game.params()
        self.market_params = self.base.market.params()
        self.salt_secret = os.urandom(32)
        self.probes: dict[JobId, ProbeTree] = {}

    # -------------------------------------------------------------- set-up

    def proto(self, signer: Signer) -> Protocol:
        return self.net.protocol(signer)

    def stake_everyone(self) -> None:
        """Stakes once (then snapshot): solver, whistleblower, four verifiers; approvals for the game."""
        stakes = self.base.stakes
        for signer, role, amount in [
            (self.solver, Role.SOLVER, 200 * VERI),
            (self.whistleblower, Role.WHISTLEBLOWER, 100 * VERI),
            *[(v, Role.VERIFIER, 200 * VERI) for v in self.verifiers],
        ]:
            p = self.proto(signer)
            p.token.approve(stakes.address, amount)
            p.stakes.stake(role, amount)
        for signer in (self.submitter, self.whistleblower, *self.verifiers):
            self.proto(signer).token.approve(self.base.game.address, 10**6 * VERI)
        self.proto(self.submitter).token.approve(self.base.market.address, 10**6 * VERI)

    def wealth(self) -> dict[str, int]:
        """Tokens + stakes + credits in the game of every account, and the escrow the market and the
        game hold (the StakeManager's tokens are the stakes: checked equal to their sum, counted once;
        the game's credits are its payees': checked equal to their sum, counted once)."""
        token, stakes, game = self.base.token, self.base.stakes, self.base.game
        accounts = [self.net.deployer, *self.net.accounts]
        staked = {s.address: sum(stakes.stake_of(s.address, r).staked for r in Role) for s in accounts}
        assert token.balance_of(stakes.address) == sum(staked.values()), "StakeManager holds exactly the stakes"
        credits = {s.address: game.credit(s.address) for s in accounts}
        assert game.total_credit() == sum(credits.values()), "the game's credits are the accounts'"
        out: dict[str, int] = {s.address: token.balance_of(s.address) + staked[s.address] + credits[s.address] for s in accounts}
        out["JobMarket"] = token.balance_of(self.base.market.address)
        out["DisputeGame"] = token.balance_of(game.address) - game.total_credit()
        return out

    def commit_job(
        self,
        states: Sequence[bytes],
        *,
        by_verifier: bool,
        probe_hash: Callable[[int, int, int], Bytes32] | None = None,
    ) -> tuple[JobId, Signer, list[Cid]]:
        """Post, claim, commit the trace of ``states``, draw the verifier and report: pass (a
        whistleblower will challenge) or fail (the verifier challenges). Returns the job, the
        challenger and the checkpoint CIDs.

        A pass commits to the probes its draw fixes (``self.probes[job_id]``), each the state hash
        ``probe_hash(index, segment, step)``: by default the true one, from the honest training."""
        checkpoints = self.trained.checkpoints(states)
        cids = [self.store.put(c) for c in checkpoints]
        hashes = [state_hash(c) for c in checkpoints]
        tree = TraceTree(hashes)
        submitter = self.proto(self.submitter)
        job_id, _ = submitter.market.post_job(b"\x01" * 32, REWARD, FEE, 600)
        solver = self.proto(self.solver)
        solver.market.claim(job_id)
        solver.market.commit(job_id, tree.root, len(hashes), cid_to_digest(cids[-1]), b"\x02" * 32)
        self.net.chain.mine(2)
        receipt = self.proto(self.outsider).market.assign_verifier(job_id)
        (assigned,) = self.base.market.decode_events(receipt, "VerifierAssigned")
        verifier = self.by_address[assigned.args["verifier"]]
        published: list[Probe] = []  # a fail publishes no probes
        if not by_verifier:
            truth = probe_hash or (lambda _i, segment, step: state_hash(self.trained.honest[segment * K + step]))
            positions = probe_positions(assigned.args["assignSeed"], self.market_params.probe_count, len(hashes), K)
            self.probes[job_id] = ProbeTree([Probe(i, seg, m, truth(i, seg, m)) for i, seg, m in positions])
            published = sorted(self.probes[job_id].probes, key=lambda p: p.index)
        seal = (assigned.args["assignSeed"], assigned.args["forcedCommitment"])
        self.proto(verifier).market.report(job_id, not by_verifier, b"\x03" * 32, *seal, published)
        return job_id, (verifier if by_verifier else self.whistleblower), cids

    # -------------------------------------------------------------- the game

    def open(self, job_id: JobId, challenger: Signer, states: Sequence[bytes]) -> Played:
        hashes = [state_hash(c) for c in self.trained.checkpoints(states)]
        args = opening(hashes, TraceTree(hashes), SEGMENT, K)
        game_id, receipt = self.proto(challenger).game.open(job_id, *args.call_args())
        out = Played(job_id, game_id, challenger.address != self.whistleblower.address)
        out.gas.append(("open", receipt.gas_used))
        return out

    def open_on_report(self, job_id: JobId, index: int, states: Sequence[bytes]) -> Played:
        """The whistleblower disputes probe ``index`` of the job's passing report (a report game:
        the job's verifier defends), its start proven against the trace of ``states``."""
        hashes = [state_hash(c) for c in self.trained.checkpoints(states)]
        seal = self.base.market.seal_of(job_id, self.net.book.deploy_block)
        args = opening_on_report(seal, self.probes[job_id].probe(index), self.probes[job_id].proof(index), hashes, TraceTree(hashes))
        game_id, receipt = self.proto(self.whistleblower).game.open_on_report(job_id, *args.call_args())
        out = Played(job_id, game_id, by_verifier=False)
        out.gas.append(("openOnReport", receipt.gas_used))
        return out

    def _spend_then(self, side_left: int, fraction: float) -> None:
        if side_left > 2:
            self.net.chain.increase_time(int(side_left * fraction))

    def _run_out(self, game_id: GameId, challenger_side: bool) -> None:
        defender_left, challenger_left = self.base.game.clocks(game_id)
        self.net.chain.increase_time((challenger_left if challenger_side else defender_left) + 1)

    def bisect(
        self,
        played: Played,
        solver_states: Sequence[bytes],
        solver_moves: Callable[[int], str],
        challenger_moves: Callable[[int], str],
    ) -> Played:
        """Plays the bisection until isolation or a clock expiry; move i of each side uses its
        strategy ``*_moves(i)``. The true states are the honest training's. The "solver" side is
        the game's defender (the job's verifier in a report game), ``solver_states`` its states."""
        game_api = self.base.game
        opened = game_api.get_game(played.game_id)
        solver = self.proto(self.by_address[opened.defender]).game
        challenger = self.proto(self.by_address[opened.challenger]).game
        honest = self.trained.honest
        base_step = opened.segment * K
        move = 0
        while True:
            game = game_api.get_game(played.game_id)
            turn = next_turn(game, self.params, self.net.client.timestamp())
            if not game.status.bisecting:
                return played
            assert turn.step is not None
            step = base_step + turn.step
            if game.status is GameStatus.DEFENDER_TO_MOVE:
                how = solver_moves(move)
                if how == "slow":
                    self._spend_then(game_api.clocks(played.game_id)[0], 1 / 3)
                if how in ("silent", "late"):
                    self._run_out(played.game_id, challenger_side=False)
                    if how == "late":
                        try:
                            solver.post_midpoint(played.game_id, b"\x07" * 32, b"\x00" * 32)
                            raise AssertionError("a late move must revert")
                        except ClockRanOut:
                            pass
                    self._record(played, "timeoutClock", self.proto(self.outsider).game.timeout_clock(played.game_id))
                    return played
                if how == "random":
                    data = os.urandom(32)
                    posted, cid = state_hash(data), b"\x00" * 31 + b"\x01"
                else:
                    data = honest[step] if how == "honest" else solver_states[step]
                    posted, cid = state_hash(data), cid_to_digest(self.store.put(data))
                self._record(played, "postMidpoint", solver.post_midpoint(played.game_id, posted, cid))
            else:
                how = challenger_moves(move)
                move += 1
                if how == "slow":
                    self._spend_then(game_api.clocks(played.game_id)[1], 1 / 3)
                if how in ("silent", "late"):
                    self._run_out(played.game_id, challenger_side=True)
                    if how == "late":
                        try:
                            challenger.answer_midpoint(played.game_id, True)
                            raise AssertionError("a late move must revert")
                        except ClockRanOut:
                            pass
                    self._record(played, "timeoutClock", self.proto(self.outsider).game.timeout_clock(played.game_id))
                    return played
                truth = game.mid_hash == state_hash(honest[step])
                agree = {"truth": truth, "slow": truth, "lie": not truth, "agree": True, "disagree": False}[how]
                self._record(played, "answerMidpoint", challenger.answer_midpoint(played.game_id, agree))

    def arbitrate(self, played: Played, cids: Sequence[str], silent: Sequence[bool] = (False, False, False)) -> Played:
        """Draws the committee; each referee fetches the agreed state, runs the one step with the
        proofs engine and votes by commit-reveal (``silent[i]``: referee i never commits)."""
        game_api = self.base.game
        game = game_api.get_game(played.game_id)
        if game.status is not GameStatus.ISOLATED:
            return played
        turn = next_turn(game, self.params, self.net.client.timestamp(), self.net.client.block_number())
        assert turn.action is Action.DRAW_COMMITTEE and turn.ready_block is not None
        self.net.chain.mine(max(0, turn.ready_block - self.net.client.block_number()))
        self._record(played, "drawCommittee", self.proto(self.outsider).game.draw_committee(played.game_id))
        committee = game_api.committee(played.game_id)
        game = game_api.get_game(played.game_id)
        task = isolated_step(game, K, cids)
        votes: dict[Address, tuple[bool, Bytes32]] = {}
        for i, referee in enumerate(committee):
            if silent[i % len(silent)]:
                played.silent_referees += 1
                continue
            pre = self.store.get(task.pre_cid, MAX_STATE_BYTES)
            assert state_hash(pre) == task.pre_hash, "the agreed state is what the CID holds"
            assert decode_checkpoint(pre).step == task.global_step
            after = execute_step(self.trained.spec, self.trained.dataset, pre)
            defender_right = state_hash(after) == task.post_hash
            salt = derive_salt(self.salt_secret + referee.encode(), played.game_id)
            votes[referee] = (defender_right, salt)
            commitment = vote_commitment(played.game_id, defender_right, salt, referee)
            self._record(played, "commitVote", self.proto(self.by_address[referee]).game.commit_vote(played.game_id, commitment))
        if len(votes) < len(committee):
            self.net.chain.increase_time(self.params.commit_window + 1)
        for referee, (defender_right, salt) in votes.items():
            self._record(played, "revealVote", self.proto(self.by_address[referee]).game.reveal_vote(played.game_id, defender_right, salt))
        if len(votes) < len(committee):
            self.net.chain.increase_time(self.params.reveal_window + 1)
        self._record(played, "settle", self.proto(self.outsider).game.settle(played.game_id))
        right = sum(v for v, _ in votes.values())
        played.majority_referees = max(right, len(votes) - right)
        return played

    def finish(self, played: Played) -> Played:
        """Records the final game; a job back in Verified (challenge window resumed) is finalized."""
        played.game = self.base.game.get_game(played.game_id)
        job = self.base.market.get_job(played.job_id)
        if job.state is JobState.VERIFIED:
            self.net.chain.travel_to(max(job.deadline + 1, self.net.client.timestamp() + 1))
            self._record(played, "finalize", self.proto(self.outsider).market.finalize(played.job_id))
        return played

    @staticmethod
    def _record(played: Played, what: str, receipt: Receipt) -> None:
        played.gas.append((what, receipt.gas_used))

    # -------------------------------------------------------------- payouts the rules promise

    def expected_deltas(self, played: Played, verdict: bool) -> dict[str, int]:
        """Wealth changes of the solver, the challenger, the job verifier, each referee kind, per
        docs/dispute.md "Outcomes and payouts" (after the job was finalized or reopened)."""
        assert played.game is not None
        p, market = self.params, self.base.market
        s_bond, v_bond = market.solver_bond(REWARD), market.verifier_bond(REWARD)
        solver_won = played.game.status is GameStatus.DEFENDER_WON
        fees = p.referee_fee * played.majority_referees if verdict else 0
        referee_slashes = p.referee_bond * played.silent_referees
        if played.by_verifier:
            verifier_slashed = solver_won
        else:
            verifier_slashed = not solver_won and verdict
        incoming = referee_slashes + (v_bond if verifier_slashed else 0) + (0 if solver_won else s_bond)
        payout = p.challenge_bond + incoming - fees
        solver = REWARD + payout if solver_won else -s_bond
        challenger = -p.challenge_bond if solver_won else payout - p.challenge_bond
        verifier_delta = -v_bond if verifier_slashed else (FEE if solver_won else 0)
        if played.by_verifier:
            challenger += verifier_delta
        return {
            "solver": TokenAmount(solver),
            "challenger": TokenAmount(challenger),
            "verifier": TokenAmount(0 if played.by_verifier else verifier_delta),
            "majority_referee": TokenAmount(p.referee_fee if verdict else 0),
            "silent_referee": TokenAmount(-p.referee_bond),
        }
