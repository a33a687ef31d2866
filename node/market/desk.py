"""What every market desk works with, built once and handed to each desk at construction.

The publisher, the catalogue, the bounty desk and the living market each take this record
(plus what only they need), instead of reading their collaborators off one another: a
desk's constructor shows everything it can touch.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from node.config import NodeConfig
from node.crystals import now_ms
from node.market.book import BountyBoard, ListingBook, ListingLifecycle
from node.memory import AsyncMemory
from protocol.envelope import Envelope
from protocol.identity import Identity

GossipPublish = Callable[..., Awaitable[Envelope]]


@dataclass(frozen=True)
class DeskParts:
    """``gossip_publish(topic, message, issued_at_ms=None)`` seals and gossips with our key;
    ``next_seq`` seals what is carried inside another message (catalogue batches); ``clock``
    is wall-clock milliseconds (a hand clock in tests)."""

    config: NodeConfig
    identity: Identity
    memory: AsyncMemory
    listings: ListingBook
    lifecycle: ListingLifecycle
    bounties: BountyBoard
    gossip_publish: GossipPublish
    next_seq: Callable[[], int]
    clock: Callable[[], int] = now_ms

    @classmethod
    def build(cls, config: NodeConfig, identity: Identity, memory: AsyncMemory,
              listings: ListingBook, gossip_publish: GossipPublish, next_seq: Callable[[], int],
              clock: Callable[[], int] = now_ms) -> DeskParts:
        """The parts over one listing book (its lifecycle and the bounty board share its
        database)."""
        return cls(config, identity, memory, listings, ListingLifecycle(listings.db, listings),
                   BountyBoard(listings.db), gossip_publish, next_seq, clock)
