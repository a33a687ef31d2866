"""The shapes of what the API answers: one ``TypedDict`` per shape that crosses the process
boundary (a crystal, a search hit, a listing, a purchase, a sale, a note, the node's status),
written once and read by both sides.

The routes declare them as ``response_model`` (so ``/openapi.json`` shows each shape, and
FastAPI checks what a route returns against it); ``ApiClient`` returns them (so the CLI, the
MCP server and scripts read named keys that mypy checks, not guessed strings). They are
``TypedDict`` rather than pydantic models because the client hands out the JSON it received
(plain dicts: every existing caller keeps working) and a ``TypedDict`` types exactly that.

Every shape allows more keys than it names (``extra="allow"``): response validation never
drops a key a route returned, so a key added to a dataclass's ``to_dict`` reaches clients at
once, and naming it here is what makes it part of the documented contract. A key a shape
names must have the type written here or the route answers 500: a test feeds each shape what
the node's own code produces (``tests/unit/node/test_api_doors.py``).

Key style on the wire: the node's own objects use snake_case (``price_micro_usdc``,
``source_id``); a crystal, nested in answers as ``crystal`` or returned alone, keeps the
field names seed 000 gives it (camelCase: ``semanticType``, ``importanceScore``) -- the same
names the portable JSONL export carries. Both are kept as they are: renaming either would
break every client and every export. A later ``/v2`` would move crystals to snake_case and
keep ``/v1`` answering the seed's names until clients moved (README, "The local API").
"""

from __future__ import annotations

from typing import Any, NotRequired

from pydantic import ConfigDict, with_config
from typing_extensions import TypedDict

Number = int | float  # a JSON number as the node wrote it (an int stays an int)
_OPEN = ConfigDict(extra="allow")


@with_config(_OPEN)
class Governance(TypedDict):
    """A crystal's governance (seed 000)."""

    accessScope: str
    lifespanPolicy: str
    ttlMs: int | None
    priority: Number
    sensitivity: str
    provenanceChain: list[Any]
    peerOrigin: str | None
    importanceFloor: Number | None


@with_config(_OPEN)
class Crystal(TypedDict):
    """A knowledge crystal with seed 000's field names (``node.crystals.Crystal.to_dict``)."""

    id: str
    text: str
    path: str | None
    source: str
    hash: str
    semanticType: str
    origin: str
    lifecycle: str
    importanceScore: Number
    accessCount: int
    createdAt: int
    governance: Governance
    provenanceDag: list[dict[str, Any]]
    skillTags: list[str]
    skillCategory: str | None
    executions: int
    successes: int
    rewardSum: Number
    namespace: str
    memoryId: str | None
    version: int | None
    validFrom: int | None
    validTo: int | None
    supersededBy: str | None
    epistemicLayer: str
    provenance: str
    seller: str | None


@with_config(_OPEN)
class StoredCrystal(Crystal):
    """``POST /v1/crystals``: the crystal, and whether it was ``created`` or already ``exists``."""

    outcome: str
    differs: NotRequired[dict[str, Any]]


@with_config(_OPEN)
class CrystalDetail(Crystal):
    """``GET /v1/crystals/{id}``: the crystal with its audit trail and what the node knows of it."""

    audit: list[dict[str, Any]]


@with_config(_OPEN)
class UpdatedCrystal(Crystal):
    """``PATCH /v1/crystals/{id}``: the new version, and the one it closed."""

    previousId: str


@with_config(_OPEN)
class PinnedCrystal(Crystal):
    """``POST /v1/crystals/{id}/lifespan``: the current version, and whether the pin changed."""

    changed: bool


@with_config(_OPEN)
class History(TypedDict):
    """``GET /v1/crystals/{id}/history``: every version (oldest first) and every transition."""

    memory_id: str
    namespace: str | None
    deleted: bool
    purged: bool
    versions: list[Crystal]
    transitions: list[dict[str, Any]]


@with_config(_OPEN)
class Crystals(TypedDict):
    """``GET /v1/crystals``."""

    crystals: list[Crystal]


@with_config(_OPEN)
class Hit(TypedDict):
    """One search hit (``node.memory.SearchHit.to_dict``); ``turn`` only for a conversation turn."""

    id: str
    score: Number
    relevance: Number
    crystal: Crystal
    source_id: str | None
    origin: dict[str, Any]
    turn: NotRequired[dict[str, Any]]


@with_config(_OPEN)
class Hits(TypedDict):
    """``POST /v1/crystals/search``: the hits, best first."""

    hits: list[Hit]


@with_config(_OPEN)
class Listing(TypedDict):
    """A skill listing as this node holds it (``node.market.StoredListing.to_dict``)."""

    listing_id: str
    seller_key: str
    stable_skill_id: str
    skill_version: int
    name: str
    description: str
    tags: list[str]
    category: str | None
    content_hash: str
    price_micro_usdc: int
    executions: int
    successes: int
    success_rate: Number
    endorsed_by: str | None
    own: bool
    crystal_id: str | None


@with_config(_OPEN)
class Listings(TypedDict):
    """``GET /v1/listings``, ``GET /v1/listings/search``."""

    listings: list[Listing]


@with_config(_OPEN)
class OwnSkills(TypedDict):
    """``GET /v1/skills/own``: this node's own listings."""

    skills: list[Listing]


@with_config(_OPEN)
class Purchase(TypedDict):
    """A purchase this node made (``node.market.Purchase.to_dict``)."""

    request_id: str
    listing_id: str
    seller_key: str
    name: str
    price_micro_usdc: int
    state: str
    tx_hash: str | None
    crystal_id: str | None
    reason: str | None
    created_at_ms: int
    updated_at_ms: int


@with_config(_OPEN)
class Purchases(TypedDict):
    """``GET /v1/purchases``: newest first."""

    purchases: list[Purchase]


@with_config(_OPEN)
class Sale(TypedDict):
    """A sale this node made (``node.market.Sale.to_dict``)."""

    request_id: str
    listing_id: str
    crystal_id: str
    buyer_key: str
    price_micro_usdc: int
    state: str
    tx_hash: str | None
    reason: str | None
    created_at_ms: int
    updated_at_ms: int


@with_config(_OPEN)
class Sales(TypedDict):
    """``GET /v1/sales``: newest first."""

    sales: list[Sale]


@with_config(_OPEN)
class Note(TypedDict):
    """``POST /v1/memory/notes``: the scratch note, and the crystal it became (seed 001)."""

    id: str
    at: str
    importance: Number
    text: str
    crystal_id: str | None
    crystal: str  # "indexed", "exists" (the text already was a crystal) or "pending"
    namespace: str
    differs: NotRequired[dict[str, Any]]


@with_config(_OPEN)
class Status(TypedDict):
    """``GET /v1/status``: who the node is, where it listens, what it holds."""

    name: str
    peer_id: str
    public_key: str
    network: str
    management: bool
    listen_addrs: list[str]
    uptime_s: int
    connected_peers: int
    listings_known: int | None
    crystals: int | None
    wallet_address: str | None
    weather: dict[str, Any]


SHAPES: tuple[type, ...] = (Crystal, StoredCrystal, CrystalDetail, UpdatedCrystal, PinnedCrystal, History,
                            Crystals, Hit, Hits, Listing, Listings,
                            OwnSkills, Purchase, Purchases, Sale, Sales, Note, Status)
