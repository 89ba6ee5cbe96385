"""Dataset files to numpy arrays: npz, npy, safetensors and flat uint16 token files, each size and
header checked before numpy allocates, never a pickle. No torch here: the dataset commands
(``veritrain data``) parse with these alone; :mod:`proofs.data` turns the arrays into a job's tensors."""

from __future__ import annotations

import io
import math
import zipfile
from typing import IO

import numpy as np
from safetensors import SafetensorError
from safetensors.numpy import load as load_safetensors

from core.bounded import safetensors_header
from proofs.errors import DatasetError, LimitExceeded
from proofs.spec import Limits

__all__ = ["read_npz", "read_npy", "read_u16", "read_safetensors", "first_line"]

#: A dataset names one or two tensors: its safetensors header is a few hundred bytes.
_MAX_SAFETENSORS_HEADER = 64 * 1024


def read_npz(data: bytes, names: list[str]) -> dict[str, np.ndarray]:
    """The arrays ``names`` from npz bytes, each member's size and header checked before it is read (never a pickle)."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        infos = {info.filename: info for info in archive.infolist()}
    except (zipfile.BadZipFile, ValueError, OSError, EOFError) as exc:
        raise DatasetError(f"dataset is not a valid npz archive: {first_line(exc)}") from exc
    out = {}
    for name in names:
        member = infos.get(name + ".npy")
        if member is None:
            raise DatasetError(f"npz dataset has no tensor {name!r} (has {sorted(n.removesuffix('.npy') for n in infos)})")
        if member.file_size > Limits.DATASET_BYTES:  # a zip bomb stops here, before inflating
            raise LimitExceeded(f"tensor {name!r} uncompressed size in bytes", member.file_size, Limits.DATASET_BYTES)
        try:
            with archive.open(member) as fh:
                _check_npy_header(name, fh, member.file_size)
            with archive.open(member) as fh:
                out[name] = np.lib.format.read_array(fh, allow_pickle=False)
        except (ValueError, OSError, EOFError, zipfile.BadZipFile, NotImplementedError) as exc:
            raise DatasetError(f"npz tensor {name!r} cannot be read: {first_line(exc)}") from exc
    return out


def read_npy(data: bytes, name: str) -> np.ndarray:
    """One array from ``.npy`` bytes, its header checked before numpy allocates (never a pickle)."""
    try:
        fh = io.BytesIO(data)
        _check_npy_header(name, fh, len(data))
        fh.seek(0)
        return np.lib.format.read_array(fh, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise DatasetError(f"npy array {name!r} cannot be read: {first_line(exc)}") from exc


def read_u16(data: bytes) -> np.ndarray:
    """A flat token file: little-endian uint16 tokens, no header (nanoGPT's ``train.bin``), read in place."""
    if len(data) % 2:
        raise DatasetError(f"a u16 token file holds 2 bytes a token: {len(data):,} bytes is an odd length")
    return np.frombuffer(data, dtype="<u2")


def _check_npy_header(name: str, fh: IO[bytes], member_size: int) -> None:
    """Refuse an npy member before numpy allocates for it: object arrays (pickles), structured or
    non-numeric dtypes, and a shape whose data would not fit in the member (numpy allocates the
    whole shape before reading from a zip member)."""
    version = np.lib.format.read_magic(fh)
    read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
    shape, _, dtype = read_header(fh)
    if dtype.hasobject or dtype.fields is not None or dtype.subdtype is not None or dtype.kind not in "biuf":
        raise DatasetError(f"tensor {name!r} has dtype {str(dtype)[:40]}: only plain numeric arrays are read (never pickles)")
    if any(d < 0 for d in shape) or math.prod(shape) * dtype.itemsize > member_size:
        raise DatasetError(f"tensor {name!r} claims shape {tuple(shape)[:8]}, more data than its {member_size:,} bytes")


def read_safetensors(data: bytes, names: list[str]) -> dict[str, np.ndarray]:
    """The arrays ``names`` from safetensors bytes, the header's size bounded before it is parsed."""
    try:
        safetensors_header(data, max_header=_MAX_SAFETENSORS_HEADER, what="safetensors dataset")
        tensors = load_safetensors(data)
    except (SafetensorError, ValueError, TypeError) as exc:  # InputRejected is a ValueError
        raise DatasetError(f"dataset is not valid safetensors: {first_line(exc)}") from exc
    missing = [n for n in names if n not in tensors]
    if missing:
        raise DatasetError(f"safetensors dataset has no tensor {missing[0]!r} (has {sorted(tensors)})")
    return {n: tensors[n] for n in names}


def first_line(exc: BaseException) -> str:
    """The first line of a library's error (numpy's run over several): errors here are one line."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
