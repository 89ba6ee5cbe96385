"""Where a party's content is served from: gateways announced on chain (``StakeManager.announce``).

A daemon run with ``--serve HOST:PORT`` (and ``veritrain submit serve`` with a key) announces
``--announce URL``, or ``http://HOST:PORT`` (``https://`` when it serves with ``--tls-cert``), once per deployment, when the chain holds another URL
(:func:`announce_gateway`); a URL no other party can reach is refused at start (:func:`gateway_url`).
A daemon's store asks, for content it lacks, its ``--peer`` gateways and then the announced ones
(:class:`AnnouncedGateways`, the ``discover`` of a :class:`core.storage.peers.FetchingStore`): those of
the accounts that may hold a job's content, that is with stake in a role or with a posted job (on the
JobMarket, or a multi-party job on DilocoJobs, whose document, spec, dataset and G_0 only its
submitter holds at first). Whatever else is announced is ignored. They are **ranked by what the
announcer has at stake**, never by recency: first the accounts bonded to a job now (stake locked as a
job's solver or verifier: the parties whose content is fetched while a clock runs), then the rest;
within each, by stake in every role plus the escrow of the jobs it posted that are not final (of a
multi-party job, its funds left until it finishes), the larger first. The first :data:`MAX_PEERS` are
kept, so pushing an honest staked party's gateway off the list takes more stake (or escrow) than it
has, in each of 32 accounts: announcements of unstaked one-wei jobs rank last. Every byte fetched is
checked against its CID, so a false URL costs a failed request. See docs/storage.md.
"""

from __future__ import annotations

import ipaddress
import logging
import time
from collections.abc import Callable
from urllib.parse import urlsplit

from core.agent import log_mined
from core.chain import LOCAL_CHAIN_IDS, Address
from core.contracts import JobId, MultipartyPhase, Protocol, Role
from core.errors import ConfigError, VeritrainError
from core.storage.errors import StoreUnavailable
from core.storage.peers import MAX_PEERS, parse_peer

__all__ = ["announce_gateway", "AnnouncedGateways", "gateway_url", "RANKED_JOBS"]

log = logging.getLogger(__name__)

#: Seconds a list of announced gateways is reused before the chain is read again.
REFRESH_S = 15.0


def gateway_url(bind: str, announce: str | None, chain_id: int | None = None, *, tls: bool = False) -> str:
    """The URL to announce for a gateway listening on ``bind`` (HOST:PORT), over HTTPS if ``tls``:
    ``announce`` if given (the address other hosts reach: behind NAT, in a container), else
    ``http(s)://bind``. ConfigError (one line, exit 2) when it can reach no other party: a wildcard
    (0.0.0.0, ::); on a chain not in :data:`core.chain.LOCAL_CHAIN_IDS` (``chain_id``; None: not known
    yet, checked again when announcing) a loopback address, or a private one that ``--announce`` did not
    name; and an ``http://`` announcement of an HTTPS gateway (a fetcher's plain request gets nothing
    there; the reverse, https announced for a plain gateway, is a TLS proxy in front of it)."""
    scheme = "https" if tls else "http"
    url = announce if announce is not None else f"{scheme}://{bind}"
    given = f"--announce {announce}" if announce is not None else f"--serve {bind}"
    try:
        host = (urlsplit(parse_peer(url)).hostname or "").lower()
    except StoreUnavailable:
        raise ConfigError(f"{given}: the announced URL must be http(s)://HOST:PORT") from None
    if tls and urlsplit(url).scheme != "https":
        raise ConfigError(f"{given}: --serve speaks HTTPS (--tls-cert), so announce https://, not http://")
    fix = f"give --announce {scheme}://ADDRESS:PORT, the address other hosts reach (behind NAT or in a container: the forwarded one)"
    address: ipaddress.IPv4Address | ipaddress.IPv6Address | None
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        address = ipaddress.ip_address("127.0.0.1") if host == "localhost" else None
    if address is not None and address.is_unspecified:
        raise ConfigError(f"{given} listens on every address and names none to announce: {fix}")
    if chain_id is None or chain_id in LOCAL_CHAIN_IDS or address is None:
        return url
    if address.is_loopback:
        raise ConfigError(f"{given}: {host} is this host's loopback, which no other party of chain {chain_id} reaches: {fix}")
    if (address.is_private or address.is_link_local) and announce is None:
        raise ConfigError(f"{given}: {host} is a private address; if every party of chain {chain_id} reaches it there, say so with --announce {url}")
    return url


def announce_gateway(protocol: Protocol, me: Address, bind: str, announce: str | None, *, tls: bool = False) -> str | None:
    """Announce the URL of ``me``'s gateway on ``bind`` (:func:`gateway_url` of ``bind``, ``announce``
    and ``tls``, checked against the chain's id: ConfigError if no other party can reach it) unless the
    chain holds it already (idempotent), and return it; a chain error is logged, not raised (None): the
    gateway serves all the same, to ``--peer`` fetchers."""
    try:
        url = gateway_url(bind, announce, protocol.stakes.client.chain_id, tls=tls)
        if protocol.stakes.gateway_of(me) != url:
            log_mined(log, "announce", protocol.stakes.announce(url), url=url)
        return url
    except ConfigError:
        raise
    except VeritrainError as exc:
        log.warning("gateway not announced", extra={"bind": bind, "error": str(exc)})
        return None


#: The most recent jobs of each announcing submitter whose escrow counts toward its rank (as many of
#: its multi-party jobs besides).
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
        multiparty: dict[str, list[int]] = {}
        for event in p.diloco.events("MultipartyJobPosted", start):
            multiparty.setdefault(str(event.args["submitter"]), []).append(int(event.args["jobId"]))
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
            for job_id in multiparty.get(account, [])[-RANKED_JOBS:]:
                mp = p.diloco.get_job(job_id)
                escrow += 0 if mp.phase is MultipartyPhase.FINISHED else int(mp.funds)
            staked = sum(int(s.staked) for s in stakes)
            if staked == 0 and account not in posted and account not in multiparty:
                continue
            ranked.append((not any(s.locked for s in stakes), -(staked + escrow), account, url))
        return [url for *_, url in sorted(ranked)[:MAX_PEERS]]
