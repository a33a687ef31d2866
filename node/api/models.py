"""The typed shape of every request body and query the API accepts (pydantic v2).

FastAPI validates each request against these before a route runs; a bad field is
a 400 naming it (``node.api.errors``) and nothing is written. Numbers are strict
(``"10"`` is not 10, ``true`` is not 1): money is integer micro-USDC. Unknown
body fields are refused. Limits mirror ``node.memory.requests`` (which checks
again, for the CLI path that does not pass through HTTP).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from node.crystals import AccessScope, Lifecycle, SemanticType, Source
from node.memory import MAX_SKILL_TEXT_BYTES, MAX_TAGS, MAX_TTL_MS, SearchRequest, search_request

MAX_MICRO_USDC = 10**12
NAMESPACE_PATTERN = r"^[a-z][a-z0-9_-]{0,31}(:[A-Za-z0-9._@-]{1,64})?$"

StrictInt = Annotated[int, Field(strict=True)]
MicroUsdc = Annotated[int, Field(strict=True, ge=0, le=MAX_MICRO_USDC)]
Id = Annotated[str, Field(min_length=1, max_length=256)]
Short = Annotated[str, Field(max_length=256)]


class Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=False)


class CrystalIn(Body):
    """``POST /v1/crystals``: one memory to store (its type's size limit: ``check_text_size``)."""

    text: Annotated[str, Field(min_length=1, max_length=MAX_SKILL_TEXT_BYTES)]
    type: SemanticType | None = None
    scope: AccessScope | None = None
    path: Annotated[str, Field(max_length=1024)] | None = None
    ttl_ms: Annotated[int, Field(strict=True, gt=0, le=MAX_TTL_MS)] | None = None
    category: Annotated[str, Field(max_length=64)] | None = None
    tags: Annotated[list[Annotated[str, Field(min_length=1, max_length=32)]],
                    Field(max_length=MAX_TAGS)] | None = None
    namespace: Annotated[str, Field(max_length=100, pattern=NAMESPACE_PATTERN)] | None = None
    importance: Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)] | None = None  # explicit: a floor
    lifespan: Literal["decay", "permanent"] | None = None  # permanent: pinned from the start


class SearchIn(Body):
    """``POST /v1/crystals/search``: the one spelling of a memory search request.

    The route validates its body against it, :meth:`ApiClient.memory_search` sends it, the
    CLI without a node (``LocalNode``) answers it, and :meth:`to_request` is the one mapping
    onto the memory's search operation (``node.memory.SearchRequest``). A new filter is a
    field here, its line in :meth:`to_request` and its stage in the search pipeline.
    """

    query: Annotated[str, Field(min_length=1, max_length=4096, pattern=r"\S")]
    k: Annotated[int, Field(strict=True, ge=1, le=100)] = 10
    types: list[SemanticType] = []
    lifecycles: list[Lifecycle] = []
    scopes: list[AccessScope] = []
    namespace: Annotated[str, Field(max_length=100, pattern=NAMESPACE_PATTERN)] = "default"
    all_namespaces: Annotated[bool, Field(strict=True)] = False
    as_of_ms: Annotated[int, Field(strict=True, ge=0, le=2**63 - 1)] | None = None  # versions valid then
    min_relevance: Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)] = 0.0  # hits below it are left out
    sources: Annotated[list[Source], Field(max_length=8)] = []  # empty: every source

    @classmethod
    def unchecked(cls, query: str, k: int = 10, **filters: Any) -> SearchIn:
        """A request from keyword filters named as the fields (None: the default), not checked
        here: the node's route checks what a client sends, and the memory's search checks what
        the CLI without a node asks, each naming what is wrong as it always has."""
        unknown = set(filters) - set(cls.model_fields)
        if unknown:
            raise TypeError(f"unknown search filter(s): {', '.join(sorted(unknown))}")
        return cls.model_construct(query=query, k=k, **{key: value for key, value in filters.items()
                                                         if value is not None})

    @classmethod
    def coerce(cls, query: str | SearchIn, k: int = 10, **filters: Any) -> SearchIn:
        """``query`` if it is a request already, else :meth:`unchecked` of the query text."""
        return query if isinstance(query, SearchIn) else cls.unchecked(query, k, **filters)

    def wire(self) -> dict[str, Any]:
        """The JSON body ``POST /v1/crystals/search`` takes: query, k and the filters that are set."""
        fields = {name: list(value) if isinstance(value, tuple) else value for name, value in self}
        return {name: value for name, value in fields.items()
                if name in ("query", "k") or value != type(self).model_fields[name].default}

    def to_request(self) -> SearchRequest:
        """The memory's search operation for this request (``node.memory.search_request``, the
        one mapping the node's route and the CLI without a node share)."""
        return search_request(
            self.query, self.k,
            types=tuple(map(str, self.types)),  # StrEnum members, or unchecked strings
            lifecycles=tuple(map(str, self.lifecycles)),
            scopes=tuple(map(str, self.scopes)),
            namespace=self.namespace, all_namespaces=self.all_namespaces,
            as_of_ms=self.as_of_ms, min_relevance=self.min_relevance,
            sources=tuple(map(str, self.sources)),
        )


