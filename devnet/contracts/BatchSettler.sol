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
///   revert the others; every item's outcome is returned and logged.
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

    event ItemSettled(uint256 indexed index);
    event ItemFailed(uint256 indexed index, bytes reason);

    error OutOfGasForItem(uint256 index);

    function settle(address token, Authorization[] calldata items) external returns (bool[] memory settled) {
        settled = new bool[](items.length);
        for (uint256 i = 0; i < items.length; ++i) {
            if (gasleft() < MIN_GAS_PER_ITEM) revert OutOfGasForItem(i);
            Authorization calldata item = items[i];
            try IERC3009(token).transferWithAuthorization(
                item.from, item.to, item.value, item.validAfter, item.validBefore, item.nonce, item.v, item.r, item.s
            ) {
                settled[i] = true;
                emit ItemSettled(i);
            } catch (bytes memory reason) {
                emit ItemFailed(i, reason);
            }
        }
    }
}
