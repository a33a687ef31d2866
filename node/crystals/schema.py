"""SQLite schema of the crystal store and its migrations.

Each migration is a list of statements run in one transaction together with
the bump of ``meta.schema_version``; a store opened by older code is migrated
forward on open, a store written by newer code is refused.
"""

from __future__ import annotations

import sqlite3

from node.errors import CrystalmeshError

MIGRATIONS: list[list[str]] = [
    # 1: crystals, full-text index, audit log, meta
    [
        """
        CREATE TABLE IF NOT EXISTS meta (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        )
        """,
        """
        CREATE TABLE crystals (
            rowid INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            text TEXT NOT NULL,
            embedding BLOB,
            path TEXT,
            source TEXT NOT NULL,
            start_line INTEGER,
            end_line INTEGER,
            hash TEXT NOT NULL UNIQUE,
            semantic_type TEXT NOT NULL,
            origin TEXT NOT NULL,
            lifecycle TEXT NOT NULL,
            importance_score REAL NOT NULL,
            access_count INTEGER NOT NULL DEFAULT 0,
            last_accessed_at_ms INTEGER,
            created_at_ms INTEGER NOT NULL,
            emotional_valence REAL,
            hormonal_json TEXT,
            steering_reward REAL NOT NULL DEFAULT 0,
            access_scope TEXT NOT NULL,
            sensitivity TEXT NOT NULL,
            governance_json TEXT NOT NULL,
            provenance_json TEXT NOT NULL,
            parent_id TEXT,
            stable_skill_id TEXT,
            skill_version INTEGER NOT NULL DEFAULT 1,
            previous_version_id TEXT,
            deprecated INTEGER NOT NULL DEFAULT 0,
            deprecated_by TEXT,
            skill_tags_json TEXT NOT NULL DEFAULT '[]',
            skill_category TEXT,
            is_verified INTEGER NOT NULL DEFAULT 0,
            verified_by TEXT,
            executions INTEGER NOT NULL DEFAULT 0,
            successes INTEGER NOT NULL DEFAULT 0,
            reward_sum REAL NOT NULL DEFAULT 0
        )
        """,
        "CREATE INDEX crystals_type_lifecycle ON crystals(semantic_type, lifecycle)",
        "CREATE INDEX crystals_path ON crystals(path)",
        "CREATE INDEX crystals_stable_skill ON crystals(stable_skill_id, skill_version)",
        """
        CREATE VIRTUAL TABLE crystals_fts USING fts5(
            text, content='crystals', content_rowid='rowid', tokenize='porter unicode61'
        )
        """,
        """
        CREATE TRIGGER crystals_fts_insert AFTER INSERT ON crystals BEGIN
            INSERT INTO crystals_fts(rowid, text) VALUES (new.rowid, new.text);
        END
        """,
        """
        CREATE TRIGGER crystals_fts_delete AFTER DELETE ON crystals BEGIN
            INSERT INTO crystals_fts(crystals_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
        END
        """,
        """
        CREATE TRIGGER crystals_fts_update AFTER UPDATE OF text ON crystals BEGIN
            INSERT INTO crystals_fts(crystals_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
            INSERT INTO crystals_fts(rowid, text) VALUES (new.rowid, new.text);
        END
        """,
        """
        CREATE TABLE memory_audit_log (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at_ms INTEGER NOT NULL,
            crystal_id TEXT,
            action TEXT NOT NULL,
            from_state TEXT,
            to_state TEXT,
            detail_json TEXT NOT NULL DEFAULT '{}'
        )
        """,
        "CREATE INDEX audit_crystal ON memory_audit_log(crystal_id)",
    ],
    # 2: skill execution log (each outcome, so stats can be audited and re-derived)
    [
        """
        CREATE TABLE skill_executions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            crystal_id TEXT NOT NULL,
            at_ms INTEGER NOT NULL,
            success INTEGER NOT NULL,
            reward REAL NOT NULL
        )
        """,
        "CREATE INDEX skill_executions_crystal ON skill_executions(crystal_id)",
    ],
    # 3: the listing book (skill listings known from gossip, own ones included)
    [
        """
        CREATE TABLE listings (
            listing_id TEXT PRIMARY KEY,
            seller_key TEXT NOT NULL,
            stable_skill_id TEXT NOT NULL,
            skill_version INTEGER NOT NULL,
            name TEXT NOT NULL,
            description TEXT NOT NULL,
            tags_json TEXT NOT NULL,
            category TEXT NOT NULL,
            content_hash TEXT NOT NULL,
            size_bytes INTEGER NOT NULL,
            price_micro_usdc INTEGER NOT NULL,
            pay_to TEXT NOT NULL,
            chain_id INTEGER NOT NULL,
            token_address TEXT NOT NULL,
            executions INTEGER NOT NULL,
            successes INTEGER NOT NULL,
            reward_sum_ppm INTEGER NOT NULL,
            unique_buyers INTEGER NOT NULL,
            expires_at_ms INTEGER NOT NULL,
            previous_listing_id TEXT,
            endorsed_by TEXT,
            issued_at_ms INTEGER NOT NULL,
            received_at_ms INTEGER NOT NULL,
            superseded_by TEXT,
            own_crystal_id TEXT,
            envelope BLOB NOT NULL,
            embedding BLOB
        )
        """,
        "CREATE INDEX listings_skill ON listings(seller_key, stable_skill_id, skill_version)",
        "CREATE INDEX listings_expiry ON listings(expires_at_ms)",
    ],
    # 4: marketplace ledgers. The seller records a sale before settling it and the
    # buyer records a purchase before paying, so neither side forgets money moved.
    [
        """
        CREATE TABLE sales (
            request_id TEXT PRIMARY KEY,
            listing_id TEXT NOT NULL,
            crystal_id TEXT NOT NULL,
            stable_skill_id TEXT NOT NULL,
            buyer_key TEXT NOT NULL,
            buyer_address TEXT NOT NULL,
            price_micro_usdc INTEGER NOT NULL,
            auth_nonce TEXT,
            state TEXT NOT NULL,
            tx_hash TEXT,
            reason TEXT,
            created_at_ms INTEGER NOT NULL,
            updated_at_ms INTEGER NOT NULL
        )
        """,
        "CREATE INDEX sales_listing ON sales(listing_id, buyer_key)",
        "CREATE INDEX sales_tx ON sales(tx_hash)",
        """
        CREATE TABLE purchases (
            request_id TEXT PRIMARY KEY,
            listing_id TEXT NOT NULL,
            seller_key TEXT NOT NULL,
            name TEXT NOT NULL,
            price_micro_usdc INTEGER NOT NULL,
            pay_to TEXT NOT NULL,
            auth_nonce TEXT,
            state TEXT NOT NULL,
            tx_hash TEXT,
            crystal_id TEXT,
            reason TEXT,
            created_at_ms INTEGER NOT NULL,
            updated_at_ms INTEGER NOT NULL
        )
        """,
        "CREATE INDEX purchases_listing ON purchases(listing_id)",
        "CREATE INDEX purchases_created ON purchases(created_at_ms)",
    ],
    # 5: trust ledger (node/trust): per-peer aggregates, the interaction events behind
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
    # 6: a purchase keeps the authorization it signed (so a retry resends it instead of
    # signing a second payment) until when it can settle, and a paid delivery the
    # ingestion gate kept out of memory (the buyer still owns what it paid for).
    [
        "ALTER TABLE purchases ADD COLUMN authorization_json TEXT",
        "ALTER TABLE purchases ADD COLUMN valid_before_s INTEGER",
        "ALTER TABLE purchases ADD COLUMN payload TEXT",
    ],
]

SCHEMA_VERSION = len(MIGRATIONS)


class SchemaError(CrystalmeshError, RuntimeError):
    http_status = 500
    code = "schema"

    """The database was written by a newer crystalmesh or is not a crystal store."""


def schema_version(conn: sqlite3.Connection) -> int:
    has_meta = conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='meta'"
    ).fetchone()
    if not has_meta:
        return 0
    row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    return int(row[0]) if row else 0


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the schema up to SCHEMA_VERSION; returns the number of migrations applied."""
    current = schema_version(conn)
    if current > SCHEMA_VERSION:
        raise SchemaError(
            f"database schema version {current} is newer than this crystalmesh "
            f"understands ({SCHEMA_VERSION}); upgrade crystalmesh"
        )
    applied = 0
    # The connection is in autocommit mode (isolation_level=None), so DDL and
    # the version bump share one explicit transaction per migration.
    for version in range(current + 1, SCHEMA_VERSION + 1):
        conn.execute("BEGIN IMMEDIATE")
        try:
            for statement in MIGRATIONS[version - 1]:
                conn.execute(statement)
            conn.execute(
                "INSERT INTO meta(key, value) VALUES('schema_version', ?) "
                "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                (str(version),),
            )
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        applied += 1
    return applied
