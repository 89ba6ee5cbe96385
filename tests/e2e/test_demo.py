"""The demo's flow, for real: anvil, the embedded store, a solver and a verifier daemon as processes."""

from __future__ import annotations

import struct
import tempfile
from pathlib import Path

import pytest

from core.errors import VeritrainError
from core.gas import max_published_checkpoint_bytes
from tests.e2e.conftest import gone
from veritrain.demo import demo, run_demo

TOKEN = 10**18
TAX = 12 * TOKEN * 300 // 10_000  # the devnet's jackpotTaxBps on reward + fee, paid on top


def test_demo_job_is_solved_verified_paid_and_leaves_no_process(tmp_path: Path) -> None:
    figures = run_demo(tmp_path, timeout_s=240, job_name="tiny")

    assert figures["state"] == "FINALIZED"
    assert list(figures["gas"]) == [
        "JobPosted",
        "JobClaimed",
        "TraceCommitted",
        "VerifierAssigned",
        "ReportSubmitted",
        "JobFinalized",
        "JackpotTaxed",
        "approve (submitter)",
    ]
    balances = figures["balances"]

    def total(label: str, when: str) -> int:
        wallet, staked = balances[label][when]
        return wallet + staked

    # the submitter paid reward + fee + tax; the solver earned the reward, the verifier the fee; no escrow left
    assert total("submitter", "after") - total("submitter", "before") == -12 * TOKEN - TAX
    assert total("solver", "after") - total("solver", "before") == 10 * TOKEN
    assert total("verifier", "after") - total("verifier", "before") == 2 * TOKEN
    assert tuple(balances["market (escrow)"]["after"]) == (0, 0)
    # the fetched model was verified against its CID and actually learned the task (3 classes: chance is 1/3)
    assert figures["model"]["test_accuracy"] > 0.8
    assert (tmp_path / "model.safetensors").stat().st_size == figures["model"]["bytes"]
    # the committed training curve, drawn: a PNG of 800x450 (its IHDR), falling as the model learned
    png = (tmp_path / "training_curve.png").read_bytes()
    assert figures["curve"]["png"] == str(tmp_path / "training_curve.png")
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", png[16:24]) == (800, 450)
    losses = figures["curve"]["losses"]
    assert len(losses) >= 2 and losses[-1] < losses[0]
    assert all(gone(pid) for pid in figures["pids"])


def test_demo_gpt_tiny_runs_on_a_mainnet_sized_chain_and_writes_text_before_and_after(tmp_path: Path) -> None:
    """The gpt-mini demo's path at a tiny size: its checkpoints (1.7 MB) are unpublishable in 30M-gas
    blocks, and the solver claims it on the default 30M-gas devnet all the same (a challenged
    checkpoint goes through the availability court)."""
    figures = run_demo(tmp_path, timeout_s=240, job_name="gpt-tiny")
    assert figures["state"] == "FINALIZED"
    before, after = figures["text"]["before"], figures["text"]["after"]
    assert before.startswith("Romeo.\n") and after.startswith("Romeo.\n") and before != after
    assert figures["model"]["bytes"] > max_published_checkpoint_bytes(30_000_000)
    assert all(gone(pid) for pid in figures["pids"])


def test_demo_cheat_catches_the_cheater_and_the_job_is_then_done_honestly(tmp_path: Path) -> None:
    figures = run_demo(tmp_path, timeout_s=360, job_name="tiny", cheat="tamper")

    assert figures["state"] == "FINALIZED"
    dispute = figures["dispute"]
    (game,) = dispute["games"]
    assert game["status"] == "CHALLENGER_WON" and game["reason"] == 0  # by the referees' verdict
    assert game["winner"].startswith("verifier") and game["bisection_moves"] == 5
    assert dispute["claimed_by"] == ["cheater", "solver"] and dispute["reopened"] == 1
    balances = figures["balances"]

    def change(label: str) -> int:
        (wb, sb), (wa, sa) = balances[label]["before"], balances[label]["after"]
        return (wa + sa) - (wb + sb)

    assert change("cheater") == -10 * TOKEN  # its solver bond, slashed
    assert change("solver") == 10 * TOKEN  # the reward, for the honest redo
    assert change("submitter") == -12 * TOKEN - TAX  # reward + fee + tax, once: made whole for the cheat
    assert change(game["winner"]) >= game["payout"] - 20 * TOKEN > 0  # the challenger was paid
    assert sum(change(label) for label in balances) == 0
    assert figures["model"]["test_accuracy"] > 0.8
    assert all(gone(pid) for pid in figures["pids"])


def test_a_failed_demo_keeps_its_workdir_with_every_log_and_says_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the demo makes its temporary workdir
    with pytest.raises(VeritrainError, match="had no new event for"):
        demo(timeout=0.5, job="tiny")  # the command itself (its --timeout is at least 10 s): gives up at once
    (kept,) = tmp_path.glob("veritrain-demo-*")
    assert {p.name for p in (kept / "logs").iterdir()} == {"solver.log", "verifier.log"}
    (line,) = [line for line in capsys.readouterr().err.splitlines() if "kept" in line]
    assert line.endswith(str(kept))
