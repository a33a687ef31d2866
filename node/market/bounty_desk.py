"""Post, receive, match and fulfil bounties (see ``node.market.book.bounties``).

``crystalmesh bounty post "need: a skill that ..." --reward 0.05`` gossips a
signed bounty on ``/crystalmesh/1/bounties``; every node stores it, and
sellers whose listings match it by meaning count it in their price
(``Publisher.bounty_matches``). ``bounty fulfil`` buys the best-matching live
listing priced at most the reward and re-announces the bounty as fulfilled,
so it stops counting everywhere.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import numpy as np

from node import metrics
from node.errors import NodeError
from node.market.book import ACCEPT, StoredBounty
from node.market.desk import DeskParts
from node.market.intake import GOSSIP_WINDOW_MS
from node.market.selling import Publisher
from protocol.envelope import Envelope
from protocol.liveness import Bounty
from protocol.messages import new_request_id
from protocol.topics import BOUNTIES

log = logging.getLogger(__name__)

BuySkill = Callable[[str, int | None], Awaitable[dict[str, Any]]]


class BountyDesk:
    def __init__(self, publisher: Publisher, parts: DeskParts, buy: BuySkill) -> None:
        """``publisher.admitted`` is the intake's trust gate, for bounties as for listings."""
        self.publisher = publisher
        self.parts = parts
        self.board = parts.bounties
        self.memory = parts.memory
        self.buy = buy

    async def post(self, text: str, reward_micro_usdc: int,
                   ttl_s: int | None = None) -> dict[str, Any]:
        market = self.parts.config.market
        if not 0 <= reward_micro_usdc <= market.max_per_purchase_micro_usdc:
            raise NodeError("reward must be 0 … market.max_per_purchase_micro_usdc "
                            f"({market.max_per_purchase_micro_usdc} micro-USDC)")
        now = self.parts.clock()
        ttl_ms = (ttl_s if ttl_s is not None else market.bounty_ttl_s) * 1000
        bounty = Bounty(bounty_id=new_request_id(), text=text.strip(),
                        reward_micro_usdc=reward_micro_usdc, expires_at_ms=now + ttl_ms)
        envelope = await self.parts.gossip_publish(BOUNTIES, bounty, issued_at_ms=now)
        metrics.GOSSIP_PUBLISHED.labels(topic=BOUNTIES).inc()
        await self._store(envelope, own=True)
        return await self.show(bounty.bounty_id)

    async def on_bounty(self, envelope: Envelope) -> None:
        if self.parts.clock() - envelope.issued_at_ms <= GOSSIP_WINDOW_MS:
            metrics.count_accepted(BOUNTIES, envelope.issued_at_ms)
        if envelope.sender == self.parts.identity.public_key:
            return
        if await self.publisher.admitted(envelope):
            await self._store(envelope, own=False)

    async def _store(self, envelope: Envelope, own: bool) -> bool:
        bounty = envelope.message()
        assert isinstance(bounty, Bounty)
        vector = (await self.memory.embed([bounty.text]))[0]
        verdict = await self.memory.run(self.board.apply, envelope, envelope.to_bytes(), vector,
                                        own, self.parts.clock())
        return verdict == ACCEPT

    async def _get(self, bounty_id: str) -> StoredBounty:
        stored = await self.memory.run(self.board.get, bounty_id)
        if stored is None:
            raise NodeError(f"unknown bounty {bounty_id}")
        return stored

    async def matches(self, bounty_id: str) -> list[dict[str, Any]]:
        """Live peers' listings that answer the bounty, best first (cosine >= threshold)."""
        vector = await self.memory.run(self.board.embedding, bounty_id)
        if vector is None:
            return []
        items = await self.memory.run(self.parts.listings.active, self.parts.clock(),
                                      None, None, (), False)
        ids = [item.listing.listing_id for item in items]
        vectors = await self.memory.run(self.parts.listings.embeddings, ids)
        threshold = self.parts.config.market.bounty_match_threshold
        found = []
        for item in items:
            listing_vector = vectors.get(item.listing.listing_id)
            if listing_vector is None:
                continue
            score = float(np.dot(listing_vector, vector))
            if score >= threshold:
                found.append((score, item))
        found.sort(key=lambda pair: pair[0], reverse=True)
        return [{"listing_id": item.listing.listing_id, "name": item.listing.name,
                 "price_micro_usdc": item.listing.price_micro_usdc, "score": round(score, 4)}
                for score, item in found]

    async def show(self, bounty_id: str) -> dict[str, Any]:
        stored = await self._get(bounty_id)
        matches = await self.matches(stored.bounty.bounty_id)
        return stored.to_dict(self.parts.clock()) | {"matches": matches}

    async def list(self, include_closed: bool = True) -> list[dict[str, Any]]:
        now = self.parts.clock()
        items = await self.memory.run(self.board.all, now, include_closed)
        out = []
        for item in items:
            matches = await self.matches(item.bounty.bounty_id)
            out.append(item.to_dict(now) | {"match_count": len(matches)})
        return out

    async def fulfil(self, bounty_id: str, listing_id: str | None = None) -> dict[str, Any]:
        """Buy a matching listing (best match within the reward, or ``listing_id``) and close."""
        stored = await self._get(bounty_id)
        if not stored.own:
            raise NodeError("only the node that posted a bounty can fulfil it")
        if stored.status(self.parts.clock()) != "open":
            raise NodeError(f"bounty {stored.bounty.bounty_id} is {stored.status(self.parts.clock())}")
        matches = await self.matches(stored.bounty.bounty_id)
        if listing_id is not None:
            matches = [m for m in matches if m["listing_id"].startswith(listing_id)]
        affordable = [m for m in matches if m["price_micro_usdc"] <= stored.bounty.reward_micro_usdc]
        if not affordable:
            raise NodeError("no live listing matches this bounty within its reward "
                            f"({len(matches)} match above it)")
        choice = affordable[0]
        purchase = await self.buy(choice["listing_id"], stored.bounty.reward_micro_usdc)
        closed = dataclasses.replace(stored.bounty, fulfilled_by=choice["listing_id"])
        envelope = await self.parts.gossip_publish(BOUNTIES, closed,
                                                       issued_at_ms=self.parts.clock())
        await self._store(envelope, own=True)
        log.info("bounty fulfilled bounty=%s listing=%s", bounty_id[:12], choice["listing_id"][:16])
        return {"bounty_id": stored.bounty.bounty_id, "fulfilled_by": choice["listing_id"],
                "purchase": purchase}
