"""The memory-record part of the node's API surface (``node.api.interface.NodeApi``).

Mixed into ``NodeService``: add with an outcome, update, delete, history, list and
namespaces, each one call into :class:`AsyncMemory` (and so into
``node.memory.versions`` on the database's thread). Kept here so the service
module stays wiring only.
"""

from __future__ import annotations

from typing import Any

from node.memory.async_memory import AsyncMemory


class MemoryRecordsApi:
    memory: AsyncMemory

    async def add_memory(self, body: dict[str, Any]) -> dict[str, Any]:
        return await self.memory.add_with_outcome(body)

    async def update_memory(self, crystal_id: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self.memory.update(crystal_id, body)

    async def delete_memory(self, crystal_id: str) -> dict[str, Any]:
        return await self.memory.delete(crystal_id)

    async def memory_history(self, crystal_id: str) -> dict[str, Any]:
        return await self.memory.history(crystal_id)

    async def list_memories(self, namespace: str | None, types: tuple[str, ...],
                            limit: int) -> list[dict[str, Any]]:
        return await self.memory.list_memories(namespace, types, limit)

    async def namespaces(self) -> list[dict[str, Any]]:
        return await self.memory.namespaces()
