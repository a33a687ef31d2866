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
- **Publish a catalogue.** ``publish(crystal_ids)`` lists many skills at once
  (``skill publish --all`` takes ``unlisted()``): one signed ``listing_batch``
  per 60 kB of listings (about 80), so 200 skills are 3 messages against the
  origin's rate limit (10/min, burst 30) instead of 200; the entries count against the
  origin's catalogue budget (burst 512). Why a batch and not a paced queue:
  paced at 10/min, 200 skills would take 17 minutes to announce; a batch
  reaches every node in one gossip round, every entry stays a listing signed
  on its own (stored and re-served by sync as if gossiped alone), and nodes
  that join later get the catalogue through listings sync.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import trio

from node import metrics
from node.crystals import KNOWLEDGE_TYPES
from node.errors import CrystalmeshError, NodeError
from node.market.book import WITHDRAWN_MARK, StoredListing
from node.market.desk import DeskParts
from node.market.selling.gates import NotListable, check_listable
from node.market.selling.publish import Draft, Publisher, listing_name_and_summary
from protocol.envelope import InvalidEnvelope, open_envelope, seal
from protocol.liveness import MAX_BATCH_BYTES, MAX_BATCH_ITEMS, ListingWithdrawal
from protocol.messages import ListingBatch, SkillListing
from protocol.topics import SKILLS

log = logging.getLogger(__name__)

MAX_PER_SWEEP = 8
SWEEP_INTERVAL_S = 60.0
_OVERRIDE_KEY = "market.price_override."


