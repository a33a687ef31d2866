"""Routes of trust in peers (docs/trust.md): what this node knows of each peer.

The operator's manual ban and unban are audited acts and live in ``operator``.
Same rules as every ``/v1`` route (``node.api.routes``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from node.api.auth import require_auth
from node.api.interface import NodeApi

Json = dict[str, Any]


def trust_router(node: NodeApi) -> APIRouter:
    router = APIRouter(prefix="/v1", dependencies=[Depends(require_auth)])

    @router.get("/trust", tags=["trust"])
    async def trust() -> Json:
        return {"peers": node.trust.show()}

    return router
