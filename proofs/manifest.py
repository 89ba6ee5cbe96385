"""The trace manifest: what a solver publishes (by CID) next to its on-chain commitment.

Canonical JSON (sorted keys, compact) listing, for checkpoint ``i = 0..n``, its
CID and state hash, the per-segment update norms (L2 of the parameter change
over segment ``i``, the top-Q sampling key), the per-segment mean training losses
(``proofs.train.segment_loss``: float32 values, written as the shortest decimal that
reads back as the same number, so they round-trip bit-exactly), the spec's CID and
hash, the Merkle root and, for a spec that holds out an evaluation split (``spec.eval``), the
final model's held-out loss (``proofs.train.held_out_loss``, a float32; left out otherwise, so a
manifest without it keeps its bytes). Parsing is bounded and checks that the manifest is
internally consistent: indices in order, ``n + 1`` checkpoints for ``n`` norms and
``n`` losses, every loss a float32, and a root that is the
:class:`~proofs.merkle.TraceTree` root of the listed hashes.

Version 2 added the losses; a version 1 manifest (no losses) is refused like any other
malformed manifest (docs/formats.md, "Manifest").

**Any length, one block at a time.** A manifest whose canonical bytes fit one UnixFS block
(:data:`MANIFEST_BLOCK`, 262,144 bytes: about 1,300 checkpoints) is stored as they are. A longer one
is a DAG of the project's own bounded format under the committed CID (:func:`manifest_blocks`):
**pages** of :data:`PAGE_CHECKPOINTS` checkpoints (page p: checkpoints ``p*P .. p*P+P-1`` with the
norms and losses of the segments they start), each canonical JSON in one block, and a **root** in
one block that holds everything else and the pages' CIDs in order. Each block is one file of one
block, so its CID is the sha256 of its dag-pb node (what the chain recomputes, ``CidLib``; the root
lists the pages by that digest, as the chain writes a CID), each is read by CID (every byte verified by the store), size-checked and parsed alone, and the whole is
then validated as one manifest (:func:`load_manifest`): 10,000 checkpoints are 11 blocks.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, PlainSerializer, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from core.bounded import MAX_DEPTH, json_depth
from core.cid import Cid, cid_to_digest, digest_to_cid
from core.probe import Bytes32
from core.storage.errors import StorageError
from core.storage.unixfs import CHUNK_SIZE, file_cid
from proofs.errors import LimitExceeded, ManifestError
from proofs.merkle import TraceTree, hex32
from proofs.spec import JobSpec, Limits, canonical_json

__all__ = [
    "MANIFEST_VERSION",
    "MAX_MANIFEST_BYTES",
    "MANIFEST_BLOCK",
    "PAGE_CHECKPOINTS",
    "CheckpointEntry",
    "Manifest",
    "parse_manifest",
    "committed_manifest",
    "is_float32",
    "manifest_blocks",
    "write_manifest",
    "load_manifest",
    "PageGetter",
]

MANIFEST_VERSION: Literal[2] = 2
MAX_MANIFEST_BYTES = 256 * (Limits.SEGMENTS + 1) + 4096
#: The largest block of a manifest (its root, or one of its pages): one UnixFS chunk, one block.
MANIFEST_BLOCK = CHUNK_SIZE
#: Checkpoints a page lists: at most ~201 bytes each in canonical JSON (with its segment's norm and
#: loss), so a page is at most ~201 KB, one block.
PAGE_CHECKPOINTS = 1000
_MAX_PAGES = -(-(Limits.SEGMENTS + 1) // PAGE_CHECKPOINTS)

#: ``get(cid)``: the bytes of one page of a manifest, verified against ``cid`` (a store's ``get`` with
#: the limit :data:`MANIFEST_BLOCK`); a StorageError (not served, forged, too large) makes the manifest
#: invalid (:class:`ManifestError`); anything else (a reader that waits longer) goes through.
PageGetter = Callable[[str], bytes]

_HEX32 = r"^0x[0-9a-f]{64}$"
_Hex32 = Annotated[str, Field(pattern=_HEX32)]


def _hash_from_json(value: object) -> object:
    """A hash field's JSON text to bytes (the pattern and messages of a ``_Hex32`` field); bytes,
    from code, pass on to the length check."""
    if isinstance(value, bytes):
        return value
    if not isinstance(value, str):
        raise PydanticCustomError("string_type", "Input should be a valid string")
    if not re.fullmatch(_HEX32, value):
        raise PydanticCustomError("string_pattern_mismatch", "String should match pattern '{pattern}'", {"pattern": _HEX32})
    return bytes.fromhex(value[2:])


#: A hash as code sees it (``Bytes32``); ``0x`` + 64 lowercase hex digits in the JSON.
_Hash = Annotated[Bytes32, BeforeValidator(_hash_from_json), Field(min_length=32, max_length=32), PlainSerializer(hex32)]
_Cid = Annotated[str, Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9]+$")]


def is_float32(value: float) -> bool:
    """Whether ``value`` is exactly a finite float32 (what a committed loss must be)."""
    with np.errstate(over="ignore"):
        return math.isfinite(value) and float(np.float32(value)) == value


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class CheckpointEntry(_Frozen):
    index: Annotated[int, Field(ge=0, le=Limits.SEGMENTS)]
    cid: _Cid
    state_hash: _Hash


class Manifest(_Frozen):
    version: Literal[2] = MANIFEST_VERSION
    spec_cid: _Cid
    spec_hash: _Hex32
    steps: Annotated[int, Field(ge=1, le=Limits.STEPS)]
    checkpoint_interval: Annotated[int, Field(ge=1, le=Limits.STEPS)]
    root: _Hash
    checkpoints: tuple[CheckpointEntry, ...] = Field(min_length=2, max_length=Limits.SEGMENTS + 1)
    update_norms: tuple[Annotated[float, Field(ge=0.0, allow_inf_nan=False)], ...]
    losses: tuple[Annotated[float, Field(allow_inf_nan=False)], ...]
    held_out_loss: Annotated[float, Field(allow_inf_nan=False)] | None = None

    @model_validator(mode="after")
    def _consistent(self) -> Manifest:
        n = self.segments
        if self.steps != n * self.checkpoint_interval:
            raise ValueError(f"{n + 1} checkpoints every {self.checkpoint_interval} steps cannot cover {self.steps} steps")
        if [c.index for c in self.checkpoints] != list(range(n + 1)):
            raise ValueError("checkpoint indices must be 0, 1, ..., n in order")
        if len(self.update_norms) != n:
            raise ValueError(f"{len(self.update_norms)} update norms for {n} segments")
        if len(self.losses) != n:
            raise ValueError(f"{len(self.losses)} losses for {n} segments")
        if (bad := next((i for i, x in enumerate(self.losses) if not is_float32(x)), None)) is not None:
            raise ValueError(f"loss of segment {bad} ({self.losses[bad]!r}) is not a float32")
        if self.held_out_loss is not None and not is_float32(self.held_out_loss):
            raise ValueError(f"held-out loss {self.held_out_loss!r} is not a float32")
        computed = TraceTree(self.state_hashes).root
        if computed != self.root:
            raise ValueError(f"root {hex32(self.root)} is not the Merkle root of the listed state hashes ({hex32(computed)})")
        return self

    @property
    def segments(self) -> int:
        return len(self.checkpoints) - 1

    @property
    def state_hashes(self) -> tuple[Bytes32, ...]:
        return tuple(c.state_hash for c in self.checkpoints)

    @property
    def checkpoint_cids(self) -> tuple[str, ...]:
        return tuple(c.cid for c in self.checkpoints)

    @property
    def final_cid(self) -> str:
        """CID of the last checkpoint: the trained model the submitter receives."""
        return self.checkpoints[-1].cid

    def tree(self) -> TraceTree:
        return TraceTree(self.state_hashes)

    def check_spec(self, spec: JobSpec) -> None:
        """Raise :class:`ManifestError` unless the manifest describes a trace of ``spec``."""
        if self.spec_hash != spec.spec_hash():
            raise ManifestError(f"manifest is for spec {self.spec_hash}, not {spec.spec_hash()}")
        if (self.steps, self.checkpoint_interval) != (spec.steps, spec.checkpoint_interval):
            raise ManifestError(
                f"manifest covers {self.steps} steps every {self.checkpoint_interval}; the spec says {spec.steps} every {spec.checkpoint_interval}"
            )
        if (self.held_out_loss is None) != (spec.eval is None):
            held = "holds out an evaluation split" if spec.eval is not None else "holds out nothing"
            raise ManifestError(f"the spec {held}; the manifest {'lacks' if self.held_out_loss is None else 'claims'} a held-out loss")

    def canonical_bytes(self) -> bytes:
        return canonical_json(self.model_dump(mode="json", exclude={"held_out_loss"} if self.held_out_loss is None else None))


class _Page(_Frozen):
    """One page of a long manifest: checkpoints ``p*P ..`` and the norms and losses of the segments
    they start (the last checkpoint starts none)."""

    checkpoints: tuple[CheckpointEntry, ...] = Field(min_length=1, max_length=PAGE_CHECKPOINTS)
    update_norms: tuple[Annotated[float, Field(ge=0.0, allow_inf_nan=False)], ...] = Field(max_length=PAGE_CHECKPOINTS)
    losses: tuple[Annotated[float, Field(allow_inf_nan=False)], ...] = Field(max_length=PAGE_CHECKPOINTS)


class _Root(_Frozen):
    """The root of a long manifest: the manifest's fields but the per-checkpoint ones, its
    checkpoint count and its pages' CIDs in order."""

    version: Literal[2] = MANIFEST_VERSION
    spec_cid: _Cid
    spec_hash: _Hex32
    steps: Annotated[int, Field(ge=1, le=Limits.STEPS)]
    checkpoint_interval: Annotated[int, Field(ge=1, le=Limits.STEPS)]
    root: _Hash
    checkpoint_count: Annotated[int, Field(ge=2, le=Limits.SEGMENTS + 1)]
    held_out_loss: Annotated[float, Field(allow_inf_nan=False)] | None = None
    """The manifest's own field (left out of the root's bytes when None, as the manifest's are)."""
    pages: tuple[_Hash, ...] = Field(min_length=2, max_length=_MAX_PAGES)
    """Each page's CIDv0 digest (the sha256 of its one block, ``0x`` + 64 hex digits as the chain's
    bytes32 is written): what a contract could check a published page against."""


