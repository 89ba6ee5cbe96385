"""`veritrain demo --lazy-verifier`, for real: the lazy verifier caught by the whistleblower daemon, slashed, the job re-verified."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.conftest import gone
from veritrain.demo import run_demo


def test_lazy_demo_slashes_the_lazy_verifier_and_an_honest_one_finishes_the_job(tmp_path: Path) -> None:
    figures = run_demo(tmp_path, timeout_s=300, job_name="tiny", lazy_verifier=True)

    assert figures["state"] == "FINALIZED"
    dispute = figures["dispute"]
    game = dispute["games"][0]
    assert game["on_report"] and game["status"] == "CHALLENGER_WON" and game["winner"] == "whistleblower"
    assert dispute["verified_by"][0] == "lazy" and dispute["verified_by"][-1].startswith("verifier")
    (overturned,) = dispute["overturned"]
    assert overturned["verifier"] == "lazy" and overturned["slashed"] > 0
    balances = figures["balances"]

    def change(label: str) -> int:
        (wb, sb), (wa, sa) = balances[label]["before"], balances[label]["after"]
        return (wa + sa) - (wb + sb)

    assert change("lazy") == -overturned["slashed"]  # its bond, and no fee
    assert change("solver") > 0 and change("jackpot") > 0  # the reward paid, the tax in the jackpot
    assert change("whistleblower") == game["payout"] - 20 * 10**18  # the pot, less its 20 VERI bond
    assert sum(change(label) for label in balances) == 0
    assert figures["economics"]["expected_per_audit"] > 0
    assert all(gone(pid) for pid in figures["pids"])
