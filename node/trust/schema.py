"""Tables of the trust concept (peer aggregates, events, gate decisions) and their migrations.

Version 1 was migration 5 of the single list used before per-concept versions
(``node.db.LEGACY_MIGRATIONS``).
"""

from __future__ import annotations

from node.db import Migration

CONCEPT = "trust"

MIGRATIONS: list[Migration] = [
    # 1: trust ledger (node/trust): per-peer aggregates, the interaction events behind
    # them, and every ingestion-gate decision with its reason.
    [
        """
        CREATE TABLE trust_peers (
            peer_key TEXT PRIMARY KEY,
            satisfactory REAL NOT NULL DEFAULT 0,
            unsatisfactory REAL NOT NULL DEFAULT 0,
            events INTEGER NOT NULL DEFAULT 0,
            offences INTEGER NOT NULL DEFAULT 0,
            banned INTEGER NOT NULL DEFAULT 0,
            first_seen_ms INTEGER NOT NULL,
            last_event_ms INTEGER NOT NULL,
            last_reason TEXT NOT NULL DEFAULT ''
        )
        """,
        """
        CREATE TABLE trust_events (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at_ms INTEGER NOT NULL,
            peer_key TEXT NOT NULL,
            kind TEXT NOT NULL,
            weight REAL NOT NULL,
            offence INTEGER NOT NULL,
            detail TEXT NOT NULL DEFAULT ''
        )
        """,
        "CREATE INDEX trust_events_peer ON trust_events(peer_key, at_ms)",
        """
        CREATE TABLE trust_decisions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at_ms INTEGER NOT NULL,
            peer_key TEXT NOT NULL,
            kind TEXT NOT NULL,
            admitted INTEGER NOT NULL,
            level TEXT NOT NULL,
            reason TEXT NOT NULL
        )
        """,
        "CREATE INDEX trust_decisions_peer ON trust_decisions(peer_key, at_ms)",
    ],
]

SCHEMA_VERSION = len(MIGRATIONS)
