// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";

/// @notice EIP-3009's payee-only pull (USDC's bytes-signature overload).
interface IERC3009Receive {
    function receiveWithAuthorization(
        address from,
        address to,
        uint256 value,
        uint256 validAfter,
        uint256 validBefore,
        bytes32 nonce,
        bytes memory signature
    ) external;
}

/// @title The batch-settlement deposit collector for EIP-3009 tokens (USDC).
/// @notice The payer signs `ReceiveWithAuthorization(from=payer, to=this collector, value,
///   validAfter, validBefore, nonce)` with `nonce = keccak256(abi.encode(channelId, salt))`, so
///   the signature pays into one channel only and only through this collector; the collector
///   receives the tokens and forwards them to the settlement contract that called it.
///   `data` is `abi.encode(uint256 validAfter, uint256 validBefore, uint256 salt, bytes signature)`
///   (what the x402 SDK's facilitator sends).
/// @dev Only `settlement` may call `collect`: otherwise anyone holding a payer's signed
///   authorisation could have the collector pull it and forward it to themselves.
///   `settlement` is an immutable: the devnet deploys this with the settlement contract's
///   canonical address and copies the runtime code to the collector's canonical address.
contract ERC3009DepositCollector {
    using SafeERC20 for IERC20;

    address public immutable settlement;

    error OnlySettlement(address caller);

    constructor(address settlement_) {
        settlement = settlement_;
    }

    function collect(address payer, address token, uint256 amount, bytes32 channelId, bytes calldata data) external {
        if (msg.sender != settlement) revert OnlySettlement(msg.sender);
        (uint256 validAfter, uint256 validBefore, uint256 salt, bytes memory signature) =
            abi.decode(data, (uint256, uint256, uint256, bytes));
        bytes32 nonce = keccak256(abi.encode(channelId, salt));
        IERC3009Receive(token).receiveWithAuthorization(
            payer, address(this), amount, validAfter, validBefore, nonce, signature
        );
        IERC20(token).safeTransfer(msg.sender, amount);
    }
}
