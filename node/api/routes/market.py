"""Routes of the market: skills (record runs, version, publish, scan, warn), listings,
purchases and sales, the wallet; the living market (publish a catalogue, re-price,
withdraw, bounties, sync status); skill safety (scan a text, release a quarantined
purchase, warn the network).

Same rules as every ``/v1`` route (``node.api.routes``): bearer token, pydantic bodies,
errors by type. Turning an emerging skill into a skill crystal is working memory's
(``working``).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from node.api import shapes
from node.api.auth import require_auth
from node.api.interface import NodeApi
from node.api.models import (
    Body,
    DepositIn,
    ExecutionIn,
    Id,
    LimitQuery,
    ListingSearchQuery,
    ListingsQuery,
    MicroUsdc,
    PublishIn,
    PurchaseIn,
    RedeliverIn,
    RefundIn,
    VersionIn,
    WithdrawIn,
)
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


class ScanIn(Body):
    """``POST /v1/skills/scan``: a skill's text (bundle, SKILL.md or plain text)."""

    text: Annotated[str, Field(max_length=256 * 1024)]
    # Also ask the endpoint judge of scan.judge_url (a second opinion shown next to the rules').
    judge: bool = False


class ReleaseIn(Body):
    """``POST /v1/purchases/release``: take a quarantined purchase into memory after all."""

    listing_id: Id


class WarnIn(Body):
    """``POST /v1/skills/warnings``: a listing id (or a skill's sha256 content hash) and why."""

    target: Id
    reason: Annotated[str, Field(min_length=1, max_length=280, pattern=r"\S")]


