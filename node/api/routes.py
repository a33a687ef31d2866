"""The local control API: JSON routes over the node's services.

Every route needs the bearer token from ``<data dir>/api.token`` except
``/metrics`` (Prometheus convention on loopback) and the dashboard login page.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from node.api.app import App, HttpError, Request
from node.api.dashboard import register_dashboard
from node.api.interface import NodeApi
from node.api.metrics import register_metrics
from node.crystals.model import AccessScope, Lifecycle, SemanticType
from node.memory.facade import SearchRequest
from node.memory.namespaces import validate_namespace


def _int_arg(request: Request, name: str) -> int | None:
    value = request.arg(name)
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError as exc:
        raise HttpError(400, f"{name} must be an integer") from exc
    if not 0 <= number <= 10**12:
        raise HttpError(400, f"{name} must be between 0 and 10^12")
    return number


def _choices(body: dict[str, Any], name: str, enum: Any) -> tuple[str, ...]:
    """A list of enum values from ``body[name]``; 400 naming the field otherwise."""
    values = body.get(name) or []
    allowed = {member.value for member in enum}
    if not isinstance(values, list) or not all(isinstance(v, str) and v in allowed for v in values):
        raise HttpError(400, f"{name} must be a list of: {', '.join(sorted(allowed))}")
    return tuple(values)


def build_app(node: NodeApi, token: str) -> App:
    app = App(token)

    # --- node -------------------------------------------------------------------------------
    @app.route("GET", "/v1/status")
    async def status(request: Request) -> Any:
        return await node.status()

    @app.route("GET", "/v1/peers")
    async def peers(request: Request) -> Any:
        return {"peers": node.peers()}

    @app.route("GET", "/v1/rejections")
    async def rejections(request: Request) -> Any:
        return {"rejections": node.rejections()}

    # --- memory -----------------------------------------------------------------------------
    @app.route("POST", "/v1/crystals")
    async def add_crystal(request: Request) -> Any:
        body = request.json()
        if not isinstance(body.get("text"), str):
            raise HttpError(400, "text is required")
        return await node.add_memory(body)

    @app.route("GET", "/v1/crystals")
    async def list_memories(request: Request) -> Any:
        return {"crystals": await node.list_memories(
            request.arg("namespace"), tuple(request.query.get("type", [])), _int_arg(request, "limit") or 50)}

    @app.route("PATCH", "/v1/crystals/{crystal_id}")
    async def update_memory(request: Request) -> Any:
        return await node.update_memory(request.params["crystal_id"], request.json())

    @app.route("DELETE", "/v1/crystals/{crystal_id}")
    async def delete_memory(request: Request) -> Any:
        return await node.delete_memory(request.params["crystal_id"])

    @app.route("GET", "/v1/crystals/{crystal_id}/history")
    async def memory_history(request: Request) -> Any:
        return await node.memory_history(request.params["crystal_id"])

    @app.route("GET", "/v1/namespaces")
    async def namespaces(request: Request) -> Any:
        return {"namespaces": await node.namespaces()}

    @app.route("GET", "/v1/crystals/{crystal_id}")
    async def get_crystal(request: Request) -> Any:
        return await node.crystal_detail(request.params["crystal_id"])

    @app.route("POST", "/v1/crystals/search")
    async def search(request: Request) -> Any:
        body = request.json()
        query = body.get("query")
        if not isinstance(query, str) or not query.strip():
            raise HttpError(400, "query is required")
        k = body.get("k", 10)
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= 100:
            raise HttpError(400, "k must be an integer between 1 and 100")
        hits = await node.search(
            SearchRequest(
                query=query,
                k=k,
                semantic_types=_choices(body, "types", SemanticType),
                lifecycles=_choices(body, "lifecycles", Lifecycle),
                scopes=_choices(body, "scopes", AccessScope),
                namespaces=() if body.get("all_namespaces") is True
                else (validate_namespace(body.get("namespace")),),
            )
        )
        return {"hits": [hit.to_dict() for hit in hits]}

    @app.route("GET", "/v1/memory/status")
    async def memory_status(request: Request) -> Any:
        return await node.memory_status()

    @app.route("POST", "/v1/memory/consolidate")
    async def consolidate(request: Request) -> Any:
        body = request.json()
        report = await node.consolidate(purge=bool(body.get("purge")))
        return asdict(report)

    # --- skills & market --------------------------------------------------------------------
    @app.route("POST", "/v1/skills/{crystal_id}/executions")
    async def record_execution(request: Request) -> Any:
        body = request.json()
        if not isinstance(body.get("success"), bool):
            raise HttpError(400, "success (true/false) is required")
        reward = body.get("reward")
        if reward is not None and (not isinstance(reward, int | float) or isinstance(reward, bool)
                                   or not 0.0 <= reward <= 1.0):
            raise HttpError(400, "reward must be a number between 0 and 1")
        crystal = await node.record_execution(request.params["crystal_id"], body["success"], reward)
        return crystal.to_dict()

    @app.route("POST", "/v1/skills/{crystal_id}/versions")
    async def new_version(request: Request) -> Any:
        body = request.json()
        if not isinstance(body.get("text"), str):
            raise HttpError(400, "text is required")
        crystal = await node.new_skill_version(request.params["crystal_id"], body["text"])
        return crystal.to_dict()

    @app.route("POST", "/v1/skills/{crystal_id}/publish")
    async def publish(request: Request) -> Any:
        body = request.json()
        fields = {key: body.get(key) for key in ("name", "summary")}
        for key, value in fields.items():
            if value is not None and not isinstance(value, str):
                raise HttpError(400, f"{key} must be a string")
        return await node.publish_skill(request.params["crystal_id"], fields["name"],
                                        fields["summary"])

    @app.route("GET", "/v1/listings")
    async def listings(request: Request) -> Any:
        return {
            "listings": await node.list_listings(
                category=request.arg("category"),
                max_price_micro_usdc=_int_arg(request, "max_price"),
                tags=tuple(request.query.get("tag", [])),
            )
        }

    @app.route("GET", "/v1/listings/search")
    async def search_listings(request: Request) -> Any:
        query = request.arg("q") or ""
        if not query.strip():
            raise HttpError(400, "q is required")
        return {
            "listings": await node.search_listings(
                query,
                k=_int_arg(request, "k") or 10,
                category=request.arg("category"),
                max_price_micro_usdc=_int_arg(request, "max_price"),
                tags=tuple(request.query.get("tag", [])),
            )
        }

    @app.route("POST", "/v1/listings/{listing_id}/endorse")
    async def endorse(request: Request) -> Any:
        return await node.endorse_listing(request.params["listing_id"])

    @app.route("POST", "/v1/purchases")
    async def buy(request: Request) -> Any:
        body = request.json()
        listing_id = body.get("listing_id")
        if not isinstance(listing_id, str) or not listing_id:
            raise HttpError(400, "listing_id is required")
        max_price = body.get("max_price_micro_usdc")
        if max_price is not None and (not isinstance(max_price, int) or isinstance(max_price, bool)):
            raise HttpError(400, "max_price_micro_usdc must be an integer (micro-USDC)")
        again = body.get("again", False)
        if not isinstance(again, bool):
            raise HttpError(400, "again must be true or false")
        return await node.buy(listing_id, max_price, again)

    @app.route("POST", "/v1/purchases/redeliver")
    async def redeliver(request: Request) -> Any:
        body = request.json()
        if not isinstance(body.get("listing_id"), str):
            raise HttpError(400, "listing_id is required")
        return await node.redeliver(body["listing_id"])

    @app.route("GET", "/v1/purchases")
    async def purchases(request: Request) -> Any:
        return {"purchases": await node.purchases(_int_arg(request, "limit") or 100)}

    @app.route("GET", "/v1/sales")
    async def sales(request: Request) -> Any:
        return {"sales": await node.sales(_int_arg(request, "limit") or 100)}

    @app.route("GET", "/v1/skills/own")
    async def own_skills(request: Request) -> Any:
        return {"skills": await node.own_skills()}

    @app.route("GET", "/v1/market/stats")
    async def market_stats(request: Request) -> Any:
        return await node.market_stats()

    @app.route("GET", "/v1/wallet")
    async def wallet(request: Request) -> Any:
        return await node.wallet_info()

    @app.route("GET", "/v1/trust")
    async def trust(request: Request) -> Any:
        return {"peers": node.trust_rows()}

    # --- weather ----------------------------------------------------------------------------
    @app.route("GET", "/v1/weather")
    async def weather(request: Request) -> Any:
        return node.weather()

    @app.route("POST", "/v1/weather/broadcast")
    async def broadcast(request: Request) -> Any:
        body = request.json()
        try:
            level = float(body["level"])
            duration_s = int(body["duration_s"])
        except (KeyError, TypeError, ValueError) as exc:
            raise HttpError(400, "level (0..1) and duration_s are required") from exc
        return await node.broadcast_weather(level, duration_s, str(body.get("reason", "")))

    register_dashboard(app, node)
    register_metrics(app, node)
    return app
