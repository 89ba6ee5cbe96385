// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @title CIDv0 digest of a one-block file, as `ipfs add` computes it.
/// @notice A file of at most CHUNK_SIZE bytes is one dag-pb block (Kubo's default chunker and
///         CIDv0 layout, core/storage/unixfs.py `leaf_block`): PBNode{Data: UnixFS{Type: File,
///         Data: bytes, filesize: n}} with no links; its CIDv0 digest is the block's sha256.
///         Larger files are a tree of blocks, which this library does not compute.
library CidLib {
    /// @notice Kubo's default chunk size: the largest file that is a single block.
    uint256 internal constant CHUNK_SIZE = 262_144;

    /// @notice The CIDv0 digest (sha256 of the dag-pb block) of `data`; `data.length <= CHUNK_SIZE`
    ///         is the caller's to check (a larger file has another, multi-block CID).
    function fileDigest(bytes calldata data) internal pure returns (bytes32) {
        uint256 n = data.length;
        bytes memory size = _varint(n);
        // UnixFS: 08 02 (Type File), 12 varint(n) data (omitted when empty), 18 varint(n) (filesize)
        bytes memory head = n == 0 ? bytes("") : bytes.concat(hex"12", size);
        uint256 unixfsLength = 2 + head.length + n + 1 + size.length;
        return sha256(bytes.concat(hex"0a", _varint(unixfsLength), hex"0802", head, data, hex"18", size));
    }

    /// Protobuf base-128 varint of `value`.
    function _varint(uint256 value) private pure returns (bytes memory out) {
        uint256 length = 1;
        for (uint256 v = value >> 7; v != 0; v >>= 7) {
            ++length;
        }
        out = new bytes(length);
        for (uint256 i; i < length; ++i) {
            // the low 7 bits, with the continuation bit on every byte but the last: fits a byte
            // forge-lint: disable-next-line(unsafe-typecast)
            out[i] = bytes1(uint8((value & 0x7f) | (i + 1 < length ? 0x80 : 0)));
            value >>= 7;
        }
    }
}
