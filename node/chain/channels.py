"""Payment channels (x402 ``batch-settlement``): a small synchronous face over the x402
SDK's own scheme code, for the node's worker threads.

Rule: this module adds no second implementation of the scheme. Deposits, claims,
settlement and cooperative refunds go through the SDK's facilitator
(:class:`x402.mechanisms.evm.batch_settlement.facilitator.BatchSettlementEvmFacilitator`);
deposit payloads and vouchers are signed by the SDK's client functions; channel ids,
EIP-712 digests and voucher checks are the SDK's. What is ours: the one adapter the SDK
asks its users to write (:class:`ChainFacilitatorSigner`, its ``FacilitatorEvmSigner``
over our :class:`~node.chain.client.ChainClient`, so the channel transactions and the
``exact`` settlement engine of one wallet share one nonce sequence), typed results in
integer micro-USDC, the payer's timed withdrawal (the SDK has only its ABI), and errors
from :mod:`node.chain.errors`.

Everything here is blocking sync web3 (AsyncWeb3 does not run under trio): call it from
``trio.to_thread.run_sync``. The contracts live at the SDK's canonical addresses: the
audited deployment on Base, ours (``devnet/contracts/ChannelSettlement.sol``) on a devnet.
"""

from __future__ import annotations

import logging
import secrets
from dataclasses import dataclass
from typing import Any

from eth_account.signers.local import LocalAccount
from eth_utils import to_checksum_address
from hexbytes import HexBytes
from web3.exceptions import ContractLogicError
from x402.mechanisms.evm.batch_settlement.abi import BATCH_SETTLEMENT_ABI
from x402.mechanisms.evm.batch_settlement.authorizer_signer import LocalAuthorizerSigner
from x402.mechanisms.evm.batch_settlement.client.eip3009 import (
    create_batch_settlement_eip3009_deposit_payload,
)
from x402.mechanisms.evm.batch_settlement.client.voucher import sign_voucher
from x402.mechanisms.evm.batch_settlement.constants import (
    BATCH_SETTLEMENT_ADDRESS,
    MAX_WITHDRAW_DELAY,
    MIN_WITHDRAW_DELAY,
    SCHEME_BATCH_SETTLEMENT,
)
from x402.mechanisms.evm.batch_settlement.facilitator import BatchSettlementEvmFacilitator
from x402.mechanisms.evm.batch_settlement.facilitator.utils import (
    read_channel_state,
    to_contract_channel_config,
    verify_batch_settlement_voucher_typed_data,
)
from x402.mechanisms.evm.batch_settlement.types import (
    ChannelConfig,
    ClaimPayload,
    DepositPayload,
    EnrichedRefundPayload,
    SettlePayload,
    VoucherClaim,
    VoucherFields,
)
from x402.mechanisms.evm.batch_settlement.utils import compute_channel_id
from x402.mechanisms.evm.signers import EthAccountSigner
from x402.mechanisms.evm.types import TransactionReceipt
from x402.schemas import PaymentPayload, PaymentRequirements, SettleResponse

from node.chain.client import ChainClient
from node.chain.contracts import TOKEN_DOMAIN_NAME, TOKEN_DOMAIN_VERSION
from node.chain.errors import ChainError
from node.chain.x402 import network_id

log = logging.getLogger(__name__)

CHANNEL_CONTRACT_ADDRESS = to_checksum_address(BATCH_SETTLEMENT_ADDRESS)
DEFAULT_WITHDRAW_DELAY_S = MIN_WITHDRAW_DELAY
# Gas is estimated per transaction (a claim's cost grows with its channels) with this
# head-room: the SDK simulates every call first, so the estimate is of a call known to pass.
GAS_HEADROOM = 1.25


class ChannelError(ChainError):
    """A channel operation was refused (by the SDK's checks or by the contract);
    ``reason`` is the SDK's error code (``invalid_batch_settlement_evm_...``) or ours."""

    http_status = 409
    code = "channel"

    def __init__(self, reason: str, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"channel operation refused: {reason}" + (f" ({detail})" if detail else ""))


