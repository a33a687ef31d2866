"""Listing lifecycle: the newest state per (seller, stable skill id), and the sync feed.

Listing ids are stable: ``listing_id_for(seller, stable_skill_id, skill_version)``
names one version of one seller's skill for as long as it is on the market.
Its seller re-announces it (refresh: new envelope seq, new ``expires_at_ms``,
current price and execution stats) under the same id; a re-price is such an
announcement with another price; a new skill version gets a new id and
supersedes the older versions; a ``listing_withdrawal`` ends it.

State machine per (seller, stable_skill_id), decided by :func:`decide` (pure)::

    (none) --announce--> LISTED --announce v'>v or (v'=v, seq'>seq)--> LISTED
    LISTED --withdraw v'>=v, seq'>seq--> WITHDRAWN --announce seq'>seq--> LISTED
    LISTED --expires_at_ms passes--> (none)       WITHDRAWN --issue + 7 days--> (none)

Anything else is *ignored* (older or repeated state, late gossip, a peer's
stale sync page): it costs nobody, and it never brings a withdrawn listing
back. Every accepted state is also the newest row of the ``market_feed``
table, whose autoincrement ``sync_seq`` is the cursor of the listings sync
protocol (``node.net.listing_sync``): a peer asking "after cursor c" gets the
newest state of every key that changed after c, still live.

Notices ride the same feed (``MarketFeed.note``): a skill warning this node accepted
(key ``warning:<sender>:<target>``, with the peer warnings that made up its quorum) and
an endorsement revocation (key ``revocation:<sender>:<listing id>``), each live
``NOTICE_SYNC_LIFETIME_MS`` after its issue. Only ``listings-sync/2`` pages carry them.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

import numpy as np

from node.crystals import now_ms as wall_now_ms
from node.db import Database
from node.market.book.listings import ListingBook, endorser
from protocol.codec import decode
from protocol.envelope import Envelope
from protocol.liveness import (
    MAX_SYNC_ENTRY_BYTES,
    NOTICE_SYNC_LIFETIME_MS,
    WITHDRAWAL_LIFETIME_MS,
    Bounty,
    ListingWithdrawal,
)
from protocol.messages import EndorsementRevocation, SkillListing, SkillWarning
from protocol.topics import listing_shard

log = logging.getLogger(__name__)

LISTED = "listing"
WITHDRAWN = "withdrawal"
WITHDRAWN_MARK = "withdrawn"
"""``listings.superseded_by`` of a withdrawn listing (it drops out of every live query)."""

ACCEPT = "accept"
IGNORE_SUPERSEDED = "superseded"
IGNORE_WITHDRAWN = "withdrawn"
IGNORE_EXPIRED = "expired"
IGNORE_WARNED = "warned"  # a skill warning this node accepted names it (node.market.warnings)
WARNED = "skill_warning"
REVOKED = "endorsement_revocation"
LISTING_FEED_KINDS = (LISTED, WITHDRAWN, "bounty")
"""Feed kinds a ``listings-sync/1`` page carries (older nodes know no others)."""


@dataclass(frozen=True)
class SkillState:
    """One state of a seller's skill: a listing or a withdrawal, at a version and seq."""

    kind: str
    skill_version: int
    seq: int
    expires_at_ms: int


def decide(current: SkillState | None, incoming: SkillState, now_ms: int) -> str:
    """``ACCEPT`` or the reason ``incoming`` is ignored (see the module's state machine)."""
    if incoming.expires_at_ms <= now_ms:
        return IGNORE_EXPIRED
    if current is None or current.expires_at_ms <= now_ms:
        return ACCEPT
    if incoming.seq <= current.seq:
        return IGNORE_WITHDRAWN if current.kind == WITHDRAWN else IGNORE_SUPERSEDED
    if incoming.kind == LISTED:
        if current.kind == WITHDRAWN or incoming.skill_version >= current.skill_version:
            return ACCEPT
        return IGNORE_SUPERSEDED
    # A withdrawal of an older version than the one listed changes nothing.
    if incoming.skill_version >= current.skill_version:
        return ACCEPT
    return IGNORE_SUPERSEDED


