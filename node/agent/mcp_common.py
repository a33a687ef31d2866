"""What every MCP tool module shares: how a tool reaches the node, and the argument types
that recur (namespace, memory id, memory type, scope, sources).

A tool module per face of the node (``mcp_memory``, ``mcp_working``, ``mcp_learning``,
``mcp_market``, ``mcp_weather``) writes its tools as the methods of one class (``MemoryTools``,
...) and offers them with ``register_<face>_tools(server, call)``;
:func:`node.agent.mcp_server.build_server` calls each once. A new tool is a new method. ``call`` runs one
operation on a fresh :class:`node.api.ApiClient` off the event loop and turns a node error
into a tool error carrying the node's one-line message.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from node.api import ApiClient

Call = Callable[[Callable[[ApiClient], Any]], Awaitable[Any]]

MemoryType = Literal[
    "general", "fact", "preference", "episode", "insight", "relationship", "goal",
    "skill", "task_pattern", "warning", "directive",
]
Scope = Literal["private", "confidential", "shared", "public"]
SourceName = Literal["memory", "sessions", "files", "skills"]  # node.crystals.Source
Sources = Annotated[list[SourceName] | None, Field(description=(
    'Only memories from these sources: "memory" (what was stored or noted), "sessions" (transcripts and '
    'conversations), "files" (indexed files), "skills". Default: all.'))]
Namespace = Annotated[str, Field(
    min_length=1, max_length=100, pattern=r"^[a-z][a-z0-9_-]{0,31}(:[A-Za-z0-9._@-]{1,64})?$",
    description='Whose memory: "default", "user:<name>", "agent:<role>", "session:<id>", ...')]
MemoryId = Annotated[str, Field(min_length=1, max_length=64,
                                description="A memory id from memory_search, memory_add or memory_list.")]


def path_segment(value: str) -> str:
    """``value`` as one URL path segment of the node's API, or a tool error."""
    if "/" in value or "?" in value or "#" in value or value in {".", ".."}:
        raise ToolError(f"not a valid id: {value!r}")
    return value


def offer(server: MCPServer[Any], tools: object) -> None:
    """Each public coroutine method of ``tools`` as a tool of ``server``, in the order written
    (its name, signature and docstring are what an agent sees)."""
    for name, member in vars(type(tools)).items():
        if not name.startswith("_") and inspect.iscoroutinefunction(member):
            server.add_tool(getattr(tools, name))
