"""Listing shards: listings travel on the shard topic of their category, not to every node.

With ``net.listing_shards = S`` (a power of two; 0 keeps today's single
``/1/skills`` topic), a skill listing is gossiped on
``/crystalmesh/<net>/1/listings/<S>/<H(category) mod S>`` (``protocol.topics``)
and a node subscribes to the shards of the categories it follows
(``market.interests``, ``"*"`` for all) plus those it sells in (joined when it
first publishes there). What reaches a node is then the listing traffic of its
shards, not the network's: docs/protocol.md, "Listings that do not flood".

Validation is the skills topic's (``Gossip.carry``: the same path, unchanged) plus
one rule of the shard: a ``skill_listing`` whose category does not hash to the shard it
arrived on is rejected (``wrong_shard``: its origin signed a category and chose the
wrong topic for it, or a relay moved it). Withdrawals, endorsements and
catalogue batches carry no category of their own; the publisher puts them on the
shard of the listing they refer to (known from our own publishes and the
listings we accepted), and on ``/1/skills`` when it knows none.

Transition: every node keeps reading ``/1/skills`` (old nodes publish there) and
accepts what arrives there as before; with ``legacy_publish`` it also publishes
there, for a network where old nodes still need its listings by gossip.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Callable, Iterable
from typing import Any

import trio

from node.net.gossip import Gossip
from protocol.envelope import Envelope, InvalidEnvelope, open_envelope, seal
from protocol.liveness import ListingBatch
from protocol.messages import SkillListing
from protocol.topics import SKILLS, TOPIC_KINDS, check_shards, listing_shard, listings_topic

logger = logging.getLogger(__name__)

WRONG_SHARD = "wrong_shard"
ALL_SHARDS = "*"


class ListingShards:
    """Shard subscriptions, the shard rule and shard routing of our own listings."""

    def __init__(self, gossip: Gossip, shards: int, interests: Iterable[str] = (ALL_SHARDS,),
                 legacy_publish: bool = False, remembered: int = 65_536,
                 advertise: Callable[[list[str]], Any] | None = None) -> None:
        """``advertise``: called with the category and tags of each listing we publish (DHT
        provider records), if the node keeps them."""
        self.gossip = gossip
        self.shards = check_shards(shards)
        self.legacy_publish = legacy_publish
        interests = tuple(interests)
        self.follows: set[int] = (set(range(shards)) if ALL_SHARDS in interests
                                  else {listing_shard(c, shards) for c in interests})
        self.joined: set[int] = set()
        # listing_id -> category, for the withdrawals and endorsements that name only the id.
        self._categories: OrderedDict[str, str] = OrderedDict()
        self._remembered = remembered
        self._nursery: trio.Nursery | None = None
        self._join_lock = trio.Lock()
        self.advertise = advertise
        for shard in range(shards):
            gossip.carry(self.topic(shard), SKILLS, self._rule_for(shard))
        gossip.on(SKILLS, self._remember)

    def topic(self, shard: int) -> str:
        return listings_topic(shard, self.shards)

    def wire_topic(self, shard: int) -> str:
        return self.gossip.wire_topic(self.topic(shard))

    def wire_topics(self) -> frozenset[str]:
        """Every shard's wire topic: peers' subscriptions to any of them are tracked."""
        return frozenset(self.wire_topic(shard) for shard in range(self.shards))

    def shard_of(self, category: str) -> int:
        return listing_shard(category, self.shards)

    # ------------------------------------------------------------------ subscriptions
    async def run(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for shard in sorted(self.follows):
                await self.join(shard)
            task_status.started()

    async def join(self, shard: int) -> None:
        """Subscribe to ``shard`` (idempotent); its listings go to the skills handlers."""
        async with self._join_lock:
            if shard in self.joined or self._nursery is None:
                return
            await self._nursery.start(self.gossip.follow, self.topic(shard), SKILLS)
            self.joined.add(shard)

    # ------------------------------------------------------------------ validation
    def _rule_for(self, shard: int) -> Callable[[Envelope], InvalidEnvelope | None]:
        def on_its_shard(envelope: Envelope) -> InvalidEnvelope | None:
            if envelope.kind != SkillListing.KIND:
                return None
            category = envelope.body.get("category", "")
            if self.shard_of(category) == shard:
                return None
            return InvalidEnvelope(WRONG_SHARD, f"category {category!r} is not on shard {shard}",
                                   envelope.sender)

        return on_its_shard

    async def _remember(self, envelope: Envelope) -> None:
        if envelope.kind == SkillListing.KIND:
            self.remember(envelope.body["listing_id"], envelope.body["category"])

    def remember(self, listing_id: str, category: str) -> None:
        self._categories[listing_id] = category
        self._categories.move_to_end(listing_id)
        while len(self._categories) > self._remembered:
            self._categories.popitem(last=False)

    # ------------------------------------------------------------------ publishing
    async def publish(self, message: Any, issued_at_ms: int | None = None) -> Envelope:
        """Gossip a skills-topic message on its shard(s) (see the module docstring)."""
        if message.KIND not in TOPIC_KINDS[SKILLS]:
            raise ValueError(f"kind {message.KIND!r} is not a listing message")
        if isinstance(message, ListingBatch):
            return await self._publish_batch(message)
        if isinstance(message, SkillListing):
            self.remember(message.listing_id, message.category)
            self._advertise(message.category, message.tags)
            shards = [self.shard_of(message.category)]
        else:
            category = self._categories.get(getattr(message, "listing_id", ""))
            shards = [] if category is None else [self.shard_of(category)]
        if issued_at_ms is None:
            issued_at_ms = self.gossip.validator.now_ms()
        data = seal(self.gossip.identity, message.KIND, message, self.gossip.sequence.next(),
                    issued_at_ms)
        return await self._publish_on(shards, data)

    def _advertise(self, category: str, tags: Iterable[str]) -> None:
        if self.advertise is not None:
            self.advertise([category, *list(tags)[:4]])

    async def _publish_on(self, shards: list[int], data: bytes) -> Envelope:
        envelope: Envelope | None = None
        for shard in shards:
            await self.join(shard)  # a seller follows the shards it sells in
            envelope = await self.gossip.publish_sealed(self.topic(shard), data)
        if not shards or self.legacy_publish:
            envelope = await self.gossip.publish_sealed(SKILLS, data)
        assert envelope is not None
        return envelope

    async def _publish_batch(self, batch: ListingBatch) -> Envelope:
        """One batch per shard its entries fall on (entries are our own sealed envelopes)."""
        groups: dict[int | None, list[bytes]] = {}
        for entry in batch.entries:
            shard: int | None = None
            try:
                opened = open_envelope(entry, self.gossip.validator.max_message_bytes)
            except InvalidEnvelope:
                opened = None
            if opened is not None and opened.kind == SkillListing.KIND:
                self.remember(opened.body["listing_id"], opened.body["category"])
                self._advertise(opened.body["category"], opened.body.get("tags", ()))
                shard = self.shard_of(opened.body["category"])
            elif opened is not None:
                category = self._categories.get(opened.body.get("listing_id", ""))
                shard = None if category is None else self.shard_of(category)
            groups.setdefault(shard, []).append(entry)
        first: Envelope | None = None
        for shard, entries in groups.items():
            part = ListingBatch(entries=tuple(entries))
            data = seal(self.gossip.identity, part.KIND, part, self.gossip.sequence.next(),
                        self.gossip.validator.now_ms())
            envelope = await self._publish_on([] if shard is None else [shard], data)
            first = first or envelope
        assert first is not None
        return first
