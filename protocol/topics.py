"""Gossipsub topics and request/response protocol ids, with what may travel on each.

Every id names the network first, then a version::

    /crystalmesh/<network>/1/skills        gossip topics (skills, weather, trust, bounties)
    /crystalmesh/<network>/purchase/1      request/response protocols
    /crystalmesh/<network>/listings-sync/2 (and /1, served beside it for older nodes)
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

import hashlib
import re

from protocol.channel import (
    ChannelRefunded,
    ChannelState,
    RefundRequest,
    VoucherDelivery,
    VoucherPurchaseRequest,
)
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
    TrustReportsRequest,
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
    "LISTINGS_SYNC_PROTOCOL_V2",
    "LISTING_SHARDS_MAX",
    "PURCHASE_EXCHANGES",
    "PURCHASE_PROTOCOL",
    "SKILLS",
    "SYNCABLE_KINDS",
    "SYNCABLE_KINDS_V1",
    "SYNCED_TRUST_KINDS",
    "SYNC_EXCHANGES",
    "SYNC_EXCHANGES_V2",
    "SYNC_NOTICE_KINDS",
    "TOPIC_KINDS",
    "TRUST",
    "WEATHER",
    "InvalidNetwork",
    "check_network",
    "check_shards",
    "listing_shard",
    "listings_topic",
    "network_kind",
    "network_of",
    "normalize_term",
    "on_network",
    "provider_key",
    "shard_of_topic",
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
LISTINGS_SYNC_PROTOCOL_V2 = _on(DEFAULT_NETWORK, "listings-sync/2")
"""Version 2: pages also carry skill warnings and endorsement revocations; the request names
the shards the node follows. Served beside version 1, which never carries the new kinds (an
older node would reject them as ``wrong_topic`` and charge the serving peer)."""
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
    VoucherPurchaseRequest.KIND: frozenset({VoucherDelivery.KIND, ChannelState.KIND,
                                            TermsChanged.KIND}) | _REFUSALS,
    RefundRequest.KIND: frozenset({ChannelRefunded.KIND}) | _REFUSALS,
}
"""Request kind (buyer -> seller) -> the response kinds a seller may answer with."""

SYNC_EXCHANGES: dict[str, frozenset[str]] = {
    ListingsSyncRequest.KIND: frozenset({ListingsSyncPage.KIND}) | _REFUSALS,
}
"""Request kind -> response kinds on the listings sync protocol."""

SYNC_EXCHANGES_V2: dict[str, frozenset[str]] = SYNC_EXCHANGES | {
    TrustReportsRequest.KIND: frozenset({ListingsSyncPage.KIND}) | _REFUSALS,
}
"""Version 2 adds the trust-report catch-up of a joiner."""

SYNCED_TRUST_KINDS: dict[str, str] = {TrustReport.KIND: TRUST}
"""What a ``trust_reports_request`` page may carry -> the topic whose rules validate it."""

BATCHABLE_KINDS = frozenset({SkillListing.KIND, ListingWithdrawal.KIND})
"""Kinds a ``listing_batch`` may carry (the sender's own announcements)."""

SYNCABLE_KINDS_V1: dict[str, str] = {
    SkillListing.KIND: SKILLS,
    ListingWithdrawal.KIND: SKILLS,
    Bounty.KIND: BOUNTIES,
}
"""Kinds a ``listings-sync/1`` page may carry -> the topic whose rules validate them."""

SYNC_NOTICE_KINDS: dict[str, str] = {
    SkillWarning.KIND: SKILLS,
    EndorsementRevocation.KIND: SKILLS,
}
"""Kinds only a ``listings-sync/2`` page carries: what a node that was away must not miss."""

SYNCABLE_KINDS: dict[str, str] = SYNCABLE_KINDS_V1 | SYNC_NOTICE_KINDS
"""Kinds a ``listings-sync/2`` page may carry -> the topic whose rules validate them."""

TOPIC_KINDS: dict[str, frozenset[str]] = {
    SKILLS: frozenset({SkillListing.KIND, ListingEndorsement.KIND, ListingWithdrawal.KIND,
                       ListingBatch.KIND, EndorsementRevocation.KIND,
                       SkillWarning.KIND}),
    BOUNTIES: frozenset({Bounty.KIND}),
    WEATHER: frozenset({WeatherAlert.KIND, WeatherLift.KIND}),
    TRUST: frozenset({TrustReport.KIND}),
    PURCHASE_PROTOCOL: frozenset(PURCHASE_EXCHANGES).union(*PURCHASE_EXCHANGES.values()),
    LISTINGS_SYNC_PROTOCOL: frozenset(SYNC_EXCHANGES).union(*SYNC_EXCHANGES.values()),
    LISTINGS_SYNC_PROTOCOL_V2: frozenset(SYNC_EXCHANGES_V2).union(*SYNC_EXCHANGES_V2.values()),
}
"""Envelope kinds accepted on each topic / protocol; anything else is "wrong_topic"."""


# ----------------------------------------------------------------------------- listing shards
# A large network does not flood every listing to every node: a listing travels on the shard
# topic of its category, ``/crystalmesh/<net>/1/listings/<S>/<shard>`` with
# shard = H(category) mod S, and a node subscribes to the shards of the categories it follows
# and sells in (docs/protocol.md, "Listings that do not flood"). S is the network's shard
# count (``net.listing_shards``, a power of two) and is part of the id, so nodes that disagree
# on it never share a shard topic; since S is a power of two, shard i of S is the union of
# shards i and i + S of 2S, so a network can double S by subscribing to both for a while.
LISTING_SHARDS_MAX = 4096
_SHARD_DOMAIN = b"crystalmesh/listing-shard/v1\x00"
_PROVIDER_DOMAIN = b"crystalmesh/provider/v1\x00"
_LISTINGS_PREFIX = _on(DEFAULT_NETWORK, "1/listings/")
MAX_TERM_CHARS = 64


def check_shards(shards: int) -> int:
    """``shards`` if it is a valid shard count (a power of two, 1 … 4096), else ``ValueError``."""
    if not isinstance(shards, int) or not 1 <= shards <= LISTING_SHARDS_MAX or shards & (shards - 1):
        raise ValueError(f"listing shards {shards!r}: a power of two from 1 to {LISTING_SHARDS_MAX}")
    return shards


def normalize_term(term: str) -> str:
    """A category, tag or keyword as shards and provider keys see it: case-folded, single-spaced."""
    return " ".join(term.casefold().split())[:MAX_TERM_CHARS]


def listing_shard(category: str, shards: int) -> int:
    """The shard (0 … shards-1) of a listing category: first 8 bytes of SHA-256, mod ``shards``."""
    digest = hashlib.sha256(_SHARD_DOMAIN + normalize_term(category).encode()).digest()
    return int.from_bytes(digest[:8], "big") % check_shards(shards)


def listings_topic(shard: int, shards: int) -> str:
    """The default network's id of listing shard ``shard`` of ``shards`` (``on_network`` for others)."""
    if not 0 <= shard < check_shards(shards):
        raise ValueError(f"shard {shard} outside 0 … {shards - 1}")
    return f"{_LISTINGS_PREFIX}{shards}/{shard}"


def shard_of_topic(topic: str) -> tuple[int, int] | None:
    """``(shard, shards)`` of a default-network listing shard id, or None for any other id."""
    if not topic.startswith(_LISTINGS_PREFIX):
        return None
    parts = topic[len(_LISTINGS_PREFIX):].split("/")
    if len(parts) != 2 or not all(part.isdigit() for part in parts):
        return None
    shard, shards = int(parts[1]), int(parts[0])
    try:
        check_shards(shards)
    except ValueError:
        return None
    return (shard, shards) if shard < shards else None


def provider_key(term: str) -> bytes:
    """The DHT key under which sellers of a category or tag ``term`` keep provider records."""
    return hashlib.sha256(_PROVIDER_DOMAIN + normalize_term(term).encode()).digest()
