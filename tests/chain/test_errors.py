"""Revert decoding from the compiled ABIs, without a chain."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from eth_abi import encode
from eth_utils import keccak

from core import artifacts, reverts
from core.errors import ArtifactsMissing, ChainError, VeritrainError
from core.reverts import ContractRevert, Panic, RevertString, UnknownRevert, decode_revert, revert_class
from deploy.build import build

ACCOUNT = "0x70997970C51812dc3A010C7d01b50e0d17dc79C8"


@pytest.fixture(scope="module", autouse=True)
def built() -> None:
    build()


def selector(signature: str) -> bytes:
    return keccak(text=signature)[:4]


def test_custom_error_decodes_into_a_named_class_with_values() -> None:
    data = selector("InsufficientStake(address,uint8,uint256,uint256)") + encode(["address", "uint8", "uint256", "uint256"], [ACCOUNT, 0, 1, 2])
    exc = decode_revert(data)
    InsufficientStake = revert_class("InsufficientStake")
    assert type(exc) is InsufficientStake
    assert isinstance(exc, ContractRevert) and isinstance(exc, ChainError) and isinstance(exc, VeritrainError)
    assert exc.args == (ACCOUNT, 0, 1, 2)
    assert (exc.account, exc.role, exc.have, exc.need) == (ACCOUNT, 0, 1, 2)
    assert exc.values == {"account": ACCOUNT, "role": 0, "have": 1, "need": 2}
    assert str(exc) == f"InsufficientStake(account={ACCOUNT}, role=0, have=1, need=2)"
    assert decode_revert("0x" + data.hex()).args == exc.args  # hex strings too


def test_error_classes_are_cached_and_importable_by_name() -> None:
    from core.reverts import UnknownJob  # module __getattr__

    assert UnknownJob is revert_class("UnknownJob") is reverts.UnknownJob
    assert UnknownJob.__module__ == "core.reverts" and UnknownJob.__name__ == "UnknownJob"
    with pytest.raises(KeyError):
        revert_class("NoSuchErrorAnywhere")
    with pytest.raises(AttributeError):
        reverts.NoSuchErrorAnywhere  # noqa: B018


def test_zero_argument_error_and_bytes32_readable() -> None:
    assert str(decode_revert(selector("ZeroReward()"))) == "ZeroReward()"
    data = selector("InvalidParameter(bytes32)") + encode(["bytes32"], [b"openWindow".ljust(32, b"\0")])
    assert str(decode_revert(data)) == "InvalidParameter(name='openWindow')"


def test_error_string_and_panic() -> None:
    exc = decode_revert(selector("Error(string)") + encode(["string"], ["not allowed"]))
    assert isinstance(exc, RevertString) and exc.reason == "not allowed"
    assert str(exc) == "Error(reason=not allowed)"
    panic = decode_revert(selector("Panic(uint256)") + encode(["uint256"], [0x11]))
    assert isinstance(panic, Panic) and panic.args == (0x11,)
    assert "overflow" in str(panic)


@pytest.mark.parametrize(
    "data",
    [b"", None, b"\x01\x02", bytes.fromhex("deadbeef") + b"\0" * 32, "0xzz"],
    ids=["empty", "none", "short", "unknown-selector", "bad-hex"],
)
def test_undecodable_data_is_an_unknown_revert(data: bytes | str | None) -> None:
    exc = decode_revert(data)
    assert type(exc) is UnknownRevert
    assert str(exc).startswith("UnknownRevert(")


def test_truncated_arguments_are_an_unknown_revert() -> None:
    data = selector("UnknownJob(uint256)") + b"\x00" * 5
    assert type(decode_revert(data)) is UnknownRevert


def test_decoded_reverts_survive_pickling() -> None:
    exc = decode_revert(selector("UnknownJob(uint256)") + encode(["uint256"], [7]))
    again = pickle.loads(pickle.dumps(exc))
    assert type(again) is type(exc) and again.args == (7,) and again.jobId == 7


def test_missing_artifacts_say_run_make_build(tmp_path: Path) -> None:
    with pytest.raises(ArtifactsMissing, match="make build"):
        artifacts.load("JobMarket", tmp_path)
    with pytest.raises(ArtifactsMissing, match="make build"):
        artifacts.load_all(tmp_path)
    (tmp_path / "JobMarket.json").write_text("{not json")
    with pytest.raises(ArtifactsMissing, match="make build"):
        artifacts.load("JobMarket", tmp_path)


def test_every_custom_error_in_the_artifacts_round_trips() -> None:
    for artifact in artifacts.load_all().values():
        for entry in artifact.abi:
            if entry["type"] != "error":
                continue
            types = [i["type"] for i in entry["inputs"]]
            samples = {"address": ACCOUNT, "bool": True, "bytes32": b"\x07" * 32, "string": "s", "bytes": b"\x01"}
            values = [samples.get(t, 3) for t in types]
            exc = decode_revert(reverts.error_selector(entry) + encode(types, values))
            assert type(exc).__name__ == entry["name"]
            assert list(exc.args) == values
