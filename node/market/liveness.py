"""The living market of one node: catalogue refresh, withdrawals, bounties, sync source.

``NodeService`` builds one ``MarketLiveness`` and hands the local API its
methods (``NodeApi.market_liveness``); the net layer gets ``sync_source`` to
answer ``/crystalmesh/<net>/listings-sync/2`` and ``/1`` and ``on_bounty`` for the bounties topic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from node.market.bounty_desk import BountyDesk, BuySkill
from node.market.desk import DeskParts
from node.market.selling import SWEEP_INTERVAL_S, Catalogue, Publisher
from node.net import NetService, SyncScope
from protocol.envelope import Envelope


class MarketLiveness:
    def __init__(self, publisher: Publisher, parts: DeskParts, buy: BuySkill,
                 sync_status: Callable[[], dict[str, Any]]) -> None:
        """``sync_status()``: the net's listings-sync status, for the API."""
        self.parts = parts
        self.catalogue = Catalogue(publisher, parts)
        self.desk = BountyDesk(publisher, parts, buy)
        self.sync_status = sync_status

    # --- net -----------------------------------------------------------------------------
    def attach(self, net: NetService) -> None:
        """Take bounties from the topic; answer listings sync from the feed and ask new peers."""
        net.on_bounty(self.on_bounty)
        net.serve_listings_sync(self.sync_source)

    async def sync_source(self, cursor: int, limit: int, max_bytes: int,
                          scope: SyncScope) -> tuple[list[bytes], int, bool]:
        """The newest live state after ``cursor``, for a peer's listings-sync request (version 2:
        with warnings and revocations, and only the listing shards the peer follows)."""
        feed = self.parts.lifecycle.feed
        return await self.parts.memory.run(feed.page, cursor, limit, max_bytes,
                                               self.parts.clock(), scope.notices,
                                               scope.shard_count, scope.shards)

    async def on_bounty(self, envelope: Envelope) -> None:
        await self.desk.on_bounty(envelope)

    async def run(self, interval_s: float = SWEEP_INTERVAL_S) -> None:
        await self.catalogue.run(interval_s)

    # --- API -----------------------------------------------------------------------------
    async def reprice(self, listing_id: str, price_micro_usdc: int | None) -> dict[str, Any]:
        return await self.catalogue.reprice(listing_id, price_micro_usdc)

    async def withdraw(self, listing_id: str) -> dict[str, Any]:
        return await self.catalogue.withdraw(listing_id)

    async def publish_skills(self, crystal_ids: Sequence[str] | None,
                             limit: int) -> dict[str, Any]:
        """``crystal_ids``, or (None) every listable skill never listed, ``limit`` at a time."""
        wanted = list(crystal_ids) if crystal_ids is not None else await self.catalogue.unlisted()
        result = await self.catalogue.publish(wanted[:limit])
        return result | {"remaining": max(0, len(wanted) - limit)}

    async def refresh(self) -> dict[str, Any]:
        return {"refreshed": await self.catalogue.refresh_due()}

    async def post_bounty(self, text: str, reward_micro_usdc: int,
                          ttl_s: int | None = None) -> dict[str, Any]:
        return await self.desk.post(text, reward_micro_usdc, ttl_s)

    async def bounties(self, include_closed: bool = True) -> list[dict[str, Any]]:
        return await self.desk.list(include_closed)

    async def bounty(self, bounty_id: str) -> dict[str, Any]:
        return await self.desk.show(bounty_id)

    async def fulfil_bounty(self, bounty_id: str, listing_id: str | None) -> dict[str, Any]:
        return await self.desk.fulfil(bounty_id, listing_id)

    def sync(self) -> dict[str, Any]:
        return self.sync_status()
