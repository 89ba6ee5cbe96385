"""proofs.keccak against the chain libraries it replaces in the engine (eth-hash, eth_abi)."""

from __future__ import annotations

import pytest
from eth_abi import encode
from eth_utils import keccak as eth_keccak
from hypothesis import given
from hypothesis import strategies as st

from proofs.errors import ProofError
from proofs.keccak import address_word, keccak, uint256


@given(st.binary(max_size=300))
def test_keccak_is_ethereums(data: bytes) -> None:
    assert keccak(data) == eth_keccak(data)


@given(st.integers(min_value=0, max_value=2**256 - 1), st.binary(min_size=20, max_size=20), st.binary(min_size=32, max_size=32))
def test_words_are_abi_encode(value: int, address: bytes, word: bytes) -> None:
    hex_address = "0x" + address.hex()
    assert uint256(value) + address_word(hex_address) + word == encode(["uint256", "address", "bytes32"], [value, hex_address, word])
    assert address_word(hex_address.upper().replace("0X", "0x")) == address_word(hex_address)


@pytest.mark.parametrize("value", [-1, 2**256])
def test_a_value_outside_uint256_is_refused(value: int) -> None:
    with pytest.raises(ProofError, match="uint256"):
        uint256(value)


@pytest.mark.parametrize("address", ["", "0x", "0x1234", "1" * 40, "0x" + "zz" * 20, "0x" + "11" * 21])
def test_a_malformed_address_is_refused(address: str) -> None:
    with pytest.raises(ProofError, match="20-byte"):
        address_word(address)
