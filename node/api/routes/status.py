"""Routes of the node itself: its status, its peers, and the messages it rejected, by reason.

Same rules as every ``/v1`` route (``node.api.routes``): bearer token, errors by type.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from node.api import shapes
from node.api.auth import require_auth
from node.api.interface import NodeApi

Json = dict[str, Any]


def status_router(node: NodeApi) -> APIRouter:
    router = APIRouter(prefix="/v1", dependencies=[Depends(require_auth)])

    @router.get("/status", tags=["node"], response_model=shapes.Status)
    async def status() -> Json:
        return await node.status()

    @router.get("/peers", tags=["node"])
    async def peers() -> Json:
        return {"peers": node.peers()}

    @router.get("/rejections", tags=["node"])
    async def rejections() -> Json:
        return {"rejections": node.rejections()}

    return router