@dataclass(frozen=True)
class ChannelState:
    """One channel on chain, in micro-USDC and unix seconds."""

    channel_id: str
    balance_micro: int
    total_claimed_micro: int
    withdraw_amount_micro: int
    withdraw_requested_at_s: int
    refund_nonce: int

    @property
    def unclaimed_micro(self) -> int:
        """Deposit not yet claimed by the receiver: what a refund or withdrawal can return."""
        return self.balance_micro - self.total_claimed_micro

    @property
    def withdrawing(self) -> bool:
        return self.withdraw_requested_at_s != 0


@dataclass(frozen=True)
class SignedVoucher:
    """A payer's cumulative voucher: the receiver may claim up to ``max_claimable_micro``
    of the channel in total."""

    channel: ChannelConfig
    channel_id: str
    max_claimable_micro: int
    signature: str

    def claim(self, total_claimed_micro: int | None = None) -> VoucherClaim:
        """The SDK's claim row for this voucher (claiming all of it by default)."""
        total = self.max_claimable_micro if total_claimed_micro is None else total_claimed_micro
        return VoucherClaim(channel=self.channel, max_claimable_amount=str(self.max_claimable_micro),
                            signature=self.signature, total_claimed=str(total))


class ChainFacilitatorSigner:
    """The x402 SDK's ``FacilitatorEvmSigner`` over a :class:`ChainClient` and one account:
    reads through the client's web3, transactions signed with the client's nonce counter."""

    def __init__(self, client: ChainClient, account: LocalAccount, receipt_timeout_s: float = 60.0) -> None:
        self.client = client
        self.account = account
        self.receipt_timeout_s = receipt_timeout_s

    @property
    def address(self) -> str:
        return to_checksum_address(self.account.address)

    def get_addresses(self) -> list[str]:
        return [self.address]

    def get_chain_id(self) -> int:
        return self.client.chain_id

    def read_contract(self, address: str, abi: list[dict[str, Any]], function_name: str, *args: Any) -> Any:
        contract = self.client.w3.eth.contract(address=to_checksum_address(address), abi=abi)
        call = getattr(contract.functions, function_name)(*args)
        return self.client._rpc(lambda: call.call({"from": self.address}))

    def verify_typed_data(self, address: str, domain: Any, types: Any, primary_type: str,
                          message: dict[str, Any], signature: bytes) -> bool:
        from x402.mechanisms.evm.verify import verify_typed_data_strict

        return verify_typed_data_strict(self, address, domain, types, primary_type, message, signature)

    def write_contract(self, address: str, abi: list[dict[str, Any]], function_name: str, *args: Any,
                       data_suffix: str | None = None) -> str:
        contract = self.client.w3.eth.contract(address=to_checksum_address(address), abi=abi)
        data = bytes(HexBytes(contract.encode_abi(function_name, args=list(args))))
        if data_suffix:
            data += bytes(HexBytes(data_suffix))
        return self.send_transaction(address, data)

    def send_transaction(self, to: str, data: bytes) -> str:
        request = {"from": self.address, "to": to_checksum_address(to), "data": HexBytes(data)}
        estimate = int(self.client._rpc(lambda: self.client.w3.eth.estimate_gas(request)))  # type: ignore[arg-type]
        return self.client.send(self.account, to, data, int(estimate * GAS_HEADROOM))

    def wait_for_transaction_receipt(self, tx_hash: str) -> TransactionReceipt:
        receipt = self.client.wait_receipt(tx_hash, self.receipt_timeout_s)
        return TransactionReceipt(status=int(receipt["status"]), block_number=int(receipt["blockNumber"]),
                                  tx_hash=tx_hash, logs=list(receipt.get("logs") or []))

    def get_balance(self, address: str, token_address: str) -> int:
        if int(token_address, 16) == 0:
            return self.client.eth_balance(address)
        return ChainClient(self.client.w3, token_address).usdc_balance(address)

    def get_code(self, address: str) -> bytes:
        return bytes(self.client._rpc(lambda: self.client.w3.eth.get_code(to_checksum_address(address))))