def manifest_blocks(manifest: Manifest) -> tuple[bytes, list[bytes]]:
    """The blocks a solver stores for ``manifest``: its root (whose CID is the committed manifest CID)
    and its pages in order (none when the canonical bytes fit one block: then they are the root)."""
    whole = manifest.canonical_bytes()
    if len(whole) <= MANIFEST_BLOCK:
        return whole, []
    n = manifest.segments
    pages = [
        canonical_json(
            _Page(
                checkpoints=manifest.checkpoints[at : at + PAGE_CHECKPOINTS],
                update_norms=manifest.update_norms[at : min(at + PAGE_CHECKPOINTS, n)],
                losses=manifest.losses[at : min(at + PAGE_CHECKPOINTS, n)],
            ).model_dump(mode="json")
        )
        for at in range(0, n + 1, PAGE_CHECKPOINTS)
    ]
    fields = manifest.model_dump(exclude={"checkpoints", "update_norms", "losses"})
    root = _Root(**fields, checkpoint_count=n + 1, pages=tuple(Bytes32(cid_to_digest(file_cid(page))) for page in pages))
    return canonical_json(root.model_dump(mode="json", exclude={"held_out_loss"} if root.held_out_loss is None else None)), pages


def write_manifest(put: Callable[[bytes], Cid], manifest: Manifest) -> Cid:
    """Store ``manifest``'s blocks with ``put`` (a store's), its pages first, and return its CID: the root's."""
    root, pages = manifest_blocks(manifest)
    for page in pages:
        put(page)
    return put(root)


