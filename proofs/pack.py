"""Datasets from what people have (``veritrain data pack``): UTF-8 text to a flat ``u16`` token
file with the shipped tokenizer, and numpy arrays of uint8 images with integer labels to
safetensors. Both return the bytes of a file that :func:`proofs.data.load_dataset` reads; a
refusal is a :class:`DatasetError` in one line, and nothing is returned half-made.
"""

from __future__ import annotations

import codecs
import sys
from collections.abc import Callable

import numpy as np
from safetensors.numpy import save as save_safetensors

from proofs.arrays import read_npy, read_npz
from proofs.errors import DatasetError, LimitExceeded
from proofs.spec import Limits
from proofs.tokenizer import shipped

__all__ = ["MAX_TEXT_BYTES", "pack_text", "as_nchw", "pack_images", "read_array"]

#: Text read for packing: at least a byte a token, so four times the largest token file is ample.
MAX_TEXT_BYTES = 4 * Limits.DATASET_BYTES
_UTF8_PIECE = 1 << 20


def pack_text(text: bytes, progress: Callable[[int], None] | None = None) -> bytes:
    """The shipped tokenizer's tokens of UTF-8 ``text``, as a ``u16`` file (little-endian uint16,
    no header); ``progress`` is called with the bytes tokenized so far."""
    if len(text) > MAX_TEXT_BYTES:
        raise LimitExceeded("text size in bytes", len(text), MAX_TEXT_BYTES)
    _check_utf8(text)
    tokens = shipped().encode(text, progress)
    if not tokens:
        raise DatasetError("the text is empty: no tokens to train on")
    if sys.byteorder == "big":
        tokens.byteswap()
    packed = tokens.tobytes()
    if len(packed) > Limits.DATASET_BYTES:
        raise LimitExceeded(f"token file size in bytes ({len(tokens):,} tokens)", len(packed), Limits.DATASET_BYTES)
    return packed


def _check_utf8(text: bytes) -> None:
    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(text)
    for start in range(0, max(len(text), 1), _UTF8_PIECE):
        try:
            decoder.decode(view[start : start + _UTF8_PIECE], final=start + _UTF8_PIECE >= len(text))
        except UnicodeDecodeError as exc:
            raise DatasetError(f"the text is not UTF-8: byte {start + exc.start:,} ({exc.reason})") from None


def as_nchw(x: np.ndarray, *, channels_last: bool = False) -> np.ndarray:
    """uint8 images ``(N, C, H, W)`` from ``(N, C, H, W)``, ``(N, H, W, C)`` with ``channels_last``,
    or ``(N, H, W)`` (one channel)."""
    if x.dtype != np.uint8:
        raise DatasetError(f"images must be uint8 (0 to 255, read as x / 255), got {x.dtype} (float features go into safetensors as they are: docs/formats.md)")
    if x.ndim == 3:
        x = x[:, None]
    elif x.ndim == 4 and channels_last:
        x = x.transpose(0, 3, 1, 2)
    elif x.ndim != 4:
        raise DatasetError(f"images must be (N, C, H, W), (N, H, W, C) or (N, H, W), got shape {x.shape}")
    if x.shape[0] == 0:
        raise DatasetError("there are no images")
    return x


def pack_images(x: np.ndarray, y: np.ndarray) -> bytes:
    """Safetensors ``x`` uint8 ``(N, C, H, W)`` (from :func:`as_nchw`) and ``y`` int64 ``(N,)`` from
    non-negative integer labels ``y``, one per image."""
    x = as_nchw(x)
    if y.dtype.kind not in "iu" or y.shape != (x.shape[0],):
        raise DatasetError(f"labels must be integers of shape ({x.shape[0]},), one per image, got {y.dtype} {y.shape}")
    if y.min() < 0:
        raise DatasetError(f"labels must be 0 or more, got {int(y.min())}")
    packed = save_safetensors({"x": np.ascontiguousarray(x), "y": y.astype(np.int64)})
    if len(packed) > Limits.DATASET_BYTES:
        raise LimitExceeded("dataset size in bytes", len(packed), Limits.DATASET_BYTES)
    return packed


def read_array(data: bytes, name: str) -> np.ndarray:
    """An array from ``.npy`` bytes, or the one named ``name`` from ``.npz`` bytes (a zip archive),
    read with ``allow_pickle=False`` and its header checked first."""
    if data[:4] == b"PK\x03\x04":  # a zip archive: npz
        return read_npz(data, [name])[name]
    return read_npy(data, name)
