"""The interaction ledger: what this node has experienced with each peer.

Every interaction is an *event* about one peer (its Ed25519 public key, hex):

- ``delivered_ok`` — a purchase was delivered and its content hash matched;
- ``delivery_failed`` — a paid purchase was not delivered (timeout, error);
- ``delivery_tampered`` — the delivered payload did not match the advertised hash;
- ``execution_success`` / ``execution_failure`` — outcome of running a skill
  acquired from that peer;
- ``invalid_message`` — the gossip validator rejected a message the peer
  forwarded to us (``detail`` is the rejection reason).

Each event adds its weight to the peer's satisfactory or unsatisfactory total;
EigenTrust's local trust is their difference (Kamvar et al. 2003, §4.1)::

    s_ij = Σ w(satisfactory events) − Σ w(unsatisfactory events)
    c_ij = max(s_ij, 0) / Σ_j max(s_ij, 0)          (normalise_local_trust)

Some events are *proven misbehaviour* (offences): a tampered delivery, or a
message that no honest node forwards (forged signature, garbage bytes,
weather not signed by a management key, ...). After ``ban_after_offences`` of
them the peer is banned.

Storage: tables ``trust_peers`` (aggregates), ``trust_events`` (the log) and
``trust_decisions`` (gate decisions) in the node's database (``node.trust.schema``). Each write is one
transaction; the in-memory mirror of ``trust_peers`` is only updated after the
transaction committed, so reads never see a write that did not happen. Like
every repository, a ``Ledger`` is used by one thread at a time (``Database.run``).
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from node.crystals import now_ms
from node.db import Database
from node.trust import schema
from node.trust.eigentrust import normalise_local_trust
from node.trust.events import (
    DEFAULT_INVALID_MESSAGE_WEIGHTS,
    DEFAULT_OFFENCE_REASONS,
    EventWeights,
    PeerRecord,
    TrustEvent,
    UnknownPeerKey,
    peer_key_hex,
)

logger = logging.getLogger(__name__)


class Ledger:
    """Events and per-peer aggregates in the node's database, mirrored in memory."""

    def __init__(
        self,
        db: Database,
        weights: EventWeights | None = None,
        clock: Callable[[], int] = now_ms,
    ) -> None:
        self.db = db
        db.migrate(schema.CONCEPT, schema.MIGRATIONS)
        self.weights = weights or EventWeights()
        self.clock = clock
        # The mirror is written by the database's thread and read from the event loop
        # (levels, gossipsub scores): the lock keeps iteration safe.
        self._lock = threading.Lock()
        self._peers: dict[str, PeerRecord] = {}
        self._row: Mapping[str, float] | None = None
        self.reload()

    def reload(self) -> None:
        """Re-read ``trust_peers`` into memory."""
        rows = self.db.execute("SELECT * FROM trust_peers").fetchall()
        with self._lock:
            self._peers = {row["peer_key"]: _record_from_row(row) for row in rows}
            self._row = None

    # --- writes -----------------------------------------------------------------------------
    def record(
        self,
        peer_key: bytes | str,
        event: TrustEvent | str,
        detail: str = "",
        at_ms: int | None = None,
    ) -> PeerRecord:
        """Log one event and update the peer's aggregate, in one transaction."""
        return self.record_many([(peer_key, event, detail)], at_ms)[-1]

    def record_many(
        self,
        events: Iterable[tuple[bytes | str, TrustEvent | str, str]],
        at_ms: int | None = None,
    ) -> list[PeerRecord]:
        """Log several events in one transaction; returns the updated record after each."""
        at = self.clock() if at_ms is None else at_ms
        pending: dict[str, PeerRecord] = {}
        out: list[PeerRecord] = []
        with self.db.transaction() as conn:
            for peer_key, raw_event, detail in events:
                key = peer_key_hex(peer_key)
                event = TrustEvent(raw_event)
                weight = self.weights.weight(event, detail)
                offence = self.weights.is_offence(event, detail)
                signed_weight = weight if event.satisfactory else -weight
                conn.execute(
                    "INSERT INTO trust_events(at_ms, peer_key, kind, weight, offence, detail) "
                    "VALUES (?, ?, ?, ?, ?, ?)",
                    (at, key, event.value, signed_weight, int(offence), detail),
                )
                before = (
                    pending.get(key) or self._peers.get(key) or PeerRecord(key, first_seen_ms=at)
                )
                after = replace(
                    before,
                    satisfactory=before.satisfactory + (weight if event.satisfactory else 0.0),
                    unsatisfactory=before.unsatisfactory + (0.0 if event.satisfactory else weight),
                    events=before.events + 1,
                    offences=before.offences + int(offence),
                    last_event_ms=at,
                    last_reason=f"{event.value}: {detail}" if detail else event.value,
                )
                _upsert(conn, after)
                pending[key] = after
                out.append(after)
        with self._lock:
            self._peers.update(pending)
            self._row = None
        return out

    def set_banned(self, peer_key: bytes | str, banned: bool, reason: str) -> PeerRecord:
        """An explicit ban or unban; unbanning also forgives past offences."""
        key = peer_key_hex(peer_key)
        at = self.clock()
        before = self._peers.get(key) or PeerRecord(key, first_seen_ms=at, last_event_ms=at)
        after = replace(
            before,
            banned=banned,
            offences=before.offences if banned else 0,
            last_reason=reason,
        )
        with self.db.transaction() as conn:
            _upsert(conn, after)
        with self._lock:
            self._peers[key] = after
            self._row = None
        return after

    def record_decision(
        self,
        peer_key: bytes | str,
        kind: str,
        admitted: bool,
        level: str,
        reason: str,
        at_ms: int | None = None,
    ) -> None:
        """Log one ingestion-gate decision; the reason also becomes the peer's last reason."""
        key = peer_key_hex(peer_key)
        at = self.clock() if at_ms is None else at_ms
        verdict = "admitted" if admitted else "rejected"
        last_reason = f"{verdict} {kind}: {reason}"
        with self.db.transaction() as conn:
            conn.execute(
                "INSERT INTO trust_decisions(at_ms, peer_key, kind, admitted, level, reason) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                (at, key, kind, int(admitted), level, reason),
            )
            # Only peers already in the ledger carry a last reason: a decision alone is
            # not evidence about a peer, so it does not create a trust_peers row.
            conn.execute(
                "UPDATE trust_peers SET last_reason=? WHERE peer_key=?", (last_reason, key)
            )
        with self._lock:
            record = self._peers.get(key)
            if record is not None:
                self._peers[key] = replace(record, last_reason=last_reason)

    def prune(self, keep_events: int = 100_000, keep_decisions: int = 100_000) -> int:
        """Drop all but the newest rows of the event and decision logs (aggregates stay)."""
        with self.db.transaction() as conn:
            removed = conn.execute(
                "DELETE FROM trust_events WHERE id <= (SELECT MAX(id) FROM trust_events) - ?",
                (keep_events,),
            ).rowcount
            removed += conn.execute(
                "DELETE FROM trust_decisions WHERE id <= (SELECT MAX(id) FROM trust_decisions) - ?",
                (keep_decisions,),
            ).rowcount
        return int(removed)

    # --- reads ------------------------------------------------------------------------------
    def peer(self, peer_key: bytes | str) -> PeerRecord | None:
        return self._peers.get(peer_key_hex(peer_key))

    def peers(self) -> list[PeerRecord]:
        with self._lock:
            return list(self._peers.values())

    def local_trust(self) -> dict[str, float]:
        """Raw ``s_ij`` of every peer with weighted evidence."""
        with self._lock:
            return {
                key: record.local_trust
                for key, record in self._peers.items()
                if record.has_evidence
            }

    def distrusted(self) -> list[str]:
        """Peers we dealt with and found wanting: banned, or weighted evidence with ``s_ij ≤ 0``."""
        with self._lock:
            return [
                key
                for key, record in self._peers.items()
                if record.banned or (record.has_evidence and record.local_trust <= 0)
            ]

    def normalised_row(self) -> Mapping[str, float]:
        """``c_ij`` over non-banned peers; a read-only view, cached until the next write."""
        with self._lock:
            if self._row is None:
                self._row = MappingProxyType(
                    normalise_local_trust(
                        {
                            key: record.local_trust
                            for key, record in self._peers.items()
                            if not record.banned
                        }
                    )
                )
            return self._row

    def events(self, peer_key: bytes | str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        return _select(self.db, "trust_events", peer_key, limit)

    def decisions(
        self, peer_key: bytes | str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]:
        rows = _select(self.db, "trust_decisions", peer_key, limit)
        for row in rows:
            row["admitted"] = bool(row["admitted"])
        return rows


def _record_from_row(row: sqlite3.Row) -> PeerRecord:
    return PeerRecord(
        peer_key=row["peer_key"],
        satisfactory=float(row["satisfactory"]),
        unsatisfactory=float(row["unsatisfactory"]),
        events=int(row["events"]),
        offences=int(row["offences"]),
        banned=bool(row["banned"]),
        first_seen_ms=int(row["first_seen_ms"]),
        last_event_ms=int(row["last_event_ms"]),
        last_reason=str(row["last_reason"]),
    )


def _upsert(conn: sqlite3.Connection, record: PeerRecord) -> None:
    conn.execute(
        "INSERT INTO trust_peers(peer_key, satisfactory, unsatisfactory, events, offences, "
        "banned, first_seen_ms, last_event_ms, last_reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT(peer_key) DO UPDATE SET satisfactory=excluded.satisfactory, "
        "unsatisfactory=excluded.unsatisfactory, events=excluded.events, "
        "offences=excluded.offences, banned=excluded.banned, "
        "last_event_ms=excluded.last_event_ms, last_reason=excluded.last_reason",
        (
            record.peer_key,
            record.satisfactory,
            record.unsatisfactory,
            record.events,
            record.offences,
            int(record.banned),
            record.first_seen_ms,
            record.last_event_ms,
            record.last_reason,
        ),
    )


def _select(
    db: Database, table: str, peer_key: bytes | str | None, limit: int
) -> list[dict[str, Any]]:
    if peer_key is None:
        rows = db.execute(f"SELECT * FROM {table} ORDER BY id DESC LIMIT ?", (limit,))
    else:
        rows = db.execute(
            f"SELECT * FROM {table} WHERE peer_key=? ORDER BY id DESC LIMIT ?",
            (peer_key_hex(peer_key), limit),
        )
    return [dict(row) for row in rows.fetchall()]


__all__ = [
    "DEFAULT_INVALID_MESSAGE_WEIGHTS",
    "DEFAULT_OFFENCE_REASONS",
    "EventWeights",
    "Ledger",
    "PeerRecord",
    "TrustEvent",
    "UnknownPeerKey",
    "peer_key_hex",
]
