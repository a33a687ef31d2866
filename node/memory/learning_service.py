"""The node's async face of memory that learns (seed 003/004): what the API routes call.

``NodeService`` mixes this in; it needs the service's ``memory``
(:class:`AsyncMemory`, one worker thread at a time on the database) and
``identity`` (the node's Ed25519 key, which signs testaments).
"""

from __future__ import annotations

import base64
import binascii
from typing import TYPE_CHECKING, Any

from node.memory.budget_context import budget_context
from node.memory.testament_io import TestamentRefused, export_testament, import_testament
from node.memory.tiers import end_session

if TYPE_CHECKING:
    from node.memory.async_memory import AsyncMemory
    from protocol.identity import Identity


class LearningServiceMixin:
    memory: AsyncMemory
    identity: Identity

    async def memory_feedback(self, crystal_id: str, verdict: str) -> dict[str, Any]:
        memory = self.memory.memory
        result: dict[str, Any] = await self.memory.run(memory.learning.feedback, crystal_id, verdict)
        return result

    async def memory_session_end(self) -> dict[str, Any]:
        memory = self.memory.memory
        return await self.memory.run(end_session, memory, memory.learning)

    async def testament_export(self) -> dict[str, Any]:
        memory = self.memory.memory
        result = await self.memory.run(export_testament, memory, memory.learning, self.identity, None)
        data: bytes = result.pop("data")
        return result | {"testament_b64": base64.b64encode(data).decode("ascii")}

    async def testament_import(self, testament_b64: str) -> dict[str, Any]:
        try:
            data = base64.b64decode(testament_b64, validate=True)
        except (binascii.Error, ValueError) as error:
            raise TestamentRefused("testament refused: not base64") from error
        memory = self.memory.memory
        return await self.memory.run(import_testament, memory, memory.learning, data)

    async def budget_context(self, query: str, budget_tokens: int, working_memory: str | None) -> dict[str, Any]:
        memory = self.memory.memory
        assembled = await self.memory.run(budget_context, memory, memory.learning, query, budget_tokens,
                                          working_memory)
        return assembled.to_dict()