def channel_requirements(*, chain_id: int, token_address: str, pay_to: str, price_micro: int,
                         receiver_authorizer: str, withdraw_delay_s: int = DEFAULT_WITHDRAW_DELAY_S,
                         max_timeout_s: int = 300) -> PaymentRequirements:
    """x402 v2 PaymentRequirements for one purchase paid from a channel (the SDK's model;
    ``.model_dump(by_alias=True)`` is the JSON a 402 carries)."""
    if not MIN_WITHDRAW_DELAY <= withdraw_delay_s <= MAX_WITHDRAW_DELAY:
        raise ValueError(f"withdraw delay must be {MIN_WITHDRAW_DELAY}..{MAX_WITHDRAW_DELAY} s")
    return PaymentRequirements(
        scheme=SCHEME_BATCH_SETTLEMENT, network=network_id(chain_id),
        asset=to_checksum_address(token_address), amount=str(int(price_micro)),
        pay_to=to_checksum_address(pay_to), max_timeout_seconds=int(max_timeout_s),
        extra={"receiverAuthorizer": to_checksum_address(receiver_authorizer),
               "withdrawDelay": int(withdraw_delay_s), "name": TOKEN_DOMAIN_NAME,
               "version": TOKEN_DOMAIN_VERSION, "assetTransferMethod": "eip3009"})


def channel_config(*, payer: str, receiver: str, receiver_authorizer: str, token_address: str,
                   withdraw_delay_s: int = DEFAULT_WITHDRAW_DELAY_S, salt: str | None = None,
                   payer_authorizer: str | None = None) -> ChannelConfig:
    """The immutable config of a payer's channel to one receiver. The payer's own key is its
    voucher signer (``payerAuthorizer``), so a voucher is checked with one ECDSA recover."""
    return ChannelConfig(
        payer=to_checksum_address(payer), payer_authorizer=to_checksum_address(payer_authorizer or payer),
        receiver=to_checksum_address(receiver), receiver_authorizer=to_checksum_address(receiver_authorizer),
        token=to_checksum_address(token_address), withdraw_delay=int(withdraw_delay_s),
        salt=salt or "0x" + bytes(32).hex())


# --- the payer's side --------------------------------------------------------------------------

def sign_channel_voucher(payer: LocalAccount, config: ChannelConfig, chain_id: int,
                         max_claimable_micro: int) -> SignedVoucher:
    """A cumulative voucher (the SDK's EIP-712 ``Voucher``) signed by the payer's key."""
    channel_id = compute_channel_id(config, chain_id)
    fields = sign_voucher(EthAccountSigner(payer), channel_id, int(max_claimable_micro), network_id(chain_id))
    return SignedVoucher(channel=config, channel_id=channel_id, max_claimable_micro=int(max_claimable_micro),
                         signature=fields.signature)


def sign_deposit(payer: LocalAccount, requirements: PaymentRequirements, config: ChannelConfig,
                 deposit_micro: int, max_claimable_micro: int) -> DepositPayload:
    """The SDK's deposit payload: an EIP-3009 ``ReceiveWithAuthorization`` to the deposit
    collector, bound to this channel, plus the first voucher. Anyone may submit it
    (:meth:`Channels.deposit`); it pays into this channel only."""
    return create_batch_settlement_eip3009_deposit_payload(
        EthAccountSigner(payer), requirements, config, int(deposit_micro), int(max_claimable_micro))


# --- checks any side can make without a transaction ----------------------------------------------

