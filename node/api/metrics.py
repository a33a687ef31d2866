"""``GET /metrics``: the node's Prometheus metrics (``node.metrics``) in the text format.

Public, as Prometheus expects on loopback (no token). Gauges that mirror the
node's state are refreshed at scrape time from the node behind this app only,
so several in-process nodes in a test do not fight over one process's gauges.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import trio
from fastapi import APIRouter
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.responses import Response

from node.api.interface import NodeApi
from node.metrics import (
    CRYSTALS,
    CRYSTALS_BY_TYPE,
    LISTINGS_KNOWN,
    NODE_INFO,
    PEERS,
    REACHABILITY,
    REGISTRY,
    RELAY_CIRCUITS,
    RELAY_RESERVATIONS,
    UNCLAIMED_EXPOSURE,
    UPTIME,
    WEATHER_ACTIVE,
    WEATHER_LEVEL,
    WEATHER_REMAINING,
)

log = logging.getLogger(__name__)


def node_collector(node: NodeApi) -> Callable[[], Awaitable[None]]:
    """A scrape-time callback filling the gauges that mirror ``node``'s state."""

    async def collect() -> None:
        status = await node.status()
        memory_stats = await node.memory.stats()
        peers = node.peers()
        PEERS.labels(state="connected").set(sum(1 for p in peers if p.get("connected")))
        PEERS.labels(state="known").set(len(peers))
        PEERS.labels(state="banned").set(sum(1 for p in peers if p.get("banned")))
        LISTINGS_KNOWN.set(status.get("listings_known") or 0)
        reach = status.get("reachability") or {}
        for state in ("public", "private", "unknown"):
            REACHABILITY.labels(state=state).set(1.0 if reach.get("status", "unknown") == state else 0.0)
        relay = reach.get("relay") or {}
        RELAY_RESERVATIONS.labels(role="held").set(len(reach.get("reservations") or ()))
        RELAY_RESERVATIONS.labels(role="served").set(relay.get("reservations") or 0)
        RELAY_CIRCUITS.set(relay.get("circuits") or 0)
        CRYSTALS.clear()
        for lifecycle, count in (memory_stats.get("by_lifecycle") or {}).items():
            CRYSTALS.labels(lifecycle=lifecycle).set(count)
        CRYSTALS_BY_TYPE.clear()
        for semantic_type, count in (memory_stats.get("by_type") or {}).items():
            CRYSTALS_BY_TYPE.labels(type=semantic_type).set(count)
        weather = status.get("weather") or {}
        WEATHER_ACTIVE.set(1.0 if weather.get("active") else 0.0)
        WEATHER_LEVEL.set(float(weather.get("level") or 0.0))
        WEATHER_REMAINING.set((weather.get("remaining_ms") or 0) / 1000)
        NODE_INFO.clear()
        NODE_INFO.labels(name=status.get("name", ""), peer_id=status.get("peer_id", "")).set(1.0)
        UPTIME.set(float(status.get("uptime_s") or 0))
        channels = await node.market.channels()
        UNCLAIMED_EXPOSURE.set(float(channels.get("unclaimed_micro_usdc") or 0))

    return collect


def metrics_router(node: NodeApi | None = None) -> APIRouter:
    """The public ``GET /metrics`` route.

    With ``node``, its gauges are refreshed at each scrape by this app only (not by a
    registry-wide callback), so several in-process nodes in a test do not fight over
    one process's gauges through callbacks that outlive them.
    """
    collect = node_collector(node) if node is not None else None
    router = APIRouter(tags=["metrics"])

    @router.get("/metrics", response_class=Response)
    async def metrics() -> Response:
        if collect is not None:
            try:
                await collect()
            except Exception:
                log.exception("metrics node collector failed")
        text = await trio.to_thread.run_sync(generate_latest, REGISTRY)
        return Response(text, 200, media_type=CONTENT_TYPE_LATEST)

    return router
