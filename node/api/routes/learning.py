"""Routes of memory that learns (seed 003/004, docs/memory.md): feedback, session end, testament, budget.

Testament bytes travel base64 inside the JSON body, so the node never opens a
path a request names; the API's body limit bounds what can be imported
through a running node (larger testaments: ``memory import --testament`` with
the node stopped).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends
from pydantic import Field

from node.api.auth import require_auth
from node.api.interface import NodeApi
from node.api.models import Body
from node.crystals import Source
from node.memory import MAX_TEXT_CHARS

Json = dict[str, Any]


class FeedbackIn(Body):
    """``POST /v1/memory/feedback``: was a retrieved crystal useful or wrong?"""

    id: Annotated[str, Field(min_length=1, max_length=64)]
    verdict: Literal["useful", "wrong"]


class TestamentIn(Body):
    """``POST /v1/memory/testament/import``: a testament file, base64."""

    __test__ = False
    testament_b64: Annotated[str, Field(min_length=1, max_length=2 * 1024 * 1024, pattern=r"^[A-Za-z0-9+/=]+$")]


class BudgetContextIn(Body):
    """``POST /v1/memory/context/budget``: typed blocks for ``query`` within ``budget_tokens``."""

    query: Annotated[str, Field(min_length=1, max_length=4096, pattern=r"\S")]
    budget_tokens: Annotated[int, Field(strict=True, ge=0, le=1_000_000)]
    working_memory: Annotated[str, Field(max_length=MAX_TEXT_CHARS)] | None = None
    sources: Annotated[list[Source], Field(default_factory=list, max_length=8)]  # empty: every source


def learning_router(node: NodeApi) -> APIRouter:
    router = APIRouter(prefix="/v1/memory", dependencies=[Depends(require_auth)], tags=["memory"])

    @router.post("/feedback")
    async def feedback(body: FeedbackIn) -> Json:
        return await node.learning.feedback(body.id, body.verdict)

    @router.post("/session/end")
    async def session_end() -> Json:
        return await node.learning.session_end()

    @router.post("/testament/export")
    async def testament_export() -> Json:
        return await node.learning.testament_export()

    @router.post("/testament/import")
    async def testament_import(body: TestamentIn) -> Json:
        return await node.learning.testament_import(body.testament_b64)

    @router.post("/context/budget")
    async def budget_context(body: BudgetContextIn) -> Json:
        return await node.learning.budget_context(body.query, body.budget_tokens, body.working_memory,
                                                  tuple(source.value for source in body.sources))

    return router
