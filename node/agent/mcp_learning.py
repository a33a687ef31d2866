"""MCP tools of memory that learns (seed 003/004): feedback, session end, context under a budget.

(Pinning and the consolidation preview are the memory's own: ``node.agent.mcp_memory``.)

Registered by :func:`node.agent.mcp_server.build_server`; each is one call of
the node's typed client (docs/memory.md).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from pydantic import Field

from node.agent.mcp_common import Call, offer


class LearningTools:
    """The tools of memory that learns, one method each (signature and docstring are what an agent sees)."""

    def __init__(self, call: Call) -> None:
        self.call = call

    async def memory_feedback(
        self,
        id: Annotated[str, Field(min_length=1, max_length=64, description="A memory id from memory_search.")],
        verdict: Annotated[Literal["useful", "wrong"], Field(description="Was the retrieved memory useful or wrong?")],
    ) -> dict[str, Any]:
        """Tell the memory whether a retrieved memory was useful (its confidence rises) or wrong
        (its confidence is halved; facts that keep being wrong are forgotten)."""
        result: dict[str, Any] = await self.call(lambda client: client.memory_feedback(id, verdict))
        return result

    async def memory_session_end(self) -> dict[str, Any]:
        """Mark the end of a working session: under the energy policy, memories used in this
        session are promoted more easily (seed 004)."""
        result: dict[str, Any] = await self.call(lambda client: client.session_end())
        return result

    async def memory_context_budget(
        self,
        query: Annotated[str, Field(min_length=1, max_length=4096, description="What the next step is about.")],
        budget_tokens: Annotated[int, Field(ge=0, le=1_000_000, description="Token budget for the context.")],
        source: Annotated[list[Literal["memory", "sessions", "files", "skills"]] | None, Field(
            description="Only memories from these sources (default: all).")] = None,
    ) -> dict[str, Any]:
        """Assemble what to read before the next step within a token budget: warnings, facts,
        episodes, skills (and working memory), the most valuable at the start and end, with a
        report of what was left out and why; each item says its origin."""
        result: dict[str, Any] = await self.call(lambda client: client.budget_context(
            query, budget_tokens, sources=source or ()))
        return result


def register_learning_tools(server: MCPServer[Any], call: Call) -> None:
    offer(server, LearningTools(call))
