"""Skills-topic intake: every message of the skills topic goes to the one handler of its kind.

Gossip (``/1/skills`` and the listing shards), listings sync and a seller's fresh terms all
hand a validated envelope to ``SkillsIntake.take``; the intake unpacks a
``listing_batch`` (every entry was already validated with its batch) and calls the
handler the owning desk registered for the kind: the publisher takes listings and
withdrawals, the endorsement acts, the warning desk warnings. A new message kind is a
new handler registered by its desk (and the kind in ``protocol.topics.TOPIC_KINDS``), not
a new branch here.

A kind no desk registered is dropped and counted (``unhandled``): validation let it in,
so it is a kind this node knows on the wire but does not act on.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable

from node import metrics
from node.crystals import now_ms
from protocol.envelope import Envelope, open_envelope
from protocol.messages import ListingBatch
from protocol.topics import SKILLS, TOPIC_KINDS

log = logging.getLogger(__name__)

KindHandler = Callable[[Envelope], Awaitable[object]]
GOSSIP_WINDOW_MS = 120_000
"""A message issued longer ago than this came by sync, not gossip: not counted as gossip."""


class SkillsIntake:
    """The table from a skills-topic message kind to its handler."""

    def __init__(self, clock: Callable[[], int] = now_ms) -> None:
        self.clock = clock
        self._handlers: dict[str, KindHandler] = {}
        self.unhandled: Counter[str] = Counter()

    def register(self, kind: str, handler: KindHandler) -> None:
        """``await handler(envelope)`` for every validated ``kind`` message; one per kind."""
        if kind not in TOPIC_KINDS[SKILLS] or kind == ListingBatch.KIND:
            raise ValueError(f"{kind!r} is not a skills-topic message kind a desk can take")
        if kind in self._handlers:
            raise ValueError(f"{kind!r} already has a handler")
        self._handlers[kind] = handler

    @property
    def kinds(self) -> frozenset[str]:
        """The kinds some desk takes (a running node: every skills-topic kind but the batch)."""
        return frozenset(self._handlers)

    async def take(self, envelope: Envelope) -> None:
        """A validated skills-topic envelope (gossip or listings sync)."""
        if envelope.kind == ListingBatch.KIND:
            # Every entry already passed node.net.rules.validation (the sync rules, same sender).
            batch = envelope.message()
            assert isinstance(batch, ListingBatch)
            for entry in batch.entries:
                await self.take(open_envelope(entry))
            return
        if self.clock() - envelope.issued_at_ms <= GOSSIP_WINDOW_MS:  # synced state is older
            metrics.count_accepted(SKILLS, envelope.issued_at_ms)
        handler = self._handlers.get(envelope.kind)
        if handler is None:
            self.unhandled[envelope.kind] += 1
            log.debug("skills message without a handler kind=%s", envelope.kind)
            return
        await handler(envelope)

    async def take_synced(self, check: Callable[[bytes], Envelope], envelope: Envelope) -> None:
        """A listing that came outside gossip (the one a seller's ``terms_changed`` carries):
        ``check`` (the listings sync rules) raises InvalidEnvelope, else it is taken as gossip's."""
        await self.take(check(envelope.to_bytes()))
