// SPDX-License-Identifier: MIT
pragma solidity ^0.8.28;

/// @notice The few forge cheatcodes these tests use (no forge-std in this repository).
interface Vm {
    struct Log {
        bytes32[] topics;
        bytes data;
        address emitter;
    }

    struct Gas {
        uint64 gasLimit;
        uint64 gasTotalUsed;
        uint64 gasMemoryUsed;
        int64 gasRefunded;
        uint64 gasRemaining;
    }

    function warp(uint256 timestamp) external;
    function roll(uint256 blockNumber) external;
    function prank(address sender) external;
    function startPrank(address sender) external;
    function stopPrank() external;
    function expectRevert(bytes calldata revertData) external;
    function expectRevert(bytes4 selector) external;
    function expectEmit(bool checkTopic1, bool checkTopic2, bool checkTopic3, bool checkData, address emitter)
        external;
    function assume(bool condition) external pure;
    function addr(uint256 privateKey) external pure returns (address);
    function label(address account, string calldata name) external;
    function setBlockhash(uint256 blockNumber, bytes32 blockHash) external;
    function lastCallGas() external view returns (Gas memory gas);
    function skip(bool skipTest) external;
    function snapshotValue(string calldata group, string calldata name, uint256 value) external;
    function snapshotState() external returns (uint256 snapshotId);
    function revertToState(uint256 snapshotId) external returns (bool success);
    function recordLogs() external;
    function getRecordedLogs() external returns (Log[] memory logs);
    function toString(uint256 value) external pure returns (string memory);
    function record() external;
    function accesses(address target) external returns (bytes32[] memory readSlots, bytes32[] memory writeSlots);
    function store(address target, bytes32 slot, bytes32 value) external;
    function etch(address target, bytes calldata newRuntimeBytecode) external;
    function mockCall(address callee, bytes calldata data, bytes calldata returnData) external;
    function expectCall(address callee, bytes calldata data) external;
}
