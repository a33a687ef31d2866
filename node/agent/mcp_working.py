"""MCP tools of working memory (seed 001): the prompt context and an on-demand dream.

Notes go through ``memory_add`` (the seed's ``working_memory_note``: one tool,
registered in :mod:`node.agent.mcp_server`). Each tool is one call to the local API.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from pydantic import Field

Call = Callable[..., Awaitable[Any]]
Namespace = Annotated[str, Field(min_length=1, max_length=100,
                                 description='Whose working memory: "default", "agent:<role>", ...')]


def register_working_tools(server: MCPServer[Any], call: Call) -> None:
    @server.tool()
    async def memory_context(
        window_tokens: Annotated[int, Field(ge=1, le=10_000_000,
                                            description="The model's context window, in tokens.")] = 200_000,
        namespace: Namespace = "default",
    ) -> dict[str, Any]:
        """The agent's working memory for its system prompt: MEMORY.md (who the user is, what is
        going on, pointers to search for older topics) and the notes not yet consolidated,
        sized for the context window. Read it at the start of a session."""
        result: dict[str, Any] = await call("GET", "/v1/memory/context",
                                            params={"window": window_tokens, "namespace": namespace})
        return result

    @server.tool()
    async def memory_dream(namespace: Namespace = "default") -> dict[str, Any]:
        """Consolidate now: rewrite MEMORY.md from the old state, the pending notes and new
        memories (normally automatic every two hours). Returns whether it was written or
        refused, and the crystal pointers it made."""
        result: dict[str, Any] = await call("POST", "/v1/memory/dream", {"namespace": namespace})
        return result
