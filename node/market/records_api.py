"""The market's read-only part of the node's API surface (``node.api.interface.NodeApi``).

Mixed into ``NodeService`` beside ``node.memory.records_api.MemoryRecordsApi``: the
economics ledger and the node's own listings, each one read on the database's
writer. Kept here so the service module stays wiring only.
"""

from __future__ import annotations

from typing import Any

from node.market.book.listings import ListingBook
from node.market.ledger import MarketLedger
from node.memory.async_memory import AsyncMemory


class MarketRecordsApi:
    memory: AsyncMemory
    ledger: MarketLedger
    listings: ListingBook

    async def purchases(self, limit: int) -> list[dict[str, Any]]:
        return [item.to_dict() for item in await self.memory.run(self.ledger.purchases, limit)]

    async def sales(self, limit: int) -> list[dict[str, Any]]:
        return [item.to_dict() for item in await self.memory.run(self.ledger.sales, limit)]

    async def own_skills(self) -> list[dict[str, Any]]:
        own = await self.memory.run(self.listings.own)
        return [item.to_dict() | {"crystal_id": item.own_crystal_id} for item in own]

    async def market_stats(self) -> dict[str, Any]:
        return await self.memory.run(self.ledger.stats)
