"""Message bodies: what travels inside a signed envelope.

Every message is a frozen dataclass with ``KIND``, ``VERSION``, ``to_body()``
and a strict ``from_body()``; its ``FIELDS`` table is the wire schema (wire
key -> type, range and length). Gossip messages live here; the purchase
request/response messages live in :mod:`protocol.purchase` and are re-exported.
:data:`MESSAGE_TYPES` maps ``(kind, version)`` to the class.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, NamedTuple

from protocol.channel import CHANNEL_MESSAGES
from protocol.codec import encode
from protocol.identity import Identity, verify
from protocol.liveness import (
    LIVENESS_MESSAGES,
    Bounty,
    ListingBatch,
    ListingsSyncPage,
    ListingsSyncRequest,
    ListingsSyncRequestV2,
    ListingWithdrawal,
    TrustReportsRequest,
)
from protocol.purchase import (
    ERROR_CODES,
    MAX_SKILL_PAYLOAD_BYTES,
    PURCHASE_MESSAGES,
    Busy,
    Delivery,
    DeliveryRequest,
    ErrorReply,
    PaidPurchaseRequest,
    PaymentAuthorization,
    PaymentRequirements,
    PurchaseRequest,
    Receipt,
    TermsChanged,
    TokenDomain,
    TransferAuthorization,
    content_hash,
    new_request_id,
)
from protocol.schema import (
    CHAIN_ID,
    COUNT,
    EVM_ADDRESS,
    MAX_LISTING_LIFETIME_MS,
    MAX_PRICE_MICRO_USDC,
    PPM,
    PUBLIC_KEY,
    SHA256_HEX,
    TIMESTAMP,
    U63_MAX,
    Bytes,
    Int,
    InvalidMessage,
    ListOf,
    Message,
    Nullable,
    Record,
    RecordField,
    Schema,
    Text,
    Tuple,
    sha256_hex,
)
from protocol.skill_warning import SkillWarning

__all__ = [
    "ENDORSEMENT_DOMAIN",
    "ERROR_CODES",
    "LISTING_ID_DOMAIN",
    "MAX_SKILL_PAYLOAD_BYTES",
    "MAX_TAGS",
    "MAX_TRUST_ROW_ENTRIES",
    "MESSAGE_TYPES",
    "PPM",
    "TRUST_ROW_TOLERANCE_PPM",
    "Bounty",
    "Busy",
    "Delivery",
    "DeliveryRequest",
    "Endorsement",
    "EndorsementRevocation",
    "ErrorReply",
    "InvalidMessage",
    "ListingBatch",
    "ListingEndorsement",
    "ListingWithdrawal",
    "ListingsSyncPage",
    "ListingsSyncRequest",
    "ListingsSyncRequestV2",
    "Message",
    "PaidPurchaseRequest",
    "PaymentAuthorization",
    "PaymentRequirements",
    "PurchaseRequest",
    "Receipt",
    "SkillListing",
    "SkillWarning",
    "TermsChanged",
    "TokenDomain",
    "TransferAuthorization",
    "TrustEntry",
    "TrustReport",
    "TrustReportsRequest",
    "WeatherAlert",
    "WeatherLift",
    "content_hash",
    "endorse",
    "endorsement_valid",
    "listing_id_for",
    "listing_signing_bytes",
    "new_request_id",
    "parse_body",
    "verify_endorsement",
]

LISTING_ID_DOMAIN = b"crystalmesh/listing-id/v1\x00"
ENDORSEMENT_DOMAIN = b"crystalmesh/listing-endorsement/v1\x00"
MAX_TAGS = 16
MAX_TRUST_ROW_ENTRIES = 256
TRUST_ROW_TOLERANCE_PPM = MAX_TRUST_ROW_ENTRIES
"""Rounding slack on a trust row's sum: up to 1 ppm per entry above 1_000_000."""


def listing_id_for(seller_public_key: bytes, stable_skill_id: str, skill_version: int) -> str:
    """``sha256(LISTING_ID_DOMAIN || cbor([seller_pk, stable_skill_id, skill_version]))``.

    Binding the seller key into the id stops one seller from publishing under
    another's listing id; receivers check it against the envelope sender.
    """
    return sha256_hex(
        LISTING_ID_DOMAIN + encode([seller_public_key, stable_skill_id, skill_version])
    )


@dataclass(frozen=True)
class Endorsement(Record):
    """A management key's signature over a listing (see :func:`listing_signing_bytes`)."""

    FIELDS: ClassVar[Schema] = {"management_key": PUBLIC_KEY, "signature": Bytes(64)}
    management_key: bytes
    signature: bytes


