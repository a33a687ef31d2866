"""Channels and vouchers between this protocol's wire form and the chain's channel face.

Everything cryptographic is the x402 SDK's (``x402.mechanisms.evm.batch_settlement``), reached
through ``node.chain``'s channel face where it offers the operation (requirements, deposit
signing, voucher signing and the one-ECDSA-recover voucher check) and directly for the
receiver's channel-config check (``validate_channel_config``). This module only converts: the
wire carries bytes and integers (:mod:`protocol.channel`), the SDK hex strings and dataclasses.
Pure functions; no chain calls.
"""

from __future__ import annotations

import time
from typing import Any

from eth_account.signers.local import LocalAccount
from eth_utils import to_checksum_address
from x402.mechanisms.evm.batch_settlement import ChannelConfig, compute_channel_id
from x402.mechanisms.evm.batch_settlement.facilitator.utils import validate_channel_config
from x402.schemas import PaymentRequirements

from node.chain import (
    SignedVoucher,
    channel_requirements,
    sign_channel_voucher,
    voucher_signature_valid,
)
from node.chain import sign_deposit as sign_channel_deposit
from protocol.channel import ChannelDeposit, ChannelTerms

SCHEME_VOUCHER = "batch-settlement"
SCHEME_EXACT = "exact"
ZERO_SALT = b"\x00" * 32
# How long a deposit authorization stays usable: the seller submits it in the same exchange.
DEPOSIT_WINDOW_S = 300


def requirements(pay_to: str, token: str, chain_id: int, price_micro_usdc: int,
                 withdraw_delay_s: int) -> PaymentRequirements:
    """x402 ``batch-settlement`` requirements for one purchase: the seller's pay-to is both
    receiver and receiver authorizer (it authorises its own claims)."""
    return channel_requirements(chain_id=chain_id, token_address=token, pay_to=pay_to,
                                price_micro=price_micro_usdc, receiver_authorizer=pay_to,
                                withdraw_delay_s=withdraw_delay_s, max_timeout_s=DEPOSIT_WINDOW_S)


def buyer_terms(payer: str, pay_to: str, token: str, withdraw_delay_s: int,
                salt: bytes = ZERO_SALT) -> ChannelTerms:
    """The channel a buyer opens to a seller: one per (payer, seller pay-to, token, salt)."""
    return ChannelTerms(
        payer=to_checksum_address(payer), payer_authorizer=to_checksum_address(payer),
        receiver=to_checksum_address(pay_to), receiver_authorizer=to_checksum_address(pay_to),
        token=to_checksum_address(token), withdraw_delay_s=withdraw_delay_s, salt=salt)


def sdk_config(terms: ChannelTerms) -> ChannelConfig:
    return ChannelConfig(
        payer=terms.payer, payer_authorizer=terms.payer_authorizer, receiver=terms.receiver,
        receiver_authorizer=terms.receiver_authorizer, token=terms.token,
        withdraw_delay=terms.withdraw_delay_s, salt="0x" + terms.salt.hex())


def channel_id(terms: ChannelTerms, chain_id: int) -> bytes:
    return bytes.fromhex(compute_channel_id(sdk_config(terms), chain_id)[2:])


def terms_problem(terms: ChannelTerms, claimed_id: bytes, pay_to: str, token: str,
                  chain_id: int) -> str | None:
    """Why a buyer's channel cannot pay this seller (the SDK's receiver-side check: the id is
    the hash of these terms, the receiver and its authorizer are our pay-to, the token ours,
    the withdraw delay within x402's bounds), or None."""
    checked = requirements(pay_to, token, chain_id, 0, terms.withdraw_delay_s)
    try:
        return validate_channel_config(sdk_config(terms), "0x" + claimed_id.hex(), checked)
    except (ValueError, TypeError) as error:
        return f"channel terms unusable: {error}"