def market_router(node: NodeApi) -> APIRouter:
    router = APIRouter(prefix="/v1", dependencies=[Depends(require_auth)])

    # --- skills and listings, purchases, sales, the wallet -----------------------------------
    @router.post("/skills/{crystal_id}/executions", tags=["skills"])
    async def record_execution(crystal_id: str, body: ExecutionIn) -> Json:
        outcome = await node.market.record_execution(crystal_id, body.success, body.reward, body.note)
        return outcome.to_dict()

    @router.post("/skills/{crystal_id}/versions", tags=["skills"])
    async def new_version(crystal_id: str, body: VersionIn) -> Json:
        return (await node.market.new_skill_version(crystal_id, body.text)).to_dict()

    @router.post("/skills/{crystal_id}/publish", tags=["skills"])
    async def publish(crystal_id: str, body: PublishIn | None = None) -> Json:
        fields = body or PublishIn()
        return await node.market.publish_skill(crystal_id, fields.name, fields.summary)

    @router.get("/skills/own", tags=["skills"], response_model=shapes.OwnSkills)
    async def own_skills() -> Json:
        return {"skills": await node.market.own_skills()}

    @router.get("/listings", tags=["market"], response_model=shapes.Listings)
    async def listings(query: Annotated[ListingsQuery, Query()]) -> Json:
        return {"listings": await node.market.list_listings(
            category=query.category, max_price_micro_usdc=query.max_price, tags=tuple(query.tag))}

    @router.get("/listings/search", tags=["market"], response_model=shapes.Listings)
    async def search_listings(query: Annotated[ListingSearchQuery, Query()]) -> Json:
        return {"listings": await node.market.search_listings(
            query.q, k=query.k, category=query.category,
            max_price_micro_usdc=query.max_price, tags=tuple(query.tag))}

    @router.post("/listings/{listing_id}/endorse", tags=["market"])
    async def endorse(listing_id: str) -> Json:
        return await node.market.endorse_listing(listing_id)

    @router.post("/purchases", tags=["market"])
    async def buy(body: PurchaseIn) -> Json:
        return await node.market.buy(body.listing_id, body.max_price_micro_usdc, body.again,
                                     body.exact)

    @router.post("/purchases/redeliver", tags=["market"])
    async def redeliver(body: RedeliverIn) -> Json:
        return await node.market.redeliver(body.listing_id)

    @router.get("/purchases", tags=["market"], response_model=shapes.Purchases)
    async def purchases(query: Annotated[LimitQuery, Query()]) -> Json:
        return {"purchases": await node.market.purchases(query.limit)}

    @router.get("/sales", tags=["market"], response_model=shapes.Sales)
    async def sales(query: Annotated[LimitQuery, Query()]) -> Json:
        return {"sales": await node.market.sales(query.limit)}

    @router.get("/market/stats", tags=["market"])
    async def market_stats() -> Json:
        return await node.market.stats()

    @router.get("/wallet", tags=["market"])
    async def wallet() -> Json:
        return await node.market.wallet()

    @router.get("/wallet/channels", tags=["market"])
    async def wallet_channels() -> Json:
        return await node.market.channels()

    @router.post("/wallet/deposit", tags=["market"])
    async def wallet_deposit(body: DepositIn) -> Json:
        return await node.market.deposit(body.seller_key, body.amount_micro_usdc)

    @router.post("/wallet/refund", tags=["market"])
    async def wallet_refund(body: RefundIn) -> Json:
        return await node.market.refund(body.channel_id)

    @router.post("/wallet/withdraw", tags=["market"])
    async def wallet_withdraw(body: WithdrawIn) -> Json:
        return await node.market.withdraw(body.channel_id)

    @router.post("/market/claim", tags=["market"])
    async def market_claim() -> Json:
        return await node.market.claim()

    # --- the living market: catalogue, re-price, withdraw, sync, bounties --------------------

    @router.post("/skills/publish", tags=["skills"])
    async def publish_many(body: PublishManyIn) -> Json:
        if (body.crystal_ids is None) == (not body.all):
            raise NodeError("give crystal_ids or all=true, not both")
        return await node.market.liveness.publish_skills(body.crystal_ids, body.limit)

    @router.post("/listings/{listing_id}/reprice", tags=["market"])
    async def reprice(listing_id: str, body: RepriceIn | None = None) -> Json:
        return await node.market.liveness.reprice(listing_id, body.price_micro_usdc if body else None)

    @router.post("/listings/{listing_id}/withdraw", tags=["market"])
    async def withdraw(listing_id: str) -> Json:
        return await node.market.liveness.withdraw(listing_id)

    @router.post("/listings/refresh", tags=["market"])
    async def refresh() -> Json:
        return await node.market.liveness.refresh()

    @router.get("/market/sync", tags=["market"])
    async def sync() -> Json:
        return node.market.liveness.sync()

    @router.post("/bounties", tags=["bounties"])
    async def post_bounty(body: BountyIn) -> Json:
        return await node.market.liveness.post_bounty(body.text, body.reward_micro_usdc, body.ttl_s)

    @router.get("/bounties", tags=["bounties"])
    async def bounties(query: Annotated[BountiesQuery, Query()]) -> Json:
        return {"bounties": await node.market.liveness.bounties(include_closed=not query.open)}

    @router.get("/bounties/{bounty_id}", tags=["bounties"])
    async def bounty(bounty_id: str) -> Json:
        return await node.market.liveness.bounty(bounty_id)

    @router.post("/bounties/{bounty_id}/fulfil", tags=["bounties"])
    async def fulfil(bounty_id: str, body: FulfilIn | None = None) -> Json:
        return await node.market.liveness.fulfil_bounty(bounty_id, body.listing_id if body else None)

    # --- skill safety: scan, release a quarantined purchase, warn the network ----------------
    @router.post("/skills/scan", tags=["skills"])
    async def scan(body: ScanIn) -> Json:
        return await node.market.scan(body.text, body.judge)

    @router.post("/purchases/release", tags=["market"])
    async def release(body: ReleaseIn) -> Json:
        return await node.market.release(body.listing_id)

    @router.post("/skills/warnings", tags=["skills"])
    async def warn(body: WarnIn) -> Json:
        return await node.market.warn(body.target, body.reason)

    @router.get("/skills/warnings", tags=["skills"])
    async def warnings() -> Json:
        return {"warnings": await node.market.skill_warnings()}

    return router