def voucher_signature_valid(voucher: SignedVoucher, chain_id: int) -> bool:
    """Whether the voucher is signed by the channel's payer authorizer (one ECDSA recover, no
    RPC; the channel id must be the config's)."""
    if compute_channel_id(voucher.channel, chain_id).lower() != voucher.channel_id.lower():
        return False
    if int(voucher.channel.payer_authorizer, 16) == 0:
        return False  # EIP-1271 payers need an RPC call; our channels always commit a key
    return verify_batch_settlement_voucher_typed_data(
        None,  # type: ignore[arg-type]  # unused on the ECDSA path
        channel_id=voucher.channel_id, max_claimable_amount=str(voucher.max_claimable_micro),
        payer_authorizer=voucher.channel.payer_authorizer, payer=voucher.channel.payer,
        signature=voucher.signature, chain_id=chain_id)


class Channels:
    """One wallet's channel operations on one chain, through the SDK's facilitator.

    ``account`` sends (and pays gas for) the transactions; ``authorizer`` signs as the
    channels' ``receiverAuthorizer`` (defaults to ``account``: a node authorizes its own
    claims and refunds). Thread-safe as far as ChainClient is (nonces are locked).
    """

    def __init__(self, client: ChainClient, account: LocalAccount, authorizer: LocalAccount | None = None) -> None:
        self.client = client
        self.account = account
        self.signer = ChainFacilitatorSigner(client, account)
        self.authorizer = LocalAuthorizerSigner(authorizer or account)
        self.facilitator = BatchSettlementEvmFacilitator(self.signer, self.authorizer)

    @property
    def chain_id(self) -> int:
        return self.client.chain_id

    @property
    def network(self) -> str:
        return network_id(self.chain_id)

    def channel_id(self, config: ChannelConfig) -> str:
        return compute_channel_id(config, self.chain_id)

    # --- reads -------------------------------------------------------------------------------

    def state(self, channel_id: str) -> ChannelState:
        """The channel as the contract holds it now (zeros for a channel never funded)."""
        try:
            state = read_channel_state(self.signer, channel_id)
            pending = self.signer.read_contract(CHANNEL_CONTRACT_ADDRESS, BATCH_SETTLEMENT_ABI,
                                                "pendingWithdrawals", HexBytes(channel_id))
        except ChainError:
            raise
        except Exception as error:
            raise ChannelError("invalid_batch_settlement_evm_rpc_read_failed", str(error)[:200]) from error
        return ChannelState(channel_id=channel_id.lower(), balance_micro=state.balance,
                            total_claimed_micro=state.total_claimed, withdraw_amount_micro=int(pending[0]),
                            withdraw_requested_at_s=state.withdraw_requested_at,
                            refund_nonce=state.refund_nonce)

    def receiver_totals(self, receiver: str) -> tuple[int, int]:
        """(claimed, settled) micro-USDC for ``receiver`` in this chain's token."""
        claimed, settled = self.signer.read_contract(
            CHANNEL_CONTRACT_ADDRESS, BATCH_SETTLEMENT_ABI, "receivers", to_checksum_address(receiver),
            self.client.token_address)
        return int(claimed), int(settled)

    # --- the receiver's (or any relayer's) transactions ----------------------------------------

    def deposit(self, payload: DepositPayload, requirements: PaymentRequirements) -> SettleResponse:
        """Verify a payer's deposit payload (SDK checks: config, signatures, balances) and
        submit it; returns the mined SettleResponse. Raises :class:`ChannelError`."""
        return self._settle(payload.to_dict(), requirements, "deposit")

    def claim(self, vouchers: list[SignedVoucher]) -> str:
        """Claim many channels' vouchers in one transaction (``claimWithSignature``, signed by
        our authorizer); returns the transaction hash once mined."""
        if not vouchers:
            raise ValueError("nothing to claim")
        payload = ClaimPayload(claims=[voucher.claim() for voucher in vouchers])
        return self._settle(payload.to_dict(), self._plain_requirements(vouchers[0].channel.receiver),
                            "claim").transaction

    def settle(self, receiver: str | None = None) -> tuple[str, int]:
        """Transfer everything claimed for ``receiver`` (default: our account) to it;
        returns (transaction hash, micro-USDC moved), or ("", 0) when nothing was claimed."""
        receiver = to_checksum_address(receiver or self.account.address)
        claimed, settled = self.receiver_totals(receiver)
        if claimed <= settled:
            return "", 0
        payload = SettlePayload(receiver=receiver, token=self.client.token_address)
        response = self._settle(payload.to_dict(), self._plain_requirements(receiver), "settle")
        return response.transaction, int(response.amount or claimed - settled)

    def refund(self, voucher: SignedVoucher, amount_micro: int | None = None) -> tuple[str, int]:
        """Cooperative refund: claim ``voucher`` (the payer's latest; a no-op if already
        claimed) and return up to ``amount_micro`` (default: all) of the rest to the payer,
        in one transaction. Returns (transaction hash, micro-USDC refunded)."""
        state = self.state(voucher.channel_id)
        unclaimed_after = state.balance_micro - max(state.total_claimed_micro, voucher.max_claimable_micro)
        amount = unclaimed_after if amount_micro is None else int(amount_micro)
        if amount <= 0 or unclaimed_after <= 0:
            raise ChannelError("invalid_batch_settlement_evm_refund_no_balance", "nothing to refund")
        claims = [voucher.claim()] if voucher.max_claimable_micro > state.total_claimed_micro else []
        payload = EnrichedRefundPayload(
            channel_config=voucher.channel,
            voucher=VoucherFields(channel_id=voucher.channel_id,
                                  max_claimable_amount=str(voucher.max_claimable_micro),
                                  signature=voucher.signature),
            amount=str(amount), refund_nonce=str(state.refund_nonce), claims=claims)
        response = self._settle(payload.to_dict(), self._plain_requirements(voucher.channel.receiver),
                                "refund")
        return response.transaction, int(response.amount or 0)

    # --- the payer's escape hatch -------------------------------------------------------------

    def initiate_withdraw(self, config: ChannelConfig, amount_micro: int) -> str:
        """Start the timed withdrawal of ``amount_micro`` of unclaimed deposit (our account
        must be the channel's payer or payer authorizer)."""
        return self._transact("initiateWithdraw", to_contract_channel_config(config), int(amount_micro))

    def finalize_withdraw(self, config: ChannelConfig) -> str:
        """Complete a withdrawal once ``withdrawDelay`` has passed since it was initiated."""
        return self._transact("finalizeWithdraw", to_contract_channel_config(config))

    # --- internals -----------------------------------------------------------------------------

    def _plain_requirements(self, receiver: str) -> PaymentRequirements:
        return PaymentRequirements(scheme=SCHEME_BATCH_SETTLEMENT, network=self.network,
                                   asset=self.client.token_address, amount="0",
                                   pay_to=to_checksum_address(receiver), max_timeout_seconds=300, extra={})

    def _settle(self, payload: dict[str, Any], requirements: PaymentRequirements,
                operation: str) -> SettleResponse:
        payment = PaymentPayload(x402_version=2, payload=payload, accepted=requirements)
        response = self.facilitator.settle(payment, requirements)
        if not response.success:
            reason = response.error_reason or f"{operation}_failed"
            log.info("channel %s refused reason=%s", operation, reason)
            raise ChannelError(reason, (response.error_message or "")[:300])
        log.info("channel %s mined tx=%s", operation, response.transaction)
        return response

    def _transact(self, function_name: str, *args: Any) -> str:
        try:
            self.signer.read_contract(CHANNEL_CONTRACT_ADDRESS, BATCH_SETTLEMENT_ABI, function_name, *args)
        except ContractLogicError as error:
            raise ChannelError(f"{function_name}_reverted", str(error)[:300]) from error
        tx_hash = self.signer.write_contract(CHANNEL_CONTRACT_ADDRESS, BATCH_SETTLEMENT_ABI, function_name, *args)
        receipt = self.signer.wait_for_transaction_receipt(tx_hash)
        if receipt.status != 1:
            raise ChannelError(f"{function_name}_reverted", tx_hash)
        return tx_hash


def new_salt() -> str:
    """A random channel salt (a payer may hold several channels to one receiver)."""
    return "0x" + secrets.token_bytes(32).hex()
