"""Where a party's content is served from: gateways announced on chain (``StakeManager.announce``).

A daemon run with ``--serve HOST:PORT`` (and ``veritrain submit serve`` with a key) announces
``http://HOST:PORT`` once per deployment, when the chain holds another URL (:func:`announce_gateway`).
A daemon's store asks, for content it lacks, its ``--peer`` gateways and then the announced ones
(:class:`AnnouncedGateways`, the ``discover`` of a :class:`core.storage.peers.FetchingStore`): those of
the accounts that may hold a job's content, that is with stake in a role or with a posted job. Whatever
else is announced is ignored. They are **ranked by what the announcer has at stake**, never by recency:
first the accounts bonded to a job now (stake locked as a job's solver or verifier: the parties whose
content is fetched while a clock runs), then the rest; within each, by stake in every role plus the
escrow of the jobs it posted that are not final, the larger first. The first :data:`MAX_PEERS` are
kept, so pushing an honest staked party's gateway off the list takes more stake (or escrow) than it
has, in each of 32 accounts: announcements of unstaked one-wei jobs rank last. Every byte fetched is
checked against its CID, so a false URL costs a failed request. See docs/storage.md.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from core.agent import log_mined
from core.chain import Address
from core.contracts import JobId, Protocol, Role
from core.errors import VeritrainError
from core.storage.errors import StoreUnavailable
from core.storage.peers import MAX_PEERS, parse_peer

__all__ = ["announce_gateway", "AnnouncedGateways", "announceable", "RANKED_JOBS"]

log = logging.getLogger(__name__)

#: Seconds a list of announced gateways is reused before the chain is read again.
REFRESH_S = 15.0


def announceable(url: str) -> bool:
    """Whether other hosts can reach ``url``: not a wildcard address (0.0.0.0, ::)."""
    host = url.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")
    return host not in ("0.0.0.0", "::", "")


def announce_gateway(protocol: Protocol, me: Address, url: str) -> None:
    """Announce ``url`` as ``me``'s gateway unless the chain holds it already (idempotent); a chain
    error is logged, not raised: the gateway serves all the same, to ``--peer`` fetchers."""
    if not announceable(url):
        log.warning("gateway not announced: it listens on every address; give --serve a reachable one", extra={"url": url})
        return
    try:
        if protocol.stakes.gateway_of(me) == url:
            return
        log_mined(log, "announce", protocol.stakes.announce(url), url=url)
    except VeritrainError as exc:
        log.warning("gateway not announced", extra={"url": url, "error": str(exc)})


#: The most recent jobs of each announcing submitter whose escrow counts toward its rank.
RANKED_JOBS = 16


class AnnouncedGateways:
    """The gateways announced by accounts with stake or a posted job, ranked by what they have at stake
    (bonded to a job first, then by stake plus open escrow), at most :data:`core.storage.peers.MAX_PEERS`;
    read again at most every :data:`REFRESH_S` seconds. ``connect`` gives the current deployment (it may
    not exist yet: then none); ``own`` is left out."""

    def __init__(self, connect: Callable[[], Protocol], own: str | None = None) -> None:
        self._connect = connect
        self._own = own
        self._urls: list[str] = []
        self._read_at = -REFRESH_S

    def __call__(self) -> list[str]:
        if time.monotonic() - self._read_at < REFRESH_S:
            return self._urls
        self._read_at = time.monotonic()
        try:
            self._urls = self._read(self._connect())
        except VeritrainError as exc:
            log.warning("cannot read the announced gateways", extra={"error": str(exc)})
        return self._urls

    def _read(self, p: Protocol) -> list[str]:
        start = p.book.deploy_block
        latest: dict[str, str] = {}
        for event in p.stakes.events("GatewayAnnounced", start):
            latest[str(event.args["account"])] = str(event.args["url"])
        posted: dict[str, list[int]] = {}
        for event in p.market.events("JobPosted", start):
            posted.setdefault(str(event.args["submitter"]), []).append(int(event.args["jobId"]))
        ranked: list[tuple[bool, int, str, str]] = []
        for account, url in latest.items():
            if not url or url == self._own:
                continue
            try:
                url = parse_peer(url)
            except StoreUnavailable:
                continue
            stakes = [p.stakes.stake_of(account, role) for role in Role]
            escrow = 0
            for job_id in posted.get(account, [])[-RANKED_JOBS:]:
                job = p.market.get_job(JobId(job_id))
                escrow += 0 if job.state.final else int(job.reward)
            staked = sum(int(s.staked) for s in stakes)
            if staked == 0 and account not in posted:
                continue
            ranked.append((not any(s.locked for s in stakes), -(staked + escrow), account, url))
        return [url for *_, url in sorted(ranked)[:MAX_PEERS]]
