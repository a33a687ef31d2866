// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

/// @notice The EIP-3009 entry point BatchSettler drives (USDC's (v,r,s) overload).
interface IERC3009 {
    function transferWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        uint8 v,
        bytes32 r,
        bytes32 s
    ) external;
}

/// @title Executes many EIP-3009 transferWithAuthorization items in one transaction.
/// @notice Anyone may call it: each item moves the payer's money only to the payee the
///   payer signed, so the caller's identity does not matter (as with the token itself).
///   A failing item (replayed nonce, expired, bad signature, low balance) does not
///   revert the others. Every item's outcome is returned (bool[]) and logged: a settled
///   item by the token's own AuthorizationUsed(from, nonce) and Transfer events, a
///   failed one by ItemFailed(index, revert data). (A settler-side success event would
///   cost ~1.1k gas per item, 3 % of a purchase, and say nothing the token's do not.)
/// @dev Stateless and immutable-free, so it works at any address and for any token
///   implementing the (v,r,s) overload.
contract BatchSettler {
    struct Authorization {
        address from;
        address to;
        uint256 value;
        uint256 validAfter;
        uint256 validBefore;
        bytes32 nonce;
        uint8 v;
        bytes32 r;
        bytes32 s;
    }

    /// @dev Enough for one transferWithAuthorization to a fresh payee (~86k) after the
    ///   63/64 rule. Below it the whole batch reverts rather than report an item as failed
    ///   merely because the caller sent too little gas (which eth_estimateGas would do,
    ///   since a caught out-of-gas still "succeeds").
    uint256 public constant MIN_GAS_PER_ITEM = 100_000;

    event ItemFailed(uint256 indexed index, bytes reason);

    error OutOfGasForItem(uint256 index);
    error NotAContract(address token);

    uint256 private constant ITEM_SIZE = 9 * 32;

    /// @dev Each item is ABI-encoded exactly like transferWithAuthorization's (v,r,s)
    ///   arguments, so it is forwarded by copying its 288 calldata bytes behind the
    ///   selector, with no decoding or re-encoding (about 1.5k gas per item less than
    ///   a try/catch on the decoded struct). The token validates the arguments.
    function settle(address token, Authorization[] calldata items) external returns (bool[] memory settled) {
        if (token.code.length == 0) revert NotAContract(token);
        uint256 count = items.length;
        settled = new bool[](count);
        bytes4 selector = IERC3009.transferWithAuthorization.selector;
        for (uint256 i = 0; i < count; ++i) {
            if (gasleft() < MIN_GAS_PER_ITEM) revert OutOfGasForItem(i);
            bool ok;
            assembly ("memory-safe") {
                let input := mload(0x40)
                mstore(input, selector)
                calldatacopy(add(input, 4), add(items.offset, mul(i, ITEM_SIZE)), ITEM_SIZE)
                ok := call(gas(), token, 0, input, add(ITEM_SIZE, 4), 0, 0)
            }
            if (ok) {
                settled[i] = true;
            } else {
                emit ItemFailed(i, _returnData());
            }
        }
    }

    function _returnData() private pure returns (bytes memory data) {
        uint256 size;
        assembly ("memory-safe") {
            size := returndatasize()
        }
        data = new bytes(size);
        assembly ("memory-safe") {
            returndatacopy(add(data, 32), 0, size)
        }
    }
}
