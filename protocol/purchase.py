"""Messages of the ``/crystalmesh/purchase/1`` request/response protocol (x402-like).

Each exchange is one request and one response, every one a signed envelope.
A purchase takes **one round trip** to the seller (x402 ``exact``: the terms
are public, the payment travels with the request):

    buyer                                   seller
    PaidPurchaseRequest      ->              (verifies against its current
                                              listing, settles on chain)
                             <-  Delivery | TermsChanged | ErrorReply

The buyer derives the terms from the signed listing it holds (price, pay-to,
token, chain id; a validity window of at most :data:`PAYMENT_WINDOW_S` and a
nonce it picks). ``TermsChanged`` (the seller re-priced) carries the seller's
current signed listing and means the authorization was not and will not be
settled; the buyer may sign the fresh terms **with the same nonce** and ask
once more: two authorizations sharing an EIP-3009 nonce can never both settle.

The multi-step exchange of version 1 stays, for peers that speak only it (an
older seller answers a ``PaidPurchaseRequest`` with ``ErrorReply(bad_request,
"unknown_kind")`` before reading it; the buyer then falls back):

    PurchaseRequest          ->
                             <-  PaymentRequirements | ErrorReply
    PaymentAuthorization     ->              (seller settles on chain)
                             <-  Delivery | ErrorReply
    DeliveryRequest          ->              (re-fetch an already paid skill)
                             <-  Delivery | ErrorReply
    Receipt                  ->              (buyer's verdict after checking)
                             <-  Receipt (echo, acknowledges) | ErrorReply

Any request may instead be answered ``Busy`` (the server is at a stream limit):
it is sent before the request is read, so no handler saw the request, and the
client sends the same bytes again after ``retry_after_ms``.

``request_id`` (16 random bytes, lowercase hex; :func:`new_request_id`) ties
the messages of one purchase together.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import ClassVar

from protocol.schema import (
    CHAIN_ID,
    EVM_ADDRESS,
    MAX_PRICE_MICRO_USDC,
    REQUEST_ID,
    SHA256_HEX,
    TX_HASH,
    Blob,
    Bool,
    Bytes,
    Int,
    InvalidMessage,
    Message,
    Record,
    RecordField,
    Schema,
    Text,
    sha256_hex,
)

__all__ = [
    "ERROR_CODES",
    "MAX_LISTING_ENVELOPE_BYTES",
    "MAX_RETRY_AFTER_MS",
    "MAX_SKILL_PAYLOAD_BYTES",
    "PAYMENT_WINDOW_S",
    "PURCHASE_MESSAGES",
    "Busy",
    "Delivery",
    "DeliveryRequest",
    "ErrorReply",
    "PaidPurchaseRequest",
    "PaymentAuthorization",
    "PaymentRequirements",
    "PurchaseRequest",
    "Receipt",
    "TermsChanged",
    "TokenDomain",
    "TransferAuthorization",
    "content_hash",
    "new_request_id",
]

PAYMENT_WINDOW_S = 300
"""Longest validity (``validBefore`` − now) a seller accepts on an authorization (it
adds 60 s of clock slack): an authorization that is refused or lost stops being
settleable within minutes."""

MAX_LISTING_ENVELOPE_BYTES = 32 * 1024
"""Largest signed listing a ``TermsChanged`` carries (as a listings sync entry)."""

MAX_SKILL_PAYLOAD_BYTES = 192 * 1024
"""Largest skill text (UTF-8), so a Delivery envelope stays under MAX_MESSAGE_BYTES."""

ERROR_UNKNOWN_LISTING = "unknown_listing"
ERROR_NOT_FOR_SALE = "not_for_sale"
ERROR_PRICE_CHANGED = "price_changed"
ERROR_PAYMENT_INVALID = "payment_invalid"
ERROR_SETTLEMENT_FAILED = "settlement_failed"
ERROR_BAD_REQUEST = "bad_request"
ERROR_RATE_LIMITED = "rate_limited"
ERROR_INTERNAL = "internal"
ERROR_SCHEME_UNSUPPORTED = "scheme_unsupported"
"""The seller cannot take vouchers (no channel contract on its chain): pay with ``exact``.
Only ever sent in answer to a :mod:`protocol.channel` request, which older buyers never send."""
ERROR_CODES = frozenset(
    {
        ERROR_UNKNOWN_LISTING,
        ERROR_NOT_FOR_SALE,
        ERROR_PRICE_CHANGED,
        ERROR_PAYMENT_INVALID,
        ERROR_SETTLEMENT_FAILED,
        ERROR_BAD_REQUEST,
        ERROR_RATE_LIMITED,
        ERROR_INTERNAL,
        ERROR_SCHEME_UNSUPPORTED,
    }
)

_NONCE = Bytes(32)
_EIP3009_SIGNATURE = Bytes(65)  # r (32) || s (32) || v (1)
_SECONDS = Int(0, 2**63 - 1)


def new_request_id() -> str:
    return secrets.token_hex(16)


def content_hash(payload: str) -> str:
    """The ``content_hash`` of a skill text: lowercase hex SHA-256 of its UTF-8 bytes."""
    return sha256_hex(payload.encode("utf-8"))


@dataclass(frozen=True)
class PurchaseRequest(Message):
    """Buyer asks to buy a listing; ``buyer_address`` is the wallet that will pay."""

    KIND: ClassVar[str] = "purchase_request"
    FIELDS: ClassVar[Schema] = {
        "request_id": REQUEST_ID,
        "listing_id": SHA256_HEX,
        "buyer_address": EVM_ADDRESS,
    }
    request_id: str
    listing_id: str
    buyer_address: str


@dataclass(frozen=True)
class TokenDomain(Record):
    """The token's EIP-712 domain name and version, x402's ``extra`` (USDC: "USDC", "2").

    The buyer signs its EIP-3009 authorization under this domain (with ``chain_id``
    and ``asset`` as chainId and verifyingContract)."""

    FIELDS: ClassVar[Schema] = {"name": Text(64), "version": Text(16)}
    name: str
    version: str


@dataclass(frozen=True)
class PaymentRequirements(Message):
    """Seller's terms: pay exactly ``price_micro_usdc`` of ``asset`` to ``pay_to``.

    Together they are an x402 v2 ``exact`` PaymentRequirements: ``extra`` is the
    token's EIP-712 domain, which x402 clients and facilitators need to sign and
    verify the authorization."""

    KIND: ClassVar[str] = "payment_requirements"
    FIELDS: ClassVar[Schema] = {
        "request_id": REQUEST_ID,
        "listing_id": SHA256_HEX,
        "scheme": Text(16, choices=frozenset({"exact"})),
        "price_micro_usdc": Int(0, MAX_PRICE_MICRO_USDC),
        "pay_to": EVM_ADDRESS,
        "asset": EVM_ADDRESS,
        "chain_id": CHAIN_ID,
        "valid_before_s": _SECONDS,
        "content_hash": SHA256_HEX,
        "extra": RecordField(TokenDomain),
    }
    request_id: str
    listing_id: str
    scheme: str
    price_micro_usdc: int
    pay_to: str
    asset: str
    chain_id: int
    valid_before_s: int
    content_hash: str
    extra: TokenDomain


@dataclass(frozen=True)
class TransferAuthorization(Record):
    """The EIP-3009 ``TransferWithAuthorization`` message (see :mod:`protocol.payment`)."""

    FIELDS: ClassVar[Schema] = {
        "from": EVM_ADDRESS,
        "to": EVM_ADDRESS,
        "value": Int(0, MAX_PRICE_MICRO_USDC),
        "valid_after": _SECONDS,
        "valid_before": _SECONDS,
        "nonce": _NONCE,
    }
    from_: str
    to: str
    value: int
    valid_after: int
    valid_before: int
    nonce: bytes

    def check(self) -> None:
        if self.valid_before <= self.valid_after:
            raise InvalidMessage("authorization: valid_before must be > valid_after")


@dataclass(frozen=True)
class PaymentAuthorization(Message):
    """Buyer's signed EIP-3009 authorization; the seller submits it on chain."""

    KIND: ClassVar[str] = "payment_authorization"
    FIELDS: ClassVar[Schema] = {
        "request_id": REQUEST_ID,
        "listing_id": SHA256_HEX,
        "authorization": RecordField(TransferAuthorization),
        "signature": _EIP3009_SIGNATURE,
    }
    request_id: str
    listing_id: str
    authorization: TransferAuthorization
    signature: bytes


