"""MCP tools of working memory (seed 001): the prompt context, an on-demand dream, the
directives a dream proposed, and an emerging skill crystallized into a skill memory.

Notes go through ``memory_add`` (the seed's ``working_memory_note``: one tool,
registered in :mod:`node.agent.mcp_memory`). Each tool is one call of the node's typed client.
"""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

from node.agent.mcp_common import Call, offer, path_segment
from node.agent.mcp_progress import HEARTBEAT_S, Progress
from protocol.skill_bundle import MAX_BUNDLE_BYTES

Importance = Annotated[float, Field(ge=0.0, le=1.0, description="How much it matters, 0-1.")]
MAX_NOTE_CHARS = 4000  # node.memory.working.scratch.MAX_NOTE_CHARS
DEFAULT_NOTE_IMPORTANCE = 0.7  # node.memory.working.scratch.DEFAULT_IMPORTANCE (seed 001)
Namespace = Annotated[str, Field(min_length=1, max_length=100,
                                 description='Whose working memory: "default", "agent:<role>", ...')]


def as_working_note(body: dict[str, Any]) -> bool:
    """Whether ``memory_add`` stores this as a working-memory note: an observation (not a
    skill or task pattern, no TTL) short enough to be one scratch line."""
    return (body.get("type") not in ("skill", "task_pattern") and "ttl_ms" not in body
            and len(str(body.get("text", ""))) <= MAX_NOTE_CHARS)


async def add_working_note(call: Call, body: dict[str, Any], importance: float) -> dict[str, Any]:
    """The seed's ``working_memory_note``: durable in the scratch at once, and a searchable crystal."""
    note = await call(lambda client: client.memory_note(
        body["text"], importance, body["namespace"], body.get("type"), body.get("scope"),
        body.get("lifespan")))
    outcome = {"indexed": "created", "exists": "exists"}.get(note.get("crystal"), "pending")
    return {"id": note.get("crystal_id"), "outcome": outcome, "namespace": note.get("namespace"),
            "type": body.get("type"), "scope": body.get("scope"), "note_id": note.get("id"),
            "importance": note.get("importance"), "at": note.get("at")} | (
                {"differs": note["differs"]} if note.get("differs") else {})


class WorkingTools:
    """Working memory's tools, one method each (what an agent sees is each method's signature and docstring)."""

    def __init__(self, call: Call, heartbeat_s: float = HEARTBEAT_S) -> None:
        self.call = call
        self.heartbeat_s = heartbeat_s

    async def memory_context(
        self,
        window_tokens: Annotated[int, Field(ge=1, le=10_000_000,
                                            description="The model's context window, in tokens.")] = 200_000,
        namespace: Namespace = "default",
    ) -> dict[str, Any]:
        """The agent's working memory for its system prompt: MEMORY.md (who the user is, what is
        going on, pointers to search for older topics) and the notes not yet consolidated,
        sized for the context window. Read it at the start of a session."""
        result: dict[str, Any] = await self.call(lambda client: client.memory_context(window_tokens, namespace))
        return result

    async def memory_dream(self, ctx: Context[Any, Any], namespace: Namespace = "default") -> dict[str, Any]:
        """Consolidate now: rewrite MEMORY.md from the old state, the pending notes and new
        memories (normally automatic every two hours). Returns whether it was written or
        refused, and the crystal pointers it made. Reports progress (with a heartbeat while
        the node dreams, which may wait for an LLM) to a client that asks for it."""
        progress = Progress(ctx, total=2, heartbeat_s=self.heartbeat_s)
        await progress.step(0, f"dreaming in {namespace}: reading MEMORY.md, the notes and new memories")
        result: dict[str, Any] = await progress.during(
            lambda: self.call(lambda client: client.memory_dream(namespace)), "dreaming")
        outcome = result.get("status") or "done"
        reason = result.get("reason")
        await progress.step(2, f"dream {outcome}" + (f": {reason}" if reason else ""))
        return result

    async def memory_directive_proposals(self, namespace: Namespace = "default") -> dict[str, Any]:
        """Directives a dream proposed from what the user said (read-only, costs nothing). They
        are NOT in force: ask the user, and only they adopt one, with
        `crystalmesh memory directives confirm <id>` (or dismiss it with `... dismiss <id>`).
        If the user tells you plainly to always do something, store it with memory_add
        type "directive" instead."""
        result: dict[str, Any] = await self.call(lambda client: client.directive_proposals(namespace))
        return result

    async def skill_crystallize(
        self,
        crystal_id: Annotated[str, Field(min_length=1, max_length=128, description=(
            "Id of an emerging skill (a task pattern listed under Emerging Skills in MEMORY.md)."))],
        text: Annotated[str | None, Field(min_length=1, max_length=MAX_BUNDLE_BYTES, description=(
            "The skill's instructions (default: the pattern's text).")) ] = None,
        category: Annotated[str | None, Field(min_length=1, max_length=64)] = None,
        tags: Annotated[list[Annotated[str, Field(min_length=1, max_length=32)]] | None,
                        Field(max_length=16)] = None,
    ) -> dict[str, Any]:
        """Turn an emerging skill (a pattern you keep repeating) into a skill memory you can run,
        record and later sell. Costs nothing: a local write. Call it when MEMORY.md lists an
        Emerging Skill you use; then record its runs with skill_record_execution."""
        segment = path_segment(crystal_id)
        crystal: dict[str, Any] = await self.call(
            lambda client: client.crystallize_skill(segment, text, category, tags or ()))
        return {"id": crystal["id"], "type": crystal.get("semanticType"),
                "executions": crystal.get("executions"), "successes": crystal.get("successes")}


def register_working_tools(server: MCPServer[Any], call: Call, heartbeat_s: float = HEARTBEAT_S) -> None:
    offer(server, WorkingTools(call, heartbeat_s))
