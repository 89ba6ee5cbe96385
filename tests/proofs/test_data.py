from __future__ import annotations

import io

import numpy as np
import pytest
import torch
from safetensors.numpy import save

from proofs.data import BatchOrder, load_dataset
from proofs.errors import DatasetError, LimitExceeded
from proofs.spec import Limits


def npz(**arrays: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, allow_pickle=True, **arrays)  # numpy's default, named so that no array is taken for it
    return buf.getvalue()


def xy(n: int = 40) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"x": rng.normal(size=(n, 2)).astype(np.float32), "y": rng.integers(0, 3, n)}


@pytest.fixture(name="spec_for")
def spec_for_fixture(make_spec):
    def spec_for(data: bytes, fmt: str = "safetensors"):
        spec = make_spec("mlp", data)
        return spec.model_copy(update={"dataset": spec.dataset.model_copy(update={"format": fmt})})

    return spec_for


@pytest.mark.parametrize("fmt", ["npz", "safetensors"])
def test_both_formats_load_to_the_same_tensors(fmt: str, spec_for) -> None:
    data = npz(**xy()) if fmt == "npz" else save(xy())
    ds = load_dataset(spec_for(data, fmt), data)
    assert ds.inputs.dtype == torch.float32 and ds.targets is not None and ds.targets.dtype == torch.int64
    assert torch.equal(ds.inputs, torch.from_numpy(xy()["x"]))


def test_pickled_object_arrays_are_refused(spec_for) -> None:
    data = npz(x=np.array([{"evil": 1}] * 40, dtype=object), y=xy()["y"])
    with pytest.raises(DatasetError, match="pickle"):
        load_dataset(spec_for(data, "npz"), data)


@pytest.mark.parametrize(
    ("arrays", "needle"),
    [
        ({"x": xy()["x"]}, "no tensor 'y'"),
        ({"x": xy()["x"].astype(np.int32), "y": xy()["y"]}, "float"),
        ({"x": np.zeros((40, 3), np.float32), "y": xy()["y"]}, "features"),
        ({"x": xy()["x"], "y": xy()["y"][:10]}, "shape"),
        ({"x": xy()["x"], "y": xy()["y"] + 5}, "labels must lie"),
        ({"x": xy(8)["x"], "y": xy(8)["y"]}, "fewer than one batch"),
        ({"x": np.full((40, 2), np.nan, np.float32), "y": xy()["y"]}, "NaN"),
    ],
)
def test_datasets_that_do_not_fit_the_spec_are_refused(arrays: dict[str, np.ndarray], needle: str, spec_for) -> None:
    data = save(arrays)
    with pytest.raises(DatasetError, match=needle):
        load_dataset(spec_for(data), data)


def test_garbage_and_wrong_length_are_refused(spec_for) -> None:
    data = save(xy())
    spec = spec_for(data)
    with pytest.raises(DatasetError, match="bytes; the spec says"):
        load_dataset(spec, data + b"x")
    garbage = b"\x00" * len(data)
    with pytest.raises(DatasetError, match="safetensors"):
        load_dataset(spec, garbage)
    with pytest.raises(DatasetError, match="npz"):
        load_dataset(spec_for(garbage, "npz"), garbage)


def test_oversize_dataset_is_refused(spec_for) -> None:
    class Huge(bytes):
        def __len__(self) -> int:
            return Limits.DATASET_BYTES + 1

    data = save(xy())
    with pytest.raises(LimitExceeded):
        load_dataset(spec_for(data), Huge(data))


def test_token_dataset_checks_vocab_and_length(make_spec) -> None:
    tokens = save({"x": np.arange(200, dtype=np.int64) % 128})
    spec = make_spec("char-transformer", tokens)
    ds = load_dataset(spec, tokens)
    x, y = BatchOrder(spec, ds).batch(3)
    assert x.shape == (16, 8) and torch.equal(x[:, 1:], y[:, :-1])
    bad = save({"x": np.full(200, 300, dtype=np.int64)})
    with pytest.raises(DatasetError, match="tokens must lie"):
        load_dataset(make_spec("char-transformer", bad), bad)


def test_batches_are_a_pure_function_of_spec_and_step(mlp) -> None:
    a, b = BatchOrder(mlp.spec, mlp.dataset), BatchOrder(mlp.spec, mlp.dataset)
    steps = [17, 0, 3, 17, 40, 1]
    for s in steps:
        assert torch.equal(a.indices(s), b.indices(s))
    assert torch.equal(a.indices(3), BatchOrder(mlp.spec, mlp.dataset).indices(3))
    other = mlp.spec.model_copy(update={"seed": mlp.spec.seed + 1})
    assert not torch.equal(a.indices(0), BatchOrder(other, mlp.dataset).indices(0))


def test_each_epoch_visits_every_example_once(mlp) -> None:
    order = BatchOrder(mlp.spec, mlp.dataset)
    for epoch in range(2):
        seen = torch.cat([order.indices(epoch * order.steps_per_epoch + i) for i in range(order.steps_per_epoch)])
        assert len(set(seen.tolist())) == len(seen) == order.steps_per_epoch * mlp.spec.batch_size
