"""Gossipsub topics and the request/response protocol id, with what may travel on each.

Names carry a protocol version (``/crystalmesh/1/...``): an incompatible change
gets new topics, so old and new nodes never feed each other undecodable bytes.
"""

from __future__ import annotations

from protocol.messages import (
    Delivery,
    DeliveryRequest,
    ErrorReply,
    ListingEndorsement,
    PaymentAuthorization,
    PaymentRequirements,
    PurchaseRequest,
    Receipt,
    SkillListing,
    TrustReport,
    WeatherAlert,
)

__all__ = [
    "GOSSIP_TOPICS",
    "PURCHASE_EXCHANGES",
    "PURCHASE_PROTOCOL",
    "SKILLS",
    "TOPIC_KINDS",
    "TRUST",
    "WEATHER",
]

SKILLS = "/crystalmesh/1/skills"
WEATHER = "/crystalmesh/1/weather"
TRUST = "/crystalmesh/1/trust"
PURCHASE_PROTOCOL = "/crystalmesh/purchase/1"

GOSSIP_TOPICS = (SKILLS, WEATHER, TRUST)

PURCHASE_EXCHANGES: dict[str, frozenset[str]] = {
    PurchaseRequest.KIND: frozenset({PaymentRequirements.KIND, ErrorReply.KIND}),
    PaymentAuthorization.KIND: frozenset({Delivery.KIND, ErrorReply.KIND}),
    DeliveryRequest.KIND: frozenset({Delivery.KIND, ErrorReply.KIND}),
    Receipt.KIND: frozenset({Receipt.KIND, ErrorReply.KIND}),
}
"""Request kind (buyer -> seller) -> the response kinds a seller may answer with."""

TOPIC_KINDS: dict[str, frozenset[str]] = {
    SKILLS: frozenset({SkillListing.KIND, ListingEndorsement.KIND}),
    WEATHER: frozenset({WeatherAlert.KIND}),
    TRUST: frozenset({TrustReport.KIND}),
    PURCHASE_PROTOCOL: frozenset(PURCHASE_EXCHANGES).union(*PURCHASE_EXCHANGES.values()),
}
"""Envelope kinds accepted on each topic / protocol; anything else is "wrong_topic"."""
