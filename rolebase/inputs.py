"""A job's training inputs from content storage, each verified against its CID: the dataset and,
when the spec fine-tunes (``spec.init``), the pretrained weights that are checkpoint 0's parameters.
Every role that trains or replays a job loads them here, so none can forget the pretrained model,
or to open a sealed dataset (``spec.dataset.sealed``: docs/sealing.md) with the job's data key."""

from __future__ import annotations

from core.errors import SealingError
from core.sealing import open_sealed
from core.storage import ContentStore
from proofs.data import Dataset, load_dataset
from proofs.spec import JobSpec

__all__ = ["fetch_inputs", "fetch_dataset", "input_names"]


def input_names(spec: JobSpec) -> list[tuple[str, str]]:
    """``(what, cid)`` of each input the job reads from storage, the dataset first."""
    names = [("dataset", spec.dataset.cid)]
    if spec.init is not None:
        names.append(("pretrained model", spec.init.cid))
    return names


def fetch_inputs(store: ContentStore, spec: JobSpec, data_key: bytes | None = None) -> tuple[bytes, bytes | None]:
    """The dataset's bytes and the pretrained weights' (None when the spec names none), each read
    up to the size the spec states and checked against its CID (raises the store's errors). A
    sealed dataset is opened with ``data_key`` (:class:`SealingError` without one, or with another
    job's: the bytes are authenticated whole before any is returned)."""
    data = store.get(spec.dataset.cid, spec.dataset.size_bytes)
    if spec.dataset.sealed:
        if data_key is None:
            raise SealingError(f"dataset {spec.dataset.cid} is sealed and no data key for it is held")
        data = open_sealed(data_key, data)
    init = store.get(spec.init.cid, spec.init.size_bytes) if spec.init is not None else None
    return data, init


def fetch_dataset(store: ContentStore, spec: JobSpec, data_key: bytes | None = None) -> Dataset:
    """:func:`fetch_inputs`, parsed and checked against the spec (:func:`proofs.load_dataset`); a
    sealed job's dataset keeps ``data_key``, which seals and opens its checkpoints."""
    return load_dataset(spec, *fetch_inputs(store, spec, data_key), data_key=data_key)
