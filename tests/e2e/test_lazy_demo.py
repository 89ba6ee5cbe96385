"""`veritrain demo --lazy-verifier`, for real: the lazy verifier caught by the whistleblower daemon, slashed, the job re-verified."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import gone
from veritrain.demo import run_demo

VERI = 10**18


def test_lazy_demo_slashes_the_lazy_verifier_and_an_honest_one_finishes_the_job(tmp_path: Path) -> None:
    figures = run_demo(tmp_path, timeout_s=300, job_name="tiny", lazy_verifier=True)

    assert figures["state"] == "FINALIZED"
    dispute = figures["dispute"]
    game = dispute["games"][0]
    assert game["on_report"] and game["status"] == "CHALLENGER_WON" and game["winner"] == "whistleblower"
    assert dispute["verified_by"][0] == "lazy" and dispute["verified_by"][-1].startswith("verifier")
    (overturned,) = dispute["overturned"]
    # the tiny job pays 10 VERI and a 2 VERI fee (submitter.demo_job.DemoJob); the devnet's verifier bond is its
    # 10 VERI minimum (20 % of the reward is less) and its jackpot tax 3 % (deploy/params/devnet.json)
    assert overturned["verifier"] == "lazy" and overturned["slashed"] == 10 * VERI
    balances = figures["balances"]

    def change(label: str) -> int:
        (wb, sb), (wa, sa) = balances[label]["before"], balances[label]["after"]
        return (wa + sa) - (wb + sb)

    assert change("lazy") == -overturned["slashed"]  # its bond, and no fee
    # the verifier drawn next may be forced (1 %): the whistleblower then also wins the jackpot share
    forced = dispute["jackpot_paid"]
    assert change("solver") == 10 * VERI  # the reward paid, its bond back
    assert change("jackpot") == 12 * VERI * 300 // 10_000 - forced  # the tax on reward and fee
    assert change("whistleblower") == game["payout"] - 20 * VERI + forced  # the pot, less its 20 VERI bond
    assert sum(change(label) for label in balances) == 0
    econ = figures["economics"]
    assert econ["forced_error_rate_bps"] == 0  # the lazy verifier's story, never a forced draw's (LAZY_MARKET)
    assert econ["jackpot"] > 0 and econ["expected_per_audit"] == econ["jackpot"] * econ["jackpot_share_bps"] * econ["forced_error_rate_bps"] // 10_000**2
    assert all(gone(pid) for pid in figures["pids"])
