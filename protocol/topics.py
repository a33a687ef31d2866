"""Gossipsub topics and request/response protocol ids, with what may travel on each.

Every id names the network first, then a version::

    /crystalmesh/<network>/1/skills        gossip topics (skills, weather, trust, bounties)
    /crystalmesh/<network>/purchase/1      request/response protocols
    /crystalmesh/<network>/listings-sync/1
    /crystalmesh/<network>/kad/1.0.0       the Kademlia DHT (never the public /ipfs/kad/1.0.0)

The network (``devnet``, ``testnet``, ``mainnet``, or ``devnet-<name>`` /
``testnet-<name>``) keeps two networks apart: a node of another network never
shares a topic, a protocol or a routing table with ours, so their messages
never meet. The version keeps incompatible releases apart the same way.

The constants below are the default network's (``devnet``), and the node
names topics by them internally; ``on_network(identifier, network)`` gives the
same id on another network, used where bytes meet the wire (``node.net``).
"""

from __future__ import annotations

import re

from protocol.messages import (
    Bounty,
    Busy,
    Delivery,
    DeliveryRequest,
    EndorsementRevocation,
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
    SkillWarning,
    TermsChanged,
    TrustReport,
    WeatherAlert,
    WeatherLift,
)

__all__ = [
    "BATCHABLE_KINDS",
    "BOUNTIES",
    "DEFAULT_NETWORK",
    "DHT_PROTOCOL",
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
    "InvalidNetwork",
    "check_network",
    "network_kind",
    "network_of",
    "on_network",
]

DEFAULT_NETWORK = "devnet"
NETWORK_KINDS = ("devnet", "testnet", "mainnet")
# devnet | testnet | mainnet, or a named devnet / testnet: lowercase, digits, inner hyphens.
_NETWORK = re.compile(r"(?:mainnet|(?:devnet|testnet)(?:-[a-z0-9](?:[a-z0-9-]{0,22}[a-z0-9])?)?)")
_PREFIX = "/crystalmesh/"


class InvalidNetwork(ValueError):
    """A network id that is not ``devnet``, ``testnet``, ``mainnet`` or ``devnet-``/``testnet-<name>``."""


def check_network(network: str) -> str:
    """``network`` if it is a valid network id, else ``InvalidNetwork``."""
    if not isinstance(network, str) or not _NETWORK.fullmatch(network):
        raise InvalidNetwork(
            f"network {network!r}: expected devnet, testnet, mainnet, devnet-<name> or "
            "testnet-<name> (lowercase letters, digits and inner hyphens, name up to 24)"
        )
    return network


def network_kind(network: str) -> str:
    """``devnet``, ``testnet`` or ``mainnet``: what a (possibly named) network is."""
    return check_network(network).split("-", 1)[0]


def _on(network: str, rest: str) -> str:
    return f"{_PREFIX}{network}/{rest}"


def on_network(identifier: str, network: str) -> str:
    """A default-network topic or protocol id (the constants here) as named on ``network``."""
    default = _on(DEFAULT_NETWORK, "")
    if not identifier.startswith(default):
        raise ValueError(f"{identifier!r} is not a crystalmesh id of the default network")
    return _on(check_network(network), identifier[len(default):])


def network_of(identifier: str) -> str | None:
    """The network named by a crystalmesh topic or protocol id, or None for anything else."""
    if not identifier.startswith(_PREFIX):
        return None
    network = identifier[len(_PREFIX):].split("/", 1)[0]
    return network if _NETWORK.fullmatch(network) else None


SKILLS = _on(DEFAULT_NETWORK, "1/skills")
WEATHER = _on(DEFAULT_NETWORK, "1/weather")
TRUST = _on(DEFAULT_NETWORK, "1/trust")
BOUNTIES = _on(DEFAULT_NETWORK, "1/bounties")
PURCHASE_PROTOCOL = _on(DEFAULT_NETWORK, "purchase/1")
LISTINGS_SYNC_PROTOCOL = _on(DEFAULT_NETWORK, "listings-sync/1")
DHT_PROTOCOL = _on(DEFAULT_NETWORK, "kad/1.0.0")
"""Kademlia (libp2p kad-dht wire format) under our own id: nothing joins the public IPFS DHT."""

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
                       ListingBatch.KIND, EndorsementRevocation.KIND,
                       SkillWarning.KIND}),
    BOUNTIES: frozenset({Bounty.KIND}),
    WEATHER: frozenset({WeatherAlert.KIND, WeatherLift.KIND}),
    TRUST: frozenset({TrustReport.KIND}),
    PURCHASE_PROTOCOL: frozenset(PURCHASE_EXCHANGES).union(*PURCHASE_EXCHANGES.values()),
    LISTINGS_SYNC_PROTOCOL: frozenset(SYNC_EXCHANGES).union(*SYNC_EXCHANGES.values()),
}
"""Envelope kinds accepted on each topic / protocol; anything else is "wrong_topic"."""
