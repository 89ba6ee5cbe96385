"""Reads what the whistleblower policy needs, at one instant, into a frozen :class:`WhistleblowerView`.

The passing reports whose challenge window is open (Verified jobs before their deadline, with the
``ReportSubmitted`` event of the current report), what the local records say about each (audited
or not, the faults found), and which of those faults this account already challenged: read from
the chain (its ``DisputeOpened`` events on the job since the report), so a kill between a mined
``open`` and the local record cannot lead to a second challenge of the same fault. Then the games
it opened that are not final, and its availability challenges the solver has not answered.

For each report with a fault left to challenge, the referees a committee could seat now: verifiers
(every account that ever staked as one, from ``Staked`` events) whose stake is eligible and whose
free stake covers the referee bond, less the job's solver, verifier and submitter and this bot,
the accounts ``DisputeGame.drawCommittee`` excludes. The draw itself reads the stakes at its
anchor block, later: the count is today's, the policy decides again every tick.

A report of a sealed job not audited yet carries its key game as it stands for us
(:class:`~whistleblower.policy.SealedReport`): whether we hold its data key (found by
``rolebase.keyring`` and kept in the records), when our wrap request at our current key version was
mined, our demands so far; a job our demand holds (DataVote, our challenge window paused) is listed
with the demand's deadline instead.
"""

from __future__ import annotations