@dataclass(frozen=True)
class PaidPurchaseRequest(Message):
    """Buy ``listing_id`` in one round trip: the request carries the buyer's signed
    EIP-3009 authorization, made out to the terms of the signed listing it holds
    (``value`` = price, ``to`` = pay-to, under the listing's chain id and token).

    The seller answers ``Delivery`` (settled), ``TermsChanged`` (its listing says
    otherwise now; nothing settled) or ``ErrorReply``."""

    KIND: ClassVar[str] = "paid_purchase_request"
    FIELDS: ClassVar[Schema] = {
        "request_id": REQUEST_ID,
        "listing_id": SHA256_HEX,
        "authorization": RecordField(TransferAuthorization),
        "signature": _EIP3009_SIGNATURE,
    }
    request_id: str
    listing_id: str
    authorization: TransferAuthorization
    signature: bytes


@dataclass(frozen=True)
class TermsChanged(Message):
    """The seller refuses a ``PaidPurchaseRequest`` whose authorization does not pay
    what its listing asks now, and never settles it. ``listing`` is the seller's
    current signed ``skill_listing`` envelope: the fresh terms, checkable by the buyer
    (signed by the seller's key) and storable as if it had been gossiped."""

    KIND: ClassVar[str] = "terms_changed"
    FIELDS: ClassVar[Schema] = {
        "request_id": REQUEST_ID,
        "listing_id": SHA256_HEX,
        "listing": Blob(MAX_LISTING_ENVELOPE_BYTES),
        "message": Text(280, min_chars=0),
    }
    request_id: str
    listing_id: str
    listing: bytes
    message: str