class ConsolidateIn(Body):
    """``POST /v1/memory/consolidate``: ``purge`` also deletes expired/unrecoverable crystals;
    ``at`` runs the cycle as of a later time (``+90d``, ``+12h`` or an ISO date); ``dry_run``
    reports what it would do (what would be forgotten) and writes nothing."""

    purge: Annotated[bool, Field(strict=True)] = False
    at: Annotated[str, Field(min_length=1, max_length=40)] | None = None
    dry_run: Annotated[bool, Field(strict=True)] = False


class ExecutionIn(Body):
    """``POST /v1/skills/{crystal_id}/executions``: how a run of the skill went."""

    success: Annotated[bool, Field(strict=True)]
    reward: Annotated[float, Field(strict=True, ge=0.0, le=1.0)] | None = None
    note: Annotated[str, Field(max_length=1024)] | None = None


class VersionIn(Body):
    """``POST /v1/skills/{crystal_id}/versions``."""

    text: Annotated[str, Field(min_length=1, max_length=MAX_SKILL_TEXT_BYTES)]


class PublishIn(Body):
    """``POST /v1/skills/{crystal_id}/publish``: optional listing name and summary."""

    name: Short | None = None
    summary: Annotated[str, Field(max_length=4096)] | None = None


class PurchaseIn(Body):
    """``POST /v1/purchases``: buy a listing, never above ``max_price_micro_usdc``."""

    listing_id: Id
    max_price_micro_usdc: MicroUsdc | None = None
    again: Annotated[bool, Field(strict=True)] = False
    # Pay with one on-chain transfer even where the seller takes vouchers.
    exact: Annotated[bool, Field(strict=True)] = False


class DepositIn(Body):
    """``POST /v1/wallet/deposit``: open or top up the channel to a seller (by its key)."""

    seller_key: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    amount_micro_usdc: MicroUsdc


class RefundIn(Body):
    """``POST /v1/wallet/refund``: close a channel; the seller returns the unspent deposit."""

    channel_id: Annotated[str, Field(pattern=r"^0x[0-9a-fA-F]{64}$")]


class WithdrawIn(Body):
    """``POST /v1/wallet/withdraw``: start a channel's timed withdrawal, or finalize it."""

    channel_id: Annotated[str, Field(pattern=r"^0x[0-9a-fA-F]{64}$")]


class RedeliverIn(Body):
    """``POST /v1/purchases/redeliver``."""

    listing_id: Id


class WeatherIn(Body):
    """``POST /v1/weather/broadcast`` (management nodes only)."""

    level: Annotated[float, Field(strict=True, ge=0.0, le=1.0)]
    duration_s: Annotated[int, Field(strict=True, gt=0, le=10**9)]
    reason: Annotated[str, Field(max_length=512)] = ""


class LoginIn(Body):
    """``POST /dashboard/login`` as JSON or a form: the API token."""

    token: Annotated[str, Field(max_length=256)] = ""


class ListingsQuery(BaseModel):
    """``GET /v1/listings`` query: filters (``tag`` may repeat)."""

    category: Short | None = None
    max_price: Annotated[int, Field(ge=0, le=MAX_MICRO_USDC)] | None = None
    tag: list[Short] = []


class ListingSearchQuery(ListingsQuery):
    """``GET /v1/listings/search`` query."""

    q: Annotated[str, Field(min_length=1, max_length=4096, pattern=r"\S")]
    k: Annotated[int, Field(ge=1, le=100)] = 10


class LimitQuery(BaseModel):
    """``GET /v1/purchases`` and ``/v1/sales`` query."""

    limit: Annotated[int, Field(ge=1, le=10_000)] = 100


class LoginLinkQuery(BaseModel):
    """``GET /dashboard/login`` query: the one-time code."""

    code: Annotated[str, Field(max_length=256)] = ""
