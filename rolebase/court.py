"""The availability court's duties, shared by every role that may sit on its committee (verifiers:
members are drawn by verifier stake) or that gains from a case ending (its challenger).

docs/protocol.md, "Availability court": a case names every item its challenger could not fetch; a
committee drawn by stake fetches each one by its CID from the announced gateways (the content store
checks every block against its CID), checks a checkpoint against the committed trace (its state hash
in the manifest whose root is the committed root), and votes by commit-reveal whether everything was
served. A member that votes "served" keeps what it fetched in its store and serves it for the rest
of the game (a daemon with ``--serve`` serves what it keeps), so a solver that serves only the
committee gains nothing: the challenger fetches the items from the custodians.

The shape is the agent's: :class:`CourtWatcher` loads the live cases (loader), :func:`court_moves`
decides (pure), :class:`CourtDuty` performs (idempotent: every move re-reads its case first).
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol as Structural

from eth_utils import keccak

from core.agent import log_mined
from core.calls import Logs
from core.chain import Address, Receipt
from core.contracts import MANIFEST_ITEM, Ballot, Case, CaseStatus, CourtParams, JobId, Protocol, court_commitment, lacking_items
from core.dispute import committed_vote, derive_salt
from core.probe import Bytes32
from core.storage import ContentStore, StorageError
from proofs.errors import ProofError
from proofs.manifest import MAX_MANIFEST_BYTES, committed_manifest
from proofs.spec import Limits
from rolebase.watchers import MarketWatcher

log = logging.getLogger(__name__)


class CourtAction(enum.Enum):
    DRAW = "drawCommittee"
    COMMIT = "commitVote"  # fetch and check every named item first
    REVEAL = "revealVote"
    SETTLE = "settle"


@dataclass(frozen=True)
class LiveCase:
    """A case that is not final, and our ballot in it (VACANT: not seated)."""

    case_id: int
    case: Case
    ballot: Ballot = Ballot.VACANT


@dataclass(frozen=True)
class CourtMove:
    case_id: int
    action: CourtAction


class CourtWatcher:
    """Reads the cases that are not final, with our ballot; settled cases are never read again."""

    def __init__(self, protocol: Protocol, me: Address, max_cases: int = 10_000) -> None:
        self.protocol = protocol
        self.me = me
        self.max_cases = max_cases
        self._final: set[int] = set()
        self._params: CourtParams | None = None

    @property
    def params(self) -> CourtParams:
        """The court's parameters (immutable: read once)."""
        if self._params is None:
            self._params = self.protocol.court.params()
        return self._params

    def live(self) -> tuple[LiveCase, ...]:
        court = self.protocol.court
        count = court.case_count()
        out: list[LiveCase] = []
        for case_id in range(max(1, count - self.max_cases + 1), count + 1):
            if case_id in self._final:
                continue
            case = court.get_case(case_id)
            if case.status.final:
                self._final.add(case_id)
                continue
            ballot = court.ballot_of(case_id, self.me)[0] if case.status is CaseStatus.VOTING else Ballot.VACANT
            out.append(LiveCase(case_id, case, ballot))
        return tuple(out)


def court_moves(now: int, block: int, me: Address, cases: Sequence[LiveCase], params: CourtParams, grace_s: int) -> list[CourtMove]:
    """What to do about the live cases: as a seated member, commit (after fetching) and reveal within
    their phases; the permissionless draw and settle at once as the case's challenger (its deposit and
    its clock wait on them), ``grace_s`` late as anyone else, so no case stays stuck."""
    moves: list[CourtMove] = []
    for live in cases:
        c = live.case
        late = 0 if c.challenger == me else grace_s
        if c.status is CaseStatus.DRAWING:
            draw_end = c.opened_at + params.draw_window
            if now > draw_end + late:
                moves.append(CourtMove(live.case_id, CourtAction.SETTLE))
            elif block >= c.anchor_block + 2 and now <= draw_end and now >= c.opened_at + late:
                moves.append(CourtMove(live.case_id, CourtAction.DRAW))
            continue
        reveal_end = c.deadline + params.reveal_window
        everyone_committed = c.commits >= params.committee_size
        if live.ballot is Ballot.SEATED and now <= c.deadline:
            moves.append(CourtMove(live.case_id, CourtAction.COMMIT))
        elif live.ballot is Ballot.COMMITTED and (now > c.deadline or everyone_committed) and now <= reveal_end:
            moves.append(CourtMove(live.case_id, CourtAction.REVEAL))
        elif now > reveal_end + late or c.votes_served + c.votes_withheld >= params.committee_size:
            moves.append(CourtMove(live.case_id, CourtAction.SETTLE))
    return moves