@dataclass(frozen=True)
class SkillListing(Message):
    """A skill offered for sale, gossiped on the skills topic by its seller.

    Execution statistics feed the buyer's pricing: success rate is
    ``successes / executions`` and the average reward is
    ``reward_sum_ppm / executions / 1e6`` (each reward in [0, 1]).
    """

    KIND: ClassVar[str] = "skill_listing"
    FIELDS: ClassVar[Schema] = {
        "listing_id": SHA256_HEX,
        "stable_skill_id": Text(128),
        "skill_version": Int(1, 2**32 - 1),
        "name": Text(128),
        "description": Text(4096, min_chars=0),
        "tags": ListOf(Text(32), MAX_TAGS, unique=True),
        "category": Text(64),
        "content_hash": SHA256_HEX,
        "size_bytes": Int(0, MAX_SKILL_PAYLOAD_BYTES),
        "price_micro_usdc": Int(0, MAX_PRICE_MICRO_USDC),
        "pay_to": EVM_ADDRESS,
        "chain_id": CHAIN_ID,
        "token_address": EVM_ADDRESS,
        "executions": COUNT,
        "successes": COUNT,
        "reward_sum_ppm": Int(0, U63_MAX),
        "unique_buyers": COUNT,
        "expires_at_ms": TIMESTAMP,
        "previous_listing_id": Nullable(SHA256_HEX),
        "endorsement": Nullable(RecordField(Endorsement)),
    }
    listing_id: str
    stable_skill_id: str
    skill_version: int
    name: str
    description: str
    tags: tuple[str, ...]
    category: str
    content_hash: str
    size_bytes: int
    price_micro_usdc: int
    pay_to: str
    chain_id: int
    token_address: str
    executions: int
    successes: int
    reward_sum_ppm: int
    unique_buyers: int
    expires_at_ms: int
    previous_listing_id: str | None = None
    endorsement: Endorsement | None = None

    def check(self) -> None:
        if self.successes > self.executions:
            raise InvalidMessage("successes > executions")
        if self.reward_sum_ppm > self.executions * PPM:
            raise InvalidMessage("reward_sum_ppm > executions * 1_000_000")
        if self.previous_listing_id == self.listing_id:
            raise InvalidMessage("previous_listing_id equals listing_id")

    def check_envelope(self, sender: bytes, issued_at_ms: int) -> None:
        if self.listing_id != listing_id_for(sender, self.stable_skill_id, self.skill_version):
            raise InvalidMessage("listing_id is not derived from sender, stable_skill_id, version")
        if self.expires_at_ms <= issued_at_ms:
            raise InvalidMessage("listing expires before it was issued")
        if self.expires_at_ms - issued_at_ms > MAX_LISTING_LIFETIME_MS:
            raise InvalidMessage("listing lives longer than MAX_LISTING_LIFETIME_MS past its issue")


def listing_signing_bytes(listing: SkillListing) -> bytes:
    """What a management key signs: domain prefix + canonical body without ``endorsement``."""
    body = listing.to_body()
    del body["endorsement"]
    return ENDORSEMENT_DOMAIN + encode(body)


def endorse(listing: SkillListing, management: Identity) -> SkillListing:
    """Return ``listing`` carrying ``management``'s endorsement."""
    signature = management.sign(listing_signing_bytes(listing))
    return dataclasses.replace(listing, endorsement=Endorsement(management.public_key, signature))


def verify_endorsement(listing: SkillListing) -> bool:
    """True if the listing carries a valid endorsement (by *some* key: check which)."""
    if listing.endorsement is None:
        return False
    return verify(
        listing.endorsement.management_key,
        listing_signing_bytes(listing),
        listing.endorsement.signature,
    )


@dataclass(frozen=True)
class ListingEndorsement(Message):
    """A management node vouches for a listing, gossiped on the skills topic.

    The envelope must be signed by a configured management key; ``signature``
    is that key's signature over :func:`listing_signing_bytes` of the listing,
    so receivers that hold the listing check it and record the endorsement,
    and a seller can embed it as ``SkillListing.endorsement`` when it
    re-announces. Receivers that do not know the listing drop it (ignore).
    """

    KIND: ClassVar[str] = "listing_endorsement"
    FIELDS: ClassVar[Schema] = {"listing_id": SHA256_HEX, "signature": Bytes(64)}
    listing_id: str
    signature: bytes


@dataclass(frozen=True)
class EndorsementRevocation(Message):
    """A management node withdraws its endorsement of a listing, gossiped on the skills topic.

    The envelope must be signed by a configured management key; receivers drop that key's
    endorsement of the listing and keep refusing it (from a replayed ``listing_endorsement``
    or the seller's embedded copy) unless the key endorses again in a newer message: for
    each (listing, key), the act with the latest envelope ``issued_at_ms`` stands.
    """

    KIND: ClassVar[str] = "endorsement_revocation"
    FIELDS: ClassVar[Schema] = {"listing_id": SHA256_HEX}
    listing_id: str


