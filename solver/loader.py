"""Reads what the solver policy needs, at one instant, into a frozen :class:`SolverView`.

The chain says which jobs are open and which are ours; the local records say how far
our work on each got. Specs of open jobs are fetched by CID and judged once
(:class:`solver.judge.SpecJudge`: spec, dataset, dry run, estimated training time), the
verdict cached in the records; a job whose spec cannot be run here, whose commit window
is shorter than its estimated training time, or whose worst-case regeneration under the disk budget
does not fit the availability window (``solver.retention.fits_budget``), is refused for good and logged once. A disputed job of
ours comes with its active game (``activeGame(job)``, ``getGame``), re-read every tick:
a restart mid-game loses nothing. Under a disk budget, a verifying job comes with the dropped
checkpoints its verifier's draw needs and those someone asked our gateway for. Our advert of capabilities is read each tick until it says
what we offer (the policy re-advertises while they differ), then no more. While a runnable job is
open, the other staked solvers' adverts (from the logs) and free stakes: the claim's turn.

Sealed jobs (docs/sealing.md), with an encryption key only (without one a sealed job is skipped, logged
once): our key in the KeyRegistry, read until it is ours; an Open sealed job's sealing, our data key
(``rolebase.keyring``: the records, else a wrap to us that opens to the committed hash) and, while we
hold none, whether our wrap request is on chain; a held one's entitled parties (its drawn verifier
while it verifies, the seated referees of a game on it), what was wrapped to them, their keys, and
its verifier's open demand. The judge is handed the data key we hold: a sealed dataset is judged
with it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from core.chain import Address
from core.cid import Cid, digest_to_cid
from core.contracts import (
    Capabilities,
    Game,
    GameId,
    GameParams,
    GameStatus,
    Job,
    JobId,
    JobState,
    MarketParams,
    Protocol,
    RegisteredKey,
    Role,
    SealingStatus,
    TokenAmount,
)
from rolebase.actions import credits_of
from rolebase.events import JOB_REFUSED
from rolebase.keyring import OwnKey, data_key
from rolebase.multiparty import MultipartyWatcher, RoundFit
from rolebase.watchers import LatestLogs, MarketWatcher, staked_rivals
from solver.judge import SpecJudge
from solver.policy import (
    HeldJob,
    OpenJob,
    Phase,
    Rival,
    SealedHeld,
    SealedOpen,
    SolverConfig,
    SolverView,
    SpecCheck,
    fits_flag,
    fits_window,
    same_offer,
)
from solver.retention import draw_checkpoints, fits_budget
from solver.state import SolverDb

log = logging.getLogger(__name__)

_HELD_STATES = frozenset(
    {JobState.CLAIMED, JobState.COMMITTED, JobState.VERIFYING, JobState.DATA_CHALLENGED, JobState.DATA_VOTE, JobState.VERIFIED, JobState.DISPUTED}
)
#: Where readers fetch our checkpoints off chain: a verifier, a whistleblower, an availability court's committee.
_SERVING = frozenset({JobState.VERIFYING, JobState.DATA_VOTE, JobState.VERIFIED})
#: Where the job's verifier replays it, so needs its data key: from its draw until its report.
_VERIFYING = frozenset({JobState.VERIFYING, JobState.DATA_CHALLENGED, JobState.DATA_VOTE})


class SolverLoader:
    def __init__(
        self,
        protocol: Protocol,
        watcher: MarketWatcher,
        db: SolverDb,
        judge: SpecJudge,
        me: Address,
        config: SolverConfig,
        offer: Capabilities | None = None,
        wanted: Callable[[], list[Cid]] = list,
        fits: Mapping[int, RoundFit] | None = None,
        forget: Callable[[int], None] = lambda _job: None,
    ) -> None:
        """``offer``: the capabilities this solver advertises (None: it advertises nothing); ``wanted``:
        the CIDs asked of our gateway that our store lacks since the last call (``LocalStore.take_wanted``);
        ``fits``: our verdicts on multi-party jobs' slots (``MultipartyDuty.fits``); ``forget``: told each
        multi-party job once it is Finished (``MultipartyDuty.forget``)."""
        self.wanted = wanted
        self._requested: dict[JobId, set[int]] = {}  # dropped checkpoints asked for, by job, until regenerated
        self.protocol = protocol
        self.offer = offer
        self.config = config
        self.watcher = watcher
        self.db = db
        self.judge = judge
        self.me = me
        self._advertised: Capabilities | None = None
        self._min_stake: TokenAmount | None = None
        self._game_params: GameParams | None = None
        self._market_params: MarketParams | None = None
        self._draws: dict[tuple[JobId, int], frozenset[int]] = {}  # (job, its deadline: one per draw and phase): the draw's checkpoints
        self._adverts = LatestLogs(protocol.stakes, "CapabilitiesAdvertised", "solver", protocol.book.deploy_block)
        self._own_key = OwnKey(protocol.keys, me, config.encryption_key)
        self.multiparty = MultipartyWatcher(protocol, me, fits=fits, finished=forget)
        self._unsealable: set[JobId] = set()  # sealed jobs skipped for want of an encryption key (logged once each)

    def load(self) -> SolverView:
        p = self.protocol
        moment, scan = self.watcher.read(self.db)
        now = moment.now
        if self._min_stake is None or self._game_params is None or self._market_params is None:
            self._min_stake = p.stakes.min_stake(Role.SOLVER)  # immutable: read once
            self._game_params = p.game.params()
            self._market_params = p.market.params()
        stake = p.stakes.stake_of(self.me, Role.SOLVER)
        records = {r.job_id: r for r in self.db.jobs()}
        wanted = set(self.wanted())
        claimed = self.db.claimed()

        registered = self._own_key.registered()
        open_jobs: list[OpenJob] = []
        held: list[HeldJob] = []
        self.judge.new_tick()
        for job_id, job in sorted(scan.jobs, key=lambda j: (-j[1].reward, j[0])):  # the budget of new judgements goes to the best paid
            if job.state is JobState.OPEN and now <= job.deadline:  # OPEN: deadline = claim by
                spec = self._judge(job_id, job)
                sealing = self._sealed_open(job_id, registered) if spec.sealed else None
                if spec.sealed and sealing is None:
                    continue  # no encryption key: no sealed job
                bond = p.market.solver_bond(job.reward)
                opened_at = job.deadline - self._market_params.open_window
                open_jobs.append(OpenJob(job_id, job.reward, bond, job.deadline, job.commit_window, spec, opened_at, sealing))
            elif job.state in _HELD_STATES and job.solver == self.me:
                record = records.get(job_id)
                if job.state is JobState.CLAIMED:
                    phase = record.phase if record is not None else Phase.CLAIMED
                else:
                    phase = Phase.COMMITTED
                ready = job.anchor_block + 2 if job.state is JobState.COMMITTED else 0  # the draw needs blockhash(anchor + 1)
                check = self.judge.check(self.watcher.spec_cid(job_id), self.db.data_key(job_id))  # from the records: judged before the claim
                train_s = check.train_s if job.state is JobState.CLAIMED else 0.0
                challenged = p.market.availability_challenge(job_id).item if job.state is JobState.DATA_CHALLENGED else None
                game_id, game, open_deadline = self._dispute(job_id, job)
                held.append(
                    HeldJob(
                        job_id,
                        job.state,
                        job.deadline,
                        ready,
                        phase,
                        game_id,
                        game,
                        open_deadline,
                        train_s=train_s,
                        challenged_item=challenged,
                        regenerate=self._regenerate(job_id, job),
                        requested=self._asked(job_id, job, wanted),
                        memory_bytes=check.memory_bytes,
                        sealing=self._sealed_held(job_id, job, game_id, game) if check.sealed else None,
                    )
                )
        held_ids = {h.job_id for h in held}
        self._requested = {j: asked for j, asked in self._requested.items() if j in held_ids}
        # an OPEN job on record is one we claimed after the view's block (confirmations) or whose claim was
        # rolled back: kept (a claim again keeps its progress), never forgotten until it is final or another's
        unclaimed = {job_id for job_id, job in scan.jobs if job.state is JobState.OPEN}
        return SolverView(
            now=now,
            block=moment.block,
            me=self.me,
            token_balance=p.token.balance_of(self.me),
            credits=credits_of(p, self.me),
            staked=stake.staked,
            free_stake=stake.free,
            min_stake=self._min_stake,
            open_jobs=tuple(open_jobs),
            held_jobs=tuple(held),
            forgettable=tuple(sorted({j for j in records if j not in held_ids and j not in unclaimed} | {JobId(j) for j in self.db.keyed_final()})),
            game_params=self._game_params,
            claims_made=len(claimed),
            advertised=self._advertised_now(),
            offer=self.offer,
            rivals=self._rivals(moment.block) if any(j.spec.runnable for j in open_jobs) else (),
            registered_key=registered,
            multiparty=self.multiparty.live(),
            multiparty_params=self.multiparty.params,
        )

    def _sealed_open(self, job_id: JobId, registered: RegisteredKey | None) -> SealedOpen | None:
        """An Open sealed job's key game for us; None without an encryption key (the job is skipped)."""
        key = self.config.encryption_key
        if key is None or registered is None:
            if job_id not in self._unsealable:
                self._unsealable.add(job_id)
                log.info("sealed job skipped: no --encryption-key to read its data with", extra={"job": job_id})
            return None
        sealed = self.protocol.sealed_jobs
        from_block = self.protocol.book.deploy_block
        active = sealed.sealing_of(job_id).status is SealingStatus.ACTIVE
        ours = registered.registered and registered.key == key.public_key
        if not (active and ours):
            return SealedOpen(active, ours, key_held=False, asked=False)
        if data_key(sealed, self.db, job_id, self.me, key, from_block) is not None:
            return SealedOpen(active, ours, key_held=True, asked=False)
        asked = any(r.party == self.me and r.key_version == registered.version for r in sealed.wrap_requests(job_id, from_block))
        return SealedOpen(active, ours, key_held=False, asked=asked)

    def _sealed_held(self, job_id: JobId, job: Job, game_id: GameId, game: Game | None) -> SealedHeld | None:
        """A held sealed job's key game, read only while someone is entitled to a wrap from us (its
        verifier while it verifies, the referees seated on a game on it) or its verifier demands the
        key; None otherwise, or without an encryption key."""
        key = self.config.encryption_key
        if key is None:
            return None
        p = self.protocol
        entitled = [job.verifier] if job.state in _VERIFYING else []
        if game is not None and game.status is GameStatus.ARBITRATING:  # the committee is drawn: its referees replay a step
            entitled += p.game.committee(game_id)
        demand = p.sealed_jobs.demand_of(job_id) if job.state is JobState.DATA_VOTE else None  # a demand holds the job there
        if demand is not None and not (demand.open and demand.verifying and demand.party == job.verifier):
            demand = None  # a whistleblower's demand is the submitter's to answer
        if not entitled and demand is None:
            return None
        from_block = p.book.deploy_block
        held = data_key(p.sealed_jobs, self.db, job_id, self.me, key, from_block) is not None
        registered = {party: p.keys.key_of(party) for party in dict.fromkeys(entitled)}
        return SealedHeld(held, tuple(entitled), p.sealed_jobs.wrapped(job_id, from_block), registered, demand)

    def _rivals(self, block: int) -> tuple[Rival, ...]:
        """The other solvers that advertised (the latest :data:`~rolebase.watchers.MAX_RIVALS`) and hold
        the minimum stake: what a claim's turn needs (``solver.policy.claim_turn``)."""
        if self._min_stake is None:
            return ()
        rivals = staked_rivals(self._adverts, self.me, Role.SOLVER, self._min_stake, block)
        return tuple(Rival(solver, int(advert.args["maxSteps"]), int(advert.args["flops"]), stake.free) for solver, advert, stake in rivals)

    def _advertised_now(self) -> Capabilities | None:
        """Our advert on chain: read until it says what we offer, then kept (only our key changes it)."""
        if self.offer is None:
            return None
        if self._advertised is None or not same_offer(self._advertised, self.offer):
            self._advertised = self.protocol.stakes.capabilities_of(self.me)
        return self._advertised

    def _judge(self, job_id: JobId, job: Job) -> SpecCheck:
        """An open job's check: refused for good already, or its spec's verdict against its commit window."""
        digest = self.watcher.spec_cid(job_id)
        spec_cid = digest_to_cid(digest)
        refused = self.db.refusal(self.judge.deployment, job_id, spec_cid)
        if refused is not None:
            return SpecCheck(False, refused)
        check = fits_flag(self.judge.check(digest, self.db.data_key(job_id)), self.watcher.posted_full_replay(job_id))  # a sealed dataset: with our key
        check = fits_window(check, job.commit_window, self.config.commit_margin_s)
        params = self._market_params
        if params is not None:
            check = fits_budget(check, self.config.disk_budget, params.probe_count, params.availability_window)
        if not check.runnable and check.final:
            self.db.refuse(self.judge.deployment, job_id, spec_cid, check.reason)
            log.warning(JOB_REFUSED, extra={"job": job_id, "spec": spec_cid, "reason": check.reason})
        return check

    def _regenerate(self, job_id: JobId, job: Job) -> tuple[int, ...]:
        """A verifying (or verified) job's checkpoints that its verifier's draw needs and the disk budget dropped: the
        draw's assign seed from ``VerifierAssigned``, the update norms from our records (recorded in
        training under a budget)."""
        if job.state not in _SERVING or self.config.disk_budget is None or self._market_params is None:
            return ()
        records = self.db.checkpoints(job_id)
        if not any(r.dropped for r in records):
            return ()
        key = (job_id, job.deadline)
        if key not in self._draws:
            norms = [r.norm for r in records[1:]]
            assigned = self.watcher.draw(job_id)
            if assigned is None or None in norms or len(records) < 2:
                return ()
            seed = bytes(assigned.args["assignSeed"])
            self._draws = {k: v for k, v in self._draws.items() if k[0] != job_id}
            self._draws[key] = draw_checkpoints([n for n in norms if n is not None], seed, self._market_params.probe_count)
        draw = self._draws[key]
        return tuple(r.index for r in records if r.dropped and r.index in draw)

    def _asked(self, job_id: JobId, job: Job, wanted: set[Cid]) -> tuple[int, ...]:
        """A verifying (or verified) job's dropped checkpoints asked of our gateway, now or on an earlier
        tick and not regenerated yet: a reader outside the draw (a whistleblower's own segments)."""
        if job.state not in _SERVING or self.config.disk_budget is None:
            self._requested.pop(job_id, None)
            return ()
        dropped = {r.index: r.cid for r in self.db.checkpoints(job_id) if r.dropped}
        asked = self._requested.setdefault(job_id, set())
        asked |= {i for i, cid in dropped.items() if cid in wanted}
        asked &= set(dropped)
        return tuple(sorted(asked))

    def _dispute(self, job_id: JobId, job: Job) -> tuple[GameId, Game | None, int | None]:
        """A disputed job's active game, or the failing verifier's open deadline while it has none."""
        if job.state is not JobState.DISPUTED:
            return GameId(0), None, None
        game_id = self.protocol.game.active_game(job_id)
        if game_id:
            return game_id, self.protocol.game.get_game(game_id), None
        if job.challenger == job.verifier:
            return GameId(0), None, self.protocol.game.open_deadline(job_id)
        return GameId(0), None, None
