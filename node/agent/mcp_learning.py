"""MCP tools of memory that learns (seed 003/004): feedback, session end, context under a budget.

Registered by :func:`node.agent.mcp_server.build_server`; each is one call of
the node's typed client (docs/memory.md).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from node.api import ApiClient

Call = Callable[[Callable[[ApiClient], Any]], Awaitable[Any]]


def register_learning_tools(server: MCPServer[Any], call: Call) -> None:
    @server.tool()
    async def memory_feedback(
        id: Annotated[str, Field(min_length=1, max_length=64, description="A memory id from memory_search.")],
        verdict: Annotated[Literal["useful", "wrong"], Field(description="Was the retrieved memory useful or wrong?")],
    ) -> dict[str, Any]:
        """Tell the memory whether a retrieved memory was useful (its confidence rises) or wrong
        (its confidence is halved; facts that keep being wrong are forgotten)."""
        result: dict[str, Any] = await call(lambda client: client.memory_feedback(id, verdict))
        return result

    @server.tool()
    async def memory_pin(
        id: Annotated[str, Field(min_length=1, max_length=64, description="A memory id from memory_search.")],
        pinned: Annotated[bool, Field(description="True: keep it for good; False: let it decay again.")] = True,
    ) -> dict[str, Any]:
        """Pin a memory the user wants kept: it is never forgotten by decay or doubt, only when
        deleted (pinning one that was just forgotten brings it back). pinned=false unpins it."""
        lifespan = "permanent" if pinned else "decay"
        crystal = await call(lambda client: client.memory_set_lifespan(id, lifespan))
        return {"id": crystal.get("id"), "lifespan": (crystal.get("governance") or {}).get("lifespanPolicy"),
                "changed": crystal.get("changed")}

    @server.tool()
    async def memory_consolidate_preview(
        at: Annotated[str, Field(min_length=1, max_length=40, description=(
            'When: "+90d", "+12h" or an ISO date such as "2026-06-01".'))] = "+30d",
    ) -> dict[str, Any]:
        """Preview consolidation as of a later time, writing nothing: which memories would be
        forgotten if nobody used them until then (pin the ones the user wants kept)."""
        report: dict[str, Any] = await call(lambda client: client.memory_consolidate(at=at, dry_run=True))
        return {"at_ms": report.get("at_ms"), "forgotten": report.get("forgotten", [])}

    @server.tool()
    async def memory_session_end() -> dict[str, Any]:
        """Mark the end of a working session: under the energy policy, memories used in this
        session are promoted more easily (seed 004)."""
        result: dict[str, Any] = await call(lambda client: client.session_end())
        return result

    @server.tool()
    async def memory_context_budget(
        query: Annotated[str, Field(min_length=1, max_length=4096, description="What the next step is about.")],
        budget_tokens: Annotated[int, Field(ge=0, le=1_000_000, description="Token budget for the context.")],
    ) -> dict[str, Any]:
        """Assemble what to read before the next step within a token budget: warnings, facts,
        episodes, skills (and working memory), the most valuable at the start and end, with a
        report of what was left out and why."""
        result: dict[str, Any] = await call(lambda client: client.budget_context(query, budget_tokens))
        return result
