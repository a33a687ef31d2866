"""Skill warnings: poison named on the network, and what a node does when it believes it.

A ``skill_warning`` (``protocol.skill_warning``) names a listing id and/or a content hash.
This node accepts it when it is signed by a configured management key, or when
``QUORUM`` distinct peers that this node holds "trusted" or better have warned about the
same target within ``QUORUM_WINDOW_MS``. A warning from anyone else is carried by gossip
(the validator bounds it per origin) but changes nothing here.

Accepting a warning, in one place for every way it can arrive:

- the target is remembered (table ``skill_warnings``): the listing book drops every
  listing with that id or content hash and never takes one in again (gossip, sync,
  batches all pass through ``ListingBook.upsert``);
- a skill this node bought with that listing or content is quarantined: its crystal is
  deleted from memory (so it is neither in context nor searchable), its text kept in the
  purchase row, the purchase marked ``quarantined`` with the warning's reason (what the
  buyer's agent sees through the API, MCP and the dashboard); the operator can release it;
- the seller is charged a ``skill_quarantined`` trust event once per quarantined purchase;
- the warning's signed envelope, and for a quorum the envelopes of every peer warning that
  made it up (its evidence), join the market feed (``MarketFeed.note``), so listings sync
  (``listings-sync/2``) hands them to a node that was away when they were gossiped. That
  node weighs them by its own rule: a management key's at once, peers' by its own trust.

A peer's warning counts towards a quorum at its signed ``issued_at_ms`` (for gossip that is
within the clock window of its receipt): warnings issued within ``QUORUM_WINDOW_MS`` of each
other add up, whether gossip brought them now or a sync brought them days later.
"""

from __future__ import annotations

import json
import logging
from collections import Counter, OrderedDict
from collections.abc import Awaitable, Callable, Collection
from typing import Any

from node.crystals import CrystalNotFound, now_ms
from node.errors import NodeError
from node.market.book import ListingBook, MarketFeed
from node.market.intake import SkillsIntake
from node.market.ledger import MarketLedger
from node.market.states import PurchaseState
from node.memory import AsyncMemory
from node.trust import TrustLevel
from protocol.envelope import Envelope
from protocol.liveness import NOTICE_SYNC_LIFETIME_MS
from protocol.skill_warning import MAX_WARNING_REASON_CHARS, SkillWarning
from protocol.topics import SKILLS

log = logging.getLogger(__name__)

QUORUM = 3
"""Distinct trusted peers whose warnings about one target make it accepted. Three: one
trusted peer can be wrong or bought; a Sybil has to earn "trusted" (EigenTrust from
pre-trusted management nodes) three times over to pull a listing."""
QUORUM_WINDOW_MS = 3_600_000
"""Warnings older than an hour do not add up: a quorum is peers agreeing about now."""
MAX_PENDING_TARGETS = 4096

Level = Callable[[bytes], Awaitable[TrustLevel]]
RecordTrust = Callable[[bytes, str, str], Awaitable[None]]
Publish = Callable[..., Awaitable[Envelope]]


