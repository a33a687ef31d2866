"""Tables of the crystals concept and their migrations (applied by ``node.db.Database``).

Version 1 and 2 were migrations 1 and 2 of the single list used before
per-concept versions; ``meta`` belongs to the database owner.
"""

from __future__ import annotations

from node.db import Migration

CONCEPT = "crystals"

MIGRATIONS: list[Migration] = [
    # 1: crystals, full-text index, audit log
    [
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
]

SCHEMA_VERSION = len(MIGRATIONS)
