"""A management node revokes its endorsement of a listing: every node drops it, and nothing
older brings it back (a replayed endorsement, the seller's embedded copy); a newer
endorsement does. Real Memory (SQLite), ListingBook, Publisher and the gossip
``MessageValidator`` on each receiving side; envelopes travel as their sealed bytes with an
injected clock (the libp2p path is tested in tests/integration/node/test_operator_undo.py).
"""

from __future__ import annotations

import dataclasses
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
from node.market.selling.pricing import FlatReputation
from node.market.selling.publish import Publisher
from node.memory.async_memory import AsyncMemory
from node.memory.facade import Memory
from node.net.gossip import SequenceSource
from node.net.rules.validation import MessageValidator
from protocol.envelope import Envelope, InvalidEnvelope, open_envelope, seal
from protocol.identity import Identity
from protocol.messages import EndorsementRevocation, SkillListing, endorse
from protocol.topics import SKILLS
from tests.support.clock import HandClock

T0 = 1_800_000_000_000
MANAGEMENT = Identity.from_seed(b"M" * 32)


@dataclass
class Side:
    identity: Identity
    memory: Memory
    publisher: Publisher
    intake: SkillsIntake
    validator: MessageValidator
    sequence: SequenceSource
    peers: list[Side] = field(default_factory=list)
    sent: list[bytes] = field(default_factory=list)

    def endorsed_by(self, listing_id: str) -> str | None:
        stored = self.publisher.listings.get(listing_id)
        assert stored is not None
        return stored.endorsed_by

    async def take(self, data: bytes) -> None:
        await self.intake.take(self.validator.check(SKILLS, data, "peer"))


def make_side(root: Path, name: str, clock: HandClock, identity: Identity) -> Side:
    config = load_config(root / name, overrides={"memory": {"embedder": "hashing"}}, environ={})
    memory = Memory(config)
    sequence = SequenceSource(clock)
    side: Side

    async def gossip_publish(topic: str, message: Any, issued_at_ms: int | None = None) -> Envelope:
        data = seal(identity, message.KIND, message, sequence.next(), issued_at_ms or clock())
        side.sent.append(data)
        for peer in side.peers:
            await peer.take(data)
        return open_envelope(data)

    async def provisional(key: bytes) -> str:
        return "provisional"

    intake = SkillsIntake(clock)
    parts = DeskParts.build(config, identity, AsyncMemory(memory), ListingBook(memory.db),
                            gossip_publish, sequence.next, clock)
    publisher = Publisher(parts, MarketLedger(memory.db), lambda: FlatReputation(1.0),
                          "0x" + "11" * 20, identity is MANAGEMENT, intake=intake,
                          origin_level=provisional)
    side = Side(identity, memory, publisher, intake, MessageValidator([MANAGEMENT.public_key], now_ms=clock),
                sequence)
    return side


@pytest.fixture
def sides(tmp_path: Path) -> Iterator[tuple[HandClock, Side, Side, Side]]:
    clock = HandClock(T0)
    seller = make_side(tmp_path, "seller", clock, Identity.generate())
    management = make_side(tmp_path, "management", clock, MANAGEMENT)
    receiver = make_side(tmp_path, "receiver", clock, Identity.generate())
    seller.peers += [management, receiver]
    management.peers += [seller, receiver]
    try:
        yield clock, seller, management, receiver
    finally:
        for side in (seller, management, receiver):
            side.memory.close()


