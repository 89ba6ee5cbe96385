"""Data people have: flat u16 token files and uint8 images, read by ``load_dataset``, written by ``proofs.pack``."""

from __future__ import annotations

import io
from typing import Any

import numpy as np
import pytest
import torch
from safetensors.numpy import load as load_safetensors

from proofs.data import load_dataset
from proofs.errors import DatasetError, LimitExceeded, SpecError
from proofs.pack import as_nchw, pack_images, pack_text, read_array
from proofs.spec import JobSpec, load_spec
from proofs.tokenizer import VOCAB_SIZE, shipped

TEXT = "To be, or not to be, that is the question: whether 'tis nobler in the mind to suffer. " * 20


def _token_spec(data: bytes, vocab: int = VOCAB_SIZE, **dataset: Any) -> JobSpec:
    return load_spec(
        {
            "model": {"kind": "char-transformer", "vocab_size": vocab, "block_size": 8, "n_layer": 1, "n_head": 2, "n_embd": 16},
            "dataset": {"cid": "QmTokens", "format": "u16", "size_bytes": len(data), "targets": None, **dataset},
            "optimizer": {"kind": "adam", "lr": 0.01},
            "batch_size": 4,
            "steps": 4,
            "seed": 1,
            "checkpoint_interval": 2,
        }
    )


def test_text_packs_to_little_endian_uint16_tokens_that_load_as_the_stream() -> None:
    data = pack_text(TEXT.encode())
    tokens = np.frombuffer(data, dtype="<u2")
    assert shipped().decode(tokens.tolist()) == TEXT
    assert data[:2] == int(tokens[0]).to_bytes(2, "little")
    loaded = load_dataset(_token_spec(data), data)
    assert loaded.is_tokens and loaded.inputs.dtype == torch.int64 and loaded.inputs.tolist() == tokens.tolist()


@pytest.mark.parametrize(
    ("mutate", "match"),
    [
        (lambda d: d + b"\x00", "2 bytes a token: .* odd length"),
        (lambda d: d[:-2] + (VOCAB_SIZE).to_bytes(2, "little"), r"tokens must lie in \[0, 4096\), got \[.*, 4096\] \(the first outside at position"),
        (lambda d: d[:6], "gives? 0 windows"),
    ],
)
def test_the_u16_loader_refuses_odd_lengths_tokens_outside_the_vocabulary_and_too_few_tokens(mutate: Any, match: str) -> None:
    data = mutate(pack_text(TEXT.encode()))
    with pytest.raises(DatasetError, match=match):
        load_dataset(_token_spec(data), data)


def test_the_u16_loader_refuses_a_file_of_another_size_than_the_spec_says_and_a_smaller_vocabulary() -> None:
    data = pack_text(TEXT.encode())
    with pytest.raises(DatasetError, match=f"is {len(data) - 2} bytes; the spec says {len(data)}"):
        load_dataset(_token_spec(data), data[:-2])
    with pytest.raises(DatasetError, match=r"tokens must lie in \[0, 256\)"):
        load_dataset(_token_spec(data, vocab=256), data)


def test_a_u16_dataset_is_one_stream_and_old_specs_keep_their_format() -> None:
    with pytest.raises(SpecError, match="a u16 file is one token stream: dataset.targets must be null"):
        _token_spec(b"\x00\x00", targets="y")
    with pytest.raises(SpecError, match="dataset.format"):
        _token_spec(b"\x00\x00", format="bin")


