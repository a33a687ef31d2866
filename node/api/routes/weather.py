"""Routes of cortisol weather: the current alert, and a management node's broadcast.

Lifting an alert early is an audited act of the operator and lives in ``operator``.
Same rules as every ``/v1`` route (``node.api.routes``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from node.api.auth import require_auth
from node.api.interface import NodeApi
from node.api.models import WeatherIn

Json = dict[str, Any]


def weather_router(node: NodeApi) -> APIRouter:
    router = APIRouter(prefix="/v1", dependencies=[Depends(require_auth)])

    @router.get("/weather", tags=["weather"])
    async def weather() -> Json:
        return node.weather.status()

    @router.post("/weather/broadcast", tags=["weather"])
    async def broadcast(body: WeatherIn) -> Json:
        return await node.weather.broadcast(body.level, body.duration_s, body.reason)

    return router