def signed_voucher(terms: ChannelTerms, channel: bytes, total_micro_usdc: int,
                   signature: bytes) -> SignedVoucher:
    return SignedVoucher(channel=sdk_config(terms), channel_id="0x" + channel.hex(),
                         max_claimable_micro=total_micro_usdc, signature="0x" + signature.hex())


def sign_voucher(wallet: LocalAccount, terms: ChannelTerms, total_micro_usdc: int,
                 chain_id: int) -> bytes:
    """The payer's EIP-712 ``Voucher(channelId, maxClaimableAmount)`` signature."""
    voucher = sign_channel_voucher(wallet, sdk_config(terms), chain_id, total_micro_usdc)
    return bytes.fromhex(voucher.signature.removeprefix("0x"))


def voucher_signed(terms: ChannelTerms, channel: bytes, total_micro_usdc: int, signature: bytes,
                   chain_id: int) -> bool:
    """True if ``signature`` is the payer authorizer's voucher for ``total`` on ``channel``
    (whose id must be these terms'): one ECDSA recover, no chain call."""
    return voucher_signature_valid(signed_voucher(terms, channel, total_micro_usdc, signature),
                                   chain_id)


def sign_deposit(wallet: LocalAccount, terms: ChannelTerms, chain_id: int, price_micro_usdc: int,
                 deposit_micro_usdc: int, voucher_total: int) -> tuple[ChannelDeposit, bytes]:
    """A deposit into ``terms``' channel (EIP-3009 ``receiveWithAuthorization`` to x402's
    deposit collector, its nonce bound to the channel) and the voucher for ``voucher_total``
    that rides with it, both signed by the SDK's client code."""
    payload = sign_channel_deposit(
        wallet, requirements(terms.receiver, terms.token, chain_id, price_micro_usdc,
                             terms.withdraw_delay_s),
        sdk_config(terms), deposit_micro_usdc, voucher_total)
    assert payload.deposit is not None and payload.voucher is not None
    erc3009 = payload.deposit.authorization.erc3009_authorization
    assert erc3009 is not None
    deposit = ChannelDeposit(
        value=int(payload.deposit.amount), valid_after=int(erc3009.valid_after),
        valid_before=int(erc3009.valid_before), salt=_bytes32(erc3009.salt),
        signature=bytes.fromhex(erc3009.signature.removeprefix("0x")))
    return deposit, bytes.fromhex(payload.voucher.signature.removeprefix("0x"))


def deposit_payload(terms: ChannelTerms, channel: bytes, deposit: ChannelDeposit,
                    voucher_total: int, voucher_signature: bytes) -> dict[str, Any]:
    """The x402 ``deposit`` payload (camelCase JSON, as the SDK's facilitator reads it)."""
    return {
        "type": "deposit",
        "channelConfig": sdk_config(terms).to_dict(),
        "voucher": {"channelId": "0x" + channel.hex(), "maxClaimableAmount": str(voucher_total),
                    "signature": "0x" + voucher_signature.hex()},
        "deposit": {"amount": str(deposit.value), "authorization": {"erc3009Authorization": {
            "validAfter": str(deposit.valid_after), "validBefore": str(deposit.valid_before),
            "salt": "0x" + deposit.salt.hex(), "signature": "0x" + deposit.signature.hex()}}},
    }


def deposit_expired(deposit: ChannelDeposit, now_s: int | None = None) -> bool:
    return deposit.valid_before <= (now_s if now_s is not None else int(time.time())) + 6


def terms_json(terms: ChannelTerms) -> dict[str, Any]:
    return terms.to_body() | {"salt": "0x" + terms.salt.hex()}


def terms_from_json(data: dict[str, Any]) -> ChannelTerms:
    return ChannelTerms.from_body(data | {"salt": bytes.fromhex(str(data["salt"])[2:])})


def _bytes32(value: str) -> bytes:
    raw = value.removeprefix("0x")
    return bytes.fromhex(raw.rjust(64, "0"))
