"""The UnixFS DAG: our CIDs equal a real IPFS daemon's for the same bytes, at every layout boundary."""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.cid import block_cid
from core.storage import IpfsStore, LocalStore
from core.storage.unixfs import CHUNK_SIZE, MAX_LINKS, DagBuilder, Link, file_cid, leaf_block, parent_block

MiB = 1 << 20


def _data(size: int, seed: int = 0) -> bytes:
    return random.Random(seed).randbytes(size)


def test_hello_leaf_block_is_kubos_bytes() -> None:
    # UnixFS {Type: File, Data: "hello\n", filesize: 6} inside a dag-pb node with no links.
    assert leaf_block(b"hello\n") == bytes.fromhex("0a0c0802120668656c6c6f0a1806")
    assert file_cid(b"hello\n") == "QmZULkCELmmk5XNfCgTnCyFgAVxBRBXyDHGGMVoLFLiXEN"
    assert file_cid(b"") == "QmbFMke1KXqnYyBBWxB74N4c5SBnJMVAiMNRcGu6x1AwQH"  # Kubo's empty file


@pytest.mark.parametrize("size", [0, 1, CHUNK_SIZE - 1, CHUNK_SIZE, CHUNK_SIZE + 1, 5 * MiB + 3])
def test_local_store_cid_equals_daemon_cid(size: int, local_store: LocalStore, ipfs_store: IpfsStore, ipfs_add: Callable[..., str]) -> None:
    data = _data(size, seed=size)
    cid = local_store.put(data)
    assert cid == ipfs_add(data)
    assert ipfs_store.put(data) == cid


@pytest.mark.parametrize(
    "chunks",
    [
        pytest.param(MAX_LINKS, id="174-chunks-one-full-level"),
        pytest.param(MAX_LINKS + 1, id="175-chunks-second-level"),
    ],
)
def test_multi_level_dag_of_default_chunks_equals_daemon(chunks: int, ipfs_add: Callable[..., str]) -> None:
    # ~46 MB each: the smallest files whose DAG needs a second level of parents under Kubo's defaults.
    data = os.urandom((chunks - 1) * CHUNK_SIZE + 1)
    assert file_cid(data) == ipfs_add(data)


@pytest.mark.parametrize("chunks", [2, MAX_LINKS - 1, MAX_LINKS, MAX_LINKS + 1, 2 * MAX_LINKS, 2 * MAX_LINKS + 1, 3 * MAX_LINKS + 7])
def test_grouping_at_link_boundaries_with_small_chunks(chunks: int, ipfs_add: Callable[..., str]) -> None:
    # The daemon's chunker is configurable, its fan-out (174) is not: small chunks reach the same boundaries cheaply.
    chunk = 256
    data = _data(chunks * chunk - 1, seed=chunks)
    assert file_cid(data, chunk_size=chunk) == ipfs_add(data, chunk)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=24_000), chunk=st.sampled_from([64, 100, 256, 1024]))
def test_random_files_and_chunkers_equal_daemon(data: bytes, chunk: int, ipfs_add: Callable[..., str]) -> None:
    assert file_cid(data, chunk_size=chunk) == ipfs_add(data, chunk)


@given(data=st.binary(max_size=5000), cuts=st.lists(st.integers(0, 5000), max_size=8))
def test_streamed_writes_give_the_same_cid_as_one_write(data: bytes, cuts: list[int]) -> None:
    builder = DagBuilder(chunk_size=512)
    bounds = [0, *sorted(c for c in cuts if c <= len(data)), len(data)]
    for start, end in zip(bounds, bounds[1:]):
        builder.write(data[start:end])
    assert builder.size == len(data)
    assert builder.finish() == file_cid(data, chunk_size=512)


def test_builder_emits_every_block_leaves_first_root_last() -> None:
    blocks: list[tuple[bytes, bytes]] = []
    builder = DagBuilder(lambda digest, block: blocks.append((digest, block)), chunk_size=16)
    builder.write(_data(16 * (MAX_LINKS + 1)))
    root = builder.finish()
    assert len(blocks) == (MAX_LINKS + 1) + 2 + 1  # leaves, two level-1 parents, the root
    assert block_cid(blocks[-1][1]) == root
    assert all(hashlib.sha256(block).digest() == digest for digest, block in blocks)
    assert len({digest for digest, _ in blocks}) == len(blocks)  # random chunks: no two blocks alike


def test_parent_refuses_too_many_or_no_children() -> None:
    with pytest.raises(ValueError, match="1..174"):
        parent_block([])
    with pytest.raises(ValueError, match="1..174"):
        parent_block([Link(bytes(32), 10, 1)] * (MAX_LINKS + 1))
