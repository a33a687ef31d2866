"""MCP tools of the node's memory: search, add, read, list, update, delete, history, pin,
a consolidation preview; conversations and session transcripts (docs/memory.md,
"Conversations", "Sessions") and the turns around a hit.

Registered by :func:`node.agent.mcp_server.build_server`; each tool is one call of the
node's typed client. ``memory_add`` is also the seed's ``working_memory_note`` (a short
observation goes to the scratch through :func:`node.agent.mcp_working.add_working_note`).
Files are read here, by the agent's own process (like ``skill_install`` writes here): the
node never opens a path a tool names. A conversation goes in one request, bounded by the
body limit (``MAX_SENT_BYTES``); a transcript in chunks from where the node stopped, with a
progress notification per chunk so a client does not time out silently.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from node.agent.mcp_common import (
    Call,
    MemoryId,
    MemoryType,
    Namespace,
    Scope,
    Sources,
    offer,
    path_segment,
)
from node.agent.mcp_progress import Progress
from node.agent.mcp_working import (
    DEFAULT_NOTE_IMPORTANCE,
    Importance,
    add_working_note,
    as_working_note,
)
from node.api import shapes
from node.errors import CrystalmeshError
from protocol.skill_bundle import MAX_BUNDLE_BYTES

# The API takes bodies up to 1 MiB; base64 makes 4 bytes of 3.
MAX_SENT_BYTES = 750 * 1024


class MemoryTools:
    """The memory's tools, one method each (what an agent sees is each method's signature and docstring)."""

    def __init__(self, call: Call) -> None:
        self.call = call

    async def memory_search(
        self,
        query: Annotated[str, Field(min_length=1, description="What to look for, in plain words or exact identifiers.")],
        k: Annotated[int, Field(ge=1, le=50, description="How many memories to return.")] = 10,
        types: Annotated[list[MemoryType] | None, Field(description="Only these memory types.")] = None,
        namespace: Namespace = "default",
        all_namespaces: Annotated[bool, Field(description="Search every namespace, not just `namespace`.")] = False,
        min_relevance: Annotated[float, Field(ge=0.0, le=1.0, description=(
            "Leave out hits whose relevance (a calibrated probability that the hit is relevant) is below "
            "this; no hit left means memory holds nothing relevant."))] = 0.0,
        source: Sources = None,
    ) -> dict[str, Any]:
        """Search the agent's long-term memory (hybrid: meaning + exact words) in one namespace.
        Returns the best matching current memories with id, text, type, namespace, score,
        relevance (0-1, calibrated) and origin: where each came from (a session's id, turn and
        time; a file's path and lines; a skill's id; or a stored memory)."""
        hits = await self.call(lambda client: client.memory_search(
            query, k, types=types or [], namespace=namespace, all_namespaces=all_namespaces,
            min_relevance=min_relevance, sources=source or ()))
        return {"hits": [_hit(hit) for hit in hits]}

    async def memory_add(
        self,
        text: Annotated[str, Field(min_length=1, max_length=MAX_BUNDLE_BYTES, description=(
            "The memory, one self-contained statement (at most 65,536 characters; a skill up to "
            "196,608 bytes)."))],
        type: Annotated[MemoryType, Field(description=(
            'Kind of memory. "directive": an instruction or preference the user stated '
            "(it never fades and outranks inferred memories that contradict it)."))] = "general",
        scope: Annotated[Scope | None, Field(description="Who may see it; secrets are always kept confidential.")] = None,
        namespace: Namespace = "default",
        ttl_seconds: Annotated[int | None, Field(ge=1, le=315_360_000, description="Forget it after this many seconds.")] = None,
        importance: Importance | None = None,
        permanent: Annotated[bool, Field(description=(
            "Pin it: never forgotten by decay, only when deleted."))] = False,
    ) -> dict[str, Any]:
        """Store a memory in a namespace. Returns its id and the outcome: "created", or "exists"
        when this namespace already holds exactly this text (then nothing changed; use
        memory_update to change its scope). This is also the working-memory note: names,
        preferences, decisions, deadlines are kept in the scratch notes until the next dream
        folds them into MEMORY.md (see memory_context), and never fade below their importance
        (default 0.7)."""
        body: dict[str, Any] = {"text": text, "type": type, "namespace": namespace}
        if scope is not None:
            body["scope"] = scope
        if ttl_seconds is not None:
            body["ttl_ms"] = ttl_seconds * 1000
        if permanent:
            body["lifespan"] = "permanent"
        if as_working_note(body):  # seed 001's working_memory_note (docs/memory.md)
            return await add_working_note(self.call, body, DEFAULT_NOTE_IMPORTANCE if importance is None else importance)
        crystal = await self.call(lambda client: client.memory_add(
            text, semantic_type=type, scope=scope, ttl_ms=body.get("ttl_ms"), namespace=namespace,
            importance=importance, lifespan=body.get("lifespan")))
        return {"id": crystal["id"], "outcome": crystal["outcome"], "namespace": crystal["namespace"],
                "type": crystal["semanticType"], "scope": crystal["governance"]["accessScope"]} | (
            {"differs": crystal["differs"]} if crystal.get("differs") else {})

    async def memory_get(self, id: MemoryId) -> dict[str, Any]:
        """Read one memory (any version) with its audit trail."""
        segment = path_segment(id)
        crystal = await self.call(lambda client: client.memory_get(segment))
        return _memory(crystal) | {"lifecycle": crystal["lifecycle"], "audit": crystal["audit"]}

    async def memory_list(
        self,
        namespace: Namespace = "default",
        types: Annotated[list[MemoryType] | None, Field(description="Only these memory types.")] = None,
        limit: Annotated[int, Field(ge=1, le=200)] = 50,
    ) -> dict[str, Any]:
        """The newest current memories of a namespace (deleted, expired and superseded ones are not listed)."""
        crystals = await self.call(lambda client: client.memory_list(namespace, types or (), limit))
        return {"memories": [_memory(crystal) for crystal in crystals]}

    async def memory_update(
        self,
        id: MemoryId,
        text: Annotated[str | None, Field(min_length=1, max_length=MAX_BUNDLE_BYTES, description=(
            "The corrected memory (at most 65,536 characters; a skill up to 196,608 bytes)."))] = None,
        scope: Annotated[Scope | None, Field(description="A new access scope.")] = None,
    ) -> dict[str, Any]:
        """Change a memory: writes a new version (new id) and closes the old one, which stays
        readable through memory_history. Give the new text, a new scope, or both."""
        if text is None and scope is None:
            raise ToolError("memory_update needs text or scope")
        segment = path_segment(id)
        crystal = await self.call(lambda client: client.memory_update(segment, text, scope))
        return _memory(crystal) | {"previous_id": crystal["previousId"]}

    async def memory_delete(self, id: MemoryId) -> dict[str, Any]:
        """Forget a memory (every version): it disappears from search, get and lists at once and is
        physically removed by the next consolidation; the deletion stays in memory_history."""
        segment = path_segment(id)
        return await self.call(lambda client: client.memory_delete(segment))

    async def memory_history(self, id: MemoryId) -> dict[str, Any]:
        """Every version of a memory (oldest first, with valid_from/valid_to) and every transition
        (created, updated, deleted, lifecycle changes), for any version's id."""
        segment = path_segment(id)
        result = await self.call(lambda client: client.memory_history(segment))
        return {"memory_id": result["memory_id"], "namespace": result["namespace"],
                "deleted": result["deleted"], "versions": [_memory(crystal) for crystal in result["versions"]],
                "transitions": result["transitions"]}

    async def memory_ingest_conversation(
        self,
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
        result: dict[str, Any] = await self.call(
            lambda client: client.memory_ingest_conversation(encoded, namespace=namespace))
        return result

    async def memory_ingest_transcript(
        self,
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
                lambda: self.call(lambda client: client.memory_ingest_transcript(
                    path, format=format, namespace=namespace, progress=progress.from_worker())),
                "ingesting the transcript")
        except CrystalmeshError as error:  # an unreadable path, read here
            raise ToolError(str(error)) from error
        return result

    async def memory_neighbours(
        self,
        id: Annotated[str, Field(min_length=1, max_length=64, description="A conversation turn's id from memory_search.")],
        window: Annotated[int, Field(ge=0, le=20, description="Turns either side.")] = 2,
    ) -> dict[str, Any]:
        """The turns said just before and after a conversation turn (same session, in order), to
        read a hit in its context."""
        segment = path_segment(id)
        result: dict[str, Any] = await self.call(lambda client: client.memory_neighbours(segment, window))
        return result

    async def memory_pin(
        self,
        id: Annotated[str, Field(min_length=1, max_length=64, description="A memory id from memory_search.")],
        pinned: Annotated[bool, Field(description="True: keep it for good; False: let it decay again.")] = True,
    ) -> dict[str, Any]:
        """Pin a memory the user wants kept: it is never forgotten by decay or doubt, only when
        deleted (pinning one that was just forgotten brings it back). pinned=false unpins it."""
        lifespan = "permanent" if pinned else "decay"
        crystal = await self.call(lambda client: client.memory_set_lifespan(id, lifespan))
        return {"id": crystal["id"], "lifespan": crystal["governance"]["lifespanPolicy"],
                "changed": crystal["changed"]}

    async def memory_consolidate_preview(
        self,
        at: Annotated[str, Field(min_length=1, max_length=40, description=(
            'When: "+90d", "+12h" or an ISO date such as "2026-06-01".'))] = "+30d",
    ) -> dict[str, Any]:
        """Preview consolidation as of a later time, writing nothing: which memories would be
        forgotten if nobody used them until then (pin the ones the user wants kept)."""
        report: dict[str, Any] = await self.call(lambda client: client.memory_consolidate(at=at, dry_run=True))
        return {"at_ms": report.get("at_ms"), "forgotten": report.get("forgotten", [])}


def register_memory_tools(server: MCPServer[Any], call: Call) -> None:
    offer(server, MemoryTools(call))


def _memory(crystal: shapes.Crystal) -> dict[str, Any]:
    return {"id": crystal["id"], "text": crystal["text"], "type": crystal["semanticType"],
            "namespace": crystal["namespace"], "scope": crystal["governance"]["accessScope"],
            "memory_id": crystal["memoryId"], "version": crystal["version"],
            "valid_from": crystal["validFrom"], "valid_to": crystal["validTo"],
            "superseded_by": crystal["supersededBy"]}


def _hit(hit: shapes.Hit) -> dict[str, Any]:
    crystal = hit["crystal"]
    turn = hit.get("turn") or {}  # a conversation turn: where it was said
    return {"id": crystal["id"], "text": crystal["text"], "type": crystal["semanticType"],
            "namespace": crystal["namespace"], "score": hit["score"], "relevance": hit["relevance"],
            # What the user told (directive) outranks what was inferred; bought is marked with its seller.
            "layer": crystal["epistemicLayer"], "provenance": crystal["provenance"],
            "seller": crystal["seller"], "origin": hit["origin"]} | (
        {"source_id": hit["source_id"], "speaker": turn.get("speaker"), "session": turn.get("session"),
         "session_date": turn.get("session_date")} if turn else {})
