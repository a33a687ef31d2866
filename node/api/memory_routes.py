"""Memory CRUD with history and namespaces on the local API (issue 14).

``GET /v1/crystals`` lists a namespace's current memories, ``PATCH
/v1/crystals/{id}`` writes a new version, ``DELETE /v1/crystals/{id}`` tombstones
the memory, ``POST /v1/crystals/{id}/lifespan`` pins or unpins it, ``GET
/v1/crystals/{id}/history`` returns every version and
transition, ``GET /v1/namespaces`` the namespaces in use. Like every ``/v1``
route they need the bearer token; bodies and queries are pydantic models.

Conversations (docs/memory.md): ``POST /v1/memory/conversations`` ingests a
conversation file sent base64 in the body (the node never opens a path a
request names; the body limit bounds the file to about 750 KiB, larger ones go
through ``memory ingest`` with the node stopped), ``GET
/v1/crystals/{id}/neighbours?window=N`` returns the turns around a turn's hit.

Session transcripts (docs/memory.md, "Sessions"): ``POST /v1/memory/transcripts`` takes
one chunk of a transcript's complete lines (base64, with the byte offset it starts at,
the file's fingerprint and where it ends) and answers what was stored and the node's
new ``offset``; ``GET /v1/memory/transcripts/cursor?transcript=...`` says where the node
stopped. The client reads the file itself (``ApiClient.memory_ingest_transcript``); a
chunk that does not continue where the node stopped is a 409 with nothing stored.
"""

from __future__ import annotations

import base64
import binascii
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from node.api.auth import require_auth
from node.api.interface import NodeApi
from node.api.models import NAMESPACE_PATTERN, Body
from node.crystals import AccessScope, SemanticType
from node.memory import MAX_TEXT_CHARS, ConversationRefused, TranscriptChunk, TranscriptRefused

Json = dict[str, Any]
Namespace = Annotated[str, Field(min_length=1, max_length=100, pattern=NAMESPACE_PATTERN)]


class UpdateIn(Body):
    """``PATCH /v1/crystals/{crystal_id}``: the new text and/or scope (a new version)."""

    text: Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS)] | None = None
    scope: AccessScope | None = None


class LifespanIn(Body):
    """``POST /v1/crystals/{crystal_id}/lifespan``: ``permanent`` pins the memory (it never
    expires by decay), ``decay`` unpins it."""

    lifespan: Literal["decay", "permanent"]


class MemoryListQuery(BaseModel):
    """``GET /v1/crystals`` query."""

    namespace: Namespace = "default"
    type: list[SemanticType] = []
    limit: Annotated[int, Field(ge=1, le=1000)] = 50


class ConversationIn(Body):
    """``POST /v1/memory/conversations``: a conversation file (JSON, JSONL or LoCoMo's shape), base64."""

    content_b64: Annotated[str, Field(min_length=1, max_length=2 * 1024 * 1024, pattern=r"^[A-Za-z0-9+/=]+$")]
    namespace: Namespace | None = None
    type: SemanticType = SemanticType.GENERAL


Transcript = Annotated[str, Field(min_length=1, max_length=4096)]
TranscriptFormat = Literal["claude-code", "codex", "messages"]


class TranscriptChunkIn(Body):
    """``POST /v1/memory/transcripts``: complete lines of a transcript from byte ``offset`` (base64)."""

    transcript: Transcript  # the file's absolute path on the client: a key, never opened here
    fingerprint: Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
    offset: Annotated[int, Field(ge=0)]
    end_offset: Annotated[int, Field(ge=0)]
    data_b64: Annotated[str, Field(max_length=2 * 1024 * 1024, pattern=r"^[A-Za-z0-9+/=]*$")]
    format: TranscriptFormat | None = None
    namespace: Namespace | None = None


class TranscriptCursorQuery(BaseModel):
    """``GET /v1/memory/transcripts/cursor`` query."""

    transcript: Transcript
    namespace: Namespace | None = None


class NeighboursQuery(BaseModel):
    """``GET /v1/crystals/{crystal_id}/neighbours`` query: turns either side of the hit."""

    window: Annotated[int, Field(ge=0, le=20)] = 2


def memory_router(node: NodeApi) -> APIRouter:
    router = APIRouter(prefix="/v1", dependencies=[Depends(require_auth)], tags=["memory"])

    @router.get("/crystals")
    async def list_memories(query: Annotated[MemoryListQuery, Query()]) -> Json:
        return {"crystals": await node.memory.list_memories(
            query.namespace, tuple(t.value for t in query.type), query.limit)}

    @router.patch("/crystals/{crystal_id}")
    async def update_memory(crystal_id: str, body: UpdateIn) -> Json:
        return await node.memory.update(crystal_id, body.model_dump(mode="json", exclude_none=True))

    @router.delete("/crystals/{crystal_id}")
    async def delete_memory(crystal_id: str) -> Json:
        return await node.memory.delete(crystal_id)

    @router.post("/crystals/{crystal_id}/lifespan")
    async def set_lifespan(crystal_id: str, body: LifespanIn) -> Json:
        return await node.memory.set_lifespan(crystal_id, body.lifespan)

    @router.get("/crystals/{crystal_id}/history")
    async def memory_history(crystal_id: str) -> Json:
        return await node.memory.history(crystal_id)

    @router.post("/memory/conversations")
    async def ingest_conversation(body: ConversationIn) -> Json:
        try:
            data = base64.b64decode(body.content_b64, validate=True)
        except binascii.Error as error:
            raise ConversationRefused(f"content_b64 is not base64: {error}") from error
        return await node.memory.ingest_conversation(data, body.namespace, body.type.value)

    @router.post("/memory/transcripts")
    async def ingest_transcript_chunk(body: TranscriptChunkIn) -> Json:
        try:
            data = base64.b64decode(body.data_b64, validate=True)
        except binascii.Error as error:
            raise TranscriptRefused(f"data_b64 is not base64: {error}") from error
        return await node.memory.ingest_transcript_chunk(TranscriptChunk(
            body.transcript, body.fingerprint, body.offset, data, body.end_offset, body.format, body.namespace))

    @router.get("/memory/transcripts/cursor")
    async def transcript_cursor(query: Annotated[TranscriptCursorQuery, Query()]) -> Json:
        return await node.memory.transcript_cursor(query.transcript, query.namespace)

    @router.get("/crystals/{crystal_id}/neighbours")
    async def neighbours(crystal_id: str, query: Annotated[NeighboursQuery, Query()]) -> Json:
        return await node.memory.neighbours(crystal_id, query.window)

    @router.get("/namespaces")
    async def namespaces() -> Json:
        return {"namespaces": await node.memory.namespaces()}

    return router
