"""Memory CRUD with history and namespaces on the local API (issue 14).

``GET /v1/crystals`` lists a namespace's current memories, ``PATCH
/v1/crystals/{id}`` writes a new version, ``DELETE /v1/crystals/{id}`` tombstones
the memory, ``GET /v1/crystals/{id}/history`` returns every version and
transition, ``GET /v1/namespaces`` the namespaces in use. Like every ``/v1``
route they need the bearer token; bodies and queries are pydantic models.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query
from pydantic import BaseModel, Field

from node.api.auth import require_auth
from node.api.interface import NodeApi
from node.api.models import NAMESPACE_PATTERN, Body
from node.crystals import AccessScope, SemanticType
from node.memory import MAX_TEXT_CHARS

Json = dict[str, Any]
Namespace = Annotated[str, Field(min_length=1, max_length=100, pattern=NAMESPACE_PATTERN)]


class UpdateIn(Body):
    """``PATCH /v1/crystals/{crystal_id}``: the new text and/or scope (a new version)."""

    text: Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS)] | None = None
    scope: AccessScope | None = None


class MemoryListQuery(BaseModel):
    """``GET /v1/crystals`` query."""

    namespace: Namespace = "default"
    type: list[SemanticType] = []
    limit: Annotated[int, Field(ge=1, le=1000)] = 50


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

    @router.get("/crystals/{crystal_id}/history")
    async def memory_history(crystal_id: str) -> Json:
        return await node.memory.history(crystal_id)

    @router.get("/namespaces")
    async def namespaces() -> Json:
        return {"namespaces": await node.memory.namespaces()}

    return router