from core.chain import Address
from core.cid import digest_to_cid
from core.contracts import (
    Event,
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
from core.sealing import EncryptionKey
from rolebase.actions import credits_of
from rolebase.earnings import expected_jackpot_per_audit
from rolebase.keyring import OwnKey, data_key, referees_to_wrap
from rolebase.watchers import GameWatcher, MarketWatcher
from whistleblower.policy import FindingKind, OpenDemand, OpenReport, OwnGame, SealedReport, WhistleblowerView
from whistleblower.state import WhistleblowerDb


class WhistleblowerLoader:
    def __init__(self, protocol: Protocol, watcher: MarketWatcher, db: WhistleblowerDb, me: Address, key: EncryptionKey | None = None) -> None:
        """``key``: our encryption key (``--encryption-key``), which opens the wraps of sealed jobs' keys to us."""
        self.key = key
        self._own_key = OwnKey(protocol.keys, me, key)
        self.protocol = protocol
        self.watcher = watcher
        self.games = GameWatcher(protocol.game)
        self.db = db
        self.me = me
        self.secret = db.secret()
        self._min_stake: TokenAmount | None = None
        self._game_params: GameParams | None = None
        self._market_params: MarketParams | None = None
        self._verifier_min = TokenAmount(0)
        self._reports: dict[tuple[int, bytes, int], Event] = {}  # (job, trace root, draws) -> its passing report
        self._verifiers: set[Address] = set()  # every account that staked as a verifier
        self._staked_scanned = protocol.book.deploy_block  # the next block to read Staked events from
        self._unsealed: set[JobId] = set()  # jobs seen Verified that are not sealed (fixed once a job left Open)
        self._asked: dict[tuple[JobId, int], int] = {}  # (job, our key version) -> when our first wrap request for it was mined

    def _unwrapped(self, game_id: GameId, game: Game) -> tuple[Address, ...]:
        """The seated referees of our game on a sealed job whose key we hold (only a sealed job's key is in
        our records) that no wrap was published to for their current key."""
        if game.status is not GameStatus.ARBITRATING or self.db.data_key(game.job_id) is None:
            return ()
        return referees_to_wrap(self.protocol, game_id, game)

    def load(self) -> WhistleblowerView:
        p = self.protocol
        moment, scan = self.watcher.read(self.db)
        if self._min_stake is None or self._game_params is None or self._market_params is None:
            self._min_stake = p.stakes.min_stake(Role.WHISTLEBLOWER)  # immutable: read once
            self._game_params = p.game.params()
            self._market_params = p.market.params()
            self._verifier_min = p.stakes.min_stake(Role.VERIFIER)
        reports = []
        data_challenges = []
        demands = []
        referees: frozenset[Address] | None = None  # read once a tick, when a fault is left to challenge
        registered = self._own_key.registered()
        for job_id, job in scan.jobs:
            if job.state is JobState.DATA_CHALLENGED and p.market.availability_challenge(job_id).challenger == self.me:
                data_challenges.append((job_id, job.deadline))
            if job.state is JobState.DATA_VOTE and job.challenger == self.me:  # held for our court case, or for our demand
                demand = p.sealed_jobs.demand_of(job_id)
                if demand.party == self.me:
                    demands.append(OpenDemand(job_id, demand.deadline))
            if job.state is not JobState.VERIFIED or moment.now >= job.deadline or self.me in (job.solver, job.verifier):
                continue  # a job's own solver and verifier may not challenge it (nor ask for its key: they hold it)
            event = self.current_report(job_id, job)
            if event is None:
                continue
            cid = digest_to_cid(bytes(event.args["reportCid"]))
            record = self.db.audit(job_id, cid)
            challenged = self.challenged(job_id, event.block_number)
            seats = 0
            if record is not None and any(f.key not in challenged for f in record.findings):
                referees = self.referees(moment.block, self._game_params.referee_bond) if referees is None else referees
                seats = len(referees - {job.solver, job.verifier, job.submitter, self.me})
            sealed = self._sealed(job_id, registered) if record is None else None  # audited: the key game is behind us
            findings = None if record is None else record.findings
            reports.append(OpenReport(job_id, cid, job.deadline, job.trace_root, findings, challenged, seats, sealed))
        final = self.db.final_jobs()
        return WhistleblowerView(
            now=moment.now,
            block=moment.block,
            me=self.me,
            token_balance=p.token.balance_of(self.me),
            credits=credits_of(p, self.me),
            staked=p.stakes.stake_of(self.me, Role.WHISTLEBLOWER).staked,
            min_stake=self._min_stake,
            secret=self.secret,
            reports=tuple(reports),
            expected_per_audit=TokenAmount(
                expected_jackpot_per_audit(p.market.jackpot(), self._market_params.jackpot_share_bps, self._market_params.forced_error_rate_bps)
            ),
            games=tuple(OwnGame(gid, game, self._unwrapped(gid, game)) for gid, game in self.games.live() if game.challenger == self.me),
            game_params=self._game_params,
            forgettable=tuple(sorted(JobId(j) for j in (self.db.audited_jobs() & final) | self.db.keyed_final())),
            data_challenges=tuple(data_challenges),
            demands=tuple(demands),
            registered_key=registered,
        )

    def _sealed(self, job_id: JobId, registered: RegisteredKey | None) -> SealedReport | None:
        """The key game of a Verified job's report, None if its data is not sealed. A data key in the records
        settles it without a read; else the keyring looks for a revealed key or a wrap to us that opens."""
        if job_id in self._unsealed:
            return None
        if self.db.data_key(job_id) is not None:
            return SealedReport(held=True)
        sealed = self.protocol.sealed_jobs
        status = sealed.sealing_of(job_id).status
        if status is SealingStatus.NONE:
            self._unsealed.add(job_id)
            return None
        deploy_block = self.protocol.book.deploy_block
        if self.key is not None and data_key(sealed, self.db, job_id, self.me, self.key, deploy_block) is not None:
            return SealedReport(held=True)
        assert self._market_params is not None  # read before the first report
        live = status is SealingStatus.ACTIVE
        return SealedReport(
            held=False,
            live=live,
            asked_at=None if registered is None or not registered.registered or not live else self._asked_at(job_id, registered.version),
            window=self._market_params.challenge_window,
            demands=sealed.demands_by(job_id, self.me),
            demand_open=sealed.demand_of(job_id).open,
        )

    def _asked_at(self, job_id: JobId, version: int) -> int | None:
        """The block time of our first wrap request for the job at our key ``version`` (None: none on chain)."""
        if (job_id, version) not in self._asked:
            requests = self.protocol.sealed_jobs.wrap_requests(job_id, self.protocol.book.deploy_block)
            ours = [r for r in requests if r.party == self.me and r.key_version == version]
            if not ours:
                return None
            self._asked[(job_id, version)] = self.protocol.client.timestamp(ours[0].block_number)
        return self._asked[(job_id, version)]

    def referees(self, block: int, bond: TokenAmount) -> frozenset[Address]:
        """The verifiers that could take a committee seat now: eligible stake, the referee ``bond`` free."""
        p = self.protocol
        if block >= self._staked_scanned:
            for e in p.stakes.events("Staked", self._staked_scanned, block, role=int(Role.VERIFIER)):
                self._verifiers.add(Address(e.args["account"]))
            self._staked_scanned = block + 1
        stakes = {v: p.stakes.stake_of(v, Role.VERIFIER) for v in self._verifiers}
        return frozenset(v for v, s in stakes.items() if s.staked >= self._verifier_min and s.free >= bond)

    def current_report(self, job_id: JobId, job: Job) -> Event | None:
        """The job's current passing report (None if the last report of its current draw failed)."""
        key = (int(job_id), bytes(job.trace_root), job.draws)
        if key not in self._reports:
            event = self.watcher.report(job_id)
            if event is None or event.args["verifier"] != job.verifier:
                return None
            self._reports = {k: v for k, v in self._reports.items() if k[0] != int(job_id)}
            self._reports[key] = event
        event = self._reports[key]
        return event if event.args["passed"] else None

    def challenged(self, job_id: JobId, since_block: int) -> frozenset[tuple[FindingKind, int]]:
        """The faults of the current report not to challenge (again): those we opened a game on (report
        games by probe slot, trace games by segment), and probe 0 once a forced error was paid on it by
        anyone (the contract pays one jackpot per draw and refuses a second game on that probe)."""
        game = self.protocol.game
        out: set[tuple[FindingKind, int]] = set()
        if self.protocol.market.events("ForcedErrorCaught", since_block, jobId=job_id):
            out.add((FindingKind.PROBE, 0))
        for opened in game.events("DisputeOpened", since_block, jobId=job_id, challenger=self.me):
            on_report = game.events("ReportDisputeOpened", opened.block_number, opened.block_number, gameId=opened.args["gameId"])
            if on_report:
                out.add((FindingKind.PROBE, int(on_report[0].args["probeIndex"])))
            elif int(opened.args["steps"]) == 0:  # a manifest game (openOnManifest)
                out.add((FindingKind.MANIFEST, 0))
            else:
                out.add((FindingKind.SEGMENT, int(opened.args["segment"])))
        return frozenset(out)
