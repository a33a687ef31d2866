"""The node's async face of memory that learns (seed 003/004): what the API routes call.

``node.service`` builds one over the node's ``memory`` (:class:`AsyncMemory`, one
worker thread at a time on the database) and ``identity`` (the node's Ed25519 key,
which signs testaments); the API's learning routes call it
(``node.api.interface.LearningApi``). Each operation is written once, as the plain
function of a :class:`Memory` above it that returns the JSON answer: the service runs it
with ``AsyncMemory.learn`` (the database's thread), the CLI without a node
(``node.cli.local.LocalNode``) calls it directly.
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


def feedback(memory: Memory, crystal_id: str, verdict: str) -> dict[str, Any]:
    """``memory feedback``: a retrieved crystal was useful (confidence up) or wrong (halved)."""
    return memory.learning.feedback(crystal_id, verdict)


def session_end(memory: Memory) -> dict[str, Any]:
    """``memory session end``: a session boundary (seed 004's energy tiers)."""
    return end_session(memory, memory.learning)


def testament_export(memory: Memory, identity: Identity) -> dict[str, Any]:
    """A signed testament of this node's knowledge, its bytes base64 in ``testament_b64``."""
    result = export_testament(memory, memory.learning, identity, None)
    data: bytes = result.pop("data")
    return result | {"testament_b64": base64.b64encode(data).decode("ascii")}


def testament_import(memory: Memory, testament_b64: str) -> dict[str, Any]:
    """A testament (base64) verified whole, then imported (:func:`import_testament`)."""
    try:
        data = base64.b64decode(testament_b64, validate=True)
    except (binascii.Error, ValueError) as error:
        raise TestamentRefused("testament refused: not base64") from error
    return import_testament(memory, memory.learning, data)


def budget(memory: Memory, query: str, budget_tokens: int, working_memory: str | None,
           sources: tuple[str, ...] = ()) -> dict[str, Any]:
    """Typed memory blocks for ``query`` within ``budget_tokens`` (seed 003's context assembly)."""
    return budget_context(memory, memory.learning, query, budget_tokens, working_memory,
                          sources=tuple(sources)).to_dict()


class LearningService:
    def __init__(self, memory: AsyncMemory, identity: Identity) -> None:
        self.memory = memory
        self.identity = identity

    async def feedback(self, crystal_id: str, verdict: str) -> dict[str, Any]:
        return await self.memory.learn(feedback, crystal_id, verdict)

    async def session_end(self) -> dict[str, Any]:
        return await self.memory.learn(session_end)

    async def testament_export(self) -> dict[str, Any]:
        return await self.memory.learn(testament_export, self.identity)

    async def testament_import(self, testament_b64: str) -> dict[str, Any]:
        return await self.memory.learn(testament_import, testament_b64)

    async def budget_context(self, query: str, budget_tokens: int, working_memory: str | None,
                             sources: tuple[str, ...] = ()) -> dict[str, Any]:
        return await self.memory.learn(budget, query, budget_tokens, working_memory, sources)
