"""The dashboard with 1,000 jobs on chain: page load time, API latency, memory.

    .venv/bin/python -m bench.dashboard                # 1,000 jobs (about a minute to post)
    .venv/bin/python -m bench.dashboard --jobs 100     # a quick run

What runs: a devnet (anvil, automine, the devnet's parameters), one tiny spec and its dataset
put in the embedded store once, then ``--jobs`` jobs posted with that spec (``postJob`` straight
to the market after one approval: no training, the jobs stay Open), a tenth of them claimed by a
staked solver. Then ``veritrain dashboard`` as a real process on that chain and store, and:

* the index's first scan of every block, timed alone in this process, and the dashboard's start-up:
  from the process start to its first answer (importing the command, torch included, then that scan);
* API latency, median of 20: ``/api/network`` (counts by state, the latest 100 jobs, stakes)
  and ``/api/job/1`` (timeline with gas, spec from the store; cached after the first call);
* page load in headless chromium (selenium), median of 5: from ``get`` to the rendered job
  count (HTML, CSS, uPlot, app.js, the JSON, the DOM), and the address page to its plot;
* live update: one more job posted, to the network page showing it (the dashboard polls
  new blocks every 0.5 s here);
* memory: the dashboard's VmRSS and VmHWM (peak) from /proc after all of the above.

The browser figures are skipped (said so) where chromium or selenium is missing.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.procstatus import memory_mb
from core.cid import cid_to_digest
from core.contracts import Role
from core.storage import LocalStore
from deploy.anvil import free_port
from deploy.devnet import start_devnet
from submitter.demo_job import build_demo_job
from submitter.specfile import publish, read_job
from veritrain.dashboard.index import ChainIndex

ROOT = Path(__file__).resolve().parents[1]


def _get(url: str) -> tuple[float, Any]:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as reply:
        data = json.loads(reply.read())
    return time.perf_counter() - start, data


def _browser() -> Any:
    try:
        from selenium import webdriver
    except ImportError:
        return None
    if shutil.which("chromium") is None or shutil.which("chromedriver") is None:
        return None
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,1400"):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=shutil.which("chromedriver")))


def _load(driver: Any, url: str, ready: str, expect: str | None = None, timeout: float = 60) -> float:
    start = time.perf_counter()
    driver.get(url)
    while time.perf_counter() - start < timeout:
        found = driver.find_elements("css selector", ready)
        if found and (expect is None or found[0].text == expect):
            return time.perf_counter() - start
        time.sleep(0.005)
    raise TimeoutError(f"{url}: {ready} not rendered in {timeout} s")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.dashboard", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1000, help="jobs to put on chain (default 1000)")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-dashboard-"))
    with start_devnet(book_dir=work / "deployments", accounts=2) as net:
        store = LocalStore(work / "store")
        demo = build_demo_job("tiny", work / "job")
        spec_digest = cid_to_digest(publish(read_job(demo.spec_path, demo.data_path, store), store))
        submitter, solver = net.protocol(net.accounts[0]), net.protocol(net.accounts[1])
        reward, fee = 10**18, 10**17
        each = reward + fee + submitter.market.jackpot_tax(reward, fee)
        submitter.token.approve(submitter.market.address, each * (args.jobs + 1))
        stake = submitter.market.solver_bond(reward) * (args.jobs // 10 + 1) + solver.stakes.min_stake(Role.SOLVER)
        solver.token.approve(solver.stakes.address, stake)
        solver.stakes.stake(Role.SOLVER, stake)
        started = time.perf_counter()
        for n in range(args.jobs):
            job_id, _ = submitter.market.post_job(spec_digest, reward, fee, 600)
            if n % 10 == 0:
                solver.market.claim(job_id)
        posting = time.perf_counter() - started
        net.client.rpc("evm_setIntervalMining", [1])
        scan_started = time.perf_counter()
        ChainIndex(net.protocol()).advance()  # the dashboard's first scan, alone (in this process)
        first_scan = time.perf_counter() - scan_started

        port = free_port()
        url = f"http://127.0.0.1:{port}"
        argv = [sys.executable, "-m", "veritrain", "dashboard", "--rpc-url", net.rpc_url, "--address-book-dir", str(work / "deployments"),
                "--store-dir", str(work / "store"), "--port", str(port), "--poll", "0.5"]  # fmt: skip
        launched = time.perf_counter()
        process = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            while True:
                try:
                    _get(url + "/api/network")
                    break
                except OSError:
                    if process.poll() is not None or time.perf_counter() - launched > 300:
                        raise SystemExit("the dashboard did not start") from None
                    time.sleep(0.1)
            startup = time.perf_counter() - launched
            network = [_get(url + "/api/network")[0] for _ in range(20)]
            _, page = _get(url + "/api/network")
            assert page["total_jobs"] == args.jobs, page["total_jobs"]
            job_first, _ = _get(url + "/api/job/1")
            job = [_get(url + "/api/job/1")[0] for _ in range(20)]
            figures: dict[str, Any] = {
                "jobs": args.jobs,
                "posting_s": round(posting, 1),
                "first_scan_s": round(first_scan, 2),
                "startup_s": round(startup, 2),
                "api_network_ms": round(1000 * statistics.median(network), 1),
                "api_job_first_ms": round(1000 * job_first, 1),
                "api_job_ms": round(1000 * statistics.median(job), 1),
            }
            driver = _browser()
            if driver is None:
                figures["browser"] = "skipped: chromium, chromedriver or selenium missing"
            else:
                try:
                    loads = [_load(driver, url + "/", "#total-jobs", str(args.jobs)) for _ in range(5)]
                    figures["page_network_ms"] = round(1000 * statistics.median(loads), 1)
                    job_loads = [_load(driver, url + "/job/1", "#spec") for _ in range(5)]
                    figures["page_job_ms"] = round(1000 * statistics.median(job_loads), 1)
                    address = [_load(driver, f"{url}/address/{net.accounts[1].address}", "#net") for _ in range(5)]
                    figures["page_address_ms"] = round(1000 * statistics.median(address), 1)
                    driver.get(url + "/")
                    _load(driver, url + "/", "#total-jobs", str(args.jobs))
                    posted = time.perf_counter()
                    submitter.market.post_job(spec_digest, reward, fee, 600)
                    while driver.find_elements("css selector", "#total-jobs")[0].text != str(args.jobs + 1):
                        if time.perf_counter() - posted > 30:
                            raise TimeoutError("the new job did not appear")
                        time.sleep(0.01)
                    figures["live_update_s"] = round(time.perf_counter() - posted, 2)
                finally:
                    driver.quit()
            figures.update({f"dashboard_{k}_mib": round(v, 1) for k, v in memory_mb(process.pid).items()})
        finally:
            process.terminate()
            process.wait(10)
    width = max(len(k) for k in figures)
    for name, value in figures.items():
        print(f"{name:<{width}}  {value}")
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
