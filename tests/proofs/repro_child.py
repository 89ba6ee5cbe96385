"""Child process of tests/proofs/test_repro.py: replay every segment of the jobs in a folder
under this process's kernel settings (set through its environment) and print the verdicts.

    python tests/proofs/repro_child.py DIR THREADS

DIR holds ``jobs.json`` (name -> spec file, data file, checkpoint files) written by the test.
Prints one JSON object: name -> list of [segment, passed, replayed hash (0x hex)], plus ``step``:
name -> the hash (0x hex) of ``execute_step`` on checkpoint 0 (a referee's single-step re-execution), and
``start``: name -> the hash (0x hex) of the spec's checkpoint 0 rebuilt here (seeded, or pretrained weights
from the job's ``init`` file; the test compares the pretrained ones: torch's seeded initialization
differs under ``ATEN_CPU_CAPABILITY=default``, docs/numerics.md).
``eval``: name -> ``[step, held-out loss]`` at the checkpoints a spec with ``eval`` evaluates.
``layer``: numba's thread pool in this process (``NUMBA_THREADING_LAYER`` picks one).
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any

import numba

from proofs import repro_kernels as K
from proofs.checkpoint import decode_checkpoint, state_hash
from proofs.data import load_dataset
from proofs.merkle import hex32
from proofs.replay import initial_state_hash, replay_segment
from proofs.spec import load_spec
from proofs.steps import execute_step
from proofs.train import Runtime, Trainer, held_out_loss


def main() -> None:
    folder, threads = Path(sys.argv[1]), int(sys.argv[2])
    # the jobs are tiny: at two threads split every kernel across them anyway (its parallel
    # build), at one run every kernel's serial build
    K.PARALLEL_MIN = 0 if threads > 1 else math.inf
    rt = Runtime(threads=threads)
    jobs = json.loads((folder / "jobs.json").read_text())
    out: dict[str, Any] = {"step": {}, "start": {}, "eval": {}}
    for name, job in jobs.items():
        spec = load_spec((folder / job["spec"]).read_bytes())
        init = (folder / job["init"]).read_bytes() if "init" in job else None
        dataset = load_dataset(spec, (folder / job["data"]).read_bytes(), init)
        ckpts = [(folder / f).read_bytes() for f in job["checkpoints"]]
        verdicts = []
        for seg in range(spec.segments):
            v = replay_segment(spec, dataset, seg, ckpts[seg], ckpts[seg + 1], rt=rt, start_hash=state_hash(ckpts[seg]), end_hash=state_hash(ckpts[seg + 1]))
            verdicts.append([seg, v.passed, None if v.replayed_hash is None else hex32(v.replayed_hash)])
        out[name] = verdicts
        out["step"][name] = hex32(state_hash(execute_step(spec, dataset, ckpts[0], rt)))
        out["start"][name] = hex32(initial_state_hash(spec, dataset))
        if spec.eval is not None:
            losses = []
            for data in ckpts:
                trainer = Trainer(spec, dataset, rt)
                trainer.load(decode_checkpoint(data))
                if trainer.step % spec.eval.every == 0:
                    losses.append([trainer.step, held_out_loss(trainer)])
            out["eval"][name] = losses
    out["layer"] = numba.threading_layer()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