def state_of(envelope: Envelope) -> tuple[str, SkillState]:
    """The feed key and state an accepted skills-topic or bounty envelope stands for."""
    message = envelope.message()
    seller = envelope.sender.hex()
    if isinstance(message, SkillListing):
        return (f"skill:{seller}:{message.stable_skill_id}",
                SkillState(LISTED, message.skill_version, envelope.seq, message.expires_at_ms))
    if isinstance(message, ListingWithdrawal):
        return (f"skill:{seller}:{message.stable_skill_id}",
                SkillState(WITHDRAWN, message.skill_version, envelope.seq,
                           envelope.issued_at_ms + WITHDRAWAL_LIFETIME_MS))
    if isinstance(message, Bounty):
        return (f"bounty:{seller}:{message.bounty_id}",
                SkillState("bounty", 1, envelope.seq, message.expires_at_ms))
    notice_expires = envelope.issued_at_ms + NOTICE_SYNC_LIFETIME_MS
    if isinstance(message, SkillWarning):
        return (f"warning:{seller}:{message.targets[0]}",
                SkillState(WARNED, 1, envelope.seq, notice_expires))
    if isinstance(message, EndorsementRevocation):
        return (f"revocation:{seller}:{message.listing_id}",
                SkillState(REVOKED, 1, envelope.seq, notice_expires))
    raise TypeError(f"{envelope.kind} has no lifecycle state")


class MarketFeed:
    """The ``market_feed`` table: newest state per key, paged by ``sync_seq``. Synchronous."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def current(self, conn: sqlite3.Connection, key: str) -> SkillState | None:
        row = conn.execute(
            "SELECT kind, skill_version, seq, expires_at_ms FROM market_feed WHERE feed_key=?",
            (key,),
        ).fetchone()
        return None if row is None else SkillState(row[0], row[1], row[2], row[3])

    def record(self, conn: sqlite3.Connection, key: str, state: SkillState, raw: bytes) -> None:
        # REPLACE deletes and re-inserts: the row gets a new sync_seq, past every cursor.
        conn.execute(
            "INSERT OR REPLACE INTO market_feed(feed_key, kind, skill_version, seq, "
            "expires_at_ms, envelope) VALUES (?,?,?,?,?,?)",
            (key, state.kind, state.skill_version, state.seq, state.expires_at_ms, raw),
        )

    def note(self, conn: sqlite3.Connection, envelope: Envelope, now: int) -> bool:
        """Keep an accepted notice (warning, revocation) in the feed, unless a newer one of
        the same key is there or it is past its sync lifetime; True if recorded."""
        key, state = state_of(envelope)
        if decide(self.current(conn, key), state, now) != ACCEPT:
            return False
        self.record(conn, key, state, envelope.to_bytes())
        return True

    def keep(self, envelope: Envelope, now: int) -> bool:
        """``note`` in a transaction of its own."""
        with self.db.transaction() as conn:
            return self.note(conn, envelope, now)

    def page(self, cursor: int, limit: int, max_bytes: int,
             now: int | None = None, notices: bool = False, shard_count: int = 0,
             shards: Collection[int] = ()) -> tuple[list[bytes], int, bool]:
        """Live entries after ``cursor``: (envelopes, next cursor, more?), within ``max_bytes``.

        ``notices``: warnings and revocations too (``listings-sync/2``), else only listings,
        withdrawals and bounties. ``shard_count`` > 0: only the listings whose category falls
        in ``shards`` (``protocol.topics.listing_shard``); the others are passed over (the
        cursor moves past them), withdrawals, bounties and notices all go."""
        only = "" if notices else (
            f" AND kind IN ({','.join(repr(kind) for kind in LISTING_FEED_KINDS)})")
        rows = self.db.execute(
            "SELECT sync_seq, envelope, kind FROM market_feed WHERE sync_seq > ? AND expires_at_ms > ?"
            f"{only} ORDER BY sync_seq LIMIT ?",
            (cursor, now if now is not None else wall_now_ms(), limit + 1),
        ).fetchall()
        entries: list[bytes] = []
        size = 0
        next_cursor = cursor
        for row in rows[:limit]:
            if len(row[1]) > MAX_SYNC_ENTRY_BYTES:  # cannot travel in a page: skip it
                next_cursor = int(row[0])
                continue
            if shard_count and row[2] == LISTED and _shard(row[1], shard_count) not in shards:
                next_cursor = int(row[0])
                continue
            if size + len(row[1]) > max_bytes:
                return entries, next_cursor, True
            entries.append(bytes(row[1]))
            size += len(row[1])
            next_cursor = int(row[0])
        return entries, next_cursor, len(rows) > limit

    def prune(self, now: int) -> int:
        with self.db.transaction() as conn:
            return conn.execute("DELETE FROM market_feed WHERE expires_at_ms <= ?", (now,)).rowcount


class ListingLifecycle:
    """Applies accepted skills-topic envelopes to the listing book through :func:`decide`."""

    def __init__(self, db: Database, book: ListingBook) -> None:
        self.db = db
        self.book = book
        self.feed = MarketFeed(db)

    def apply(self, envelope: Envelope, raw: bytes, embedding: np.ndarray | None,
              own_crystal_id: str | None = None, now: int | None = None) -> str:
        """Apply a listing or withdrawal; returns ``ACCEPT`` or the ignore reason."""
        now = now if now is not None else wall_now_ms()
        key, state = state_of(envelope)
        with self.db.transaction() as conn:
            verdict = decide(self.feed.current(conn, key), state, now)
            if verdict != ACCEPT:
                return verdict
            message = envelope.message()
            if isinstance(message, ListingWithdrawal):
                conn.execute(
                    "UPDATE listings SET superseded_by=? WHERE seller_key=? AND stable_skill_id=? "
                    "AND skill_version<=? AND (superseded_by IS NULL OR superseded_by=?)",
                    (WITHDRAWN_MARK, envelope.sender.hex(), message.stable_skill_id,
                     message.skill_version, WITHDRAWN_MARK),
                )
            else:
                assert isinstance(message, SkillListing)
                if conn.execute("SELECT 1 FROM listings WHERE listing_id=?",
                                (message.listing_id,)).fetchone():
                    _refresh(conn, envelope, message, raw, embedding, now, own_crystal_id)
                elif self.book.warned(conn, message):
                    return IGNORE_WARNED  # not in the book, not in the feed served to others
                else:
                    self.book.upsert(envelope, raw, embedding, own_crystal_id, now)
                # A relisting brings back nothing older than itself.
                conn.execute(
                    "UPDATE listings SET superseded_by=? WHERE seller_key=? AND stable_skill_id=? "
                    "AND skill_version<? AND (superseded_by IS NULL OR superseded_by=?)",
                    (message.listing_id, envelope.sender.hex(), message.stable_skill_id,
                     message.skill_version, WITHDRAWN_MARK),
                )
            self.feed.record(conn, key, state, raw)
        return ACCEPT

    def prune(self, now: int | None = None) -> dict[str, int]:
        """Forget expired feed states and peers' listings expired for over a day."""
        now = now if now is not None else wall_now_ms()
        feed = self.feed.prune(now)
        with self.db.transaction() as conn:
            listings = conn.execute(
                "DELETE FROM listings WHERE own_crystal_id IS NULL AND expires_at_ms <= ?",
                (now - 86_400_000,),
            ).rowcount
        return {"feed": feed, "listings": listings}


