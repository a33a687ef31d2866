"""Routes of the living market: publish a catalogue, re-price, withdraw, bounties, sync status.

Same rules as ``node.api.routes``: bearer token, pydantic bodies, errors by type.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from node.api.auth import require_auth
from node.api.interface import LivenessApi
from node.api.models import Body, Id, MicroUsdc
from node.errors import NodeError

Json = dict[str, Any]


class RepriceIn(Body):
    """``POST /v1/listings/{listing_id}/reprice``: a fixed price, or null for a fresh quote."""

    price_micro_usdc: MicroUsdc | None = None


class PublishManyIn(Body):
    """``POST /v1/skills/publish``: several skills at once (``crystal_ids``), or with
    ``all`` every listable skill never listed; at most ``limit`` per call (carried in signed
    batches of up to 60 kB), ``remaining`` in the answer says how many are left."""

    crystal_ids: Annotated[list[Id], Field(max_length=1024)] | None = None
    all: bool = False
    limit: Annotated[int, Field(strict=True, ge=1, le=1024)] = 128


class BountyIn(Body):
    """``POST /v1/bounties``: what is needed, and the reward in micro-USDC."""

    text: Annotated[str, Field(min_length=1, max_length=1024, pattern=r"\S")]
    reward_micro_usdc: MicroUsdc
    ttl_s: Annotated[int, Field(strict=True, ge=60, le=7 * 86_400)] | None = None


class FulfilIn(Body):
    """``POST /v1/bounties/{bounty_id}/fulfil``: optionally which matching listing to buy."""

    listing_id: Id | None = None


class BountiesQuery(BaseModel):
    """``GET /v1/bounties`` query: ``open=true`` hides fulfilled and expired ones."""

    open: bool = False


def market_liveness_router(market: LivenessApi) -> APIRouter:
    router = APIRouter(prefix="/v1", dependencies=[Depends(require_auth)])

    @router.post("/skills/publish", tags=["skills"])
    async def publish_many(body: PublishManyIn) -> Json:
        if (body.crystal_ids is None) == (not body.all):
            raise NodeError("give crystal_ids or all=true, not both")
        return await market.publish_skills(body.crystal_ids, body.limit)

    @router.post("/listings/{listing_id}/reprice", tags=["market"])
    async def reprice(listing_id: str, body: RepriceIn | None = None) -> Json:
        return await market.reprice(listing_id, body.price_micro_usdc if body else None)

    @router.post("/listings/{listing_id}/withdraw", tags=["market"])
    async def withdraw(listing_id: str) -> Json:
        return await market.withdraw(listing_id)

    @router.post("/listings/refresh", tags=["market"])
    async def refresh() -> Json:
        return await market.refresh()

    @router.get("/market/sync", tags=["market"])
    async def sync() -> Json:
        return market.sync()

    @router.post("/bounties", tags=["bounties"])
    async def post_bounty(body: BountyIn) -> Json:
        return await market.post_bounty(body.text, body.reward_micro_usdc, body.ttl_s)

    @router.get("/bounties", tags=["bounties"])
    async def bounties(query: Annotated[BountiesQuery, Query()]) -> Json:
        return {"bounties": await market.bounties(include_closed=not query.open)}

    @router.get("/bounties/{bounty_id}", tags=["bounties"])
    async def bounty(bounty_id: str) -> Json:
        return await market.bounty(bounty_id)

    @router.post("/bounties/{bounty_id}/fulfil", tags=["bounties"])
    async def fulfil(bounty_id: str, body: FulfilIn | None = None) -> Json:
        return await market.fulfil_bounty(bounty_id, body.listing_id if body else None)

    return router
