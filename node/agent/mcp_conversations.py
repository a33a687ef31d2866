"""MCP tools for conversations (docs/memory.md, "Conversations", "Sessions"): ingest a
conversation or a session transcript, read around a turn.

Registered by :func:`node.agent.mcp_server.build_server`. Files are read here, by the
agent's own process (like ``skill_install`` writes here): the node never opens a path a
tool names. A conversation goes in one request, bounded by the body limit
(``MAX_SENT_BYTES``); a transcript in chunks from where the node stopped, with a
progress notification per chunk so a client does not time out silently.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from node.agent.mcp_progress import Progress
from node.api import ApiClient
from node.errors import CrystalmeshError

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
    async def memory_ingest_transcript(
        path: Annotated[str, Field(min_length=1, max_length=4096, description=(
            "Absolute path of a session transcript: Claude Code session JSONL, Codex CLI rollout JSONL, "
            "or JSONL of {role, content, timestamp} messages."))],
        ctx: Context,
        format: Annotated[Literal["claude-code", "codex", "messages"] | None, Field(
            description="The transcript's format; detected from its lines when not given.")] = None,
        namespace: Namespace = "default",
    ) -> dict[str, Any]:
        """Remember a coding session: each user and assistant message, each tool call (one line: the
        tool and its command or path) and each tool result (shortened) becomes a memory with the
        session id, its position and time; thinking and bookkeeping are dropped and secrets redacted.
        Only what the node has not read yet is sent, so calling it again on a grown transcript adds
        just the new messages. Returns counts: added, already_stored, skipped, redacted, offset."""
        if not Path(path).is_absolute():
            raise ToolError("path must be an absolute path")

        progress = Progress(ctx)  # per chunk read, and a heartbeat while one chunk is stored
        try:
            result: dict[str, Any] = await progress.during(
                lambda: call(lambda client: client.memory_ingest_transcript(
                    path, format=format, namespace=namespace, progress=progress.from_worker())),
                "ingesting the transcript")
        except CrystalmeshError as error:  # an unreadable path, read here
            raise ToolError(str(error)) from error
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
