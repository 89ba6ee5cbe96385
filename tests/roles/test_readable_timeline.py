"""What people read of a job: timeline arguments in VERI, dates and readable probes (``--json`` keeps
raw values), and the curve called replay-checked only once a verifier's report passed."""

from __future__ import annotations

import struct

from core.contracts import JobState
from core.probe import Bytes32
from proofs.manifest import CheckpointEntry, Manifest
from proofs.merkle import TraceTree
from rolebase.cli import show_time
from submitter.curve import replay_checked, training_curve
from submitter.timeline import readable_args


def test_amounts_dates_and_probes_are_readable() -> None:
    probe = {"segment": 3, "step": 117, "stateHash": "0x" + "ab" * 32}
    shown = readable_args(
        {"bond": 5 * 10**18, "commitDeadline": 1_795_747_506, "probes": [probe, probe], "probeRoot": "0x" + "cd" * 32, "passed": True, "slot": 2}
    )
    assert shown["bond"] == "5 VERI"
    assert shown["commitDeadline"] == show_time(1_795_747_506) == "2026-11-27 02:45:06 UTC"
    assert shown["probes"] == "segment 3 step 117 0xabababab…; segment 3 step 117 0xabababab…"
    assert shown["probeRoot"] == "0xcdcdcdcd…" and shown["passed"] == "True" and shown["slot"] == "2"
    assert "{" not in " ".join(shown.values())  # no Python dict in the default output


def test_the_curve_is_replay_checked_only_once_a_report_passed() -> None:
    assert [s.name for s in JobState if replay_checked(s)] == ["VERIFIED", "FINALIZED"]
    assert not replay_checked(JobState.VERIFYING) and not replay_checked(JobState.DISPUTED)


def test_the_curve_carries_the_committed_held_out_loss() -> None:
    hashes = [Bytes32(bytes([i]) * 32) for i in range(3)]
    manifest = Manifest(
        spec_cid="QmSpec",
        spec_hash="0x" + "11" * 32,
        steps=4,
        checkpoint_interval=2,
        root=TraceTree(hashes).root,
        checkpoints=tuple(CheckpointEntry(index=i, cid=f"Qm{i}", state_hash=h) for i, h in enumerate(hashes)),
        update_norms=(0.5, 0.25),
        losses=(1.5, 1.25),
        held_out_loss=1.375,
    )
    curve = training_curve(manifest, "QmManifest")  # type: ignore[arg-type]
    assert curve.to_json()["held_out"] == {"loss": 1.375, "loss_f32": "0x" + struct.pack(">f", 1.375).hex()}
    assert training_curve(manifest.model_copy(update={"held_out_loss": None}), "QmManifest").to_json()["held_out"] is None  # type: ignore[arg-type]
