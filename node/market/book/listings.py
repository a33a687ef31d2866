"""The listing book: every skill listing this node knows, from gossip or its own.

Stored in the node's database (table ``listings``, ``node.market.schema``) so it
survives restarts and shares the database's single writer thread. A newer version of a
seller's skill supersedes older ones; expired and superseded listings drop
out of ``active()`` and search.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

import numpy as np

from node.crystals import now_ms
from node.db import Database
from node.market import schema
from protocol.envelope import Envelope
from protocol.messages import SkillListing


@dataclass(frozen=True)
class StoredListing:
    listing: SkillListing
    seller_key: bytes
    issued_at_ms: int
    received_at_ms: int
    superseded_by: str | None
    own_crystal_id: str | None
    envelope: bytes
    # A configured management key that vouched for it (checked before it was recorded).
    endorsed_by: str | None = None

    @property
    def success_rate(self) -> float:
        return self.listing.successes / self.listing.executions if self.listing.executions else 0.0

    def to_dict(self) -> dict[str, Any]:
        listing = self.listing
        return {
            "listing_id": listing.listing_id,
            "seller_key": self.seller_key.hex(),
            "stable_skill_id": listing.stable_skill_id,
            "skill_version": listing.skill_version,
            "name": listing.name,
            "description": listing.description,
            "tags": list(listing.tags),
            "category": listing.category,
            "content_hash": listing.content_hash,
            "size_bytes": listing.size_bytes,
            "price_micro_usdc": listing.price_micro_usdc,
            "pay_to": listing.pay_to,
            "chain_id": listing.chain_id,
            "token_address": listing.token_address,
            "executions": listing.executions,
            "successes": listing.successes,
            "success_rate": round(self.success_rate, 4),
            "avg_reward": round(listing.reward_sum_ppm / listing.executions / 1e6, 4)
            if listing.executions
            else 0.0,
            "unique_buyers": listing.unique_buyers,
            "expires_at_ms": listing.expires_at_ms,
            "previous_listing_id": listing.previous_listing_id,
            "endorsed_by": self.endorsed_by,
            "issued_at_ms": self.issued_at_ms,
            "received_at_ms": self.received_at_ms,
            "superseded_by": self.superseded_by,
            "own": self.own_crystal_id is not None,
            "crystal_id": self.own_crystal_id,
        }


def _from_row(row: sqlite3.Row) -> StoredListing:
    from protocol.envelope import open_envelope

    envelope = open_envelope(row["envelope"])
    listing = envelope.message()
    assert isinstance(listing, SkillListing)
    return StoredListing(
        listing=listing,
        seller_key=bytes.fromhex(row["seller_key"]),
        issued_at_ms=row["issued_at_ms"],
        received_at_ms=row["received_at_ms"],
        superseded_by=row["superseded_by"],
        own_crystal_id=row["own_crystal_id"],
        envelope=row["envelope"],
        endorsed_by=row["endorsed_by"],
    )


class ListingBook:
    """Listings in SQLite. Synchronous: call through ``Database.run``."""

    def __init__(self, db: Database) -> None:
        self.db = db
        db.migrate(schema.CONCEPT, schema.MIGRATIONS)

    def upsert(
        self,
        envelope: Envelope,
        raw: bytes,
        embedding: np.ndarray | None,
        own_crystal_id: str | None = None,
        received_at_ms: int | None = None,
    ) -> bool:
        """Record a validated listing; returns False if it was already known."""
        listing = envelope.message()
        if not isinstance(listing, SkillListing):
            raise TypeError("not a skill listing")
        seller = envelope.sender.hex()
        with self.db.transaction() as conn:
            if conn.execute(
                "SELECT 1 FROM listings WHERE listing_id=?", (listing.listing_id,)
            ).fetchone():
                return False
            if self.warned(conn, listing):
                return False
            newer = conn.execute(
                "SELECT listing_id FROM listings WHERE seller_key=? AND stable_skill_id=? "
                "AND skill_version>? ORDER BY skill_version DESC LIMIT 1",
                (seller, listing.stable_skill_id, listing.skill_version),
            ).fetchone()
            conn.execute(
                "INSERT INTO listings(listing_id, seller_key, stable_skill_id, skill_version, name, "
                "description, tags_json, category, content_hash, size_bytes, price_micro_usdc, "
                "pay_to, chain_id, token_address, executions, successes, reward_sum_ppm, "
                "unique_buyers, expires_at_ms, previous_listing_id, endorsed_by, issued_at_ms, "
                "received_at_ms, superseded_by, own_crystal_id, envelope, embedding) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    listing.listing_id,
                    seller,
                    listing.stable_skill_id,
                    listing.skill_version,
                    listing.name,
                    listing.description,
                    json.dumps(list(listing.tags)),
                    listing.category,
                    listing.content_hash,
                    listing.size_bytes,
                    listing.price_micro_usdc,
                    listing.pay_to,
                    listing.chain_id,
                    listing.token_address,
                    listing.executions,
                    listing.successes,
                    listing.reward_sum_ppm,
                    listing.unique_buyers,
                    listing.expires_at_ms,
                    listing.previous_listing_id,
                    endorser(conn, listing),
                    envelope.issued_at_ms,
                    received_at_ms or now_ms(),
                    newer["listing_id"] if newer else None,
                    own_crystal_id,
                    raw,
                    None if embedding is None else np.asarray(embedding, np.float32).tobytes(),
                ),
            )
            if newer is None:
                conn.execute(
                    "UPDATE listings SET superseded_by=? WHERE seller_key=? AND stable_skill_id=? "
                    "AND skill_version<? AND superseded_by IS NULL",
                    (listing.listing_id, seller, listing.stable_skill_id, listing.skill_version),
                )
        return True

    @staticmethod
    def warned(conn: sqlite3.Connection, listing: SkillListing) -> bool:
        """True if an accepted skill warning names the listing or its content: it never comes
        back into the book, whichever way it arrives (``node.market.warnings``)."""
        return conn.execute(
            "SELECT 1 FROM skill_warnings WHERE target IN (?, ?)",
            (listing.listing_id, listing.content_hash),
        ).fetchone() is not None

    def own(self, now: int | None = None) -> list[StoredListing]:
        """This node's own live listings (newest version of each skill)."""
        rows = self.db.execute(
            "SELECT * FROM listings WHERE own_crystal_id IS NOT NULL AND superseded_by IS NULL "
            "AND expires_at_ms > ? ORDER BY issued_at_ms DESC",
            (now if now is not None else now_ms(),),
        ).fetchall()
        return [_from_row(row) for row in rows]

    def record_endorsement(self, listing_id: str, management_key: bytes, at_ms: int = 0) -> bool:
        """Mark a listing as endorsed by ``management_key`` (already verified by the caller),
        unless that key revoked it at or after ``at_ms`` (the endorsement's issue time)."""
        with self.db.transaction() as conn:
            if not _newer_act(conn, listing_id, management_key.hex(), at_ms, revoked=False):
                return False
            cursor = conn.execute(
                "UPDATE listings SET endorsed_by=? WHERE listing_id=?",
                (management_key.hex(), listing_id),
            )
            return cursor.rowcount > 0

    def revoke_endorsement(self, listing_id: str, management_key: bytes, at_ms: int) -> bool:
        """``management_key`` withdrew its endorsement at ``at_ms``: drop it, and refuse it
        later from anything older (a replayed endorsement, the seller's embedded copy)."""
        with self.db.transaction() as conn:
            if not _newer_act(conn, listing_id, management_key.hex(), at_ms, revoked=True):
                return False
            conn.execute("UPDATE listings SET endorsed_by=NULL WHERE listing_id=? AND endorsed_by=?",
                         (listing_id, management_key.hex()))
            return True

    def get(self, listing_id: str) -> StoredListing | None:
        row = self.db.execute(
            "SELECT * FROM listings WHERE listing_id=?", (listing_id,)
        ).fetchone()
        if row is None and 6 <= len(listing_id) < 64:
            rows = self.db.execute(
                "SELECT * FROM listings WHERE listing_id LIKE ? LIMIT 2", (listing_id + "%",)
            ).fetchall()
            row = rows[0] if len(rows) == 1 else None
        return None if row is None else _from_row(row)

    def any_of_seller(self, seller_key: bytes) -> StoredListing | None:
        """The seller's newest listing this node knows (its pay-to, token and chain)."""
        row = self.db.execute(
            "SELECT * FROM listings WHERE seller_key=? AND superseded_by IS NULL "
            "ORDER BY issued_at_ms DESC LIMIT 1", (seller_key.hex(),)).fetchone()
        return None if row is None else _from_row(row)

    def active(
        self,
        now: int | None = None,
        category: str | None = None,
        max_price_micro_usdc: int | None = None,
        tags: tuple[str, ...] = (),
        include_own: bool = True,
    ) -> list[StoredListing]:
        clauses = ["superseded_by IS NULL", "expires_at_ms > ?"]
        params: list[Any] = [now or now_ms()]
        if category:
            clauses.append("category = ?")
            params.append(category)
        if max_price_micro_usdc is not None:
            clauses.append("price_micro_usdc <= ?")
            params.append(max_price_micro_usdc)
        if not include_own:
            clauses.append("own_crystal_id IS NULL")
        rows = self.db.execute(
            f"SELECT * FROM listings WHERE {' AND '.join(clauses)} ORDER BY received_at_ms DESC",
            params,
        ).fetchall()
        listings = [_from_row(row) for row in rows]
        if tags:
            wanted = set(tags)
            listings = [item for item in listings if wanted <= set(item.listing.tags)]
        return listings

    def embeddings(self, listing_ids: list[str]) -> dict[str, np.ndarray]:
        if not listing_ids:
            return {}
        marks = ",".join("?" * len(listing_ids))
        rows = self.db.execute(
            f"SELECT listing_id, embedding FROM listings WHERE listing_id IN ({marks}) "
            "AND embedding IS NOT NULL",
            listing_ids,
        ).fetchall()
        return {row[0]: np.frombuffer(row[1], dtype=np.float32) for row in rows}

    def count_similar(self, category: str, exclude_seller: bytes | None = None) -> int:
        """Active listings in the same category (scarcity input for pricing)."""
        row = self.db.execute(
            "SELECT COUNT(DISTINCT seller_key || stable_skill_id) FROM listings "
            "WHERE category=? AND superseded_by IS NULL AND expires_at_ms > ? AND seller_key != ?",
            (category, now_ms(), exclude_seller.hex() if exclude_seller else ""),
        ).fetchone()
        return int(row[0])

    def own_for_crystal(self, crystal_id: str) -> StoredListing | None:
        row = self.db.execute(
            "SELECT * FROM listings WHERE own_crystal_id=? AND superseded_by IS NULL "
            "ORDER BY skill_version DESC LIMIT 1",
            (crystal_id,),
        ).fetchone()
        return None if row is None else _from_row(row)

    def own_active(self) -> list[StoredListing]:
        rows = self.db.execute(
            "SELECT * FROM listings WHERE own_crystal_id IS NOT NULL AND superseded_by IS NULL "
            "AND expires_at_ms > ?",
            (now_ms(),),
        ).fetchall()
        return [_from_row(row) for row in rows]

    def count(self) -> int:
        return int(
            self.db.execute(
                "SELECT COUNT(*) FROM listings WHERE superseded_by IS NULL AND expires_at_ms > ?",
                (now_ms(),),
            ).fetchone()[0]
        )


def _newer_act(conn: sqlite3.Connection, listing_id: str, key: str, at_ms: int, revoked: bool) -> bool:
    """Record an endorse (``revoked`` False) or revoke act if newer than the last one; True if it was."""
    row = conn.execute("SELECT at_ms FROM endorsement_states WHERE listing_id=? AND management_key=?",
                       (listing_id, key)).fetchone()
    if row is not None and row[0] >= at_ms:
        return False
    conn.execute("INSERT INTO endorsement_states(listing_id, management_key, revoked, at_ms) "
                 "VALUES (?,?,?,?) ON CONFLICT(listing_id, management_key) DO UPDATE SET "
                 "revoked=excluded.revoked, at_ms=excluded.at_ms",
                 (listing_id, key, int(revoked), at_ms))
    return True


def endorser(conn: sqlite3.Connection, listing: SkillListing) -> str | None:
    """The key of the endorsement a listing carries, unless that key revoked it."""
    if listing.endorsement is None:
        return None
    key = listing.endorsement.management_key.hex()
    row = conn.execute("SELECT revoked FROM endorsement_states WHERE listing_id=? AND management_key=?",
                       (listing.listing_id, key)).fetchone()
    return None if row is not None and row[0] else key
