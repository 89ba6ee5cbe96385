"""`veritrain data pack text|images`: a dataset file from what people have, and its spec block.

``data pack text FILE --out corpus.u16`` tokenizes UTF-8 text with the shipped tokenizer
(:mod:`proofs.tokenizer`) into a flat uint16 token file; ``data pack images --x X.npy --y Y.npy
--out data.safetensors`` writes uint8 images and integer labels as safetensors. Each prints, on
stdout, the spec's ``dataset`` block for the file (its CID as ``ipfs add`` and ``submit post``
compute it, format, size, tensor names) and, on stderr, the model sizes that fit it. The file
is written to a temporary name beside ``--out`` and renamed once complete, so bad input leaves
nothing behind and an existing ``--out`` is replaced whole or not at all.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

from core.bounded import InputRejected, read_regular_file
from core.errors import VeritrainError
from core.storage import file_cid
from proofs.errors import ProofError
from proofs.pack import MAX_TEXT_BYTES, as_nchw, pack_images, pack_text, read_array
from proofs.spec import DatasetSpec, Limits
from proofs.tokenizer import VOCAB_SIZE
from rolebase import cli as options
from rolebase.cli import err_console

app = options.command_group("data", "Datasets from what you have: text to tokens, numpy arrays to safetensors (docs/formats.md).")
pack = options.command_group("pack", "Write a dataset file and print the spec's dataset block for it.")
app.add_typer(pack, name="pack")


class PackError(VeritrainError):
    """An input file cannot be packed (the message names it and why)."""

    exit_code = 2


def _read(path: Path, what: str, limit: int) -> bytes:
    try:
        return read_regular_file(path, max_bytes=limit, what=what)
    except InputRejected as exc:
        raise PackError(str(exc)) from None


def _write(out: Path, data: bytes, block: DatasetSpec) -> None:
    """Write ``data`` to ``out`` through a temporary file renamed into place; print the dataset block."""
    tmp = out.with_name(f".{out.name}.{os.getpid()}.part")
    try:
        with open(tmp, "wb") as fh:
            fh.write(data)
        os.replace(tmp, out)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    print(json.dumps({"dataset": block.model_dump(mode="json")}, indent=2))


def _block(data: bytes, fmt: str, targets: str | None) -> DatasetSpec:
    return DatasetSpec.model_validate({"cid": file_cid(data), "format": fmt, "size_bytes": len(data), "inputs": "x", "targets": targets})


def _out_dir(out: Path) -> None:
    if not out.parent.is_dir():
        raise PackError(f"--out {out}: no directory {out.parent}")
    if out.is_dir():
        raise PackError(f"--out {out} is a directory: name the file to write")


@pack.command("text")
def text(
    file: Annotated[Path, typer.Argument(help="UTF-8 text to tokenize", show_default=False)],
    out: Annotated[Path, typer.Option("--out", help="the token file to write (u16: little-endian uint16, no header)", show_default=False)],
) -> None:
    """Tokenize a UTF-8 text file with the shipped byte-level BPE (4,096 tokens) into a u16 token file.

    The dataset block printed on stdout goes into a gpt or char-transformer spec with vocab_size
    of at least 4096 (targets null); `submit post --data` uploads the file.

    Examples:

      veritrain data pack text input.txt --out corpus.u16

      veritrain data pack text input.txt --out corpus.u16 > block.json && jq -s '.[0] * .[1]' job.json block.json > job-u16.json
    """
    _out_dir(out)
    raw = _read(file, "text file", MAX_TEXT_BYTES)
    columns = ("{task.description}", BarColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn())
    with Progress(*columns, console=err_console, transient=True) as bar:
        task = bar.add_task("tokenizing", total=len(raw))
        try:
            data = pack_text(raw, progress=lambda done: bar.update(task, completed=done))
        except ProofError as exc:
            raise PackError(f"{file}: {exc}") from None
    _write(out, data, _block(data, "u16", None))
    err_console.print(
        f"wrote {out}: {len(data) // 2:,} tokens from {len(raw):,} bytes; models with vocab_size >= {VOCAB_SIZE} read it", highlight=False, soft_wrap=True
    )


@pack.command("images")
def images(
    x: Annotated[str, typer.Option("--x", help="uint8 images: X.npy, or ARRAYS.npz[:NAME] (NAME default x)", show_default=False)],
    y: Annotated[str, typer.Option("--y", help="integer labels: Y.npy, or ARRAYS.npz[:NAME] (NAME default y)", show_default=False)],
    out: Annotated[Path, typer.Option("--out", help="the safetensors file to write (x uint8 (N, C, H, W), y int64)", show_default=False)],
    channels_last: Annotated[bool, typer.Option("--channels-last", help="the images are (N, H, W, C): transpose them to (N, C, H, W)")] = False,
) -> None:
    """Write uint8 images and integer labels from numpy files as a safetensors dataset for the cnn.

    Images are (N, C, H, W), or (N, H, W) for one channel (--channels-last: (N, H, W, C)); the
    model sees each pixel as x / 255 in float32. Arrays are read with allow_pickle=False.

    Examples:

      veritrain data pack images --x train_x.npy --y train_y.npy --out data.safetensors

      veritrain data pack images --x mnist.npz:images --y mnist.npz:labels --out mnist.safetensors
    """
    _out_dir(out)
    try:
        pixels = as_nchw(_array(x, "x", "--x"), channels_last=channels_last)
        labels = _array(y, "y", "--y")
        data = pack_images(pixels, labels)
    except ProofError as exc:
        raise PackError(f"--x {x} --y {y}: {exc}") from None
    _write(out, data, _block(data, "safetensors", "y"))
    n, c, h, w = pixels.shape
    err_console.print(
        f"wrote {out}: {n:,} images; a cnn with in_channels {c}, height {h}, width {w}, num_classes >= {int(labels.max()) + 1} reads it",
        highlight=False,
        soft_wrap=True,
    )


def _array(source: str, default: str, option: str) -> np.ndarray:
    """The array ``source`` names: a ``.npy`` file, or one array of a ``.npz`` file (``PATH[:NAME]``)."""
    head, _, name = source.rpartition(":")
    path = head if head.endswith(".npz") else source
    raw = _read(Path(path), f"{option} file", Limits.DATASET_BYTES)
    try:
        return read_array(raw, name if path == head else default)
    except ProofError as exc:
        raise PackError(f"{option} {source}: {exc}") from None
