"""Bounties: standing requests for a skill, matched against listings by meaning.

A bounty (``protocol.liveness.Bounty``, topic ``/crystalmesh/1/bounties``) is
"need: a skill that ..." with a reward in integer micro-USDC. Receivers keep
the newest state per (poster, bounty_id) (higher envelope seq wins) in the
``bounties`` table and in the market feed, so late joiners sync them too.

Matching is by meaning: a listing matches an open bounty when the cosine
similarity of their embeddings (the node's embedder, unit vectors) is at
least ``market.bounty_match_threshold``. The number of open bounties that
match a listing is ``bountyMatches`` in the demand multiplier of the price
(seed 000, ``node.market.selling.pricing.quote``); a fulfilled or expired bounty no
longer counts. The poster fulfils a bounty by buying a matching listing
(``crystalmesh bounty fulfil``) and re-announces it with ``fulfilled_by``.
"""

from __future__ import annotations

import logging
import sqlite3
from dataclasses import dataclass
from typing import Any

import numpy as np

from node.crystals import now_ms as wall_now_ms
from node.db import Database
from node.market.book.lifecycle import ACCEPT, MarketFeed, decide, state_of
from protocol.envelope import Envelope
from protocol.liveness import Bounty

log = logging.getLogger(__name__)

DEFAULT_MATCH_THRESHOLD = 0.5
"""Cosine similarity at which a listing answers a bounty (MiniLM: same need, other words)."""


def count_matches(listing_vector: np.ndarray, bounty_vectors: np.ndarray, threshold: float,
                  posters: list[str] | None = None) -> int:
    """Open bounties within ``threshold`` cosine of the listing (unit vectors): bountyMatches.

    With ``posters`` (the poster key of each row) a poster counts once however many
    bounties it posts, so one key cannot inflate a price by repeating itself.
    """
    if bounty_vectors.size == 0:
        return 0
    hits = np.flatnonzero(bounty_vectors @ np.asarray(listing_vector, np.float32) >= threshold)
    if posters is None:
        return int(hits.size)
    return len({posters[i] for i in hits})


@dataclass(frozen=True)
class StoredBounty:
    sender_key: bytes
    bounty: Bounty
    issued_at_ms: int
    own: bool

    def status(self, now: int) -> str:
        if self.bounty.fulfilled_by is not None:
            return "fulfilled"
        return "open" if self.bounty.expires_at_ms > now else "expired"

    def to_dict(self, now: int) -> dict[str, Any]:
        bounty = self.bounty
        return {
            "bounty_id": bounty.bounty_id, "poster_key": self.sender_key.hex(),
            "text": bounty.text, "reward_micro_usdc": bounty.reward_micro_usdc,
            "expires_at_ms": bounty.expires_at_ms, "fulfilled_by": bounty.fulfilled_by,
            "issued_at_ms": self.issued_at_ms, "own": self.own, "status": self.status(now),
        }


def _from_row(row: sqlite3.Row) -> StoredBounty:
    return StoredBounty(
        sender_key=bytes.fromhex(row["sender_key"]),
        bounty=Bounty(bounty_id=row["bounty_id"], text=row["text"],
                      reward_micro_usdc=row["reward_micro_usdc"],
                      expires_at_ms=row["expires_at_ms"], fulfilled_by=row["fulfilled_by"]),
        issued_at_ms=row["issued_at_ms"],
        own=bool(row["own"]),
    )


class BountyBoard:
    """Bounties in SQLite. Synchronous: call through ``Database.run``."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.feed = MarketFeed(db)

    def apply(self, envelope: Envelope, raw: bytes, embedding: np.ndarray | None,
              own: bool = False, now: int | None = None) -> str:
        """Record a validated bounty if it is the newest state; ``ACCEPT`` or ignore reason."""
        bounty = envelope.message()
        if not isinstance(bounty, Bounty):
            raise TypeError("not a bounty")
        now = now if now is not None else wall_now_ms()
        key, state = state_of(envelope)
        with self.db.transaction() as conn:
            verdict = decide(self.feed.current(conn, key), state, now)
            if verdict != ACCEPT:
                return verdict
            conn.execute(
                "INSERT OR REPLACE INTO bounties(sender_key, bounty_id, text, reward_micro_usdc, "
                "expires_at_ms, fulfilled_by, issued_at_ms, received_at_ms, own, embedding) "
                "VALUES (?,?,?,?,?,?,?,?,?,?)",
                (envelope.sender.hex(), bounty.bounty_id, bounty.text, bounty.reward_micro_usdc,
                 bounty.expires_at_ms, bounty.fulfilled_by, envelope.issued_at_ms, now, int(own),
                 None if embedding is None else np.asarray(embedding, np.float32).tobytes()),
            )
            self.feed.record(conn, key, state, raw)
        return ACCEPT

    def get(self, bounty_id: str, sender_key: bytes | None = None) -> StoredBounty | None:
        sql, params = "SELECT * FROM bounties WHERE bounty_id LIKE ?", [bounty_id + "%"]
        if sender_key is not None:
            sql += " AND sender_key=?"
            params.append(sender_key.hex())
        rows = self.db.execute(sql + " LIMIT 2", params).fetchall()
        return _from_row(rows[0]) if len(rows) == 1 and len(bounty_id) >= 6 else None

    def all(self, now: int | None = None, include_closed: bool = True,
            limit: int = 200) -> list[StoredBounty]:
        now = now if now is not None else wall_now_ms()
        clauses = "" if include_closed else " WHERE fulfilled_by IS NULL AND expires_at_ms > ?"
        params: list[Any] = [] if include_closed else [now]
        rows = self.db.execute(
            f"SELECT * FROM bounties{clauses} ORDER BY issued_at_ms DESC LIMIT ?",
            (*params, limit),
        ).fetchall()
        return [_from_row(row) for row in rows]

    def open_vectors(self, now: int | None = None, exclude_sender: bytes | None = None,
                     by_poster: bool = False) -> tuple[list[str], np.ndarray]:
        """Ids (or poster keys) and embedding matrix of open bounties, not posted by one key."""
        rows = self.db.execute(
            f"SELECT {'sender_key' if by_poster else 'bounty_id'}, embedding FROM bounties "
            "WHERE fulfilled_by IS NULL "
            "AND expires_at_ms > ? AND embedding IS NOT NULL AND sender_key != ?",
            (now if now is not None else wall_now_ms(),
             exclude_sender.hex() if exclude_sender else ""),
        ).fetchall()
        if not rows:
            return [], np.zeros((0, 0), np.float32)
        return [row[0] for row in rows], np.stack(
            [np.frombuffer(row[1], dtype=np.float32) for row in rows]
        )

    def embedding(self, bounty_id: str) -> np.ndarray | None:
        row = self.db.execute(
            "SELECT embedding FROM bounties WHERE bounty_id=? AND embedding IS NOT NULL",
            (bounty_id,),
        ).fetchone()
        return None if row is None else np.frombuffer(row[0], dtype=np.float32)

    def prune(self, now: int | None = None) -> int:
        now = now if now is not None else wall_now_ms()
        with self.db.transaction() as conn:
            return conn.execute("DELETE FROM bounties WHERE expires_at_ms <= ?",
                                (now - 86_400_000,)).rowcount
