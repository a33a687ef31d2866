"""The node's async face of memory that learns (seed 003/004): what the API routes call.

``node.service`` builds one over the node's ``memory`` (:class:`AsyncMemory`, one
worker thread at a time on the database) and ``identity`` (the node's Ed25519 key,
which signs testaments); the API's learning routes call it
(``node.api.interface.LearningApi``). Each operation
is a plain function of a :class:`Memory`, run by ``AsyncMemory.learn``.
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING, Any

from node.memory.learning import (
    TestamentRefused,
    budget_context,
    end_session,
    export_testament,
    import_testament,
)

if TYPE_CHECKING:
    from node.memory.async_memory import AsyncMemory
    from node.memory.facade import Memory
    from protocol.identity import Identity


def _feedback(memory: Memory, crystal_id: str, verdict: str) -> dict[str, Any]:
    return memory.learning.feedback(crystal_id, verdict)


def _session_end(memory: Memory) -> dict[str, Any]:
    return end_session(memory, memory.learning)


def _export(memory: Memory, identity: Identity) -> dict[str, Any]:
    return export_testament(memory, memory.learning, identity, None)


def _import(memory: Memory, data: bytes) -> dict[str, Any]:
    return import_testament(memory, memory.learning, data)


def _budget(memory: Memory, query: str, budget_tokens: int, working_memory: str | None,
            sources: tuple[str, ...] = ()) -> dict[str, Any]:
    return budget_context(memory, memory.learning, query, budget_tokens, working_memory,
                          sources=sources).to_dict()


class LearningService:
    def __init__(self, memory: AsyncMemory, identity: Identity) -> None:
        self.memory = memory
        self.identity = identity

    async def feedback(self, crystal_id: str, verdict: str) -> dict[str, Any]:
        return await self.memory.learn(_feedback, crystal_id, verdict)

    async def session_end(self) -> dict[str, Any]:
        return await self.memory.learn(_session_end)

    async def testament_export(self) -> dict[str, Any]:
        result = await self.memory.learn(_export, self.identity)
        data: bytes = result.pop("data")
        return result | {"testament_b64": base64.b64encode(data).decode("ascii")}

    async def testament_import(self, testament_b64: str) -> dict[str, Any]:
        try:
            data = base64.b64decode(testament_b64, validate=True)
        except (binascii.Error, ValueError) as error:
            raise TestamentRefused("testament refused: not base64") from error
        return await self.memory.learn(_import, data)

    async def budget_context(self, query: str, budget_tokens: int, working_memory: str | None,
                             sources: tuple[str, ...] = ()) -> dict[str, Any]:
        return await self.memory.learn(_budget, query, budget_tokens, working_memory, sources)
