"""Routes of the operator's undo: weather lift, manual ban and unban, endorsement revocation,
and the audit log they write.

Same rules as every ``/v1`` route (``node.api.routes``): bearer token (or a dashboard session), pydantic bodies,
errors by type. Every act is carried out by ``node.operator.OperatorDesk``, which appends
it to ``<data dir>/audit.jsonl`` once it took effect.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from node.api.auth import require_auth
from node.api.interface import NodeApi
from node.api.models import Body

Json = dict[str, Any]
Reason = Annotated[str, Field(max_length=280)]


class ReasonIn(Body):
    """Why (kept in the audit log; a lift's reason is gossiped with it)."""

    reason: Reason = ""


class PeerIn(Body):
    """``POST /v1/trust/ban`` and ``/unban``: a libp2p peer id or a 64-hex public key."""

    peer: Annotated[str, Field(min_length=1, max_length=128)]
    reason: Reason = ""


class AuditQuery(BaseModel):
    """``GET /v1/audit``: the newest ``limit`` entries."""

    limit: Annotated[int, Field(ge=1, le=10_000)] = 100


def operator_router(node: NodeApi) -> APIRouter:
    router = APIRouter(prefix="/v1", dependencies=[Depends(require_auth)], tags=["operator"])

    @router.post("/weather/lift", tags=["weather"])
    async def lift(body: ReasonIn | None = None) -> Json:
        return await node.operator.lift_weather((body or ReasonIn()).reason)

    @router.post("/trust/ban", tags=["trust"])
    async def ban(body: PeerIn) -> Json:
        return await node.operator.ban(body.peer, body.reason)

    @router.post("/trust/unban", tags=["trust"])
    async def unban(body: PeerIn) -> Json:
        return await node.operator.unban(body.peer, body.reason)

    @router.post("/listings/{listing_id}/endorse/revoke", tags=["market"])
    async def revoke(listing_id: str, body: ReasonIn | None = None) -> Json:
        return await node.operator.revoke_endorsement(listing_id, (body or ReasonIn()).reason)

    @router.get("/audit")
    async def audit(query: Annotated[AuditQuery, Query()]) -> Json:
        return {"entries": await node.operator.entries(query.limit)}

    return router