class WarningDesk:
    def __init__(self, memory: AsyncMemory, listings: ListingBook, ledger: MarketLedger,
                 management_keys: Collection[str], own_key: bytes, level: Level,
                 record_trust: RecordTrust, publish: Publish | None = None, *,
                 intake: SkillsIntake) -> None:
        """Takes the skills topic's warnings (it registers their kind in ``intake``)."""
        self.memory = memory
        self.listings = listings
        self.ledger = ledger
        self.management = {bytes.fromhex(key) for key in management_keys}
        self.own_key = own_key
        self.level = level
        self.record_trust = record_trust
        self.publish = publish
        self.feed = MarketFeed(listings.db)
        # target -> {sender: (issued_at_ms, envelope)} of warnings below quorum (bounded)
        self._votes: OrderedDict[str, dict[bytes, tuple[int, Envelope]]] = OrderedDict()
        # accepted / already_known / ignored_untrusted / quorum_vote: what gossip and sync
        # brought and what came of it
        self.counts: Counter[str] = Counter()
        intake.register(SkillWarning.KIND, self.on_warning)

    async def on_warning(self, envelope: Envelope) -> None:
        """A validated warning (gossip or sync): accept it, count it towards a quorum, or note it."""
        warning = envelope.message()
        assert isinstance(warning, SkillWarning)
        sender = envelope.sender
        if sender in self.management or sender == self.own_key:
            await self._accept_counted(warning, [sender], [envelope])
            return
        level = await self.level(sender)
        if not level.at_least(TrustLevel.TRUSTED):
            self.counts["ignored_untrusted"] += 1
            log.info("skill warning ignored sender=%s level=%s targets=%s",
                     sender.hex()[:16], level, warning.targets)
            return
        now = now_ms()
        issued = envelope.issued_at_ms
        self.counts["quorum_vote"] += 1
        for target in warning.targets:
            votes = self._votes.setdefault(target, {})
            self._votes.move_to_end(target)
            votes[sender] = (issued, envelope)
            for voter in [key for key, (at, _) in votes.items()
                          if now - at > NOTICE_SYNC_LIFETIME_MS]:
                del votes[voter]
            while len(self._votes) > MAX_PENDING_TARGETS:
                self._votes.popitem(last=False)
            agreeing = {key: vote for key, (at, vote) in votes.items()
                        if abs(at - issued) <= QUORUM_WINDOW_MS}
            if len(agreeing) >= QUORUM:
                del self._votes[target]
                await self._accept_counted(warning, sorted(agreeing), list(agreeing.values()))
                return

    async def warn(self, target: str, reason: str) -> dict[str, Any]:
        """Sign and gossip a warning about ``target`` (listing id or content hash); apply it here."""
        target = target.strip().lower()
        stored = await self.memory.run(self.listings.get, target)
        listing_id = stored.listing.listing_id if stored is not None else None
        content_hash = stored.listing.content_hash if stored is not None else None
        if stored is None:
            if len(target) != 64 or any(c not in "0123456789abcdef" for c in target):
                raise NodeError(f"{target[:80]!r} is neither a known listing nor a sha256 content hash")
            content_hash = target
        if not reason.strip():
            raise NodeError("a warning needs a reason")
        issued = now_ms()
        warning = SkillWarning(listing_id=listing_id, content_hash=content_hash,
                               reason=reason.strip()[:MAX_WARNING_REASON_CHARS], issued_at_ms=issued)
        seq = None
        evidence = []
        if self.publish is not None:
            envelope = await self.publish(SKILLS, warning, issued_at_ms=issued)
            seq = envelope.seq
            evidence.append(envelope)
        applied = await self.accept(warning, [self.own_key], evidence)
        return applied | {"seq": seq, "issued_at_ms": issued}

    async def _accept_counted(self, warning: SkillWarning, senders: list[bytes],
                              evidence: list[Envelope]) -> None:
        """``accept``, counted as ``accepted`` only when the warning was new here.

        The same signed warning can arrive several times (gossip, and a sync session with
        each peer that holds it; a returning node's sessions run at once): the database
        applies it once, and the count says so (``already_known`` for the others). Counted
        on the database's thread with the change itself, so whoever sees the listing gone
        sees the count too."""
        await self._apply(warning, senders, evidence, counted=True)

    async def accept(self, warning: SkillWarning, senders: list[bytes],
                     evidence: Collection[Envelope] = ()) -> dict[str, Any]:
        """Apply ``warning``; ``evidence``: the signed warnings it rests on, re-served by sync."""
        return (await self._apply(warning, senders, evidence))[1]

    async def _apply(self, warning: SkillWarning, senders: list[bytes],
                     evidence: Collection[Envelope], counted: bool = False
                     ) -> tuple[bool, dict[str, Any]]:
        """``accept``, and whether any of the warning's targets was new here."""
        result = await self.memory.run(self._record_and_drop, warning, senders, list(evidence),
                                       counted)
        for content_hash in result["hashes"]:
            crystal = await self.memory.find_by_hash(content_hash)
            if crystal is not None and crystal.governance.peer_origin:
                result["crystal_ids"].append(crystal.id)
        quarantined = []
        for purchase in await self.memory.run(self.ledger.held_purchases, result["listing_ids"],
                                              result["crystal_ids"]):
            payload = purchase.payload
            if purchase.crystal_id:
                try:
                    payload = (await self.memory.get_stored(purchase.crystal_id)).text
                    await self.memory.delete(purchase.crystal_id)
                except CrystalNotFound:
                    pass  # deleted by the operator already: nothing in memory to pull
            await self.memory.run(self.ledger.update_purchase, purchase.request_id,
                                  PurchaseState.QUARANTINED, payload=payload,
                                  reason=f"network warning: {warning.reason}")
            await self.record_trust(bytes.fromhex(purchase.seller_key), "skill_quarantined",
                                    f"warning {warning.reason[:80]}")
            quarantined.append(purchase.listing_id)
        if result["new"]:
            log.warning("skill warning accepted targets=%s senders=%d dropped=%d quarantined=%d "
                        "reason=%s", warning.targets, len(senders), result["dropped"],
                        len(quarantined), warning.reason)
        return result["new"], {"targets": list(warning.targets), "reason": warning.reason,
                               "dropped_listings": result["dropped"], "quarantined": quarantined}

    def _record_and_drop(self, warning: SkillWarning, senders: list[bytes],
                         evidence: list[Envelope], counted: bool = False) -> dict[str, Any]:
        """In one transaction: remember the targets, drop their listings, keep the evidence in
        the sync feed; what was held. ``counted``: count it (accepted / already_known)."""
        result = self._record_and_drop_once(warning, senders, evidence)
        if counted:
            self.counts["accepted" if result["new"] else "already_known"] += 1
        return result

    def _record_and_drop_once(self, warning: SkillWarning, senders: list[bytes],
                              evidence: list[Envelope]) -> dict[str, Any]:
        db = self.listings.db
        targets = warning.targets
        marks = ",".join("?" * len(targets))
        with db.transaction() as conn:
            now = now_ms()
            for envelope in evidence:
                self.feed.note(conn, envelope, now)
            new = 0
            for target in targets:
                new += conn.execute(
                    "INSERT INTO skill_warnings(target, reason, senders_json, accepted_at_ms) "
                    "VALUES (?,?,?,?) ON CONFLICT(target) DO NOTHING",
                    (target, warning.reason, json.dumps([key.hex() for key in senders]), now_ms()),
                ).rowcount
            if not new:  # known already: what was released after it stays released
                return {"listing_ids": [], "hashes": [], "crystal_ids": [], "dropped": 0,
                        "new": False}
            rows = conn.execute(
                f"SELECT listing_id, content_hash, seller_key, stable_skill_id FROM listings "
                f"WHERE listing_id IN ({marks}) OR content_hash IN ({marks})",
                (*targets, *targets)).fetchall()
            for row in rows:  # nor served to peers through the listings sync (key: lifecycle.state_of)
                conn.execute("DELETE FROM market_feed WHERE feed_key=?",
                             (f"skill:{row['seller_key']}:{row['stable_skill_id']}",))
            listing_ids = sorted({row["listing_id"] for row in rows} | ({warning.listing_id}
                                 if warning.listing_id else set()))
            hashes = sorted({row["content_hash"] for row in rows} | ({warning.content_hash}
                            if warning.content_hash else set()))
            dropped = conn.execute(
                f"DELETE FROM listings WHERE listing_id IN ({marks}) OR content_hash IN ({marks})",
                (*targets, *targets)).rowcount
        return {"listing_ids": listing_ids, "hashes": hashes, "crystal_ids": [], "dropped": dropped,
                "new": True}

    def warned(self) -> list[dict[str, Any]]:
        rows = self.listings.db.execute(
            "SELECT * FROM skill_warnings ORDER BY accepted_at_ms DESC LIMIT 200").fetchall()
        return [{"target": row["target"], "reason": row["reason"],
                 "senders": json.loads(row["senders_json"]), "accepted_at_ms": row["accepted_at_ms"]}
                for row in rows]
