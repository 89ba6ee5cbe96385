"""From a spec file and a dataset file on disk to a validated job spec, before anything is uploaded.

The spec file is the proofs engine's JSON job spec; its ``dataset.cid`` and
``dataset.size_bytes`` may be left out when ``--data`` is given: they are computed
from the file (the CID is the one ``ipfs add`` would give it); ``--init`` fills ``init``
(fine-tuning from pretrained weights) the same way. Without ``--data`` the
spec must name a dataset CID that the store already holds, with that exact size. A spec
that fine-tunes (``init``) without ``--init`` names weights the store must hold likewise.
Everything is checked locally first (:func:`read_job`); :func:`publish` uploads.

A sealed job (``--sealed``, docs/sealing.md) gives :func:`read_job` its data key: the dataset file is
checked against the spec as plaintext, then sealed, and the spec names the sealed bytes (their CID
and size, ``sealed: true``): the draft holds only the sealed bytes, so nothing uploads the plaintext.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from core.bounded import InputRejected, load_json, read_regular_file
from core.cid import Cid, validate_cid
from core.sealing import seal
from core.storage import ContentStore, file_cid
from proofs.errors import ProofError
from proofs.spec import JobSpec, Limits, load_spec
from submitter.errors import SubmitError

#: A spec file larger than this is not a spec (the canonical spec is bounded far below).
MAX_SPEC_FILE_BYTES = 64 * 1024


@dataclass(frozen=True)
class JobDraft:
    """A validated spec, its canonical bytes, and the dataset (and pretrained weights) it names (bytes, if given
    on disk; a sealed job's dataset as its sealed bytes)."""

    spec: JobSpec
    spec_bytes: bytes
    dataset_cid: Cid
    dataset: bytes | None
    init: bytes | None = None  # pretrained weights given on disk (``--init``), uploaded by publish


def _read(path: Path, what: str, limit: int) -> bytes:
    try:
        return read_regular_file(path, max_bytes=limit, what=what)
    except InputRejected as exc:
        raise SubmitError(str(exc)) from None


def read_job(spec_path: Path, data_path: Path | None, store: ContentStore, init_path: Path | None = None, data_key: bytes | None = None) -> JobDraft:
    """Parse and validate the spec (and the dataset and pretrained weights against it); nothing is uploaded yet.
    With ``data_key`` the dataset file is sealed under it, and the spec names the sealed bytes."""
    if data_key is not None and data_path is None:
        raise SubmitError("--sealed needs --data: the dataset is sealed from its file")
    raw = _read(spec_path, "spec file", MAX_SPEC_FILE_BYTES)
    try:
        decoded = load_json(raw, max_bytes=MAX_SPEC_FILE_BYTES, what=f"spec file {spec_path}")
    except InputRejected as exc:
        raise SubmitError(str(exc)) from None
    if not isinstance(decoded, dict) or not isinstance(decoded.get("dataset", {}), dict):
        raise SubmitError(f"spec file {spec_path}: a job spec is a JSON object with a 'dataset' object")
    dataset: bytes | None = None
    stored: bytes | None = None  # what the store gets: the dataset, or its sealed bytes
    if data_path is not None:
        dataset = _read(data_path, "dataset file", Limits.DATASET_BYTES)
        stored = dataset if data_key is None else seal(data_key, dataset)
        named = {"cid": file_cid(stored), "size_bytes": len(stored)} | ({} if data_key is None else {"sealed": True})
        decoded["dataset"] = {**decoded.get("dataset", {}), **named}
    weights: bytes | None = None
    if init_path is not None:
        weights = _read(init_path, "pretrained model file", Limits.WEIGHTS_BYTES)
        decoded["init"] = {"cid": file_cid(weights), "size_bytes": len(weights)}
    try:
        spec = load_spec(decoded)
    except ProofError as exc:
        raise SubmitError(f"spec file {spec_path}: {exc}") from None
    if spec.dataset.sealed and data_key is None:
        raise SubmitError(f"spec file {spec_path}: dataset.sealed is true; post a sealed job with --sealed --data FILE (the plaintext), which seals it")
    init = weights if weights is not None else _pretrained(spec, spec_path, store)
    cid = validate_cid(spec.dataset.cid)
    if dataset is None:
        if not store.has(cid):
            raise SubmitError(f"dataset {cid} named by {spec_path} is not in the store: give the file with --data")
        size = store.stat(cid).size
        if size != spec.dataset.size_bytes:
            raise SubmitError(f"dataset {cid} is {size:,} bytes, the spec says {spec.dataset.size_bytes:,}")
    else:
        from proofs.data import load_dataset  # here, not above: torch loads in seconds, and only a dataset on disk needs it
        from proofs.replay import initial_state

        try:
            # the tensors the spec names, with the shapes it needs; a pretrained model must be the model's parameters
            loaded = load_dataset(spec, dataset, init, data_key)
            if init is not None:
                initial_state(spec, loaded)
        except ProofError as exc:
            ds = spec.dataset
            names = f"{ds.inputs!r}" + (f" and {ds.targets!r}" if ds.targets is not None else "")
            raise SubmitError(
                f"dataset file {data_path} does not fit the spec: {exc}; expected a {ds.format} file with tensors {names} (docs/formats.md)"
            ) from None
    return JobDraft(spec, spec.canonical_bytes(), cid, stored, weights)


def _pretrained(spec: JobSpec, spec_path: Path, store: ContentStore) -> bytes | None:
    """The pretrained weights a fine-tuning spec names (``init``), which must be in the store already."""
    if spec.init is None:
        return None
    cid = validate_cid(spec.init.cid)
    if not store.has(cid):
        raise SubmitError(f"pretrained model {cid} named by {spec_path} is not in the store: give the file with --init")
    stored = store.stat(cid).size
    if stored != spec.init.size_bytes:
        raise SubmitError(f"pretrained model {cid} is {stored:,} bytes, the spec says {spec.init.size_bytes:,}")
    return store.get(cid, spec.init.size_bytes)


def publish(draft: JobDraft, store: ContentStore) -> Cid:
    """Upload the dataset and the pretrained weights (if given) and the canonical spec; returns the spec's CID."""
    uploads = [("dataset", draft.dataset, draft.dataset_cid)]
    if draft.spec.init is not None:
        uploads.append(("pretrained model", draft.init, validate_cid(draft.spec.init.cid)))
    for what, data, cid in uploads:
        if data is None:
            continue
        stored = store.put(data)
        if stored != cid:  # both computed by the same UnixFS code: a store that disagrees is broken
            raise SubmitError(f"store returned CID {stored} for the {what}, expected {cid}")
    return store.put(draft.spec_bytes)
