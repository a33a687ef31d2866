"""Selling side of the market on the network: publish a skill, take in listings and
endorsements from the skills topic (the kinds it registers in ``node.market.intake``),
list and search the listing book.

A listing shows peers a name and a seller-written summary, never the skill
(``listing_name_and_summary``); the skill goes only to a paying buyer.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from node import metrics
from node.crystals import Crystal
from node.crystals import governance as gov
from node.errors import NodeError, NotManagementNode
from node.market.book import ACCEPT, count_matches
from node.market.desk import DeskParts
from node.market.intake import SkillsIntake
from node.market.ledger import MarketLedger
from node.market.selling.gates import check_listable
from node.market.selling.pricing import ReputationSource, quote, scarcity_for
from protocol.envelope import Envelope
from protocol.liveness import ListingWithdrawal
from protocol.messages import (
    EndorsementRevocation,
    ListingEndorsement,
    SkillListing,
    endorsement_valid,
    listing_id_for,
    listing_signing_bytes,
)
from protocol.schema import PPM
from protocol.skill_bundle import decode_or_none
from protocol.topics import SKILLS

log = logging.getLogger(__name__)

OriginLevel = Callable[[bytes], Awaitable[str]]
AskNetwork = Callable[..., Awaitable[dict[str, Any]]]


def listing_text(listing: SkillListing) -> str:
    return _text(listing.name, listing.description, listing.tags)


def _text(name: str, description: str, tags: tuple[str, ...]) -> str:
    return f"{name}. {description} {' '.join(tags)}"


class Publisher:
    def __init__(self, parts: DeskParts, ledger: MarketLedger,
                 reputation: Callable[[], ReputationSource], wallet_address: str,
                 is_management: bool, *, intake: SkillsIntake, origin_level: OriginLevel,
                 ask_network: AskNetwork | None = None) -> None:
        """``origin_level`` is the trust gate at intake (the trust level of a listing's or
        bounty's origin key); ``await ask_network(terms, timeout_s, max_sellers) -> report``
        is given when this node follows only some listing shards (net.listing_shards): a
        search that finds too little then asks the network. Registers the kinds it takes
        in ``intake``: listings, withdrawals, endorsements and their revocations."""
        self.config = parts.config
        self.identity = parts.identity
        self.memory = parts.memory
        self.listings = parts.listings
        self.lifecycle = parts.lifecycle
        self.bounties = parts.bounties
        self.gossip_publish = parts.gossip_publish
        self.clock = parts.clock
        self.ledger = ledger
        self.reputation = reputation
        self.wallet_address = wallet_address
        self.is_management = is_management
        self.origin_level = origin_level
        self.ask_network = ask_network
        self.last_network_search: dict[str, Any] | None = None
        intake.register(SkillListing.KIND, self.take_listing)
        intake.register(ListingWithdrawal.KIND, self.take_listing)
        intake.register(ListingEndorsement.KIND, self._apply_endorsement)
        intake.register(EndorsementRevocation.KIND, self._apply_revocation)

    async def publish_skill(self, crystal_id: str, name: str | None = None,
                            summary: str | None = None) -> dict[str, Any]:
        crystal = await self.memory.get(crystal_id)
        name, summary = listing_name_and_summary(crystal, name, summary)
        check_listable(
            crystal,
            min_executions=self.config.market.min_executions,
            min_success_rate=self.config.market.min_success_rate,
        )
        crystal = await self.memory.ensure_stable_skill_id(crystal.id)
        return await self.announce(crystal, name, summary)

    async def announce(self, crystal: Crystal, name: str, summary: str,
                       price_override: int | None = None) -> dict[str, Any]:
        """Sign and gossip the listing of ``crystal`` as it stands now (stats, price, expiry).

        The listing id is the same for every announcement of one skill version:
        publishing again, a refresh and a re-price all replace the receivers' state
        (``node.market.book.lifecycle``). ``price_override`` (micro-USDC) skips the quote.
        """
        draft = await self.draft(crystal, name, summary, price_override)
        envelope = await self.gossip_publish(SKILLS, draft.listing, issued_at_ms=draft.issued_at_ms)
        metrics.GOSSIP_PUBLISHED.labels(topic=SKILLS).inc()
        await self.store_listing(envelope, own_crystal_id=crystal.id)
        return draft.result(price_override)

    async def draft(self, crystal: Crystal, name: str, summary: str,
                     price_override: int | None) -> Draft:
        """The listing of ``crystal`` as it stands now, priced, not yet signed."""
        assert crystal.stable_skill_id is not None
        similar = await self.memory.run(
            self.listings.count_similar, crystal.skill_category or "general", self.identity.public_key
        )
        previous = None
        if crystal.previous_version_id:
            older = await self.memory.run(self.listings.own_for_crystal, crystal.previous_version_id)
            previous = older.listing.listing_id if older else None
        unique_buyers = await self.memory.run(self._unique_buyers, crystal.stable_skill_id)
        tags = tuple(dict.fromkeys(t[:32] for t in crystal.skill_tags))[:16]
        category = (crystal.skill_category or "general")[:64]
        vector = (await self.memory.embed([_text(name, summary, tags)]))[0]
        matches = await self.bounty_matches(vector)
        market = self.config.market
        breakdown = quote(
            base_micro_usdc=market.base_price_micro_usdc,
            successes=crystal.execution.successes,
            executions=crystal.execution.executions,
            avg_reward=crystal.execution.avg_reward,
            unique_buyers=unique_buyers,
            bounty_matches=matches,
            reputation=self.reputation().reputation(self.identity.public_key),
            scarcity=scarcity_for(similar),
            min_micro=market.min_price_micro_usdc,
            max_micro=market.max_price_micro_usdc,
        )
        price = breakdown.price_micro_usdc if price_override is None else price_override
        issued = self.clock()
        listing = SkillListing(
            listing_id=listing_id_for(
                self.identity.public_key, crystal.stable_skill_id, crystal.skill_version
            ),
            stable_skill_id=crystal.stable_skill_id,
            skill_version=crystal.skill_version,
            name=name,
            description=summary,
            tags=tags,
            category=category,
            content_hash=crystal.hash,
            size_bytes=len(crystal.text.encode()),
            price_micro_usdc=price,
            pay_to=self.wallet_address,
            chain_id=self.config.chain.chain_id,
            token_address=self.config.chain.token_address,
            executions=crystal.execution.executions,
            successes=crystal.execution.successes,
            reward_sum_ppm=round(crystal.execution.reward_sum * PPM),
            unique_buyers=unique_buyers,
            expires_at_ms=issued + market.listing_ttl_s * 1000,
            previous_listing_id=previous,
        )
        return Draft(listing, issued, breakdown.to_dict(), crystal.id, matches)

    async def bounty_matches(self, vector: np.ndarray) -> int:
        """Posters (other than us) of open bounties matching ``vector``: bountyMatches."""
        posters, vectors = await self.memory.run(self.bounties.open_vectors, self.clock(),
                                                 self.identity.public_key, True)
        return count_matches(vector, vectors, self.config.market.bounty_match_threshold, posters)

    def _unique_buyers(self, stable_skill_id: str) -> int:
        return self.ledger.unique_buyers(stable_skill_id)

    async def store_listing(self, envelope: Envelope, own_crystal_id: str | None = None) -> bool:
        """Apply a listing or withdrawal through the lifecycle; True if it is the newest state."""
        listing = envelope.message()
        vector = None
        if isinstance(listing, SkillListing):
            vector = (await self.memory.embed([listing_text(listing)]))[0]
        verdict = await self.memory.run(
            self.lifecycle.apply, envelope, envelope.to_bytes(), vector, own_crystal_id,
            self.clock(),
        )
        if verdict != ACCEPT:
            log.debug("listing state ignored kind=%s reason=%s", envelope.kind, verdict)
        return verdict == ACCEPT

    async def take_listing(self, envelope: Envelope) -> None:
        """A peer's listing or withdrawal from the skills topic (ours we stored when we sent it)."""
        if envelope.sender == self.identity.public_key or not await self.admitted(envelope):
            return
        await self.store_listing(envelope)

    async def admitted(self, envelope: Envelope) -> bool:
        """Listings and bounties (gossiped or synced) from a banned origin key are dropped."""
        if await self.origin_level(envelope.sender) != "banned":
            return True
        log.info("dropped %s from banned origin %s", envelope.kind, envelope.sender.hex()[:16])
        return False

    async def _apply_endorsement(self, envelope: Envelope) -> bool:
        """Record a management key's endorsement of a listing we hold, if its signature holds."""
        endorsement = envelope.message()
        assert isinstance(endorsement, ListingEndorsement)
        stored = await self.memory.run(self.listings.get, endorsement.listing_id)
        if stored is None or not endorsement_valid(stored.listing, envelope.sender,
                                                   endorsement.signature):
            log.info("endorsement dropped listing=%s known=%s", endorsement.listing_id[:16],
                     stored is not None)
            return False
        return await self.memory.run(self.listings.record_endorsement, endorsement.listing_id,
                                     envelope.sender, envelope.issued_at_ms)

    async def _apply_revocation(self, envelope: Envelope) -> bool:
        """Drop a management key's endorsement (validation checked the key); newest act wins."""
        revocation = envelope.message()
        assert isinstance(revocation, EndorsementRevocation)
        revoked = await self.memory.run(self.listings.revoke_endorsement, revocation.listing_id,
                                        envelope.sender, envelope.issued_at_ms)
        # Re-served by listings sync (v2) to nodes that were away: a revocation must not be missed.
        await self.memory.run(self.lifecycle.feed.keep, envelope, self.clock())
        log.info("endorsement revoked listing=%s by=%s applied=%s", revocation.listing_id[:16],
                 envelope.sender.hex()[:16], revoked)
        return bool(revoked)

    async def revoke_endorsement(self, listing_id: str) -> dict[str, Any]:
        """Management nodes: withdraw this node's endorsement of a listing, on every node."""
        if not self.is_management:
            raise NotManagementNode(
                "only a management node can revoke an endorsement: its public key "
                f"{self.identity.public_key.hex()} is not in [net] management_keys"
            )
        stored = await self.memory.run(self.listings.get, listing_id)
        if stored is None:
            raise NodeError(f"unknown listing {listing_id}")
        if stored.endorsed_by != self.identity.public_key.hex():
            raise NodeError(f"this node has not endorsed listing {stored.listing.listing_id[:16]}")
        message = EndorsementRevocation(listing_id=stored.listing.listing_id)
        envelope = await self.gossip_publish(SKILLS, message)
        metrics.GOSSIP_PUBLISHED.labels(topic=SKILLS).inc()
        await self._apply_revocation(envelope)
        return {"listing_id": message.listing_id, "revoked_by": self.identity.public_key.hex()}

    async def endorse_listing(self, listing_id: str) -> dict[str, Any]:
        """Management nodes: vouch for a listing network-wide (gossiped; stored by every node)."""
        if not self.is_management:
            raise NotManagementNode(
                "only a management node can endorse: its public key "
                f"{self.identity.public_key.hex()} is not in [net] management_keys"
            )
        stored = await self.memory.run(self.listings.get, listing_id)
        if stored is None:
            raise NodeError(f"unknown listing {listing_id}")
        unendorsed = dataclasses.replace(stored.listing, endorsement=None)
        signature = self.identity.sign(listing_signing_bytes(unendorsed))
        message = ListingEndorsement(listing_id=stored.listing.listing_id, signature=signature)
        envelope = await self.gossip_publish(SKILLS, message)
        metrics.GOSSIP_PUBLISHED.labels(topic=SKILLS).inc()
        await self._apply_endorsement(envelope)
        return {"listing_id": message.listing_id, "endorsed_by": self.identity.public_key.hex()}

    async def list_listings(
        self,
        category: str | None = None,
        max_price_micro_usdc: int | None = None,
        tags: tuple[str, ...] = (),
    ) -> list[dict[str, Any]]:
        items = await self.memory.run(
            self.listings.active, None, category, max_price_micro_usdc, tags
        )
        return [item.to_dict() for item in items]

    async def search_listings(
        self,
        query: str,
        k: int = 10,
        category: str | None = None,
        max_price_micro_usdc: int | None = None,
        tags: tuple[str, ...] = (),
    ) -> list[dict[str, Any]]:
        items = await self.memory.run(
            self.listings.active, None, category, max_price_micro_usdc, tags
        )
        market = self.config.market
        if self.ask_network is not None and len(items) < market.network_search_min_results:
            # This node follows only its listing shards: ask the sellers of the query's terms.
            words = [word for word in query.split() if len(word) >= 3][:6]
            terms = [*([category] if category else []), *tags, *words]
            self.last_network_search = await self.ask_network(
                terms, market.network_search_timeout_s, market.network_search_sellers)
            items = await self.memory.run(
                self.listings.active, None, category, max_price_micro_usdc, tags
            )
        if not items:
            return []
        ids = [item.listing.listing_id for item in items]
        vectors = await self.memory.run(self.listings.embeddings, ids)
        query_vector = (await self.memory.embed([query]))[0]
        scored = []
        for item in items:
            vector = vectors.get(item.listing.listing_id)
            score = float(np.dot(vector, query_vector)) if vector is not None else 0.0
            scored.append((score, item))
        scored.sort(key=lambda pair: pair[0], reverse=True)
        bounty_ids, bounty_vectors = await self.memory.run(self.bounties.open_vectors, self.clock())
        threshold = self.config.market.bounty_match_threshold
        results = []
        for score, item in scored[:k]:
            vector = vectors.get(item.listing.listing_id)
            matching = [] if vector is None or not bounty_ids else [
                bounty_ids[i] for i in np.flatnonzero(bounty_vectors @ vector >= threshold)]
            results.append(item.to_dict() | {"score": round(score, 4),
                                             "bounty_matches": len(matching),
                                             "bounties": matching})
        return results



MAX_SUMMARY_CHARS = 1024
DEFAULT_NAME_WORDS = 8


def listing_name_and_summary(crystal: Crystal, name: str | None,
                             summary: str | None) -> tuple[str, str]:
    """What a listing shows every peer: a name and a seller-written summary, never the skill.

    A SKILL.md bundle's own ``name`` and ``description`` (its Agent Skills
    discovery metadata, written to be shown) are the defaults; otherwise the
    first words of the skill's first line stand in (at most 8, and at most half
    of the skill's words), and its category and tags for the summary. Both, and
    the skill itself, must pass the secret/PII classifier: a flagged publish is
    refused naming the class.
    """
    bundle = decode_or_none(crystal.text)
    if bundle is not None:
        name = bundle.name if name is None else name
        summary = bundle.description if summary is None else summary
    words = crystal.text.split()
    if name is None:
        first_line = crystal.text.strip().splitlines()[0].split() if crystal.text.strip() else []
        keep = min(DEFAULT_NAME_WORDS, max(1, len(words) // 2))
        name = " ".join(first_line[:keep]) + (" …" if len(first_line) > keep else "")
    if summary is None:
        tags = ", ".join(crystal.skill_tags[:8])
        summary = f"A {crystal.skill_category or 'general'} skill" + (f" ({tags})" if tags else "") + "."
    name, summary = name.strip()[:128], summary.strip()
    if not name:
        raise NodeError("a listing needs a name")
    if len(summary) > MAX_SUMMARY_CHARS:
        raise NodeError(f"the summary is longer than {MAX_SUMMARY_CHARS} characters")
    for what, text in (("skill", crystal.text), ("name", name), ("summary", summary)):
        classes = gov.sensitive_classes(text)
        if classes:
            raise NodeError(f"refusing to publish: the {what} looks like it contains "
                            f"{', '.join(classes)} (secret/PII classifier)")
    return name, summary


@dataclass(frozen=True)
class Draft:
    """A listing about to be signed, and what ``publish`` reports about it."""

    listing: SkillListing
    issued_at_ms: int
    price: dict[str, Any]
    crystal_id: str
    bounty_matches: int

    def result(self, price_override: int | None) -> dict[str, Any]:
        listing = self.listing
        return {"listing_id": listing.listing_id, "price_micro_usdc": listing.price_micro_usdc,
                "price": self.price, "crystal_id": self.crystal_id,
                "skill_version": listing.skill_version,
                "previous_listing_id": listing.previous_listing_id,
                "bounty_matches": self.bounty_matches, "expires_at_ms": listing.expires_at_ms,
                "price_override": price_override is not None}
