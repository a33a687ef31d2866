"""Listing lifecycle and bounties between two nodes' market stacks, with an injected clock.

Each side is the real thing — Memory (SQLite + embedder), ListingBook, Publisher,
Catalogue, BountyDesk, and the gossip ``MessageValidator`` on the receiving end —
and an envelope travels as its sealed bytes: ``seal`` on one side, ``validator.check``
then the node's own topic handler on the other. Only libp2p is left out, so that
time can be injected (two days of refreshes without sleeping); the sync tests run
over real hosts.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from node.config import load_config
from node.crystals.model import SemanticType
from node.market.book.listings import ListingBook
from node.market.desk import DeskParts
from node.market.intake import SkillsIntake
from node.market.ledger import MarketLedger
from node.market.liveness import MarketLiveness
from node.market.selling.pricing import FlatReputation
from node.market.selling.publish import Publisher
from node.memory.async_memory import AsyncMemory
from node.memory.facade import Memory
from node.net.gossip import SequenceSource
from node.net.rules.validation import MessageValidator
from protocol.envelope import Envelope, InvalidEnvelope, open_envelope, seal, sign_envelope
from protocol.identity import Identity
from protocol.liveness import ListingWithdrawal
from protocol.topics import BOUNTIES, SKILLS
from tests.support.clock import HandClock

HOUR_MS = 3_600_000
T0 = 1_800_000_000_000


@dataclass
class Side:
    memory: Memory
    publisher: Publisher
    intake: SkillsIntake
    liveness: MarketLiveness
    validator: MessageValidator
    banned: set[bytes]  # origin keys the side's trust layer holds banned
    peers: list[Side] = field(default_factory=list)
    sent: list[bytes] = field(default_factory=list)

    @property
    def book(self) -> ListingBook:
        return self.publisher.listings

    def visible(self, listing_id: str, now: int) -> dict[str, Any] | None:
        found = [item for item in self.book.active(now) if item.listing.listing_id == listing_id]
        return found[0].to_dict() if found else None


async def deliver(side: Side, topic: str, data: bytes) -> None:
    envelope = side.validator.check(topic, data, "peer")
    if topic == SKILLS:
        await side.intake.take(envelope)
    else:
        await side.liveness.on_bounty(envelope)


def make_side(root: Path, name: str, clock: HandClock, embedder: str = "hashing") -> Side:
    config = load_config(root / name, overrides={"memory": {"embedder": embedder}, "market": {
        "listing_ttl_s": 86_400, "listing_refresh_s": 12 * 3600}}, environ={})
    memory = Memory(config)
    identity = Identity.generate()
    sequence = SequenceSource(clock)
    side: Side

    async def gossip_publish(topic: str, message: Any, issued_at_ms: int | None = None) -> Envelope:
        data = seal(identity, message.KIND, message, sequence.next(), issued_at_ms or clock())
        side.sent.append(data)
        for peer in side.peers:
            await deliver(peer, topic, data)
        return open_envelope(data)

    banned: set[bytes] = set()

    async def origin_level(key: bytes) -> str:
        return "banned" if key in banned else "provisional"

    intake = SkillsIntake(clock)
    parts = DeskParts.build(config, identity, AsyncMemory(memory), ListingBook(memory.db),
                            gossip_publish, sequence.next, clock)
    publisher = Publisher(parts, MarketLedger(memory.db), lambda: FlatReputation(1.0),
                          "0x" + "11" * 20, False, intake=intake,
                          origin_level=origin_level)

    async def no_buy(listing_id: str, max_price: int | None) -> dict[str, Any]:
        raise AssertionError("no purchase in this test")

    side = Side(memory, publisher, intake, MarketLiveness(publisher, parts, no_buy, lambda: {}),
                MessageValidator([], now_ms=clock), banned)
    return side


@pytest.fixture
def clock() -> HandClock:
    return HandClock(T0)


@pytest.fixture
def pair(tmp_path: Path, clock: HandClock, request: pytest.FixtureRequest) -> Iterator[tuple[Side, Side]]:
    embedder = getattr(request, "param", "hashing")
    seller, buyer = make_side(tmp_path, "seller", clock, embedder), make_side(tmp_path, "buyer", clock, embedder)
    seller.peers.append(buyer)
    buyer.peers.append(seller)
    try:
        yield seller, buyer
    finally:
        seller.memory.close()
        buyer.memory.close()


async def publish_skill(side: Side, text: str, name: str, summary: str) -> dict[str, Any]:
    crystal = side.memory.add(text, semantic_type=SemanticType.SKILL, skill_tags=["logs", "ops"],
                              skill_category="ops")
    for success in (True, True, True, True, False):
        side.memory.record_execution(crystal.id, success, 1.0 if success else 0.0)
    return await side.publisher.publish_skill(crystal.id, name, summary)


SKILL = ("grep the nginx error log for upstream timeouts and count them per minute",
         "Summarise nginx error logs", "Counts nginx upstream timeouts per minute from error.log")


async def test_a_listing_refreshed_for_two_days_stays_visible(pair: tuple[Side, Side],
                                                              clock: HandClock) -> None:
    seller, buyer = pair
    published = await publish_skill(seller, *SKILL)
    listing_id = published["listing_id"]
    assert buyer.visible(listing_id, clock.now) is not None
    first_seq = open_envelope(seller.sent[-1]).seq
    for _ in range(48):
        clock.now += HOUR_MS
        await seller.liveness.catalogue.refresh_due()
        seen = buyer.visible(listing_id, clock.now)
        assert seen is not None, f"gone after {(clock.now - T0) // HOUR_MS} h"
        assert seen["listing_id"] == listing_id and seen["executions"] == 5
    refreshes = [open_envelope(data) for data in seller.sent[1:]]
    assert len(refreshes) == 4  # every 12 h
    assert all(envelope.seq > first_seq for envelope in refreshes)
    assert buyer.visible(listing_id, clock.now)["expires_at_ms"] > clock.now


async def test_without_refresh_the_listing_expires(pair: tuple[Side, Side], clock: HandClock) -> None:
    seller, buyer = pair
    listing_id = (await publish_skill(seller, *SKILL))["listing_id"]
    clock.now += 25 * HOUR_MS
    assert buyer.visible(listing_id, clock.now) is None


async def test_reprice_keeps_the_id_and_stats_and_withdraw_removes_it_for_good(
        pair: tuple[Side, Side], clock: HandClock) -> None:
    seller, buyer = pair
    published = await publish_skill(seller, *SKILL)
    listing_id = published["listing_id"]
    first_announcement = seller.sent[-1]

    clock.now += 1000
    await seller.liveness.reprice(listing_id, 123_456)
    seen = buyer.visible(listing_id, clock.now)
    assert seen is not None and seen["price_micro_usdc"] == 123_456
    assert (seen["executions"], seen["successes"]) == (5, 4)
    assert len(buyer.book.active(clock.now)) == 1
    # The fixed price survives a refresh.
    clock.now += 13 * HOUR_MS
    await seller.liveness.catalogue.refresh_due()
    assert buyer.visible(listing_id, clock.now)["price_micro_usdc"] == 123_456

    await seller.liveness.withdraw(listing_id)
    assert buyer.visible(listing_id, clock.now) is None
    assert seller.visible(listing_id, clock.now) is None
    # A late copy of an older announcement (gossip reorder, a stale peer's sync page)
    # does not bring it back: the withdrawal is the newest state.
    old = open_envelope(first_announcement)
    verdict = buyer.publisher.lifecycle.apply(old, first_announcement, None, None, clock.now)
    assert verdict == "withdrawn"
    assert buyer.visible(listing_id, clock.now) is None
    with pytest.raises(Exception, match="withdrawn"):
        await seller.liveness.withdraw(listing_id)


@pytest.mark.parametrize("pair", ["minilm"], indirect=True)
async def test_a_bounty_raises_the_matching_skills_price(pair: tuple[Side, Side],
                                                         clock: HandClock) -> None:
    seller, buyer = pair
    published = await publish_skill(seller, *SKILL)
    listing_id, before = published["listing_id"], published["price_micro_usdc"]
    assert published["bounty_matches"] == 0

    # An unrelated bounty changes nothing.
    await buyer.liveness.post_bounty("need: a skill that translates French invoices", 50_000)
    clock.now += 1000
    assert (await seller.liveness.reprice(listing_id, None))["price_micro_usdc"] == before

    posted = await buyer.liveness.post_bounty(
        "need: a skill that summarises nginx error logs and upstream timeouts", 50_000)
    assert posted["reward_micro_usdc"] == 50_000
    assert [m["listing_id"] for m in posted["matches"]] == [listing_id]
    clock.now += 1000
    repriced = await seller.liveness.reprice(listing_id, None)
    assert repriced["bounty_matches"] == 1
    assert repriced["price_micro_usdc"] > before
    # The buyer sees the new price, and the bounty against the listing in search.
    hits = await buyer.publisher.search_listings("nginx error log summary", k=5)
    assert hits[0]["listing_id"] == listing_id
    assert hits[0]["price_micro_usdc"] == repriced["price_micro_usdc"]
    assert hits[0]["bounty_matches"] == 1 and hits[0]["bounties"] == [posted["bounty_id"]]
    listed = {b["bounty_id"]: b for b in await seller.liveness.bounties()}
    assert listed[posted["bounty_id"]]["status"] == "open"
    assert listed[posted["bounty_id"]]["own"] is False
    # The same poster asking again does not count twice in the price.
    await buyer.liveness.post_bounty("need: a skill for nginx error log timeouts", 50_000)
    clock.now += 1000
    again = await seller.liveness.reprice(listing_id, None)
    assert again["bounty_matches"] == 1
    assert again["price_micro_usdc"] == repriced["price_micro_usdc"]


async def test_foreign_withdrawals_and_wrong_topics_are_refused(pair: tuple[Side, Side],
                                                                clock: HandClock) -> None:
    seller, buyer = pair
    published = await publish_skill(seller, *SKILL)
    stored = buyer.book.get(published["listing_id"])
    assert stored is not None
    body = {"listing_id": stored.listing.listing_id,
            "stable_skill_id": stored.listing.stable_skill_id,
            "skill_version": stored.listing.skill_version}
    # Mallory signs a withdrawal naming the seller's listing: the id is bound to its seller.
    mallory = Identity.generate()
    raw = sign_envelope(mallory, ListingWithdrawal.KIND, 1, body, 7, clock.now).to_bytes()
    with pytest.raises(InvalidEnvelope) as error:
        buyer.validator.check(SKILLS, raw)
    assert error.value.reason == "bad_body"
    assert buyer.visible(stored.listing.listing_id, clock.now) is not None
    # A listing sent on the bounties topic is the wrong topic.
    with pytest.raises(InvalidEnvelope) as error:
        buyer.validator.check(BOUNTIES, seller.sent[0])
    assert error.value.reason == "wrong_topic"


async def test_listings_and_bounties_from_a_banned_origin_are_dropped(
        pair: tuple[Side, Side], clock: HandClock) -> None:
    seller, buyer = pair
    buyer.banned.add(seller.publisher.identity.public_key)
    listing_id = (await publish_skill(seller, *SKILL))["listing_id"]
    await seller.liveness.post_bounty("need: a skill that counts nginx timeouts", 10_000)
    assert buyer.visible(listing_id, clock.now) is None
    assert await buyer.liveness.bounties() == []
    buyer.banned.clear()  # the same bytes are taken once the origin is not banned
    envelope = open_envelope(seller.sent[0])
    await buyer.intake.take(envelope)
    assert buyer.visible(listing_id, clock.now) is not None
