"""``crystalmesh mcp``: the node's memory and market as MCP tools.

The server is a client of the running node's local API, so the node stays the
single owner of its database; this process holds no state of its own. Errors
from the node (or an unreachable node) become MCP tool errors carrying the
node's one-line message, never a traceback.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from node.agent.mcp_working import register_working_tools
from node.api.client import ApiClient, ApiError

MICRO_PER_USDC = 1_000_000

INSTRUCTIONS = """\
Long-term memory and a skill marketplace for this agent, served by a local crystalmesh node.
Search memory before answering questions about past work; add what is worth remembering
(decisions, facts about the user, outcomes of tasks). Skills bought on the market cost real
USDC: check the price with market_search first; skill_buy never pays more than max_price_usdc
and the node's own daily spend cap."""

MemoryType = Literal[
    "general", "fact", "preference", "episode", "insight", "relationship", "goal",
    "skill", "task_pattern",
]
Scope = Literal["private", "confidential", "shared", "public"]


def usdc_to_micro(amount_usdc: float) -> int:
    """Dollars as an agent writes them (0.05) to integer micro-USDC, refusing sub-micro amounts."""
    micro = round(amount_usdc * MICRO_PER_USDC)
    if micro < 0 or abs(micro - amount_usdc * MICRO_PER_USDC) > 1e-6 * MICRO_PER_USDC:
        raise ToolError(f"max_price_usdc must be a non-negative amount with at most 6 decimals, got {amount_usdc}")
    return micro


def build_server(connect: Callable[[], ApiClient]) -> MCPServer[Any]:
    """The MCP server; ``connect`` returns a client for the running node (raises ApiError)."""
    server: MCPServer[Any] = MCPServer(name="crystalmesh", instructions=INSTRUCTIONS)

    async def call(method: str, path: str, body: Any = None, params: dict[str, Any] | None = None) -> Any:
        def blocking() -> Any:
            client = connect()
            try:
                if method == "GET":
                    return client.get(path, **(params or {}))
                return client.request(method, path, json=body, params=params)
            finally:
                client.close()

        try:
            return await anyio.to_thread.run_sync(blocking)
        except ApiError as exc:
            raise ToolError(str(exc)) from exc

    @server.tool()
    async def memory_search(
        query: Annotated[str, Field(min_length=1, description="What to look for, in plain words or exact identifiers.")],
        k: Annotated[int, Field(ge=1, le=50, description="How many memories to return.")] = 10,
        types: Annotated[list[MemoryType] | None, Field(description="Only these memory types.")] = None,
    ) -> dict[str, Any]:
        """Search the agent's long-term memory (hybrid: meaning + exact words). Returns the best
        matching memories with id, text, type and score."""
        result = await call("POST", "/v1/crystals/search", {"query": query, "k": k, "types": types or []})
        return {"hits": [_hit(hit) for hit in result.get("hits", [])]}

    @server.tool()
    async def memory_add(
        text: Annotated[str, Field(min_length=1, max_length=65536, description="The memory, one self-contained statement.")],
        type: Annotated[MemoryType, Field(description="Kind of memory.")] = "general",
        scope: Annotated[Scope | None, Field(description="Who may see it; secrets are always kept confidential.")] = None,
    ) -> dict[str, Any]:
        """Store a memory in the agent's long-term memory. Returns the stored memory's id."""
        body: dict[str, Any] = {"text": text, "type": type}
        if scope is not None:
            body["scope"] = scope
        crystal = await call("POST", "/v1/crystals", body)
        return {"id": crystal["id"], "type": crystal.get("semanticType"), "scope": _scope(crystal)}

    @server.tool()
    async def memory_get(
        id: Annotated[str, Field(min_length=1, description="A memory id from memory_search or memory_add.")],
    ) -> dict[str, Any]:
        """Read one memory with its audit trail."""
        crystal = await call("GET", f"/v1/crystals/{_path_segment(id)}")
        return {"id": crystal["id"], "text": crystal.get("text"), "type": crystal.get("semanticType"),
                "lifecycle": crystal.get("lifecycle"), "audit": crystal.get("audit", [])}

    @server.tool()
    async def market_search(
        query: Annotated[str, Field(min_length=1, description="The skill you need, in plain words.")],
        k: Annotated[int, Field(ge=1, le=50)] = 10,
        max_price_usdc: Annotated[float | None, Field(ge=0, description="Only skills at or below this price.")] = None,
    ) -> dict[str, Any]:
        """Search skills other nodes sell, by meaning. Prices are in USDC (and micro-USDC)."""
        params: dict[str, Any] = {"q": query, "k": k}
        if max_price_usdc is not None:
            params["max_price"] = usdc_to_micro(max_price_usdc)
        result = await call("GET", "/v1/listings/search", params=params)
        return {"listings": [_listing(listing) for listing in result.get("listings", [])]}

    @server.tool()
    async def skill_buy(
        listing_id: Annotated[str, Field(min_length=1, description="listing_id from market_search.")],
        max_price_usdc: Annotated[float, Field(ge=0, description="Refuse to pay more than this (USDC).")],
    ) -> dict[str, Any]:
        """Buy a skill with USDC and store it in memory. Pays at most max_price_usdc and never
        beyond the node's spend caps. Returns the price actually paid and the stored skill's id."""
        result = await call("POST", "/v1/purchases", {"listing_id": listing_id,
                                                      "max_price_micro_usdc": usdc_to_micro(max_price_usdc)})
        paid = result.get("price_micro_usdc")
        return result | ({"price_usdc": paid / MICRO_PER_USDC} if isinstance(paid, int) else {})

    @server.tool()
    async def skill_publish(
        crystal_id: Annotated[str, Field(min_length=1, description="Id of a skill memory with a track record.")],
    ) -> dict[str, Any]:
        """List one of the agent's proven skills on the market (needs >= 3 recorded executions
        and >= 60 % success). The price comes from the node's pricing engine."""
        return dict(await call("POST", f"/v1/skills/{_path_segment(crystal_id)}/publish", {}))

    @server.tool()
    async def weather_status() -> dict[str, Any]:
        """The network's 'cortisol weather': whether a management alert currently restricts which
        peers' skills are accepted."""
        return dict(await call("GET", "/v1/weather"))

    @server.tool()
    async def wallet_balance() -> dict[str, Any]:
        """The node's wallet address and USDC balance, and today's spending against its cap."""
        return dict(await call("GET", "/v1/wallet"))

    register_working_tools(server, call)  # working memory (seed 001): memory_context, memory_dream
    return server


def _path_segment(value: str) -> str:
    if "/" in value or "?" in value or "#" in value or value in {".", ".."}:
        raise ToolError(f"not a valid id: {value!r}")
    return value


def _scope(crystal: dict[str, Any]) -> Any:
    governance = crystal.get("governance")
    return governance.get("accessScope") if isinstance(governance, dict) else None


def _hit(hit: dict[str, Any]) -> dict[str, Any]:
    crystal = hit.get("crystal", hit)
    return {"id": crystal.get("id"), "text": crystal.get("text"), "type": crystal.get("semanticType"),
            "score": hit.get("score")}


def _listing(listing: dict[str, Any]) -> dict[str, Any]:
    price = listing.get("price_micro_usdc")
    return listing | ({"price_usdc": price / MICRO_PER_USDC} if isinstance(price, int) else {})