class CourtCalls(Logs, Structural):
    """What :class:`CourtDuty` reads and sends: the court's cases and logs, its ballots and its moves."""

    def get_case(self, case_id: int) -> Case: ...

    def ballot_of(self, case_id: int, member: str) -> tuple[Ballot, Bytes32]: ...

    def draw_committee(self, case_id: int) -> Receipt: ...

    def commit_vote(self, case_id: int, commitment: bytes) -> Receipt: ...

    def reveal_vote(self, case_id: int, served: bool, salt: bytes) -> Receipt: ...

    def settle(self, case_id: int) -> Receipt: ...


class CourtDuty:
    """Carries out :class:`CourtMove` for one account. ``salt_secret``: at least 32 secret bytes kept
    in the role's records; a vote's salt is derived from it, and its reveal matches the commitment
    on chain, so nothing about a vote is stored. ``deploy_block``: where the court's logs begin."""

    def __init__(
        self, court: CourtCalls, deploy_block: int, store: ContentStore, me: Address, salt_secret: Callable[[], bytes], watcher: MarketWatcher
    ) -> None:
        self.court = court
        self.deploy_block = deploy_block
        self.store = store
        self.watcher = watcher  # the trace commitment a case names
        self.me = me
        self._salt_secret = salt_secret

    def perform(self, move: CourtMove) -> None:
        court = self.court
        case = court.get_case(move.case_id)
        match move.action:
            case CourtAction.DRAW if case.status is CaseStatus.DRAWING:
                log_mined(log, "court drawCommittee", court.draw_committee(move.case_id), case=move.case_id)
            case CourtAction.COMMIT if case.status is CaseStatus.VOTING:
                if court.ballot_of(move.case_id, self.me)[0] is Ballot.SEATED:
                    served = self.served(move.case_id, case)
                    commitment = court_commitment(move.case_id, served, self._salt(move.case_id), self.me)
                    log_mined(log, "court commitVote", court.commit_vote(move.case_id, commitment), case=move.case_id, served=served)
            case CourtAction.REVEAL if case.status is CaseStatus.VOTING:
                self._reveal(move.case_id)
            case CourtAction.SETTLE if not case.status.final:
                log_mined(log, "court settle", court.settle(move.case_id), case=move.case_id)
            case _:
                log.debug("court move no longer due", extra={"case": move.case_id, "move": move.action.value})

    def served(self, case_id: int, case: Case) -> bool:
        """Whether every item the case names is served: fetched by its CID (and a checkpoint checked
        against the committed trace). What was fetched stays in our store, which we serve from."""
        opened = self.court.events("CaseOpened", self.deploy_block, caseId=case_id)
        committed = self.watcher.commitment(JobId(case.job_id), case.trace_root)  # not in our node's logs yet: no vote this tick
        if not opened:
            log.warning("case not found in the logs", extra={"case": case_id, "job": case.job_id})
            return False
        items = lacking_items(committed.checkpoint_count, bytes(opened[-1].args["lacking"]))
        manifest_cid = committed.manifest_cid
        try:
            data = self.store.get(manifest_cid, MAX_MANIFEST_BYTES)
        except StorageError as exc:
            log.info("case item not served", extra={"case": case_id, "job": case.job_id, "item": "manifest", "error": str(exc)})
            return False
        checkpoints = [i for i in items if i != MANIFEST_ITEM]
        if not checkpoints:
            return True
        try:
            manifest = committed_manifest(data, case.trace_root)
        except ProofError as exc:  # no checkpoint CIDs to fetch by: nothing committed can be served
            log.info("case manifest gives no checkpoints", extra={"case": case_id, "job": case.job_id, "error": str(exc)})
            return False
        for i in checkpoints:
            if not self._checkpoint(JobId(case.job_id), i, manifest.checkpoint_cids[i], manifest.state_hashes[i]):
                log.info("case item not served", extra={"case": case_id, "job": case.job_id, "item": i})
                return False
        log.info("every case item served: kept to serve it on", extra={"case": case_id, "job": case.job_id, "items": len(items)})
        return True

    def _checkpoint(self, job_id: JobId, index: int, cid: str, expect: Bytes32) -> bool:
        from proofs.checkpoint import state_hash  # here: the verifier's policy imports this module, its CLI the policy

        try:
            return state_hash(self.store.get(cid, Limits.CHECKPOINT_BYTES)) == expect
        except StorageError as exc:
            log.debug("checkpoint not fetched", extra={"job": job_id, "item": index, "error": str(exc)})
            return False

    def _salt(self, case_id: int) -> Bytes32:
        # a domain of its own, so a case's salt is unrelated to a dispute game's of the same number
        return derive_salt(keccak(b"veritrain availability court" + self._salt_secret()), case_id)

    def _reveal(self, case_id: int) -> None:
        ballot, commitment = self.court.ballot_of(case_id, self.me)
        if ballot is not Ballot.COMMITTED:
            return
        salt = self._salt(case_id)
        served = committed_vote(commitment, case_id, salt, self.me)
        if served is None:
            log.error("committed vote matches no salt of ours (the salt secret was lost): cannot reveal", extra={"case": case_id})
            return
        log_mined(log, "court revealVote", self.court.reveal_vote(case_id, served, salt), case=case_id, served=served)
