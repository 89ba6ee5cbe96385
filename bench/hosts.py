"""Content between hosts: a 50 MB checkpoint fetched from a party's gateway by raw blocks, every block
verified against its CID, then kept in the fetcher's store.

    .venv/bin/python -m bench.hosts [--mb 50] [--repeat 3]

Two rows: both ends on loopback in this process, and the server and the fetcher each in a network
namespace of its own joined by veth pairs on a bridge (deploy/netns.py; root only, else that row is
skipped with the reason). The server is ``veritrain submit serve`` (the gateway every daemon runs with
``--serve``); the fetcher is :class:`core.storage.peers.FetchingStore`, as in a daemon with ``--peer``.
"fetch" is the transfer with per-block checks; "fetch + keep" adds the write to the fetcher's own store
(which recomputes the file's CID). Median of ``--repeat`` runs; MB = 10^6 bytes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from core.storage import LocalStore
from core.storage.gateway import GatewayServer
from core.storage.peers import FetchingStore, GatewayFetcher
from deploy.netns import Hosts, why_not

PORT = 8080
REPO = Path(__file__).resolve().parents[1]


def _timed(url: str, cid: str, size: int, repeat: int) -> dict[str, float]:
    """Median seconds of a verified fetch, and of a fetch kept in a fresh store, from ``url``."""
    fetch, keep = [], []
    for _ in range(repeat):
        start = time.perf_counter()
        if len(GatewayFetcher(url).fetch(cid, size)) != size:
            raise SystemExit("short fetch")
        fetch.append(time.perf_counter() - start)
        with tempfile.TemporaryDirectory() as tmp:
            store = FetchingStore(LocalStore(tmp), [url])
            start = time.perf_counter()
            store.get(cid, size)
            keep.append(time.perf_counter() - start)
    return {"fetch": statistics.median(fetch), "keep": statistics.median(keep)}


def _row(where: str, size: int, seconds: dict[str, float]) -> None:
    print(
        f"| {where} | {size / 1e6 / seconds['fetch']:,.0f} MB/s ({seconds['fetch']:.2f} s) | {size / 1e6 / seconds['keep']:,.0f} MB/s ({seconds['keep']:.2f} s) |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=50, help="checkpoint size in MB (10^6 bytes), default 50")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per row (median), default 3")
    parser.add_argument("--client", nargs=3, metavar=("URL", "CID", "SIZE"), help=argparse.SUPPRESS)  # the fetcher's side, in its namespace
    args = parser.parse_args()
    if args.client:
        url, cid, size = args.client
        print(json.dumps(_timed(url, cid, int(size), args.repeat)))
        return
    size = args.mb * 1_000_000
    with tempfile.TemporaryDirectory() as tmp:
        store = LocalStore(Path(tmp) / "served")
        cid = store.put(os.urandom(size))
        print(f"{args.mb} MB checkpoint {cid}, median of {args.repeat}\n")
        print("| where | fetch (verified by block) | fetch + keep (store recomputes the CID) |\n|---|---|---|")
        with GatewayServer(store) as server:
            _row("loopback, server and fetcher in one process", size, _timed(server.url, cid, size, args.repeat))
        reason = why_not()
        if reason is not None:
            print(f"| between namespaces | skipped: {reason} | |")
            return
        with Hosts(["server", "fetcher"]) as hosts:
            server_host, fetcher = hosts["server"], hosts["fetcher"]
            argv = [*server_host.launcher, sys.executable, "-m", "veritrain", "submit", "serve", f"{server_host.ip}:{PORT}", "--store-dir", str(store.root)]
            serving = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            try:
                url = f"http://{server_host.ip}:{PORT}"
                probe = [*fetcher.launcher, sys.executable, "-m", "bench.hosts", "--repeat", str(args.repeat), "--client", url, cid, str(size)]
                for _ in range(120):  # the server imports for a few seconds before it listens
                    done = subprocess.run(probe, cwd=REPO, capture_output=True, text=True)
                    if done.returncode == 0:
                        break
                    time.sleep(1)
                else:
                    raise SystemExit(f"no fetch between namespaces: {done.stderr.strip()[-500:]}")
                _row("between namespaces (veth pairs, a bridge), two processes", size, json.loads(done.stdout.splitlines()[-1]))
            finally:
                serving.terminate()
                serving.wait(10)


if __name__ == "__main__":
    main()
