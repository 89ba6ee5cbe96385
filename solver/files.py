"""Checkpoint files on the solver's disk: written durably, read bounded (training and regeneration both)."""

from __future__ import annotations

import os
from pathlib import Path

from proofs.spec import Limits


def write_durable(path: Path, data: bytes | memoryview) -> None:
    """Write ``path`` atomically: a temporary file beside it, fsynced, renamed over it. A crash leaves
    the old file or the new one, and at most a temporary file nothing reads."""
    tmp = path.with_suffix(".tmp")
    with open(tmp, "wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def read_bounded(path: Path) -> bytes:
    """A checkpoint file's bytes; OSError if it is missing or larger than any checkpoint."""
    size = path.stat().st_size
    if size > Limits.CHECKPOINT_BYTES:
        raise OSError(f"{path} is {size} bytes, larger than any checkpoint")
    return path.read_bytes()