class Catalogue:
    def __init__(self, publisher: Publisher, parts: DeskParts) -> None:
        """Publishes through ``publisher`` (drafts, announcements, the book's state)."""
        self.publisher = publisher
        self.parts = parts
        self.db = parts.listings.db

    async def publish(self, crystal_ids: Sequence[str]) -> dict[str, Any]:
        """Publish many skills as a catalogue: each listing signed on its own, carried to the
        network in as few signed ``listing_batch`` messages as fit (128 listings or 60 kB
        each), so a catalogue of hundreds stays under the origin's rate limit.

        A skill that may not be listed is reported in ``failed`` and the others go on. If
        the network refuses a batch (this node's own validator: the catalogue budget), its
        listings and the rest are reported failed, nothing of them stored."""
        failed: list[dict[str, str]] = []
        drafts: list[tuple[str, Draft, bytes]] = []
        for crystal_id in dict.fromkeys(crystal_ids):
            try:
                crystal = await self.parts.memory.get(crystal_id)
                name, summary = listing_name_and_summary(crystal, None, None)
                check_listable(crystal, min_executions=self.parts.config.market.min_executions,
                               min_success_rate=self.parts.config.market.min_success_rate)
                crystal = await self.parts.memory.ensure_stable_skill_id(crystal.id)
                draft = await self.publisher.draft(crystal, name, summary, None)
            except CrystalmeshError as error:
                failed.append({"crystal_id": crystal_id, "error": str(error)})
                continue
            data = seal(self.parts.identity, SkillListing.KIND, draft.listing, self.parts.next_seq(),
                        draft.issued_at_ms)
            drafts.append((crystal.id, draft, data))
        published: list[dict[str, Any]] = []
        batches = 0
        for chunk in _chunks(drafts):
            try:
                await self.parts.gossip_publish(SKILLS, ListingBatch(entries=tuple(d for _, _, d in chunk)))
            except InvalidEnvelope as error:
                failed.extend({"crystal_id": crystal_id, "error": f"not announced: {error}"}
                              for crystal_id, _, _ in drafts[len(published):])
                break
            batches += 1
            metrics.GOSSIP_PUBLISHED.labels(topic=SKILLS).inc()
            for crystal_id, draft, data in chunk:
                await self.publisher.store_listing(open_envelope(data), own_crystal_id=crystal_id)
                published.append(draft.result(None))
        return {"published": published, "failed": failed, "batches": batches}

    async def unlisted(self, limit: int = 1000) -> list[str]:
        """Ids of this node's current skill and task-pattern crystals, in every namespace,
        that pass the listing gates and were never listed (a withdrawn skill stays
        withdrawn): what ``skill publish --all`` publishes."""
        memory = self.parts.memory
        market = self.parts.config.market
        types = tuple(kind.value for kind in KNOWLEDGE_TYPES)
        found: list[str] = []
        for namespace in await memory.namespaces():
            for item in await memory.list_memories(namespace["namespace"], types, limit):
                crystal = await memory.get(item["id"])
                try:
                    check_listable(crystal, market.min_executions, market.min_success_rate)
                except NotListable:
                    continue
                if not await memory.run(self._ever_listed, crystal.id):
                    found.append(crystal.id)
        return found[:limit]

    def _ever_listed(self, crystal_id: str) -> bool:
        return self.db.execute("SELECT 1 FROM listings WHERE own_crystal_id=? LIMIT 1",
                               (crystal_id,)).fetchone() is not None

    def _own_current(self) -> list[StoredListing]:
        """Own listings still offered: newest version, not withdrawn (expired ones included)."""
        rows = self.db.execute(
            "SELECT listing_id FROM listings WHERE own_crystal_id IS NOT NULL "
            "AND superseded_by IS NULL ORDER BY issued_at_ms",
        ).fetchall()
        found = [self.parts.listings.get(row[0]) for row in rows]
        return [item for item in found if item is not None]

    async def _own(self, listing_id: str) -> StoredListing:
        stored = await self.parts.memory.run(self.parts.listings.get, listing_id)
        if stored is None or stored.own_crystal_id is None:
            raise NodeError(f"{listing_id} is not a listing of this node")
        if stored.superseded_by is not None:
            raise NodeError(f"{listing_id} is {'withdrawn' if stored.superseded_by == WITHDRAWN_MARK else 'superseded by ' + stored.superseded_by}")
        return stored

    async def _reannounce(self, stored: StoredListing) -> dict[str, Any]:
        assert stored.own_crystal_id is not None
        crystal = await self.parts.memory.get(stored.own_crystal_id)
        raw = await self.parts.memory.run(
            self.db.get_meta, _OVERRIDE_KEY + stored.listing.listing_id)
        override = int(raw) if raw is not None else None
        return await self.publisher.announce(
            crystal, stored.listing.name, stored.listing.description, override)

    async def refresh_due(self) -> list[str]:
        """Re-announce own listings whose last announcement is older than the refresh period."""
        now = self.parts.clock()
        refresh_ms = self.parts.config.market.listing_refresh_s * 1000
        own = await self.parts.memory.run(self._own_current)
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
        market = self.parts.config.market
        key = _OVERRIDE_KEY + stored.listing.listing_id
        if price_micro_usdc is None:
            await self.parts.memory.run(self._delete_meta, key)
        else:
            if not 0 <= price_micro_usdc <= market.max_price_micro_usdc:
                raise NodeError(f"price must be 0 … {market.max_price_micro_usdc} micro-USDC")
            await self.parts.memory.run(self.db.set_meta, key, str(price_micro_usdc))
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
        envelope = await self.parts.gossip_publish(SKILLS, message,
                                                       issued_at_ms=self.parts.clock())
        metrics.GOSSIP_PUBLISHED.labels(topic=SKILLS).inc()
        await self.publisher.store_listing(envelope)
        await self.parts.memory.run(self._delete_meta, _OVERRIDE_KEY + listing.listing_id)
        return {"listing_id": listing.listing_id, "withdrawn": True,
                "stable_skill_id": listing.stable_skill_id, "skill_version": listing.skill_version}

    async def run(self, interval_s: float = SWEEP_INTERVAL_S) -> None:
        """Refresh due listings and prune expired state, every ``interval_s``."""
        while True:
            await self.refresh_due()
            now = self.parts.clock()
            await self.parts.memory.run(self.parts.lifecycle.prune, now)
            await self.parts.memory.run(self.parts.bounties.prune, now)
            await trio.sleep(interval_s)


def _chunks(drafts: list[tuple[str, Draft, bytes]]) -> list[list[tuple[str, Draft, bytes]]]:
    """Batches of at most ``MAX_BATCH_ITEMS`` entries and ``MAX_BATCH_BYTES`` bytes."""
    chunks: list[list[tuple[str, Draft, bytes]]] = []
    size = 0
    for item in drafts:
        if not chunks or len(chunks[-1]) >= MAX_BATCH_ITEMS or \
                size + len(item[2]) > MAX_BATCH_BYTES:
            chunks.append([])
            size = 0
        chunks[-1].append(item)
        size += len(item[2])
    return chunks