def endorsement_valid(listing: SkillListing, management_key: bytes, signature: bytes) -> bool:
    """True if ``signature`` is ``management_key``'s endorsement of ``listing``."""
    unendorsed = dataclasses.replace(listing, endorsement=None)
    return verify(management_key, listing_signing_bytes(unendorsed), signature)


@dataclass(frozen=True)
class WeatherAlert(Message):
    """A management node's cortisol spike. Effective until the signed ``expires_at_ms``.

    ``issued_at_ms`` must equal the envelope's, so the alert's lifetime is
    covered by the signature and the clock-window check.
    """

    KIND: ClassVar[str] = "weather_alert"
    FIELDS: ClassVar[Schema] = {
        "cortisol_level_ppm": Int(0, PPM),
        "issued_at_ms": TIMESTAMP,
        "expires_at_ms": TIMESTAMP,
        "reason": Text(280, min_chars=0),
    }
    cortisol_level_ppm: int
    issued_at_ms: int
    expires_at_ms: int
    reason: str

    def check(self) -> None:
        if self.expires_at_ms <= self.issued_at_ms:
            raise InvalidMessage("expires_at_ms must be > issued_at_ms")

    def check_envelope(self, sender: bytes, issued_at_ms: int) -> None:
        if self.issued_at_ms != issued_at_ms:
            raise InvalidMessage("issued_at_ms differs from the envelope's")


@dataclass(frozen=True)
class WeatherLift(Message):
    """A management node ends its own alerts early: every alert its key issued at or before
    ``issued_at_ms`` stops counting.

    Same rules as an alert (management key, clock window, and a ``seq`` above every weather
    message already accepted from that key), so a captured lift can neither be replayed nor
    end an alert issued after it: the lift names a signed moment, not an alert.
    ``issued_at_ms`` must equal the envelope's.
    """

    KIND: ClassVar[str] = "weather_lift"
    FIELDS: ClassVar[Schema] = {
        "issued_at_ms": TIMESTAMP,
        "reason": Text(280, min_chars=0),
    }
    issued_at_ms: int
    reason: str

    def check_envelope(self, sender: bytes, issued_at_ms: int) -> None:
        if self.issued_at_ms != issued_at_ms:
            raise InvalidMessage("issued_at_ms differs from the envelope's")


class TrustEntry(NamedTuple):
    """One cell of a local-trust row; on the wire ``[peer, weight_ppm]``."""

    peer: bytes
    weight_ppm: int


@dataclass(frozen=True)
class TrustReport(Message):
    """The sender's normalised local-trust row for ``epoch`` (EigenTrust's c_ij)."""

    KIND: ClassVar[str] = "trust_report"
    FIELDS: ClassVar[Schema] = {
        "epoch": Int(0, U63_MAX),
        "row": ListOf(Tuple(PUBLIC_KEY, Int(0, PPM), factory=TrustEntry), MAX_TRUST_ROW_ENTRIES),
    }
    epoch: int
    row: tuple[TrustEntry, ...]

    def check(self) -> None:
        peers = {entry.peer for entry in self.row}
        if len(peers) != len(self.row):
            raise InvalidMessage("row: duplicate peers")
        total = sum(entry.weight_ppm for entry in self.row)
        if total > PPM + TRUST_ROW_TOLERANCE_PPM:
            raise InvalidMessage(f"row: weights sum to {total} ppm > 1_000_000")

    def check_envelope(self, sender: bytes, issued_at_ms: int) -> None:
        if any(entry.peer == sender for entry in self.row):
            raise InvalidMessage("row: a peer may not report trust in itself")


_ALL_MESSAGES: tuple[type[Message], ...] = (
    SkillListing,
    ListingEndorsement,
    EndorsementRevocation,
    WeatherAlert,
    WeatherLift,
    TrustReport,
    *PURCHASE_MESSAGES,
    *CHANNEL_MESSAGES,
    *LIVENESS_MESSAGES,
    SkillWarning,
)
MESSAGE_TYPES: dict[tuple[str, int], type[Message]] = {
    (message_type.KIND, message_type.VERSION): message_type for message_type in _ALL_MESSAGES
}


def parse_body(kind: str, version: int, body: Any) -> Message:
    """Parse a body by its ``(kind, version)``; KeyError if unknown, InvalidMessage if bad."""
    return MESSAGE_TYPES[(kind, version)].from_body(body)
