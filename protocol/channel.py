"""Messages of the x402 ``batch-settlement`` exchange on ``/crystalmesh/purchase/1``.

A buyer pays a seller it buys from often through a **channel**: a deposit held by the
batch-settlement contract (``x402.mechanisms.evm.batch_settlement``: the x402 spec's contract
at its canonical address, or an ABI-compatible one at the same address on a devnet), out of
which the seller may claim what the buyer's **cumulative vouchers** allow. A purchase is then
one signed voucher carried with the request, checked by the seller with one ECDSA recover (no
chain call), recorded, and answered at once::

    buyer                                    seller
    VoucherPurchaseRequest     ->              (checks the channel and the voucher against
      (channel, voucher, and on the             its record: cumulative = last + price;
       first purchase a deposit)                records it; deposits first if one came)
                               <-  VoucherDelivery | ChannelState | TermsChanged | ErrorReply
    RefundRequest              ->              (claims what is owed, returns the rest)
                               <-  ChannelRefunded | ErrorReply

The channel is named by ``channel_id`` = EIP-712 hash of its :class:`ChannelTerms` under the
batch-settlement domain (x402's ``compute_channel_id``): it binds payer, receiver (the seller's
pay-to), token, withdraw delay and salt, so a voucher for one seller is worthless to another.
A voucher signs ``(channel_id, max_claimable)`` (x402's ``Voucher`` type) where
``max_claimable`` is the **total** the seller may ever claim from the channel: the seller
expects exactly its recorded total plus the listed price. Any other total gets
``ChannelState`` (the seller's record: its total and the last voucher it holds, which the
buyer can check is its own signature) and nothing is recorded or delivered; the buyer signs
again on that base. A deposit (EIP-3009 ``receiveWithAuthorization`` to x402's deposit
collector, so the buyer needs no ETH) rides along with the first purchase or a top-up; the
seller submits it, then checks the voucher against the new balance.

A seller that does not speak this exchange answers ``ErrorReply(bad_request,
"unknown_kind")`` (an older node) or ``ErrorReply(scheme_unsupported)`` (no channel contract
on its chain): the buyer then pays with ``exact`` (:mod:`protocol.purchase`).

Amounts are micro-USDC integers. Every map is strict (unknown keys refused) and bounded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from protocol.purchase import MAX_SKILL_PAYLOAD_BYTES, content_hash
from protocol.schema import (
    EVM_ADDRESS,
    REQUEST_ID,
    SHA256_HEX,
    TX_HASH,
    Bytes,
    Int,
    InvalidMessage,
    Message,
    Nullable,
    Record,
    RecordField,
    Schema,
    Text,
)

__all__ = [
    "CHANNEL_MESSAGES",
    "MAX_CUMULATIVE_MICRO_USDC",
    "MAX_WITHDRAW_DELAY_S",
    "MIN_WITHDRAW_DELAY_S",
    "ChannelDeposit",
    "ChannelRefunded",
    "ChannelState",
    "ChannelTerms",
    "RefundRequest",
    "VoucherDelivery",
    "VoucherPurchaseRequest",
]

MIN_WITHDRAW_DELAY_S = 900
MAX_WITHDRAW_DELAY_S = 2_592_000
"""x402's bounds on a channel's ``withdrawDelay`` (15 minutes to 30 days)."""

MAX_CUMULATIVE_MICRO_USDC = 2**96 - 1
"""Largest voucher total on the wire (the contract's field is a uint128; 2^96 micro-USDC is
far beyond any deposit, and keeps the integer small for every CBOR decoder)."""

_SECONDS = Int(0, 2**63 - 1)
_AMOUNT = Int(0, MAX_CUMULATIVE_MICRO_USDC)
_SIGNATURE = Bytes(65)  # r (32) || s (32) || v (1)
_BYTES32 = Bytes(32)
_MESSAGE = Text(280, min_chars=0)


@dataclass(frozen=True)
class ChannelTerms(Record):
    """x402's ``ChannelConfig``: who pays whom in which token, and how long a withdrawal
    waits. ``receiver`` and ``receiver_authorizer`` are the seller's pay-to address (it
    authorises its own claims)."""

    FIELDS: ClassVar[Schema] = {
        "payer": EVM_ADDRESS,
        "payer_authorizer": EVM_ADDRESS,
        "receiver": EVM_ADDRESS,
        "receiver_authorizer": EVM_ADDRESS,
        "token": EVM_ADDRESS,
        "withdraw_delay_s": Int(MIN_WITHDRAW_DELAY_S, MAX_WITHDRAW_DELAY_S),
        "salt": _BYTES32,
    }
    payer: str
    payer_authorizer: str
    receiver: str
    receiver_authorizer: str
    token: str
    withdraw_delay_s: int
    salt: bytes


@dataclass(frozen=True)
class ChannelDeposit(Record):
    """An EIP-3009 ``ReceiveWithAuthorization`` of ``value`` from the payer to x402's deposit
    collector, its nonce bound to the channel (x402's ``build_erc3009_deposit_nonce(channel_id,
    salt)``): only this channel can receive it."""

    FIELDS: ClassVar[Schema] = {
        "value": Int(1, MAX_CUMULATIVE_MICRO_USDC),
        "valid_after": _SECONDS,
        "valid_before": _SECONDS,
        "salt": _BYTES32,
        "signature": _SIGNATURE,
    }
    value: int
    valid_after: int
    valid_before: int
    salt: bytes
    signature: bytes

    def check(self) -> None:
        if self.valid_before <= self.valid_after:
            raise InvalidMessage("deposit: valid_before must be > valid_after")


@dataclass(frozen=True)
class VoucherPurchaseRequest(Message):
    """Buy ``listing_id`` with a voucher: ``max_claimable`` is the channel's new total (the
    seller's recorded total + ``price_micro_usdc``), ``signature`` the payer authorizer's
    EIP-712 signature of x402's ``Voucher(channelId, maxClaimableAmount)``. ``deposit`` opens
    or tops up the channel first (None otherwise)."""

    KIND: ClassVar[str] = "voucher_purchase_request"
    FIELDS: ClassVar[Schema] = {
        "request_id": REQUEST_ID,
        "listing_id": SHA256_HEX,
        "price_micro_usdc": Int(0, MAX_CUMULATIVE_MICRO_USDC),
        "channel": RecordField(ChannelTerms),
        "channel_id": _BYTES32,
        "max_claimable": Int(1, MAX_CUMULATIVE_MICRO_USDC),
        "signature": _SIGNATURE,
        "deposit": Nullable(RecordField(ChannelDeposit)),
    }
    request_id: str
    listing_id: str
    price_micro_usdc: int
    channel: ChannelTerms
    channel_id: bytes
    max_claimable: int
    signature: bytes
    deposit: ChannelDeposit | None

    def check(self) -> None:
        if self.price_micro_usdc > self.max_claimable:
            raise InvalidMessage("max_claimable is below the price it pays")


@dataclass(frozen=True)
class VoucherDelivery(Message):
    """The skill, delivered on a voucher the seller has recorded. ``charged_total`` is the
    channel's total after this purchase (= the voucher's ``max_claimable``); ``deposit_tx``
    the deposit transaction when the request carried one."""

    KIND: ClassVar[str] = "voucher_delivery"
    FIELDS: ClassVar[Schema] = {
        "request_id": REQUEST_ID,
        "listing_id": SHA256_HEX,
        "payload": Text(
            MAX_SKILL_PAYLOAD_BYTES, min_chars=0, max_utf8_bytes=MAX_SKILL_PAYLOAD_BYTES
        ),
        "content_hash": SHA256_HEX,
        "channel_id": _BYTES32,
        "charged_total": _AMOUNT,
        "balance": _AMOUNT,
        "deposit_tx": Nullable(TX_HASH),
    }
    request_id: str
    listing_id: str
    payload: str
    content_hash: str
    channel_id: bytes
    charged_total: int
    balance: int
    deposit_tx: str | None

    def check(self) -> None:
        if content_hash(self.payload) != self.content_hash:
            raise InvalidMessage("content_hash is not the SHA-256 of payload")


@dataclass(frozen=True)
class ChannelState(Message):
    """The seller's record of a channel, instead of a delivery: nothing was recorded or
    delivered for this request. ``charged_total`` is what the seller has recorded as owed;
    ``voucher_total`` / ``voucher_signature`` the newest voucher it holds (the buyer checks it
    is its own), ``balance`` / ``withdraw_requested_at_s`` the channel on chain as the seller
    last read it. ``reason``: ``base`` (sign again on ``charged_total``), ``deposit`` (the
    balance does not cover the voucher: deposit more), ``unknown`` (no such channel)."""

    KIND: ClassVar[str] = "channel_state"
    FIELDS: ClassVar[Schema] = {
        "request_id": REQUEST_ID,
        "channel_id": _BYTES32,
        "reason": Text(16, choices=frozenset({"base", "deposit", "unknown"})),
        "charged_total": _AMOUNT,
        "voucher_total": _AMOUNT,
        "voucher_signature": Nullable(_SIGNATURE),
        "balance": _AMOUNT,
        "withdraw_requested_at_s": _SECONDS,
        "message": _MESSAGE,
    }
    request_id: str
    channel_id: bytes
    reason: str
    charged_total: int
    voucher_total: int
    voucher_signature: bytes | None
    balance: int
    withdraw_requested_at_s: int
    message: str


@dataclass(frozen=True)
class RefundRequest(Message):
    """The payer asks the seller to close its account: claim what the vouchers owe, and return
    the rest of the deposit to the payer (x402's cooperative refund). ``max_claimable`` /
    ``signature`` is the payer's voucher for what it has been charged (x402's zero-charge
    refund voucher); the seller claims the higher of it and the newest voucher it holds."""

    KIND: ClassVar[str] = "channel_refund_request"
    FIELDS: ClassVar[Schema] = {
        "request_id": REQUEST_ID,
        "channel": RecordField(ChannelTerms),
        "channel_id": _BYTES32,
        "max_claimable": _AMOUNT,
        "signature": _SIGNATURE,
    }
    request_id: str
    channel: ChannelTerms
    channel_id: bytes
    max_claimable: int
    signature: bytes


@dataclass(frozen=True)
class ChannelRefunded(Message):
    """The refund is on chain: ``claimed_total`` went to the seller, ``refunded`` back to the
    payer, in ``tx_hash``."""

    KIND: ClassVar[str] = "channel_refunded"
    FIELDS: ClassVar[Schema] = {
        "request_id": REQUEST_ID,
        "channel_id": _BYTES32,
        "claimed_total": _AMOUNT,
        "refunded": _AMOUNT,
        "tx_hash": TX_HASH,
    }
    request_id: str
    channel_id: bytes
    claimed_total: int
    refunded: int
    tx_hash: str


CHANNEL_MESSAGES: tuple[type[Message], ...] = (
    VoucherPurchaseRequest,
    VoucherDelivery,
    ChannelState,
    RefundRequest,
    ChannelRefunded,
)
