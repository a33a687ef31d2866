"""The local control API: FastAPI routes over a ``NodeApi`` (never ``NodeService`` itself).

Every ``/v1`` route needs the bearer token from ``<data dir>/api.token`` (or a
dashboard session); ``/metrics``, ``/openapi.json`` and the dashboard's login and
static files are public. Every body and query is a pydantic model
(``node.api.models``); errors are mapped by type (``node.api.errors``); the
hostile-input doors sit in front, in ``node.api.guards``. ``build_app`` returns
that guard wrapped round the FastAPI app; hypercorn's trio worker serves it.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Query

from node.api.auth import ApiAuth, require_auth
from node.api.dashboard import dashboard_router
from node.api.errors import install_error_handlers
from node.api.guards import Guard
from node.api.interface import NodeApi
from node.api.learning_routes import learning_router
from node.api.market_routes import market_liveness_router
from node.api.memory_routes import memory_router
from node.api.metrics import metrics_router
from node.api.models import (
    ConsolidateIn,
    CrystalIn,
    DepositIn,
    ExecutionIn,
    LimitQuery,
    ListingSearchQuery,
    ListingsQuery,
    PublishIn,
    PurchaseIn,
    RedeliverIn,
    RefundIn,
    SearchIn,
    VersionIn,
    WeatherIn,
)
from node.api.operator_routes import operator_router
from node.api.safety_routes import safety_router
from node.api.working_routes import working_memory_router
from node.memory import SearchRequest

Json = dict[str, Any]


def node_router(node: NodeApi) -> APIRouter:
    router = APIRouter(prefix="/v1", dependencies=[Depends(require_auth)])

    # --- node -------------------------------------------------------------------------------
    @router.get("/status", tags=["node"])
    async def status() -> Json:
        return await node.status()

    @router.get("/peers", tags=["node"])
    async def peers() -> Json:
        return {"peers": node.peers()}

    @router.get("/rejections", tags=["node"])
    async def rejections() -> Json:
        return {"rejections": node.rejections()}

    # --- memory -----------------------------------------------------------------------------
    @router.post("/crystals", tags=["memory"])
    async def add_crystal(body: CrystalIn) -> Json:
        return await node.memory.add_with_outcome(body.model_dump(mode="json", exclude_none=True))

    @router.get("/crystals/{crystal_id}", tags=["memory"])
    async def get_crystal(crystal_id: str) -> Json:
        return await node.memory.detail(crystal_id)

    @router.post("/crystals/search", tags=["memory"])
    async def search(body: SearchIn) -> Json:
        hits = await node.memory.search(SearchRequest(
            query=body.query, k=body.k,
            semantic_types=tuple(t.value for t in body.types),
            lifecycles=tuple(lc.value for lc in body.lifecycles),
            scopes=tuple(s.value for s in body.scopes),
            namespaces=() if body.all_namespaces else (body.namespace,),
            as_of_ms=body.as_of_ms,
            min_relevance=body.min_relevance,
            sources=tuple(source.value for source in body.sources),
        ))
        return {"hits": [hit.to_dict() for hit in hits]}

    @router.get("/memory/status", tags=["memory"])
    async def memory_status() -> Json:
        return await node.memory.status()

    @router.post("/memory/consolidate", tags=["memory"])
    async def consolidate(body: ConsolidateIn | None = None) -> Json:
        request = body or ConsolidateIn()
        report = await node.memory.consolidate(request.purge, request.at, request.dry_run)
        if not request.dry_run:
            await node.working.auto_scratch_logged()  # seed 001: hormonal spikes after a cycle
        return asdict(report)

    # --- skills & market --------------------------------------------------------------------
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

    @router.get("/skills/own", tags=["skills"])
    async def own_skills() -> Json:
        return {"skills": await node.market.own_skills()}

    @router.get("/listings", tags=["market"])
    async def listings(query: Annotated[ListingsQuery, Query()]) -> Json:
        return {"listings": await node.market.list_listings(
            category=query.category, max_price_micro_usdc=query.max_price, tags=tuple(query.tag))}

    @router.get("/listings/search", tags=["market"])
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

    @router.get("/purchases", tags=["market"])
    async def purchases(query: Annotated[LimitQuery, Query()]) -> Json:
        return {"purchases": await node.market.purchases(query.limit)}

    @router.get("/sales", tags=["market"])
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

    @router.post("/market/claim", tags=["market"])
    async def market_claim() -> Json:
        return await node.market.claim()

    @router.get("/trust", tags=["trust"])
    async def trust() -> Json:
        return {"peers": node.trust.show()}

    # --- weather ----------------------------------------------------------------------------
    @router.get("/weather", tags=["weather"])
    async def weather() -> Json:
        return node.weather.status()

    @router.post("/weather/broadcast", tags=["weather"])
    async def broadcast(body: WeatherIn) -> Json:
        return await node.weather.broadcast(body.level, body.duration_s, body.reason)

    return router


def build_fastapi(node: NodeApi | None, auth: ApiAuth) -> FastAPI:
    """The FastAPI app without the guard (``node`` None: only dashboard and metrics)."""
    app = FastAPI(title="crystalmesh local API", version="1", docs_url=None, redoc_url=None,
                  swagger_ui_oauth2_redirect_url=None)
    app.state.auth = auth
    install_error_handlers(app)
    if node is not None:
        app.include_router(node_router(node))
        app.include_router(learning_router(node))
        app.include_router(working_memory_router(node))
        app.include_router(memory_router(node))
        market = getattr(node, "market", None)  # test doubles may leave it out
        if market is not None:
            app.include_router(market_liveness_router(market.liveness))
            app.include_router(safety_router(market))
        operator = getattr(node, "operator", None)  # the operator's undo (test doubles may leave it out)
        if operator is not None:
            app.include_router(operator_router(operator))
    app.include_router(dashboard_router())
    app.include_router(metrics_router(node))
    return app


class ApiApp(Guard):
    """What hypercorn serves: the guard in front of the FastAPI app."""

    def __init__(self, node: NodeApi | None, token: str) -> None:
        self.auth = ApiAuth(token)
        self.fastapi = build_fastapi(node, self.auth)
        super().__init__(self.fastapi)


def build_app(node: NodeApi, token: str) -> ApiApp:
    return ApiApp(node, token)
