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
from node.memory import MAX_TEXT_CHARS, ConversationRefused

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

    @router.get("/crystals/{crystal_id}/neighbours")
    async def neighbours(crystal_id: str, query: Annotated[NeighboursQuery, Query()]) -> Json:
        return await node.memory.neighbours(crystal_id, query.window)

    @router.get("/namespaces")
    async def namespaces() -> Json:
        return {"namespaces": await node.memory.namespaces()}

    return router
