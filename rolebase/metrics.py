"""A daemon's status as a Prometheus text endpoint (``--metrics HOST:PORT``, ``GET /metrics``).

Fed from the report the role's ``status`` command prints (``rolebase.cli.status_report``: stake,
balance, gas, net earnings, the daemon's heartbeat and its jobs in hand), computed at each scrape,
so the endpoint and ``status --json`` never disagree. Written in the text exposition format 0.0.4
by hand (a dozen lines; no client library to pin)::

    veritrain_stake_veri{role="solver",address="0x...",kind="staked"} 200
    veritrain_job_deadline_timestamp_seconds{role="solver",address="0x...",job="3",state="CLAIMED"} 1795747506
    veritrain_daemon_last_error_info{role="solver",address="0x...",error="..."} 1

A scrape that cannot read the chain answers 503 with the reason in one line. Served on a daemon
thread of the stdlib's ``ThreadingHTTPServer``; nothing but ``GET /metrics`` answers (404).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from core.errors import ConfigError, VeritrainError

__all__ = ["render", "MetricsServer", "serve_metrics", "CONTENT_TYPE"]

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: Metric name -> (type, help), in the order they are written.
_METRICS = {
    "veritrain_balance_veri": ("gauge", "VERI held by the account (not staked)"),
    "veritrain_gas_eth": ("gauge", "native balance left for gas"),
    "veritrain_stake_veri": ("gauge", "stake in the daemon's role, by kind (staked, locked, unbonding)"),
    "veritrain_earnings_net_veri": ("gauge", "net earnings from chain events since the deployment (veritrain earnings)"),
    "veritrain_daemon_running": ("gauge", "1 when the daemon's heartbeat is fresh"),
    "veritrain_daemon_ticks": ("gauge", "ticks of the daemon's loop since it started"),
    "veritrain_daemon_last_tick_age_seconds": ("gauge", "seconds since the daemon's last tick"),
    "veritrain_daemon_last_error_info": ("gauge", "the last tick's transient error (1), or none (0)"),
    "veritrain_jobs_in_hand": ("gauge", "jobs the daemon holds records of, by chain state"),
    "veritrain_job_deadline_timestamp_seconds": ("gauge", "each job in hand's current chain deadline (unix seconds)"),
}

_WEI = 10**18


def _escape(value: object) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _sample(name: str, labels: Mapping[str, object], value: float) -> str:
    inner = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
    return f"{name}{{{inner}}} {value:.17g}"


def _jobs(report: Mapping[str, object]) -> list[Mapping[str, object]]:
    """The role's jobs in hand, whatever its report calls them (solver ``jobs``, verifier
    ``assignments``, whistleblower ``audits``)."""
    for key in ("jobs", "assignments", "audits"):
        listed = report.get(key)
        if isinstance(listed, list):
            return [j for j in listed if isinstance(j, Mapping)]
    return []


def render(role: str, report: Mapping[str, object]) -> str:
    """The text exposition of a role's ``status --json`` report (amounts in base units)."""
    me = {"role": role, "address": report["address"]}
    samples: dict[str, list[str]] = {name: [] for name in _METRICS}
    samples["veritrain_balance_veri"].append(_sample("veritrain_balance_veri", me, int(str(report["balance"])) / _WEI))
    samples["veritrain_gas_eth"].append(_sample("veritrain_gas_eth", me, int(str(report["gas"])) / _WEI))
    stake = report["stake"]
    assert isinstance(stake, Mapping)
    for kind in ("staked", "locked", "unbonding"):
        samples["veritrain_stake_veri"].append(_sample("veritrain_stake_veri", {**me, "kind": kind}, int(str(stake[kind])) / _WEI))
    samples["veritrain_earnings_net_veri"].append(_sample("veritrain_earnings_net_veri", me, int(str(report["earnings_net"])) / _WEI))
    beat = report.get("daemon")
    if isinstance(beat, Mapping):
        samples["veritrain_daemon_running"].append(_sample("veritrain_daemon_running", me, 1 if beat["running"] else 0))
        samples["veritrain_daemon_ticks"].append(_sample("veritrain_daemon_ticks", me, float(str(beat["ticks"]))))
        samples["veritrain_daemon_last_tick_age_seconds"].append(_sample("veritrain_daemon_last_tick_age_seconds", me, float(str(beat["last_tick_s_ago"]))))
        error = beat.get("last_error")
        samples["veritrain_daemon_last_error_info"].append(_sample("veritrain_daemon_last_error_info", {**me, "error": error or ""}, 1 if error else 0))
    states: dict[str, int] = {}
    for job in _jobs(report):
        state = str(job.get("chain_state", job.get("state", "unknown")))
        states[state] = states.get(state, 0) + 1
        deadline = job.get("deadline")
        if isinstance(deadline, int) and deadline > 0 and job.get("job_id") is not None:  # a Committed job has none (0)
            labels = {**me, "job": job["job_id"], "state": state}
            samples["veritrain_job_deadline_timestamp_seconds"].append(_sample("veritrain_job_deadline_timestamp_seconds", labels, float(deadline)))
    for state, count in sorted(states.items()):
        samples["veritrain_jobs_in_hand"].append(_sample("veritrain_jobs_in_hand", {**me, "state": state}, count))
    return "".join(_family(name, lines) for name, lines in samples.items())


def _family(name: str, lines: Iterable[str]) -> str:
    kind, text = _METRICS[name]
    return f"# HELP {name} {text}\n# TYPE {name} {kind}\n" + "".join(line + "\n" for line in lines)


class MetricsServer:
    """``GET /metrics`` answered with ``collect()`` on a daemon thread; :meth:`stop` closes it."""

    def __init__(self, host: str, port: int, collect: Callable[[], str]) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                if self.path.split("?", 1)[0] != "/metrics":
                    self.send_error(404, "only /metrics is served")
                    return
                try:
                    status, body, kind = 200, collect().encode(), CONTENT_TYPE
                except VeritrainError as exc:  # the chain or the records cannot be read now: say so, keep serving
                    status, body, kind = 503, f"{type(exc).__name__}: {exc}\n".encode(), "text/plain; charset=utf-8"
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:  # scrapes are not news
                log.debug("metrics request", extra={"line": format % args})

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics", daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/metrics"

    def start(self) -> MetricsServer:
        self._thread.start()
        log.info("metrics served", extra={"url": self.url})
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def serve_metrics(address: str, collect: Callable[[], str]) -> MetricsServer:
    """A started :class:`MetricsServer` on ``HOST:PORT`` (``--metrics``); a bad address is a ConfigError."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ConfigError(f"--metrics takes HOST:PORT, e.g. 127.0.0.1:9101, not {address!r}")
    try:
        return MetricsServer(host.strip("[]"), int(port), collect).start()
    except OSError as exc:
        raise ConfigError(f"--metrics {address}: cannot listen there: {exc.strerror or exc}") from None
