"""Routes of working memory (seed 001, docs/memory.md#working-memory): notes, dreams, context, crystallize."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel, ConfigDict, Field

from node.api import shapes
from node.api.auth import require_auth
from node.api.interface import NodeApi
from node.api.models import Body
from node.crystals import AccessScope, SemanticType
from node.memory import MAX_TEXT_CHARS

Json = dict[str, Any]
Namespace = Annotated[str, Field(min_length=1, max_length=100)]
MAX_VERSION_NAMESPACES = 64  # node.agent.mcp_subscriptions.MAX_WATCHED_NAMESPACES


class NoteIn(Body):
    """``POST /v1/memory/notes``: the seed's ``working_memory_note``."""

    text: Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS)]
    importance: Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)] = 0.7
    namespace: Namespace = "default"
    type: SemanticType | None = None
    scope: AccessScope | None = None
    lifespan: Literal["decay", "permanent"] | None = None


class DreamIn(Body):
    """``POST /v1/memory/dream``: one dream now (ignores ``min_chunks_for_dream``)."""

    namespace: Namespace = "default"


class ContextQuery(BaseModel):
    """``GET /v1/memory/context``: MEMORY.md + pending notes for a model's context window."""

    model_config = ConfigDict(extra="forbid")
    window: Annotated[int, Field(ge=1, le=10_000_000)] = 200_000
    namespace: Namespace = "default"


class StateQuery(BaseModel):
    """``GET /v1/memory/working``: MEMORY.md and the pending notes, each as stored."""

    model_config = ConfigDict(extra="forbid")
    namespace: Namespace = "default"


class ProposalsQuery(BaseModel):
    """``GET /v1/memory/directives/proposals``: directives a dream proposed."""

    model_config = ConfigDict(extra="forbid")
    namespace: Namespace = "default"
    status: Literal["pending", "adopted", "dismissed", "all"] = "pending"


class DecisionIn(Body):
    """``POST /v1/memory/directives/proposals/{id}``: the user's answer to one proposal."""

    adopt: bool
    namespace: Namespace = "default"


class VersionsQuery(BaseModel):
    """``GET /v1/memory/working/versions``: what a resource subscriber polls (MCP subscriptions)."""

    model_config = ConfigDict(extra="forbid")
    namespace: Annotated[list[Namespace], Field(min_length=1, max_length=MAX_VERSION_NAMESPACES)] = ["default"]
    skills: bool = False


class CrystallizeIn(Body):
    """``POST /v1/skills/{id}/crystallize``: an emerging skill into a skill crystal."""

    text: Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS)] | None = None
    category: Annotated[str, Field(min_length=1, max_length=64)] | None = None
    tags: Annotated[list[Annotated[str, Field(min_length=1, max_length=32)]], Field(max_length=16)] | None = None


def working_memory_router(node: NodeApi) -> APIRouter:
    router = APIRouter(prefix="/v1", dependencies=[Depends(require_auth)], tags=["working memory"])

    @router.post("/memory/notes", response_model=shapes.Note)
    async def note(body: NoteIn) -> Json:
        return await node.working.note(body.text, body.importance, body.namespace,
                                      body.type.value if body.type else None,
                                      body.scope.value if body.scope else None, body.lifespan)

    @router.post("/memory/dream")
    async def dream(body: DreamIn | None = None) -> Json:
        return await node.working.dream((body or DreamIn()).namespace)

    @router.get("/memory/context")
    async def context(query: Annotated[ContextQuery, Query()]) -> Json:
        return await node.working.context(query.window, query.namespace)

    @router.get("/memory/working")
    async def state(query: Annotated[StateQuery, Query()]) -> Json:
        return await node.working.state(query.namespace)

    @router.get("/memory/directives/proposals")
    async def proposals(query: Annotated[ProposalsQuery, Query()]) -> Json:
        return await node.working.proposals(query.namespace, query.status)

    @router.post("/memory/directives/proposals/{proposal_id}")
    async def decide(proposal_id: Annotated[str, Path(min_length=1, max_length=64)], body: DecisionIn) -> Json:
        return await node.working.decide_proposal(proposal_id, body.adopt, body.namespace)

    @router.get("/memory/working/versions")
    async def versions(query: Annotated[VersionsQuery, Query()]) -> Json:
        return await node.working.versions(query.namespace, query.skills)

    @router.post("/skills/{crystal_id}/crystallize", tags=["skills"])
    async def crystallize(crystal_id: str, body: CrystallizeIn | None = None) -> Json:
        fields = body or CrystallizeIn()
        return await node.working.crystallize_skill(crystal_id, fields.text, fields.category, fields.tags or [])

    return router
