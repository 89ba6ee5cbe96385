"""Every benchmark, one after the other: ``.venv/bin/python -m bench [--quick] [--only NAME ...]``.

Each benchmark is a module of this folder with a ``main()`` that reads its own flags
from ``sys.argv``; this runner calls them in turn with the flags listed below (the
``--quick`` column for a smoke run), prints a header before each and its wall time
after, and exits non-zero if any failed (the others still run).

| module | default flags | --quick flags |
|---|---|---|
| proof_of_learning (solver overhead, replay share, detection, false rejects) | none | --quick |
| commit_overhead (issues 12 and 27: commit cost per checkpoint and end to end, peak RSS of solver and verifier, every registry model at 1M, 10M, 100M) | none | --quick |
| storage_throughput (both backends, 50 MB blob) | none | --mb 10 --repeat 1 |
| hosts (a 50 MB checkpoint from a gateway, loopback and between network namespaces) | none | --mb 10 --repeat 1 |
| incentives (economic simulation, plots in docs/img) | none | --jobs 20000 --no-plots |
| daemon_capacity (concurrent jobs, real daemons on anvil) | none | --quick |
| adaptive_cheaters (issue 10: catch rate, work saved, expected gain; tolerance drift; norm costs) | none | --quick |
| repro_numerics (repro-v1 vs plain torch, seconds per step, 1 and 2 threads; per-kernel profile) | none | --steps 1 --only transformer-100k --profile |
| training_memory (peak training memory against the spec's estimate) | none | --only resnet-20 |
| dashboard (1,000 jobs on chain: page load in chromium, API latency, memory) | none | --jobs 100 |
| storage_budget (disk per job against --disk-budget, worst-case regeneration latency, two model sizes) | none | --quick |
| diloco (issue 28: 4 parties x 10 rounds against 1 party at equal compute, bytes per round, the outer step's cost) | none | --rounds 2 --inner-steps 5 |
| gpt2_small (issue 26: a 124M-parameter AdamW job finalized, and a withholding cheater slashed through the availability court, on 30M-gas blocks) | none (hours, ~8 GiB) | --job gpt-tiny |

Run from the repository root with ``-m``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time
import traceback

#: module name -> (default argv, --quick argv)
BENCHMARKS: dict[str, tuple[list[str], list[str]]] = {
    "proof_of_learning": ([], ["--quick"]),
    "commit_overhead": ([], ["--quick"]),
    "storage_throughput": ([], ["--mb", "10", "--repeat", "1"]),
    "hosts": ([], ["--mb", "10", "--repeat", "1"]),
    "incentives": ([], ["--jobs", "20000", "--no-plots"]),
    "daemon_capacity": ([], ["--quick"]),
    "adaptive_cheaters": ([], ["--quick"]),
    "repro_numerics": ([], ["--steps", "1", "--only", "transformer-100k", "--profile"]),
    "training_memory": ([], ["--only", "resnet-20"]),
    "dashboard": ([], ["--jobs", "100"]),
    "storage_budget": ([], ["--quick"]),
    "diloco": ([], ["--rounds", "2", "--inner-steps", "5"]),
    "gpt2_small": ([], ["--job", "gpt-tiny"]),
}


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="each benchmark's smoke settings")
    parser.add_argument("--only", action="append", choices=sorted(BENCHMARKS), help="run only this benchmark (repeatable)")
    args = parser.parse_args()
    failed: list[str] = []
    saved_argv = sys.argv
    for name, (full, quick) in BENCHMARKS.items():
        if args.only and name not in args.only:
            continue
        flags = quick if args.quick else full
        print(f"\n=== bench.{name} {' '.join(flags)}".rstrip(), flush=True)
        start = time.monotonic()
        sys.argv = [f"bench.{name}", *flags]
        try:
            importlib.import_module(f"bench.{name}").main()
        except (Exception, SystemExit) as exc:  # one failing benchmark does not stop the others
            if isinstance(exc, SystemExit) and exc.code in (0, None):
                pass
            else:
                traceback.print_exc()
                failed.append(name)
        finally:
            sys.argv = saved_argv
        print(f"=== bench.{name}: {time.monotonic() - start:.0f} s", flush=True)
    if failed:
        raise SystemExit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
