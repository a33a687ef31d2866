"""Gossipsub topics and the request/response protocol id, with what may travel on each.

Names carry a protocol version (``/crystalmesh/1/...``): an incompatible change
gets new topics, so old and new nodes never feed each other undecodable bytes.
"""

from __future__ import annotations

from protocol.messages import (
    Bounty,
    Busy,
    Delivery,
    DeliveryRequest,
    ErrorReply,
    ListingBatch,
    ListingEndorsement,
    ListingsSyncPage,
    ListingsSyncRequest,
    ListingWithdrawal,
    PaidPurchaseRequest,
    PaymentAuthorization,
    PaymentRequirements,
    PurchaseRequest,
    Receipt,
    SkillListing,
    TermsChanged,
    TrustReport,
    WeatherAlert,
)

__all__ = [
    "BATCHABLE_KINDS",
    "BOUNTIES",
    "GOSSIP_TOPICS",
    "LISTINGS_SYNC_PROTOCOL",
    "PURCHASE_EXCHANGES",
    "PURCHASE_PROTOCOL",
    "SKILLS",
    "SYNCABLE_KINDS",
    "SYNC_EXCHANGES",
    "TOPIC_KINDS",
    "TRUST",
    "WEATHER",
]

SKILLS = "/crystalmesh/1/skills"
WEATHER = "/crystalmesh/1/weather"
TRUST = "/crystalmesh/1/trust"
BOUNTIES = "/crystalmesh/1/bounties"
PURCHASE_PROTOCOL = "/crystalmesh/purchase/1"
LISTINGS_SYNC_PROTOCOL = "/crystalmesh/listings-sync/1"

GOSSIP_TOPICS = (SKILLS, WEATHER, TRUST, BOUNTIES)

# Any request may be answered Busy (the server is at a stream limit; see protocol.purchase).
_REFUSALS = frozenset({ErrorReply.KIND, Busy.KIND})

PURCHASE_EXCHANGES: dict[str, frozenset[str]] = {
    PaidPurchaseRequest.KIND: frozenset({Delivery.KIND, TermsChanged.KIND}) | _REFUSALS,
    PurchaseRequest.KIND: frozenset({PaymentRequirements.KIND}) | _REFUSALS,
    PaymentAuthorization.KIND: frozenset({Delivery.KIND}) | _REFUSALS,
    DeliveryRequest.KIND: frozenset({Delivery.KIND}) | _REFUSALS,
    Receipt.KIND: frozenset({Receipt.KIND}) | _REFUSALS,
}
"""Request kind (buyer -> seller) -> the response kinds a seller may answer with."""

SYNC_EXCHANGES: dict[str, frozenset[str]] = {
    ListingsSyncRequest.KIND: frozenset({ListingsSyncPage.KIND}) | _REFUSALS,
}
"""Request kind -> response kinds on the listings sync protocol."""

BATCHABLE_KINDS = frozenset({SkillListing.KIND, ListingWithdrawal.KIND})
"""Kinds a ``listing_batch`` may carry (the sender's own announcements)."""

SYNCABLE_KINDS: dict[str, str] = {
    SkillListing.KIND: SKILLS,
    ListingWithdrawal.KIND: SKILLS,
    Bounty.KIND: BOUNTIES,
}
"""Kinds a sync page may carry -> the topic whose rules validate them."""

TOPIC_KINDS: dict[str, frozenset[str]] = {
    SKILLS: frozenset({SkillListing.KIND, ListingEndorsement.KIND, ListingWithdrawal.KIND,
                       ListingBatch.KIND}),
    BOUNTIES: frozenset({Bounty.KIND}),
    WEATHER: frozenset({WeatherAlert.KIND}),
    TRUST: frozenset({TrustReport.KIND}),
    PURCHASE_PROTOCOL: frozenset(PURCHASE_EXCHANGES).union(*PURCHASE_EXCHANGES.values()),
    LISTINGS_SYNC_PROTOCOL: frozenset(SYNC_EXCHANGES).union(*SYNC_EXCHANGES.values()),
}
"""Envelope kinds accepted on each topic / protocol; anything else is "wrong_topic"."""
