"""Routes of skill safety: scan a text, release a quarantined purchase, warn the network.

Same rules as ``node.api.routes``: bearer token, pydantic bodies, errors by type.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from pydantic import Field

from node.api.auth import require_auth
from node.api.interface import MarketApi
from node.api.models import Body, Id

Json = dict[str, Any]


class ScanIn(Body):
    """``POST /v1/skills/scan``: a skill's text (bundle, SKILL.md or plain text)."""

    text: Annotated[str, Field(max_length=256 * 1024)]


class ReleaseIn(Body):
    """``POST /v1/purchases/release``: take a quarantined purchase into memory after all."""

    listing_id: Id


class WarnIn(Body):
    """``POST /v1/skills/warnings``: a listing id (or a skill's sha256 content hash) and why."""

    target: Id
    reason: Annotated[str, Field(min_length=1, max_length=280, pattern=r"\S")]


def safety_router(market: MarketApi) -> APIRouter:
    router = APIRouter(prefix="/v1", dependencies=[Depends(require_auth)])

    @router.post("/skills/scan", tags=["skills"])
    async def scan(body: ScanIn) -> Json:
        return await market.scan(body.text)

    @router.post("/purchases/release", tags=["market"])
    async def release(body: ReleaseIn) -> Json:
        return await market.release(body.listing_id)

    @router.post("/skills/warnings", tags=["skills"])
    async def warn(body: WarnIn) -> Json:
        return await market.warn(body.target, body.reason)

    @router.get("/skills/warnings", tags=["skills"])
    async def warnings() -> Json:
        return {"warnings": await market.skill_warnings()}

    return router