def test_uint8_images_become_x_over_255_one_float32_division_each() -> None:
    x = np.arange(256, dtype=np.uint8).reshape(4, 1, 8, 8)
    data = pack_images(x, np.array([0, 1, 2, 3]))
    spec = load_spec(
        {
            "model": {"kind": "cnn", "in_channels": 1, "height": 8, "width": 8, "channels": [2], "hidden": 4, "num_classes": 4},
            "dataset": {"cid": "QmImages", "format": "safetensors", "size_bytes": len(data)},
            "optimizer": {"kind": "sgd", "lr": 0.1},
            "batch_size": 2,
            "steps": 2,
            "seed": 1,
            "checkpoint_interval": 1,
        }
    )
    loaded = load_dataset(spec, data)
    want = np.array([np.float32(v / 255) for v in range(256)], dtype=np.float32).reshape(4, 1, 8, 8)  # float64 quotient rounded once: exact
    assert loaded.inputs.dtype == torch.float32 and np.array_equal(loaded.inputs.numpy().view(np.int32), want.view(np.int32))
    assert loaded.inputs.flatten()[[0, 51, 255]].tolist() == [0.0, np.float32(0.2), 1.0]
    assert loaded.targets is not None and loaded.targets.tolist() == [0, 1, 2, 3]


def test_images_are_stored_channels_first_from_any_layout() -> None:
    nhwc = np.random.default_rng(1).integers(0, 256, (5, 6, 4, 3), dtype=np.uint8)
    nchw = as_nchw(nhwc, channels_last=True)
    assert nchw.shape == (5, 3, 6, 4) and nchw[2, 1, 5, 3] == nhwc[2, 5, 3, 1]
    assert as_nchw(nhwc[..., 0]).shape == (5, 1, 6, 4)
    stored = load_safetensors(pack_images(nchw, np.arange(5, dtype=np.uint8)))
    assert np.array_equal(stored["x"], nchw) and stored["y"].dtype == np.int64


@pytest.mark.parametrize(
    ("x", "y", "match"),
    [
        (np.zeros((2, 1, 4, 4), np.float32), np.zeros(2, np.int64), "images must be uint8"),
        (np.zeros((2, 4), np.uint8), np.zeros(2, np.int64), "got shape"),
        (np.zeros((0, 1, 4, 4), np.uint8), np.zeros(0, np.int64), "no images"),
        (np.zeros((2, 1, 4, 4), np.uint8), np.zeros(3, np.int64), r"one per image"),
        (np.zeros((2, 1, 4, 4), np.uint8), np.zeros(2, np.float32), r"labels must be integers"),
        (np.zeros((2, 1, 4, 4), np.uint8), np.array([0, -1]), r"0 or more"),
    ],
)
def test_bad_images_or_labels_are_refused_in_one_line(x: np.ndarray, y: np.ndarray, match: str) -> None:
    with pytest.raises(DatasetError, match=match):
        pack_images(x, y)


def test_text_that_is_not_utf8_or_is_empty_is_refused() -> None:
    with pytest.raises(DatasetError, match=r"not UTF-8: byte 6 \(invalid start byte\)"):
        pack_text(b"hello \xff")
    with pytest.raises(DatasetError, match="empty"):
        pack_text(b"")


def test_oversize_text_is_refused_before_tokenizing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("proofs.pack.MAX_TEXT_BYTES", 10)
    with pytest.raises(LimitExceeded, match="text size in bytes is 11"):
        pack_text(b"x" * 11)


def test_arrays_are_read_from_npy_and_npz_without_pickles() -> None:
    def npy(arr: np.ndarray) -> bytes:
        out = io.BytesIO()
        np.save(out, arr, allow_pickle=True)
        return out.getvalue()

    out = io.BytesIO()
    np.savez(out, images=np.ones((2, 3), np.uint8), labels=np.arange(2))
    assert read_array(out.getvalue(), "labels").tolist() == [0, 1]
    assert read_array(npy(np.arange(3)), "x").tolist() == [0, 1, 2]
    with pytest.raises(DatasetError, match="never pickles"):
        read_array(npy(np.array([{}], dtype=object)), "x")
    with pytest.raises(DatasetError, match=r"has no tensor 'x' \(has \['images', 'labels'\]\)"):
        read_array(out.getvalue(), "x")
    with pytest.raises(DatasetError, match="cannot be read"):
        read_array(b"not numpy at all", "x")