def _shard(raw: bytes, shard_count: int) -> int:
    """The listing shard of a stored listing envelope (stored only after validation)."""
    body = decode(bytes(raw)).get("body", {})
    return listing_shard(str(body.get("category", "")), shard_count)


def _refresh(conn: sqlite3.Connection, envelope: Envelope, listing: SkillListing, raw: bytes,
             embedding: np.ndarray | None, now: int, own_crystal_id: str | None) -> None:
    """A newer announcement of a known listing id: price, stats, expiry and envelope move."""
    values: dict[str, Any] = {
        "name": listing.name, "description": listing.description, "category": listing.category,
        "price_micro_usdc": listing.price_micro_usdc, "pay_to": listing.pay_to,
        "executions": listing.executions, "successes": listing.successes,
        "reward_sum_ppm": listing.reward_sum_ppm, "unique_buyers": listing.unique_buyers,
        "expires_at_ms": listing.expires_at_ms, "issued_at_ms": envelope.issued_at_ms,
        "received_at_ms": now, "envelope": raw, "superseded_by": None,
        "tags_json": json.dumps(list(listing.tags)),
    }
    endorsed = endorser(conn, listing)
    if endorsed is not None:  # else keep an endorsement recorded earlier (or none, if revoked)
        values["endorsed_by"] = endorsed
    if embedding is not None:
        values["embedding"] = np.asarray(embedding, np.float32).tobytes()
    if own_crystal_id is not None:
        values["own_crystal_id"] = own_crystal_id
    assignments = ", ".join(f"{column}=?" for column in values)
    conn.execute(f"UPDATE listings SET {assignments} WHERE listing_id=?",
                 (*values.values(), listing.listing_id))
