"""Storage that fits a disk (solver.retention): a solver's disk per job against its ``--disk-budget``,
and the time to regenerate the worst-case dropped checkpoint.

    .venv/bin/python -m bench.storage_budget [--quick]

For each model (the tiny job's MLP with momentum SGD, and a char-level transformer with Adam) a job of
``--segments`` segments of ``--k`` steps is trained by the solver's own :class:`solver.work.JobTrainer`
(on a local anvil: it reads the market's ``probeCount``) under no budget and under budgets that leave 26
and 6 anchors beside the draw's and the serving slots, then uploaded. "on disk" is the largest number
of bytes its checkpoints held (files in the job's folder plus their blobs in the store) at any training
step and after the upload, then again once the dropped checkpoints a verifier's draw needs are
regenerated and held (a fixed assign seed); "worst regeneration" is the wall time of regenerating the
dropped checkpoint farthest from its anchor (training from it, hashing, writing, storing), the time an
availability challenge on it waits for. The last rows project the issue's example, a 1000-segment
trace of a 100M-parameter Adam job, from the plan alone (no training).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

from core.agent import StopFlag
from core.contracts import JobId, Protocol
from core.storage import LocalStore
from deploy.devnet import start_devnet
from proofs.data import load_dataset
from proofs.datasets import ReferenceJob, reference_job
from proofs.train import Trainer
from rolebase.watchers import MarketWatcher
from solver.retention import COPIES, SERVE_SLOTS, draw_checkpoints, draw_size, plan_retention, regeneration_source
from solver.state import SolverDb
from solver.work import JobTrainer

JOB = JobId(1)
FAR = 2**32 - 1
ANCHORS = (None, 26, 6)  # no budget, and budgets that keep this many anchors
DRAW_SEED = bytes(range(32))  # an assign seed


@dataclass(frozen=True)
class Row:
    model: str
    checkpoint_bytes: int
    budget: int | None
    anchors: int
    trained_peak: int
    peak: int
    all_kept: int
    train_s: float
    worst_segments: int
    regen_s: float
    draw: int
    draw_s: float


def _job(name: str, segments: int, k: int, scale: int) -> ReferenceJob:
    """A reference job of ``segments`` segments, its model widened ``scale`` times."""
    job = reference_job(name, steps=segments * k, checkpoint_interval=k)
    model = dict(job.template["model"])
    if "hidden" in model and isinstance(model["hidden"], list):
        model["hidden"] = [h * scale for h in model["hidden"]]
    if "n_embd" in model:
        model["n_embd"] *= scale
    return replace(job, template={**job.template, "model": model})


def _on_disk(db: SolverDb, store: LocalStore, folder: Path) -> int:
    files = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    blobs = (store.root / "blobs" / c.cid for c in db.checkpoints(JOB) if c.cid is not None)
    return files + sum(b.stat().st_size for b in blobs if b.exists())


def _run(protocol: Protocol, job: ReferenceJob, anchors: int | None, probe_count: int, root: Path) -> Row:
    store = LocalStore(root / "store")
    spec = job.spec(store.put(job.dataset))
    db = SolverDb(root / "state.sqlite")
    db.start_job(JOB, store.put(spec.canonical_bytes()))
    count = spec.segments + 1
    size = len(Trainer(spec, load_dataset(spec, job.dataset)).to_bytes())
    budget = None if anchors is None else COPIES * size * (SERVE_SLOTS + draw_size(count, probe_count) + anchors)
    trainer = JobTrainer(protocol, store, db, MarketWatcher(protocol.market, protocol.book.deploy_block), root / "jobs", StopFlag(), disk_budget=budget)
    peak = [0]
    trainer.progress = lambda job_id, done, total: peak.__setitem__(0, max(peak[0], _on_disk(db, store, root / "jobs")))
    started = time.monotonic()
    trainer.train(JOB, FAR)
    trainer.upload(JOB)
    train_s = time.monotonic() - started
    trained_peak = peak[0] = max(peak[0], _on_disk(db, store, root / "jobs"))
    plan = plan_retention(count, size, budget, probe_count)
    regen_s = draw_s = 0.0
    draw = draw_checkpoints([c.norm or 0.0 for c in db.checkpoints(JOB)[1:]], DRAW_SEED, probe_count) - plan.kept
    if plan.worst_segments:
        worst = max((i for i in range(count) if i not in plan.kept), key=lambda i: i - regeneration_source(plan.kept, i))
        started = time.monotonic()
        trainer.checkpoint(JOB, worst)
        regen_s = time.monotonic() - started
        started = time.monotonic()
        for index in sorted(draw):  # as the solver does once a verifier is drawn: held until the job is final
            trainer.checkpoint(JOB, index, held=True)
        draw_s = time.monotonic() - started
        peak[0] = max(peak[0], _on_disk(db, store, root / "jobs"))
    db.close()
    return Row(
        spec.model.kind, size, budget, len(plan.kept), trained_peak, peak[0], COPIES * size * count, train_s, plan.worst_segments, regen_s, len(draw), draw_s
    )


def _size(n: int | None) -> str:
    if n is None:
        return "none"
    unit, scale = next((u, f) for u, f in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("KB", 1e3), ("B", 1)) if n >= f or u == "B")
    return f"{n / scale:,.1f} {unit}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="the MLP only, at its size")
    parser.add_argument("--segments", type=int, default=150, help="segments per job (default 150)")
    parser.add_argument("--k", type=int, default=2, help="steps per segment (default 2)")
    args = parser.parse_args()
    models = [("mlp-spirals", 1)] if args.quick else [("mlp-spirals", 1), ("char-text", 4)]
    rows: list[Row] = []
    with tempfile.TemporaryDirectory() as tmp, start_devnet(book_dir=Path(tmp) / "book", accounts=1) as net:
        protocol = net.protocol()
        probe_count = protocol.market.params().probe_count
        for name, scale in models:
            job = _job(name, args.segments, args.k, scale)
            for anchors in ANCHORS:
                with tempfile.TemporaryDirectory() as run_dir:
                    rows.append(_run(protocol, job, anchors, probe_count, Path(run_dir)))
    print(f"{args.segments} segments of {args.k} steps; on disk = checkpoint files + their store blobs")
    print(
        "| model | checkpoint | budget | anchors | on disk, trained and uploaded | on disk, draw held | / budget | every checkpoint kept"
        " | train + upload | worst regeneration (segments) | the draw regenerated (checkpoints) |"
    )
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        ratio = "-" if r.budget is None else f"{r.peak / r.budget:.2f}"
        print(
            f"| {r.model} | {_size(r.checkpoint_bytes)} | {_size(r.budget)} | {r.anchors} | {_size(r.trained_peak)} | {_size(r.peak)} | {ratio}"
            f" | {_size(r.all_kept)} | {r.train_s:.1f} s | {r.regen_s:.2f} s ({r.worst_segments}) | {r.draw_s:.1f} s ({r.draw}) |"
        )
    size, count = 1_200_000_000, 1001  # the example: 100M parameters with Adam, 1000 segments
    print(f"\nprojection, 100M-parameter Adam job (1.2 GB checkpoints), 1000 segments, every checkpoint kept: {_size(COPIES * size * count)} (file + blob)")
    print("| budget | anchors | worst regeneration (segments) |")
    print("| ---: | ---: | ---: |")
    for budget in (300 * 10**9, 500 * 10**9, 1000 * 10**9):
        plan = plan_retention(count, size, budget, probe_count)
        print(f"| {budget / 1e9:,.0f} GB | {len(plan.kept)} | {plan.worst_segments} |")


if __name__ == "__main__":
    main()
