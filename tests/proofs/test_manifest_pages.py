"""Manifests of any length (issue 26 item 3): a job of 10,000 checkpoints has a manifest of 11 blocks
under its committed CID (proofs.manifest: a root and pages, each one block), written, fetched block by
block from another party's gateway (each verified against its CID), parsed bounded and validated whole;
a root or page that is missing, forged or inconsistent makes it a manifest that gives no leaves, which a
referee of a manifest game votes against. Synthetic leaves: no training."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from core.cid import cid_to_digest
from core.probe import Bytes32
from core.storage import LocalStore, file_cid
from core.storage.gateway import GatewayServer
from core.storage.peers import FetchingStore
from core.storage.unixfs import CHUNK_SIZE
from proofs.datasets import reference_job
from proofs.errors import LimitExceeded, ManifestError
from proofs.keccak import keccak
from proofs.manifest import MANIFEST_BLOCK, PAGE_CHECKPOINTS, CheckpointEntry, Manifest, committed_manifest, load_manifest, manifest_blocks, write_manifest
from proofs.merkle import TraceTree
from proofs.replay import check_committed_manifest
from proofs.spec import canonical_json

N = 10_000  # segments: 10,001 checkpoints


def synthetic(n: int, salt: bytes = b"leaf") -> Manifest:
    hashes = [Bytes32(keccak(salt + b" %d" % i)) for i in range(n + 1)]
    return Manifest(
        spec_cid=file_cid(b"spec"),
        spec_hash="0x" + "ab" * 32,
        steps=3 * n,
        checkpoint_interval=3,
        root=TraceTree(hashes).root,
        checkpoints=tuple(CheckpointEntry(index=i, cid=file_cid(b"checkpoint %d" % i), state_hash=hashes[i]) for i in range(n + 1)),
        update_norms=tuple(i / 7 for i in range(n)),
        losses=tuple(float(np.float32(1 / (i + 1))) for i in range(n)),
    )


@pytest.fixture(scope="module")
def long() -> Manifest:
    return synthetic(N)


def test_a_manifest_that_fits_one_block_is_stored_as_it_is() -> None:
    small = synthetic(40)
    assert manifest_blocks(small) == (small.canonical_bytes(), [])
    assert load_manifest(small.canonical_bytes()) == small


def test_ten_thousand_checkpoints_cross_hosts_block_by_block_and_read_back_whole(long: Manifest, tmp_path: Path) -> None:
    root, pages = manifest_blocks(long)
    assert len(long.canonical_bytes()) > 7 * CHUNK_SIZE  # 1.9 MB as one file: 8 blocks no chain can recompute
    assert len(pages) == -(-(N + 1) // PAGE_CHECKPOINTS) == 11
    assert len(root) < 2_000 and all(len(page) <= MANIFEST_BLOCK for page in pages)  # each one block: its CID is its sha256
    solver = LocalStore(tmp_path / "solver")
    cid = write_manifest(solver.put, long)
    assert cid == file_cid(root) and all(solver.has(file_cid(page)) for page in pages)
    with GatewayServer(solver) as gateway:
        verifier = FetchingStore(LocalStore(tmp_path / "verifier"), [gateway.url], timeout=10)
        got = committed_manifest(verifier.get(cid, MANIFEST_BLOCK), long.root, lambda page: verifier.get(page, MANIFEST_BLOCK))
    assert got == long and got.segments == N
    assert all(verifier.own.has(file_cid(page)) for page in pages), "kept, so the verifier serves them on"


def test_a_page_missing_forged_or_out_of_place_gives_no_leaves(long: Manifest, tmp_path: Path) -> None:
    root, pages = manifest_blocks(long)
    store = LocalStore(tmp_path / "store")
    for block in pages:
        store.put(block)

    def page(cid: str) -> bytes:
        return store.get(cid, MANIFEST_BLOCK)

    store.unpin(file_cid(pages[7]))
    assert store.gc()  # the solver dropped page 7
    with pytest.raises(ManifestError, match=r"manifest page 7 \(Qm\w+\) cannot be had: content Qm\w+ not found"):
        load_manifest(root, page)
    spec = reference_job("mlp-spirals").spec(file_cid(b"data"))  # the verdict falls before the spec is read
    verdict = check_committed_manifest(spec, root, long.root, N + 1, long.final_cid, page)
    assert not verdict.passed and verdict.reason.value == "malformed-manifest", "a referee votes the solver wrong"
    store.put(pages[7])

    body = json.loads(root)
    swapped = dict(body, pages=[body["pages"][1], body["pages"][0], *body["pages"][2:]])
    with pytest.raises(ManifestError, match="checkpoint indices must be 0, 1, ..., n in order"):
        load_manifest(canonical_json(swapped), page)
    short = dict(body, pages=body["pages"][:-1])
    with pytest.raises(ManifestError, match="a manifest of 10001 checkpoints has 11 pages, its root lists 10"):
        load_manifest(canonical_json(short), page)
    other = synthetic(N, b"other")  # the same page of another manifest: its leaves do not make the committed root
    foreign = dict(body, pages=[*body["pages"][:-1], "0x" + cid_to_digest(store.put(manifest_blocks(other)[1][-1])).hex()])
    with pytest.raises(ManifestError, match="is not the Merkle root of the listed state hashes"):
        committed_manifest(canonical_json(foreign), long.root, page)
    with pytest.raises(LimitExceeded, match="manifest root size in bytes"):
        load_manifest(b" " * (MANIFEST_BLOCK + 1), page)
    with pytest.raises(ManifestError, match="a manifest of pages, and no way to read them"):
        load_manifest(root)
