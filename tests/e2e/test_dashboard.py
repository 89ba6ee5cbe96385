"""`veritrain dashboard` in a real headless browser (Debian's chromium through selenium) on a devnet
with real role daemons: an honest job appears and reaches FINALIZED on the open page without a
reload, the solver's address page shows its reward; a cheating solver's job shows the dispute game
won by the challenger and the network page the slash.

Skipped where chromium, chromedriver or selenium is missing. Screenshots of the three pages go to
``$DASHBOARD_SCREENSHOTS`` (docs/img to refresh the documentation's), else the test's tmp folder.
"""

from __future__ import annotations

import json
import os
import shutil
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core.contracts import JobId
from deploy.anvil import free_port
from submitter import service
from submitter.demo_job import build_demo_job
from tests.e2e.conftest import Market, wait_for

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (make test's set-up installs it from requirements.lock)")
if shutil.which("chromium") is None or shutil.which("chromedriver") is None:
    pytest.skip("Debian's chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)", allow_module_level=True)

E2E_ACCOUNTS = 7  # the submitter, an honest solver, four verifiers (a job's verifier + a committee of three), a cheater
SOLVER, VERIFIERS, CHEATER = 1, range(2, 6), 6
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def browser() -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1280,1400"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=shutil.which("chromedriver")))
    try:
        yield driver
    finally:
        driver.quit()


def _dashboard(market: Market) -> str:
    """Start `veritrain dashboard` on the market's chain and store; its URL once it answers."""
    port = free_port()
    market.dashboard(port)
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        try:
            with urllib.request.urlopen(url + "/api/network", timeout=2) as reply:
                return bool(json.loads(reply.read())["head"])
        except OSError:
            return False

    wait_for("the dashboard to answer", answers, 180, market)  # imports the whole command (torch too) on two busy cores
    return url


def _post(market: Market, folder: Path) -> JobId:
    job = build_demo_job("tiny", folder)
    return service.post_job(market.protocol(market.account(0)), market.store, job.spec_path, job.data_path, job.reward, job.fee, job.commit_window).job_id


def _shots() -> Path | None:
    given = os.environ.get("DASHBOARD_SCREENSHOTS")
    return Path(given) if given else None


def _screenshot(driver: Any, name: str, fallback: Path) -> None:
    folder = _shots() or fallback
    folder.mkdir(parents=True, exist_ok=True)
    driver.set_window_size(1280, max(900, min(4000, driver.execute_script("return document.body.scrollHeight") + 40)))
    assert driver.save_screenshot(str(folder / f"dashboard-{name}.png"))


def _texts(driver: Any, selector: str, attribute: str | None = None) -> list[str]:
    """Texts (or an attribute) of the elements matching ``selector``, read in one script: the page
    re-renders as blocks come, so element handles kept across calls go stale."""
    script = "return [...document.querySelectorAll(arguments[0])].map(e => arguments[1] ? e.getAttribute(arguments[1]) : e.innerText)"
    return list(driver.execute_script(script, selector, attribute))


def _text(driver: Any, selector: str) -> str:
    found = _texts(driver, selector)
    return found[0] if found else ""


def test_an_honest_job_reaches_finalized_live_and_pays_its_solver(market: Market, browser: Any, tmp_path: Path) -> None:
    url = _dashboard(market)
    for i in VERIFIERS:
        market.daemon("verifier", i, f"verifier{i}", "--stake", "200", "--duty-grace", "5", "--poll", "0.5")
    market.daemon("solver", SOLVER, "solver", "--poll", "0.5")
    browser.get(url + "/")
    wait_for("the network page rendered", lambda: _text(browser, "#total-jobs"), 30, market)
    browser.execute_script("window.notReloaded = true")

    job_id = _post(market, tmp_path / "job")
    row = f'#jobs tr[data-job="{job_id}"]'
    wait_for("the new job on the open page", lambda: browser.find_elements("css selector", row), 30, market)
    wait_for("the job FINALIZED on the open page", lambda: browser.find_elements("css selector", row + '[data-state="FINALIZED"]'), 300, market)
    assert browser.execute_script("return window.notReloaded") is True, "the page was reloaded"
    assert "FINALIZED 1" in _text(browser, "#counts")
    assert len(browser.find_elements("css selector", "#jobs tbody tr")) == int(_text(browser, "#total-jobs"))

    browser.get(f"{url}/job/{job_id}")
    wait_for("the job page's timeline", lambda: browser.find_elements("css selector", '#timeline tr[data-event="JobFinalized"]'), 30, market)
    assert _text(browser, "#job-state") == "FINALIZED"
    assert "PASSED" in _text(browser, "#verdict")
    assert browser.find_elements("css selector", "#curve canvas"), "the training curve is drawn"
    assert "fetchable" in _text(browser, "#model")
    events = _texts(browser, "#timeline tbody tr", "data-event")
    assert events[0] == "JobPosted" and "TraceCommitted" in events and "ReportSubmitted" in events
    _screenshot(browser, "job", tmp_path)

    solver = market.account(SOLVER).address
    browser.get(f"{url}/address/{solver}")
    wait_for("the solver's earnings", lambda: "reward (job finalized)" in _text(browser, "#earnings"), 30, market)
    reward = service.get_job(market.protocol(), job_id).reward
    assert f"+{reward // 10**18}" in _text(browser, "#earnings")
    assert browser.find_elements("css selector", "#earnings-plot canvas"), "the earnings plot is drawn"
    _screenshot(browser, "address", tmp_path)


def test_a_cheating_solvers_job_shows_the_dispute_and_the_slash(market: Market, browser: Any, tmp_path: Path) -> None:
    url = _dashboard(market)
    for i in VERIFIERS:
        market.daemon("verifier", i, f"verifier{i}", "--stake", "200", "--duty-grace", "5", "--poll", "0.5", run=2)
    market.daemon("solver", CHEATER, "cheater", "--cheat", "wrong-lr", "--poll", "0.5")
    job_id = _post(market, tmp_path / "job")
    browser.get(f"{url}/job/{job_id}")
    browser.execute_script("window.notReloaded = true")

    status = '.game-status[data-status="CHALLENGER_WON"]'
    wait_for("the dispute settled on the open job page", lambda: browser.find_elements("css selector", status), 420, market)
    assert browser.execute_script("return window.notReloaded") is True, "the page was reloaded"
    assert "FAILED" in _text(browser, "#verdict")
    moves = _texts(browser, ".moves tbody tr")
    assert any("MidpointPosted" in m for m in moves) and any("DisputeSettled" in m for m in moves)
    wait_for("the job reopened for another solver", lambda: _texts(browser, '#timeline tr[data-event="JobReopened"]'), 60, market)
    cheater = market.account(CHEATER).address
    assert cheater not in _texts(browser, ".game-winner a.addr", "title") and _texts(browser, ".game-winner a.addr", "title")
    _screenshot(browser, "dispute", tmp_path)

    browser.get(url + "/")
    wait_for("the slash on the network page", lambda: _texts(browser, "#slashes tr.slash"), 30, market)
    slashed = _texts(browser, "#slashes tr.slash a.addr", "title")
    assert cheater in slashed
    _screenshot(browser, "network", tmp_path)