async def test_a_revoked_endorsement_stays_revoked_until_a_newer_one(
        sides: tuple[HandClock, Side, Side, Side]) -> None:
    clock, seller, management, receiver = sides
    crystal = seller.memory.add("rotate the ingress TLS certificates with the ACME client",
                                semantic_type=SemanticType.SKILL, skill_category="ops")
    for _ in range(3):
        seller.memory.record_execution(crystal.id, True, 1.0)
    listing_id = (await seller.publisher.publish_skill(crystal.id))["listing_id"]
    first_announcement = open_envelope(seller.sent[-1])

    clock.now += 1000
    await management.publisher.endorse_listing(listing_id)
    endorsement = management.sent[-1]
    assert receiver.endorsed_by(listing_id) == MANAGEMENT.public_key.hex()

    clock.now += 1000
    revoked = await management.publisher.revoke_endorsement(listing_id)
    assert revoked == {"listing_id": listing_id, "revoked_by": MANAGEMENT.public_key.hex()}
    assert receiver.endorsed_by(listing_id) is None and management.endorsed_by(listing_id) is None
    with pytest.raises(Exception, match="not endorsed"):
        await management.publisher.revoke_endorsement(listing_id)

    # The captured endorsement, replayed: the validator drops it (its seq is spent), and
    # the book refuses it even past the validator (older than the revocation).
    with pytest.raises(InvalidEnvelope) as replayed:
        receiver.validator.check(SKILLS, endorsement, "peer")
    assert replayed.value.reason == "replayed"
    await receiver.intake.take(open_envelope(endorsement))
    assert receiver.endorsed_by(listing_id) is None

    # The seller re-announces with the endorsement embedded (a valid signature, timeless).
    listing = first_announcement.message()
    assert isinstance(listing, SkillListing)
    embedded = endorse(dataclasses.replace(listing, expires_at_ms=clock.now + 86_400_000), MANAGEMENT)
    clock.now += 1000
    reannounced = seal(seller.identity, SkillListing.KIND, embedded, seller.sequence.next(), clock.now)
    for side in (receiver, management):
        await side.take(reannounced)
    stored = receiver.publisher.listings.get(listing_id)
    assert stored is not None and stored.listing.expires_at_ms == embedded.expires_at_ms
    assert stored.endorsed_by is None and management.endorsed_by(listing_id) is None

    # A forged revocation (not a management key) is rejected before it changes anything.
    clock.now += 1000
    await management.publisher.endorse_listing(listing_id)  # a newer endorsement stands again
    assert receiver.endorsed_by(listing_id) == MANAGEMENT.public_key.hex()
    forged = seal(seller.identity, EndorsementRevocation.KIND, EndorsementRevocation(listing_id),
                  seller.sequence.next(), clock.now)
    with pytest.raises(InvalidEnvelope) as refused:
        await receiver.take(forged)
    assert refused.value.reason == "not_management"
    assert receiver.endorsed_by(listing_id) == MANAGEMENT.public_key.hex()


async def test_a_node_away_when_an_endorsement_was_revoked_takes_the_revocation_by_sync(
        tmp_path: Path, sides: tuple[HandClock, Side, Side, Side]) -> None:
    clock, seller, management, receiver = sides
    away = make_side(tmp_path, "away", clock, Identity.generate())
    try:
        seller.peers.append(away)
        management.peers.append(away)
        crystal = seller.memory.add("rotate the ingress TLS certificates with the ACME client",
                                    semantic_type=SemanticType.SKILL, skill_category="ops")
        for _ in range(3):
            seller.memory.record_execution(crystal.id, True, 1.0)
        listing_id = (await seller.publisher.publish_skill(crystal.id))["listing_id"]
        clock.now += 1000
        await management.publisher.endorse_listing(listing_id)
        assert away.endorsed_by(listing_id) == MANAGEMENT.public_key.hex()

        management.peers.remove(away)  # its connection drops
        clock.now += 1000
        await management.publisher.revoke_endorsement(listing_id)
        assert away.endorsed_by(listing_id) == MANAGEMENT.public_key.hex()

        # Back: the receiver's listings-sync feed (version 2 pages) carries the revocation.
        clock.now += 3_600_000  # an hour later: gossip's clock window is long past
        feed = receiver.publisher.lifecycle.feed
        v1_page, _, _ = feed.page(0, 128, 200_000, clock.now)
        assert all(open_envelope(raw).kind != EndorsementRevocation.KIND for raw in v1_page)
        v2_page, _, _ = feed.page(0, 128, 200_000, clock.now, True)
        for raw in v2_page:
            await away.intake.take(away.validator.check_synced(raw))
        assert away.endorsed_by(listing_id) is None
    finally:
        away.memory.close()
