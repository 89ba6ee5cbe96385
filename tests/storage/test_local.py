"""LocalStore: verified reads, bounded sizes, atomic writes, pins, and no way out of its directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.cid import InvalidCid
from core.storage import (
    CidMismatch,
    ContentNotFound,
    ContentStore,
    ContentTooLarge,
    LocalStore,
    StoreUnavailable,
    file_cid,
)

HELLO_V0 = "QmZULkCELmmk5XNfCgTnCyFgAVxBRBXyDHGGMVoLFLiXEN"
HELLO_V1 = "bafybeiffndsajwhk3lwjewwdxqntmjm4b5wxaaanokonsggenkbw6slwk4"
ABSENT = "QmYwAPJzv5CZsnA625s3Xf2nemtYgPpHdWEz79ojWnPbdG"


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory: pytest.TempPathFactory) -> LocalStore:
    return LocalStore(tmp_path_factory.mktemp("shared"))


def _blob(store: LocalStore, cid: str) -> Path:
    return store.root / "blobs" / cid


def test_local_store_is_a_content_store(local_store: LocalStore) -> None:
    assert isinstance(local_store, ContentStore)


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=700_000))
def test_put_get_round_trip(shared_store: LocalStore, data: bytes) -> None:
    cid = shared_store.put(data)
    assert cid == file_cid(data)
    assert shared_store.get(cid, max_size=len(data)) == data
    assert shared_store.has(cid)
    assert shared_store.stat(cid).size == len(data)


def test_put_is_idempotent_and_leaves_no_temporary_file(local_store: LocalStore) -> None:
    assert local_store.put(b"hello\n") == HELLO_V0
    assert local_store.put(b"hello\n") == HELLO_V0
    assert sorted(p.name for p in (local_store.root / "blobs").iterdir()) == [HELLO_V0]
    assert list((local_store.root / "tmp").iterdir()) == []


def test_cidv1_names_the_same_content(local_store: LocalStore) -> None:
    local_store.put(b"hello\n")
    assert local_store.get(HELLO_V1, 100) == b"hello\n"
    assert local_store.stat(HELLO_V1).cid == HELLO_V0


def test_missing_content_error_names_the_cid(local_store: LocalStore) -> None:
    with pytest.raises(ContentNotFound, match=ABSENT) as info:
        local_store.get(ABSENT, 100)
    assert info.value.cid == ABSENT
    assert not local_store.has(ABSENT)
    with pytest.raises(ContentNotFound, match=ABSENT):
        local_store.stat(ABSENT)
    with pytest.raises(ContentNotFound, match=ABSENT):
        local_store.pin(ABSENT)


def test_oversize_is_rejected_with_size_and_limit(local_store: LocalStore) -> None:
    cid = local_store.put(b"x" * 1000)
    with pytest.raises(ContentTooLarge, match="1000 bytes, over the limit of 999 bytes") as info:
        local_store.get(cid, max_size=999)
    assert (info.value.cid, info.value.size, info.value.limit) == (cid, 1000, 999)
    assert local_store.get(cid, max_size=1000) == b"x" * 1000


@pytest.mark.parametrize("limit", [-1, 1.5, True, "10"])
def test_bad_limit_is_refused(local_store: LocalStore, limit: object) -> None:
    with pytest.raises(ValueError, match="max_size"):
        local_store.get(HELLO_V0, limit)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "tamper",
    [
        pytest.param(lambda b: b[:1] + bytes([b[1] ^ 1]) + b[2:], id="one-bit-flipped"),
        pytest.param(lambda b: b[:-1], id="truncated"),
        pytest.param(lambda b: b + b"\0", id="extended"),
        pytest.param(lambda b: b"", id="emptied"),
    ],
)
def test_corruption_on_disk_is_detected(local_store: LocalStore, tamper: object) -> None:
    data = os.urandom(300_000)  # two chunks: the DAG root is recomputed, not just a file hash
    cid = local_store.put(data)
    blob = _blob(local_store, cid)
    corrupted = tamper(blob.read_bytes())  # type: ignore[operator]
    blob.write_bytes(corrupted)
    with pytest.raises(CidMismatch, match=cid) as info:
        local_store.get(cid, max_size=1 << 20)
    assert info.value.expected == cid and info.value.got == file_cid(corrupted)
    local_store.put(data)  # writing the true bytes again repairs the blob
    assert local_store.get(cid, max_size=1 << 20) == data


def test_content_swapped_under_another_cid_is_detected(local_store: LocalStore) -> None:
    a, b = local_store.put(b"first"), local_store.put(b"second")
    os.replace(_blob(local_store, b), _blob(local_store, a))
    with pytest.raises(CidMismatch):
        local_store.get(a, 100)


def test_symlinked_blob_is_refused(local_store: LocalStore, tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.write_bytes(b"hello\n")  # even bytes that would verify are not read through a link
    _blob(local_store, HELLO_V0).symlink_to(secret)
    with pytest.raises(ContentNotFound, match="symlink"):
        local_store.get(HELLO_V0, 100)
    assert not local_store.has(HELLO_V0)


@pytest.mark.parametrize(
    "cid",
    [
        "../../../../etc/passwd",
        "/etc/passwd",
        "Qm" + "../" * 14 + "ab",
        "QmZULkCELmmk5XNfCgTnCyFgAVxBRBXyDHGGMVoLFLiX/N",
        "QmZULkCELmmk5XNfCgTnCyFgAVxBRBXyDHGGMVoLFLiXE\0",
        "..",
        "",
        "blobs",
        "bafybeiffndsajwhk3lwjewwdxqntmjm4b5wxaaanokonsggenkbw6slwk4/../../x",
    ],
)
def test_path_traversal_attempts_are_rejected(local_store: LocalStore, cid: str) -> None:
    before = sorted(str(p) for p in local_store.root.parent.rglob("*"))
    for call in (
        lambda: local_store.get(cid, 100),
        lambda: local_store.has(cid),
        lambda: local_store.stat(cid),
        lambda: local_store.pin(cid),
        lambda: local_store.unpin(cid),
    ):
        with pytest.raises(InvalidCid):
            call()
    assert sorted(str(p) for p in local_store.root.parent.rglob("*")) == before


def test_pins_and_gc(local_store: LocalStore) -> None:
    kept, dropped = local_store.put(b"keep me"), local_store.put(b"drop me")
    assert local_store.stat(kept).pinned and local_store.stat(dropped).pinned
    local_store.unpin(dropped)
    local_store.unpin(dropped)  # unpinning twice is a no-op
    assert not local_store.stat(dropped).pinned
    (local_store.root / "blobs" / "not-a-cid").write_bytes(b"foreign")
    assert local_store.gc() == [dropped]
    assert local_store.has(kept) and not local_store.has(dropped)
    assert (local_store.root / "blobs" / "not-a-cid").exists()
    local_store.put(b"drop me")
    local_store.unpin(dropped)
    local_store.pin(dropped)
    assert local_store.gc() == []


def test_failed_write_leaves_neither_blob_nor_temporary(local_store: LocalStore, monkeypatch: pytest.MonkeyPatch) -> None:
    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(StoreUnavailable, match="No space left"):
        local_store.put(b"hello\n")
    monkeypatch.undo()
    assert not local_store.has(HELLO_V0)
    assert list((local_store.root / "tmp").iterdir()) == []


def test_store_in_unwritable_place_is_unavailable(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_bytes(b"")
    with pytest.raises(StoreUnavailable, match="cannot create"):
        LocalStore(blocker / "store")
