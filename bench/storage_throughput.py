"""Storage throughput: put and get of one blob on both backends, side by side in one run.

    .venv/bin/python bench/storage_throughput.py [--mb 50] [--repeat 3]

Starts a throwaway offline js-ipfs node on loopback (deploy.jsipfs),
puts and gets the same random blob through LocalStore (a temporary directory)
and IpfsStore, and prints the median MB/s of each. Both get paths verify every
byte (recompute the UnixFS DAG root); "cid only" is that computation alone,
the floor under every row. MB = 10^6 bytes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from core.storage import ContentStore, IpfsStore, LocalStore, file_cid
from deploy.jsipfs import JsIpfsNode


def _median_seconds(action: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _measure(store: ContentStore, blob: bytes, repeat: int) -> tuple[float, float]:
    cid = store.put(blob)
    put_s = _median_seconds(lambda: store.put(blob), repeat)
    get_s = _median_seconds(lambda: store.get(cid, len(blob)), repeat)
    if store.get(cid, len(blob)) != blob:
        raise SystemExit(f"{store!r} returned other bytes for {cid}")
    return put_s, get_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=50, help="blob size in MB (10^6 bytes), default 50")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per cell (median), default 3")
    args = parser.parse_args()
    size = args.mb * 1_000_000
    blob = os.urandom(size)
    mb = size / 1e6

    cid_s = _median_seconds(lambda: file_cid(blob), args.repeat)
    rows: list[tuple[str, float, float | None]] = [("cid only (file_cid)", cid_s, None)]
    with tempfile.TemporaryDirectory(prefix="veritrain-bench-") as tmp:
        rows.append(("LocalStore", *_measure(LocalStore(Path(tmp)), blob, args.repeat)))
    with JsIpfsNode() as node:
        rows.append(("IpfsStore (js-ipfs 0.18.1)", *_measure(IpfsStore(node.api_url), blob, args.repeat)))

    print(f"blob {mb:.0f} MB, cid {file_cid(blob)}, median of {args.repeat} runs, {os.cpu_count()} CPUs")
    print(f"{'backend':<28} {'put MB/s':>10} {'get MB/s':>10} {'put s':>8} {'get s':>8}")
    for name, put_s, get_s in rows:
        get_cells = f"{mb / get_s:>10.1f}" if get_s else f"{'-':>10}"
        get_time = f"{get_s:>8.3f}" if get_s else f"{'-':>8}"
        print(f"{name:<28} {mb / put_s:>10.1f} {get_cells} {put_s:>8.3f} {get_time}")


if __name__ == "__main__":
    main()
