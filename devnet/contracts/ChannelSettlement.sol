// SPDX-License-Identifier: MIT
pragma solidity ^0.8.24;

import {IERC20} from "@openzeppelin/contracts/token/ERC20/IERC20.sol";
import {SafeERC20} from "@openzeppelin/contracts/token/ERC20/utils/SafeERC20.sol";
import {ECDSA} from "@openzeppelin/contracts/utils/cryptography/ECDSA.sol";
import {SignatureChecker} from "@openzeppelin/contracts/utils/cryptography/SignatureChecker.sol";
import {Multicall} from "@openzeppelin/contracts/utils/Multicall.sol";
import {ReentrancyGuardTransient} from "@openzeppelin/contracts/utils/ReentrancyGuardTransient.sol";

/// @notice What `deposit` asks a collector to do: move `amount` of `token` from `payer`
///   to the caller (the settlement contract), authorised by `data` and bound to `channelId`.
interface IDepositCollector {
    function collect(address payer, address token, uint256 amount, bytes32 channelId, bytes calldata data)
        external;
}

/// @title Unidirectional payment channels settled in batches: x402's `batch-settlement`
///   scheme on EVM, written from its public specification (specs/schemes/batch-settlement/
///   scheme_batch_settlement_evm.md) for a devnet, where the audited deployment does not exist.
/// @notice A payer deposits into a channel once (through a deposit collector, e.g. an EIP-3009
///   `receiveWithAuthorization`, so the payer needs no gas), then signs cumulative EIP-712
///   vouchers off chain. The receiver side claims the latest voucher of many channels in one
///   transaction (accounting only) and sweeps everything claimed to the receiver with `settle`.
///   Unclaimed escrow goes back to the payer by a cooperative refund, or after `withdrawDelay`
///   by a timed withdrawal the payer starts alone.
/// @dev The ABI, the EIP-712 domain ("x402 Batch Settlement", "1") and the typed structs are
///   the ones the x402 SDKs sign and call. No constructor arguments and no immutables: the
///   runtime code is placed at the SDK's canonical address on a devnet (anvil_setCode) and
///   computes its domain from `address(this)`, so it is correct wherever it runs.
///   Invariant: token held = sum(channel.balance) - sum(receiver.totalSettled) per token.
contract ChannelSettlement is Multicall, ReentrancyGuardTransient {
    using SafeERC20 for IERC20;

    struct ChannelConfig {
        address payer;
        address payerAuthorizer;
        address receiver;
        address receiverAuthorizer;
        address token;
        uint40 withdrawDelay;
        bytes32 salt;
    }

    struct Voucher {
        ChannelConfig channel;
        uint128 maxClaimableAmount;
    }

    /// @dev `totalClaimed` is the channel's new cumulative claimed total (<= the voucher's ceiling).
    struct VoucherClaim {
        Voucher voucher;
        bytes signature;
        uint128 totalClaimed;
    }

    struct ChannelState {
        uint128 balance;
        uint128 totalClaimed;
    }

    struct PendingWithdrawal {
        uint128 amount;
        uint40 initiatedAt;
    }

    struct ReceiverState {
        uint128 totalClaimed;
        uint128 totalSettled;
    }

    uint40 public constant MIN_WITHDRAW_DELAY = 15 minutes;
    uint40 public constant MAX_WITHDRAW_DELAY = 30 days;

    bytes32 private constant DOMAIN_TYPEHASH =
        keccak256("EIP712Domain(string name,string version,uint256 chainId,address verifyingContract)");
    bytes32 private constant NAME_HASH = keccak256("x402 Batch Settlement");
    bytes32 private constant VERSION_HASH = keccak256("1");
    bytes32 private constant CHANNEL_CONFIG_TYPEHASH = keccak256(
        "ChannelConfig(address payer,address payerAuthorizer,address receiver,address receiverAuthorizer,address token,uint40 withdrawDelay,bytes32 salt)"
    );
    bytes32 private constant VOUCHER_TYPEHASH = keccak256("Voucher(bytes32 channelId,uint128 maxClaimableAmount)");
    bytes32 private constant REFUND_TYPEHASH = keccak256("Refund(bytes32 channelId,uint256 nonce,uint128 amount)");
    bytes32 private constant CLAIM_ENTRY_TYPEHASH =
        keccak256("ClaimEntry(bytes32 channelId,uint128 maxClaimableAmount,uint128 totalClaimed)");
    bytes32 private constant CLAIM_BATCH_TYPEHASH = keccak256(
        "ClaimBatch(ClaimEntry[] claims)ClaimEntry(bytes32 channelId,uint128 maxClaimableAmount,uint128 totalClaimed)"
    );

    mapping(bytes32 channelId => ChannelState) public channels;
    mapping(bytes32 channelId => PendingWithdrawal) public pendingWithdrawals;
    mapping(bytes32 channelId => uint256) public refundNonce;
    mapping(address receiver => mapping(address token => ReceiverState)) public receivers;

    event ChannelCreated(bytes32 indexed channelId, ChannelConfig config);
    event ChannelClosed(bytes32 indexed channelId, ChannelConfig config);
    event Deposited(bytes32 indexed channelId, address indexed sender, address collector, uint128 amount);
    event Claimed(bytes32 indexed channelId, address indexed receiver, uint128 amount, uint128 totalClaimed);
    event Settled(address indexed receiver, address indexed token, address indexed sender, uint128 amount);
    event WithdrawInitiated(bytes32 indexed channelId, uint128 amount, uint40 initiatedAt);
    event WithdrawFinalized(bytes32 indexed channelId, uint128 amount);
    event Refunded(bytes32 indexed channelId, address indexed sender, uint128 amount, uint256 nonce);

    error InvalidChannelConfig();
    error ZeroAmount();
    error DepositNotReceived(uint256 expected, uint256 received);
    error NotReceiverSide(address caller);
    error NotPayerSide(address caller);
    error InvalidVoucherSignature(bytes32 channelId);
    error InvalidAuthorizerSignature();
    error MixedReceiverAuthorizers();
    error ClaimAboveVoucher(bytes32 channelId);
    error ClaimAboveBalance(bytes32 channelId);
    error WithdrawAboveAvailable(uint128 requested, uint128 available);
    error NoPendingWithdrawal();
    error WithdrawDelayNotElapsed(uint256 readyAt);
    error StaleRefundNonce(uint256 expected);

    // --- identities and digests -------------------------------------------------------------

    function domainSeparator() public view returns (bytes32) {
        return keccak256(abi.encode(DOMAIN_TYPEHASH, NAME_HASH, VERSION_HASH, block.chainid, address(this)));
    }

    /// @notice The channel's id: the EIP-712 digest of its (immutable) config, bound to this
    ///   chain and this contract.
    function getChannelId(ChannelConfig calldata config) public view returns (bytes32) {
        return _digest(domainSeparator(), _configHash(config));
    }

    function getVoucherDigest(bytes32 channelId, uint128 maxClaimableAmount) external view returns (bytes32) {
        return _digest(domainSeparator(), keccak256(abi.encode(VOUCHER_TYPEHASH, channelId, maxClaimableAmount)));
    }

    function getRefundDigest(bytes32 channelId, uint256 nonce, uint128 amount) external view returns (bytes32) {
        return _digest(domainSeparator(), keccak256(abi.encode(REFUND_TYPEHASH, channelId, nonce, amount)));
    }

    function getClaimBatchDigest(VoucherClaim[] calldata voucherClaims) external view returns (bytes32) {
        bytes32 separator = domainSeparator();
        bytes32[] memory ids = new bytes32[](voucherClaims.length);
        for (uint256 i = 0; i < voucherClaims.length; ++i) {
            ids[i] = _digest(separator, _configHash(voucherClaims[i].voucher.channel));
        }
        return _claimBatchDigest(separator, voucherClaims, ids);
    }

    // --- deposit ----------------------------------------------------------------------------

    /// @notice Add `amount` to the channel of `config`, pulled from the payer by `collector`.
    ///   Anyone may call it (a facilitator relays it); the collector's authorisation from the
    ///   payer binds the channel and the amount, and the token must arrive here in full.
    function deposit(ChannelConfig calldata config, uint128 amount, address collector, bytes calldata collectorData)
        external
        nonReentrant
    {
        if (amount == 0) revert ZeroAmount();
        if (
            config.payer == address(0) || config.receiver == address(0) || config.receiverAuthorizer == address(0)
                || config.token.code.length == 0 || config.withdrawDelay < MIN_WITHDRAW_DELAY
                || config.withdrawDelay > MAX_WITHDRAW_DELAY
        ) revert InvalidChannelConfig();
        bytes32 channelId = getChannelId(config);
        IERC20 token = IERC20(config.token);
        uint256 before = token.balanceOf(address(this));
        IDepositCollector(collector).collect(config.payer, config.token, amount, channelId, collectorData);
        uint256 received = token.balanceOf(address(this)) - before;
        if (received != amount) revert DepositNotReceived(amount, received);
        ChannelState storage channel = channels[channelId];
        if (channel.balance == channel.totalClaimed && channel.totalClaimed == 0) {
            emit ChannelCreated(channelId, config);
        }
        channel.balance += amount;
        emit Deposited(channelId, msg.sender, collector, amount);
    }

    // --- claim and settle -------------------------------------------------------------------

    /// @notice Claim the vouchers of many channels; the caller is each row's receiver or
    ///   receiver authorizer. Accounting only: no token moves until `settle`.
    function claim(VoucherClaim[] calldata voucherClaims) external nonReentrant {
        bytes32 separator = domainSeparator();
        for (uint256 i = 0; i < voucherClaims.length; ++i) {
            ChannelConfig calldata config = voucherClaims[i].voucher.channel;
            if (msg.sender != config.receiver && msg.sender != config.receiverAuthorizer) {
                revert NotReceiverSide(msg.sender);
            }
            _claim(separator, voucherClaims[i], _digest(separator, _configHash(config)));
        }
    }

    /// @notice The relayable claim: anyone submits rows sharing one receiver authorizer, with
    ///   that authorizer's EIP-712 `ClaimBatch` signature over (channelId, ceiling, new total).
    function claimWithSignature(VoucherClaim[] calldata voucherClaims, bytes calldata authorizerSignature)
        external
        nonReentrant
    {
        if (voucherClaims.length == 0) return;
        bytes32 separator = domainSeparator();
        address authorizer = voucherClaims[0].voucher.channel.receiverAuthorizer;
        bytes32[] memory ids = new bytes32[](voucherClaims.length);
        for (uint256 i = 0; i < voucherClaims.length; ++i) {
            if (voucherClaims[i].voucher.channel.receiverAuthorizer != authorizer) revert MixedReceiverAuthorizers();
            ids[i] = _digest(separator, _configHash(voucherClaims[i].voucher.channel));
        }
        if (!SignatureChecker.isValidSignatureNow(
                authorizer, _claimBatchDigest(separator, voucherClaims, ids), authorizerSignature
            )) revert InvalidAuthorizerSignature();
        for (uint256 i = 0; i < voucherClaims.length; ++i) {
            _claim(separator, voucherClaims[i], ids[i]);
        }
    }

    /// @notice Pay the receiver everything claimed for it in `token` and not yet paid.
    ///   Permissionless: the money can only go to `receiver`.
    function settle(address receiver, address token) external nonReentrant {
        ReceiverState storage state = receivers[receiver][token];
        uint128 amount = state.totalClaimed - state.totalSettled;
        if (amount == 0) return;
        state.totalSettled = state.totalClaimed;
        IERC20(token).safeTransfer(receiver, amount);
        emit Settled(receiver, token, msg.sender, amount);
    }

    // --- timed withdrawal (the payer's escape hatch) ----------------------------------------

    /// @notice Start withdrawing `amount` of unclaimed escrow; it can be finalised after the
    ///   channel's `withdrawDelay`, during which the receiver side can still claim.
    function initiateWithdraw(ChannelConfig calldata config, uint128 amount) external nonReentrant {
        _requirePayerSide(config);
        if (amount == 0) revert ZeroAmount();
        bytes32 channelId = getChannelId(config);
        ChannelState storage channel = channels[channelId];
        uint128 available = channel.balance - channel.totalClaimed;
        if (amount > available) revert WithdrawAboveAvailable(amount, available);
        uint40 initiatedAt = uint40(block.timestamp);
        pendingWithdrawals[channelId] = PendingWithdrawal(amount, initiatedAt);
        emit WithdrawInitiated(channelId, amount, initiatedAt);
    }

    /// @notice Complete a withdrawal whose delay has passed: pays the payer the pending
    ///   amount, capped to what is still unclaimed now.
    function finalizeWithdraw(ChannelConfig calldata config) external nonReentrant {
        _requirePayerSide(config);
        bytes32 channelId = getChannelId(config);
        PendingWithdrawal memory pending = pendingWithdrawals[channelId];
        if (pending.initiatedAt == 0) revert NoPendingWithdrawal();
        uint256 readyAt = uint256(pending.initiatedAt) + config.withdrawDelay;
        if (block.timestamp < readyAt) revert WithdrawDelayNotElapsed(readyAt);
        delete pendingWithdrawals[channelId];
        ChannelState storage channel = channels[channelId];
        uint128 available = channel.balance - channel.totalClaimed;
        uint128 amount = pending.amount < available ? pending.amount : available;
        channel.balance -= amount;
        if (amount > 0) IERC20(config.token).safeTransfer(config.payer, amount);
        emit WithdrawFinalized(channelId, amount);
        _closedCheck(channelId, config, channel);
    }

    // --- cooperative refund -----------------------------------------------------------------

    /// @notice Return up to `amount` of unclaimed escrow to the payer, called by the receiver
    ///   or its authorizer.
    function refund(ChannelConfig calldata config, uint128 amount) external nonReentrant {
        if (msg.sender != config.receiver && msg.sender != config.receiverAuthorizer) {
            revert NotReceiverSide(msg.sender);
        }
        _refund(config, getChannelId(config), amount);
    }

    /// @notice The relayable refund: the receiver authorizer's EIP-712 `Refund` signature over
    ///   (channelId, the channel's current refund nonce, amount).
    function refundWithSignature(
        ChannelConfig calldata config,
        uint128 amount,
        uint256 nonce,
        bytes calldata receiverAuthorizerSignature
    ) external nonReentrant {
        bytes32 separator = domainSeparator();
        bytes32 channelId = _digest(separator, _configHash(config));
        if (nonce != refundNonce[channelId]) revert StaleRefundNonce(refundNonce[channelId]);
        bytes32 digest = _digest(separator, keccak256(abi.encode(REFUND_TYPEHASH, channelId, nonce, amount)));
        if (!SignatureChecker.isValidSignatureNow(config.receiverAuthorizer, digest, receiverAuthorizerSignature)) {
            revert InvalidAuthorizerSignature();
        }
        _refund(config, channelId, amount);
    }

    // --- internals --------------------------------------------------------------------------

    function _claim(bytes32 separator, VoucherClaim calldata row, bytes32 channelId) private {
        ChannelConfig calldata config = row.voucher.channel;
        uint128 ceiling = row.voucher.maxClaimableAmount;
        uint128 newTotal = row.totalClaimed;
        if (newTotal > ceiling) revert ClaimAboveVoucher(channelId);
        ChannelState storage channel = channels[channelId];
        uint128 previous = channel.totalClaimed;
        // A row at or below what is already claimed is superseded: nothing to do, and one
        // stale row must not sink the rest of a batch.
        if (newTotal <= previous) return;
        if (newTotal > channel.balance) revert ClaimAboveBalance(channelId);
        bytes32 digest = _digest(separator, keccak256(abi.encode(VOUCHER_TYPEHASH, channelId, ceiling)));
        if (!_validVoucherSignature(config, digest, row.signature)) revert InvalidVoucherSignature(channelId);
        channel.totalClaimed = newTotal;
        uint128 amount = newTotal - previous;
        receivers[config.receiver][config.token].totalClaimed += amount;
        emit Claimed(channelId, config.receiver, amount, newTotal);
    }

    /// @dev A committed payer authorizer signs with a plain key (ECDSA only); without one the
    ///   payer itself signs, which may be an EIP-1271 wallet.
    function _validVoucherSignature(ChannelConfig calldata config, bytes32 digest, bytes calldata signature)
        private
        view
        returns (bool)
    {
        if (config.payerAuthorizer != address(0)) {
            (address recovered, ECDSA.RecoverError error,) = ECDSA.tryRecover(digest, signature);
            return error == ECDSA.RecoverError.NoError && recovered == config.payerAuthorizer;
        }
        return SignatureChecker.isValidSignatureNow(config.payer, digest, signature);
    }

    /// @dev The nonce advances before the amount is capped, so even a refund that moves nothing
    ///   invalidates a signature made for the old nonce.
    function _refund(ChannelConfig calldata config, bytes32 channelId, uint128 amount) private {
        if (amount == 0) revert ZeroAmount();
        uint256 nonce = refundNonce[channelId]++;
        ChannelState storage channel = channels[channelId];
        uint128 available = channel.balance - channel.totalClaimed;
        uint128 refunded = amount < available ? amount : available;
        if (refunded == 0) return;
        channel.balance -= refunded;
        PendingWithdrawal storage pending = pendingWithdrawals[channelId];
        if (pending.initiatedAt != 0) {
            if (refunded >= pending.amount) delete pendingWithdrawals[channelId];
            else pending.amount -= refunded;
        }
        IERC20(config.token).safeTransfer(config.payer, refunded);
        emit Refunded(channelId, msg.sender, refunded, nonce);
        _closedCheck(channelId, config, channel);
    }

    function _closedCheck(bytes32 channelId, ChannelConfig calldata config, ChannelState storage channel) private {
        if (channel.balance == 0 && channel.totalClaimed == 0) emit ChannelClosed(channelId, config);
    }

    function _requirePayerSide(ChannelConfig calldata config) private view {
        if (msg.sender != config.payer && (config.payerAuthorizer == address(0) || msg.sender != config.payerAuthorizer))
        {
            revert NotPayerSide(msg.sender);
        }
    }

    function _configHash(ChannelConfig calldata config) private pure returns (bytes32) {
        return keccak256(
            abi.encode(
                CHANNEL_CONFIG_TYPEHASH,
                config.payer,
                config.payerAuthorizer,
                config.receiver,
                config.receiverAuthorizer,
                config.token,
                config.withdrawDelay,
                config.salt
            )
        );
    }

    function _claimBatchDigest(bytes32 separator, VoucherClaim[] calldata voucherClaims, bytes32[] memory ids)
        private
        pure
        returns (bytes32)
    {
        bytes32[] memory entries = new bytes32[](voucherClaims.length);
        for (uint256 i = 0; i < voucherClaims.length; ++i) {
            entries[i] = keccak256(
                abi.encode(
                    CLAIM_ENTRY_TYPEHASH, ids[i], voucherClaims[i].voucher.maxClaimableAmount, voucherClaims[i].totalClaimed
                )
            );
        }
        return _digest(separator, keccak256(abi.encode(CLAIM_BATCH_TYPEHASH, keccak256(abi.encodePacked(entries)))));
    }

    function _digest(bytes32 separator, bytes32 structHash) private pure returns (bytes32) {
        return keccak256(abi.encodePacked("\x19\x01", separator, structHash));
    }
}