def _bounded(data: bytes, what: str) -> None:
    if len(data) > MANIFEST_BLOCK:
        raise LimitExceeded(f"{what} size in bytes", len(data), MANIFEST_BLOCK)
    depth = json_depth(data)
    if depth > MAX_DEPTH:
        raise ManifestError(f"{what} nests {depth} levels deep, over the limit of {MAX_DEPTH}")


def _validated(model: type[_Frozen], data: bytes, what: str) -> _Frozen:
    try:
        return model.model_validate_json(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or f'({what})'}: {e['msg']}" for e in exc.errors(include_url=False)[:5])
        raise ManifestError(f"invalid {what}: {problems}") from exc


def load_manifest(data: bytes, page: PageGetter | None = None, spec: JobSpec | None = None) -> Manifest:
    """The manifest whose root block is ``data`` (bounded, validated, matched to ``spec`` if given):
    ``data`` itself when it is a whole manifest, else the root of a long one, whose pages are read
    with ``page`` (each bounded and parsed alone, then the whole validated as one manifest: the
    Merkle root of all its state hashes, indices in order, a norm and a loss per segment)."""
    _bounded(data, "manifest root")
    try:
        body = json.loads(data)  # bounded above: one block, MAX_DEPTH levels
    except ValueError:
        body = None  # not JSON: parse_manifest says why
    if not (isinstance(body, dict) and "pages" in body):
        return parse_manifest(data, spec)
    root = _validated(_Root, data, "manifest root")
    assert isinstance(root, _Root)
    expected = -(-root.checkpoint_count // PAGE_CHECKPOINTS)
    if len(root.pages) != expected:
        raise ManifestError(f"a manifest of {root.checkpoint_count} checkpoints has {expected} pages, its root lists {len(root.pages)}")
    if page is None:
        raise ManifestError("a manifest of pages, and no way to read them")
    checkpoints: list[CheckpointEntry] = []
    norms: list[float] = []
    losses: list[float] = []
    for number, digest in enumerate(root.pages):
        cid = digest_to_cid(digest)
        try:
            body = page(cid)
        except StorageError as exc:  # not served, forged, too large: the manifest cannot be had whole
            raise ManifestError(f"manifest page {number} ({cid}) cannot be had: {exc}") from None
        _bounded(body, f"manifest page {number}")
        got = _validated(_Page, body, f"manifest page {number} ({cid})")
        assert isinstance(got, _Page)
        count = min(PAGE_CHECKPOINTS, root.checkpoint_count - number * PAGE_CHECKPOINTS)
        starts = min(count, root.checkpoint_count - 1 - number * PAGE_CHECKPOINTS)
        if (len(got.checkpoints), len(got.update_norms), len(got.losses)) != (count, starts, starts):
            raise ManifestError(
                f"manifest page {number} lists {len(got.checkpoints)} checkpoints, {len(got.update_norms)} norms and {len(got.losses)} losses, not {count}, {starts} and {starts}"
            )
        checkpoints += got.checkpoints
        norms += got.update_norms
        losses += got.losses
    fields = root.model_dump(exclude={"checkpoint_count", "pages"})
    try:
        manifest = Manifest(**fields, checkpoints=tuple(checkpoints), update_norms=tuple(norms), losses=tuple(losses))
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(manifest)'}: {e['msg']}" for e in exc.errors(include_url=False)[:5])
        raise ManifestError(f"invalid manifest: {problems}") from exc
    if spec is not None:
        manifest.check_spec(spec)
    return manifest


def parse_manifest(data: bytes, spec: JobSpec | None = None) -> Manifest:
    """Parse canonical manifest bytes (bounded), validate them, and match them to ``spec`` if given."""
    if len(data) > MAX_MANIFEST_BYTES:
        raise LimitExceeded("manifest size in bytes", len(data), MAX_MANIFEST_BYTES)
    depth = json_depth(data)  # a manifest nests 3 levels; bounded before any parser sees it
    if depth > MAX_DEPTH:
        raise ManifestError(f"manifest nests {depth} levels deep, over the limit of {MAX_DEPTH}")
    try:
        manifest = Manifest.model_validate_json(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(manifest)'}: {e['msg']}" for e in exc.errors(include_url=False)[:5])
        raise ManifestError(f"invalid manifest: {problems}") from exc
    except json.JSONDecodeError as exc:  # pragma: no cover - pydantic wraps JSON errors
        raise ManifestError(f"manifest is not JSON: {exc}") from exc
    if spec is not None:
        manifest.check_spec(spec)
    return manifest


def committed_manifest(data: bytes, root: Bytes32, page: PageGetter | None = None) -> Manifest:
    """The committed manifest from its root block ``data`` (and, for a long one, its pages read with
    ``page``: :func:`load_manifest`), if its root is the committed ``root`` (the chain's bytes32):
    only then do its leaves open a trace game. Else :class:`ProofError`: it does not parse, a page
    cannot be had, or it names another root, and a challenger opens a manifest game instead
    (docs/protocol.md)."""
    manifest = load_manifest(data, page)
    if manifest.root != root:
        raise ManifestError(f"manifest root {hex32(manifest.root)} is not the committed root {hex32(root)}")
    return manifest
