"""A seller's live catalogue: periodic re-announcement, re-pricing and withdrawal.

- **Refresh.** Every listing this node sells (newest version, not withdrawn)
  is re-announced once its last announcement is ``market.listing_refresh_s``
  old: same listing id, a new envelope seq, a new ``expires_at_ms`` (now +
  ``listing_ttl_s``), the crystal's current execution stats and a fresh quote
  (unique buyers and bounty matches move the price). A listing whose node was
  offline past its expiry is announced again on the next sweep. At most
  ``MAX_PER_SWEEP`` announcements per sweep keep the seller under the skills
  topic's rate limit (10/min per origin).
- **Re-price.** ``reprice(listing_id, price)`` re-announces at once with a fixed
  price (kept on later refreshes) or, without a price, a fresh quote.
- **Withdraw.** ``withdraw(listing_id)`` gossips a signed ``listing_withdrawal``;
  receivers drop the listing and keep the withdrawal so it does not come back.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from node import metrics
from node.errors import NodeError
from node.market.book import WITHDRAWN_MARK, StoredListing
from node.market.selling.publish import Publisher
from protocol.liveness import ListingWithdrawal
from protocol.topics import SKILLS

log = logging.getLogger(__name__)

MAX_PER_SWEEP = 8
SWEEP_INTERVAL_S = 60.0
_OVERRIDE_KEY = "market.price_override."


class Catalogue:
    def __init__(self, publisher: Publisher) -> None:
        self.publisher = publisher
        self.db = publisher.listings.db

    def _own_current(self) -> list[StoredListing]:
        """Own listings still offered: newest version, not withdrawn (expired ones included)."""
        rows = self.db.execute(
            "SELECT listing_id FROM listings WHERE own_crystal_id IS NOT NULL "
            "AND superseded_by IS NULL ORDER BY issued_at_ms",
        ).fetchall()
        found = [self.publisher.listings.get(row[0]) for row in rows]
        return [item for item in found if item is not None]

    async def _own(self, listing_id: str) -> StoredListing:
        stored = await self.publisher.memory.run(self.publisher.listings.get, listing_id)
        if stored is None or stored.own_crystal_id is None:
            raise NodeError(f"{listing_id} is not a listing of this node")
        if stored.superseded_by is not None:
            raise NodeError(f"{listing_id} is {'withdrawn' if stored.superseded_by == WITHDRAWN_MARK else 'superseded by ' + stored.superseded_by}")
        return stored

    async def _reannounce(self, stored: StoredListing) -> dict[str, Any]:
        assert stored.own_crystal_id is not None
        crystal = await self.publisher.memory.get(stored.own_crystal_id)
        raw = await self.publisher.memory.run(
            self.db.get_meta, _OVERRIDE_KEY + stored.listing.listing_id)
        override = int(raw) if raw is not None else None
        return await self.publisher.announce(
            crystal, stored.listing.name, stored.listing.description, override)

    async def refresh_due(self) -> list[str]:
        """Re-announce own listings whose last announcement is older than the refresh period."""
        now = self.publisher.clock()
        refresh_ms = self.publisher.config.market.listing_refresh_s * 1000
        own = await self.publisher.memory.run(self._own_current)
        done: list[str] = []
        for stored in own:
            if len(done) >= MAX_PER_SWEEP:
                break
            if now - stored.issued_at_ms < refresh_ms and stored.listing.expires_at_ms > now:
                continue
            try:
                await self._reannounce(stored)
            except Exception as error:  # one crystal gone or a publish refused: keep sweeping
                log.warning("refresh failed listing=%s: %s", stored.listing.listing_id[:16], error)
                continue
            done.append(stored.listing.listing_id)
        if done:
            log.info("re-announced %d listings", len(done))
        return done

    async def reprice(self, listing_id: str, price_micro_usdc: int | None) -> dict[str, Any]:
        """Re-announce now at ``price_micro_usdc`` (kept on refreshes) or at a fresh quote."""
        stored = await self._own(listing_id)
        market = self.publisher.config.market
        key = _OVERRIDE_KEY + stored.listing.listing_id
        if price_micro_usdc is None:
            await self.publisher.memory.run(self._delete_meta, key)
        else:
            if not 0 <= price_micro_usdc <= market.max_price_micro_usdc:
                raise NodeError(f"price must be 0 … {market.max_price_micro_usdc} micro-USDC")
            await self.publisher.memory.run(self.db.set_meta, key, str(price_micro_usdc))
        return await self._reannounce(stored)

    def _delete_meta(self, key: str) -> None:
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM meta WHERE key=?", (key,))

    async def withdraw(self, listing_id: str) -> dict[str, Any]:
        stored = await self._own(listing_id)
        listing = stored.listing
        message = ListingWithdrawal(listing_id=listing.listing_id,
                                    stable_skill_id=listing.stable_skill_id,
                                    skill_version=listing.skill_version)
        envelope = await self.publisher.gossip_publish(SKILLS, message,
                                                       issued_at_ms=self.publisher.clock())
        metrics.GOSSIP_PUBLISHED.labels(topic=SKILLS).inc()
        await self.publisher.store_listing(envelope)
        await self.publisher.memory.run(self._delete_meta, _OVERRIDE_KEY + listing.listing_id)
        return {"listing_id": listing.listing_id, "withdrawn": True,
                "stable_skill_id": listing.stable_skill_id, "skill_version": listing.skill_version}

    async def run(self, interval_s: float = SWEEP_INTERVAL_S) -> None:
        """Refresh due listings and prune expired state, every ``interval_s``."""
        while True:
            await self.refresh_due()
            now = self.publisher.clock()
            await self.publisher.memory.run(self.publisher.lifecycle.prune, now)
            await self.publisher.memory.run(self.publisher.bounties.prune, now)
            await trio.sleep(interval_s)
