"""MCP tools for conversations (docs/memory.md, "Conversations"): ingest a transcript, read around a turn.

Registered by :func:`node.agent.mcp_server.build_server`. The transcript is read
here, by the agent's own process (like ``skill_install`` writes here), and sent
to the node base64 in one request: the node never opens a path a tool names,
and its body limit bounds the file (``MAX_SENT_BYTES``).
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from node.api import ApiClient

Call = Callable[[Callable[[ApiClient], Any]], Awaitable[Any]]

Namespace = Annotated[str, Field(
    min_length=1, max_length=100, pattern=r"^[a-z][a-z0-9_-]{0,31}(:[A-Za-z0-9._@-]{1,64})?$",
    description='Whose memory: "default", "user:<name>", "agent:<role>", "session:<id>", ...')]
# The API takes bodies up to 1 MiB; base64 makes 4 bytes of 3.
MAX_SENT_BYTES = 750 * 1024


def register_conversation_tools(server: MCPServer[Any], call: Call) -> None:
    @server.tool()
    async def memory_ingest_conversation(
        path: Annotated[str, Field(min_length=1, description=(
            "Absolute path of a conversation file: a JSON list of turns {speaker, text, time, session, id}, "
            "JSONL (one turn a line) or a LoCoMo file."))],
        namespace: Namespace = "default",
    ) -> dict[str, Any]:
        """Remember a whole conversation: each turn becomes a memory with its speaker, session, time
        and its id in the file (returned as source_id by memory_search). Relative dates ("last
        Saturday") are resolved against the session date. A malformed file is refused whole;
        ingesting the same file again adds nothing."""
        file = Path(path)
        if not file.is_absolute():
            raise ToolError("path must be an absolute path")
        try:
            with file.open("rb") as handle:
                data = handle.read(MAX_SENT_BYTES + 1)
        except OSError as error:
            raise ToolError(f"cannot read {path}: {error.strerror or error}") from error
        if len(data) > MAX_SENT_BYTES:
            raise ToolError(f"{path} is over {MAX_SENT_BYTES} bytes: ingest it with "
                            "`crystalmesh memory ingest --conversation` while the node is stopped")
        encoded = base64.b64encode(data).decode("ascii")
        result: dict[str, Any] = await call(
            lambda client: client.memory_ingest_conversation(encoded, namespace=namespace))
        return result

    @server.tool()
    async def memory_neighbours(
        id: Annotated[str, Field(min_length=1, max_length=64, description="A conversation turn's id from memory_search.")],
        window: Annotated[int, Field(ge=0, le=20, description="Turns either side.")] = 2,
    ) -> dict[str, Any]:
        """The turns said just before and after a conversation turn (same session, in order), to
        read a hit in its context."""
        if "/" in id or "?" in id or "#" in id or id in {".", ".."}:
            raise ToolError(f"not a valid id: {id!r}")
        result: dict[str, Any] = await call(lambda client: client.memory_neighbours(id, window))
        return result
