"""A job's training curve on a real anvil: a real tiny trace committed, its manifest in the store,
read back by ``submitter.curve`` and by ``veritrain submit show`` (table, ``--json`` with the exact
values, ``--curve`` drawing a PNG of the stated size)."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from core.address_book import book_path
from core.cid import Cid, cid_to_digest
from core.contracts import Role
from core.storage import LocalStore
from deploy.devnet import Devnet
from proofs.data import load_dataset
from proofs.datasets import reference_job
from proofs.train import train_trace
from submitter.curve import CURVE_SIZE_PX, CurvePoint, TrainingCurve, draw_curve, job_curve
from tests.chain.test_lifecycle import post, stake

if TYPE_CHECKING:
    from tests.conftest import Parties

ROOT = Path(__file__).resolve().parents[2]


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", "a PNG starts with its signature and IHDR"
    width, height = struct.unpack(">II", data[16:24])
    assert data[-12:] == b"\x00\x00\x00\x00IEND\xaeB`\x82", "and ends with IEND"
    return width, height


def test_the_committed_curve_is_shown_exactly_and_drawn(devnet: Devnet, parties: Parties, tmp_path: Path) -> None:
    proto = devnet.protocol()
    store = LocalStore(tmp_path / "store")
    ref = reference_job("mlp-spirals", steps=60, checkpoint_interval=10)
    spec = ref.spec(store.put(ref.dataset))
    trace = train_trace(spec, load_dataset(spec, ref.dataset))
    manifest = trace.manifest(store.put(spec.canonical_bytes()), [store.put(c) for c in trace.checkpoints])
    manifest_cid = store.put(manifest.canonical_bytes())

    stake(proto, parties.solver, Role.SOLVER)
    job_id, _ = post(proto, parties.submitter)
    assert job_curve(proto, store, job_id) is None  # nothing committed yet
    solver = proto.with_signer(parties.solver).market
    solver.claim(job_id)
    solver.commit(job_id, trace.root, len(trace.state_hashes), cid_to_digest(manifest.final_cid), cid_to_digest(manifest_cid))

    curve = job_curve(proto, store, job_id)
    assert curve is not None and curve.manifest_cid == manifest_cid
    assert [p.loss for p in curve.points] == list(manifest.losses) == list(trace.losses)
    assert [(p.segment, p.first_step, p.last_step) for p in curve.points] == [(i, 10 * i, 10 * i + 10) for i in range(6)]
    assert _png_size(draw_curve(curve, tmp_path / "direct.png").read_bytes()) == CURVE_SIZE_PX

    books = tmp_path / "books"
    devnet.book.save(book_path(books, devnet.client.chain_id))
    common = ["--rpc-url", devnet.rpc_url, "--address-book-dir", str(books), "--store-dir", str(tmp_path / "store")]

    def show(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "veritrain", "submit", "show", str(job_id), *common, *args],
            cwd=ROOT, env={**os.environ, "COLUMNS": "200"}, capture_output=True, text=True, timeout=600,
        )  # fmt: skip

    shown = show("--json", "--curve", str(tmp_path / "curve.png"))
    assert shown.returncode == 0, shown.stderr
    points = json.loads(shown.stdout)["curve"]["points"]
    assert [p["loss"] for p in points] == list(manifest.losses)  # the exact float32 values, through JSON
    bits = [int(p["loss_f32"], 16) for p in points]
    assert np.array(bits, dtype=np.uint32).view(np.float32).tolist() == list(manifest.losses)
    assert _png_size((tmp_path / "curve.png").read_bytes()) == CURVE_SIZE_PX
    table = show()
    assert table.returncode == 0, table.stderr
    assert "training curve" in table.stdout and f"{manifest.losses[-1]:.6g}" in table.stdout and "50-60" in table.stdout
    # a store without the manifest: the timeline is still shown, the curve is said to be unreadable;
    # asked to draw it, the command fails in one line
    empty = ["--store-dir", str(tmp_path / "empty")]
    blind = show("--json", *empty)
    assert blind.returncode == 0, blind.stderr
    body = json.loads(blind.stdout)
    assert body["curve"] is None and "cannot be read" in body["curve_unavailable"] and body["timeline"]
    refused = show("--curve", str(tmp_path / "none.png"), *empty)
    assert refused.returncode != 0 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    assert not (tmp_path / "none.png").exists()
    nowhere = show("--curve", str(tmp_path / "missing" / "curve.png"))
    assert nowhere.returncode == 2 and "--curve" in nowhere.stderr and len(nowhere.stderr.strip().splitlines()) == 1, nowhere.stderr


def test_a_long_curve_is_shown_sampled_evenly_with_its_last_segment() -> None:
    curve = TrainingCurve(Cid("QmManifest"), tuple(CurvePoint(i, 10 * i, 10 * i + 10, 1.0 / (i + 1)) for i in range(62)))
    assert curve.stride(25) == 3 and [p.segment for p in curve.sampled(25)] == [*range(0, 62, 3), 61]
    assert curve.stride(100) == 1 and curve.sampled(100) == curve.points
    assert [p.segment for p in TrainingCurve(Cid("QmM"), curve.points[:7]).sampled(3)] == [0, 3, 6]
