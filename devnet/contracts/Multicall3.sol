// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @title The `tryAggregate` subset of Multicall3, for a devnet.
/// @notice The x402 SDK batches its chain reads (channel state, balances) through Multicall3
///   at its canonical address 0xcA11bde05977b3631167028862bE2a173976CA11, which every public
///   chain has and a fresh anvil does not. This contract answers the same call there.
contract Multicall3 {
    struct Call {
        address target;
        bytes callData;
    }

    struct Result {
        bool success;
        bytes returnData;
    }

    error CallFailed(uint256 index);

    /// @notice Run every call in order; a failure fails the whole call only if `requireSuccess`.
    function tryAggregate(bool requireSuccess, Call[] calldata calls) external payable returns (Result[] memory returnData) {
        returnData = new Result[](calls.length);
        for (uint256 i = 0; i < calls.length; ++i) {
            (bool success, bytes memory data) = calls[i].target.call(calls[i].callData);
            if (requireSuccess && !success) revert CallFailed(i);
            returnData[i] = Result(success, data);
        }
    }
}