@dataclass(frozen=True)
class Delivery(Message):
    """The skill text, after settlement. ``content_hash`` must be the payload's hash."""

    KIND: ClassVar[str] = "delivery"
    FIELDS: ClassVar[Schema] = {
        "request_id": REQUEST_ID,
        "listing_id": SHA256_HEX,
        "payload": Text(
            MAX_SKILL_PAYLOAD_BYTES, min_chars=0, max_utf8_bytes=MAX_SKILL_PAYLOAD_BYTES
        ),
        "content_hash": SHA256_HEX,
        "tx_hash": TX_HASH,
    }
    request_id: str
    listing_id: str
    payload: str
    content_hash: str
    tx_hash: str

    def check(self) -> None:
        if content_hash(self.payload) != self.content_hash:
            raise InvalidMessage("content_hash is not the SHA-256 of payload")


@dataclass(frozen=True)
class DeliveryRequest(Message):
    """Ask again for a skill already paid for by ``tx_hash``."""

    KIND: ClassVar[str] = "delivery_request"
    FIELDS: ClassVar[Schema] = {
        "request_id": REQUEST_ID,
        "listing_id": SHA256_HEX,
        "tx_hash": TX_HASH,
    }
    request_id: str
    listing_id: str
    tx_hash: str


@dataclass(frozen=True)
class Receipt(Message):
    """Buyer's verdict: ``ok`` if the hash matched and the transfer is on chain."""

    KIND: ClassVar[str] = "receipt"
    FIELDS: ClassVar[Schema] = {
        "request_id": REQUEST_ID,
        "listing_id": SHA256_HEX,
        "tx_hash": TX_HASH,
        "content_hash": SHA256_HEX,
        "ok": Bool(),
    }
    request_id: str
    listing_id: str
    tx_hash: str
    content_hash: str
    ok: bool


@dataclass(frozen=True)
class ErrorReply(Message):
    """A refusal; ``code`` is one of :data:`ERROR_CODES`, ``message`` is for humans."""

    KIND: ClassVar[str] = "error_reply"
    FIELDS: ClassVar[Schema] = {
        "request_id": REQUEST_ID,
        "code": Text(32, choices=ERROR_CODES),
        "message": Text(280, min_chars=0),
    }
    request_id: str
    code: str
    message: str


MAX_RETRY_AFTER_MS = 60_000


@dataclass(frozen=True)
class Busy(Message):
    """The server is at a limit and did not read the request: send it again after
    ``retry_after_ms``. A live, loaded peer says this instead of resetting the stream,
    so a client can tell busy from gone (any request/response protocol may answer it)."""

    KIND: ClassVar[str] = "busy"
    FIELDS: ClassVar[Schema] = {"retry_after_ms": Int(1, MAX_RETRY_AFTER_MS)}
    retry_after_ms: int


PURCHASE_MESSAGES: tuple[type[Message], ...] = (
    PurchaseRequest,
    PaymentRequirements,
    PaymentAuthorization,
    PaidPurchaseRequest,
    TermsChanged,
    Delivery,
    DeliveryRequest,
    Receipt,
    ErrorReply,
    Busy,
)
