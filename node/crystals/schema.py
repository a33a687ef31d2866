"""Tables of the crystals concept and their migrations (applied by ``node.db.Database``).

Version 1 and 2 were migrations 1 and 2 of the single list used before
per-concept versions; ``meta`` belongs to the database owner.
"""

from __future__ import annotations

from node.db import Migration

CONCEPT = "crystals"

# The columns of version 1/2 of the crystals table (copied by migration 3).
V2_COLUMNS = (
    "id, text, embedding, path, source, start_line, end_line, hash, semantic_type, origin, "
    "lifecycle, importance_score, access_count, last_accessed_at_ms, created_at_ms, "
    "emotional_valence, hormonal_json, steering_reward, access_scope, sensitivity, "
    "governance_json, provenance_json, parent_id, stable_skill_id, skill_version, "
    "previous_version_id, deprecated, deprecated_by, skill_tags_json, skill_category, "
    "is_verified, verified_by, executions, successes, reward_sum"
)

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
    # 3: namespaces and versions (issue 14). Rebuilt because a text may now be stored once
    # per namespace and again as a later version: the global UNIQUE(hash) becomes unique
    # among the current crystals of a namespace. Rowids (the FTS and vector index keys)
    # and the AUTOINCREMENT high-water mark are kept. Existing crystals land in
    # "default"; a local skill's versions become one memory (memory_id = stable skill id).
    [
        """
        CREATE TABLE crystals_v3 (
            rowid INTEGER PRIMARY KEY AUTOINCREMENT,
            id TEXT NOT NULL UNIQUE,
            text TEXT NOT NULL,
            embedding BLOB,
            path TEXT,
            source TEXT NOT NULL,
            start_line INTEGER,
            end_line INTEGER,
            hash TEXT NOT NULL,
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
            reward_sum REAL NOT NULL DEFAULT 0,
            namespace TEXT NOT NULL DEFAULT 'default',
            memory_id TEXT NOT NULL,
            version INTEGER NOT NULL DEFAULT 1,
            valid_from_ms INTEGER NOT NULL,
            valid_to_ms INTEGER,
            superseded_by TEXT,
            deleted_at_ms INTEGER,
            expires_at_ms INTEGER
        )
        """,
        f"""
        INSERT INTO crystals_v3(rowid, {V2_COLUMNS},
            namespace, memory_id, version, valid_from_ms, expires_at_ms)
        SELECT rowid, {V2_COLUMNS},
            'default',
            CASE WHEN stable_skill_id IS NOT NULL AND origin <> 'peer' THEN stable_skill_id ELSE id END,
            CASE WHEN stable_skill_id IS NOT NULL AND origin <> 'peer' THEN skill_version ELSE 1 END,
            created_at_ms,
            CASE WHEN json_extract(governance_json, '$.lifespanPolicy') = 'ttl'
                  AND CAST(json_extract(governance_json, '$.ttlMs') AS INTEGER) > 0
                 THEN created_at_ms + CAST(json_extract(governance_json, '$.ttlMs') AS INTEGER) END
        FROM crystals
        """,
        """
        UPDATE crystals_v3 SET
            superseded_by = (SELECT n.id FROM crystals_v3 n WHERE n.previous_version_id = crystals_v3.id
                             ORDER BY n.skill_version LIMIT 1),
            valid_to_ms = (SELECT n.created_at_ms FROM crystals_v3 n
                           WHERE n.previous_version_id = crystals_v3.id ORDER BY n.skill_version LIMIT 1)
        WHERE deprecated = 1 AND origin <> 'peer'
        """,
        "CREATE TABLE crystals_v3_seq AS SELECT seq FROM sqlite_sequence WHERE name = 'crystals'",
        "DROP TABLE crystals",
        "ALTER TABLE crystals_v3 RENAME TO crystals",
        "DELETE FROM sqlite_sequence WHERE name IN ('crystals', 'crystals_v3')",
        """
        INSERT INTO sqlite_sequence(name, seq) SELECT 'crystals',
            MAX(COALESCE((SELECT MAX(seq) FROM crystals_v3_seq), 0),
                COALESCE((SELECT MAX(rowid) FROM crystals), 0))
        """,
        "DROP TABLE crystals_v3_seq",
        "CREATE INDEX crystals_type_lifecycle ON crystals(semantic_type, lifecycle)",
        "CREATE INDEX crystals_path ON crystals(path)",
        "CREATE INDEX crystals_stable_skill ON crystals(stable_skill_id, skill_version)",
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
        "CREATE UNIQUE INDEX crystals_current_hash ON crystals(namespace, hash) "
        "WHERE valid_to_ms IS NULL AND deleted_at_ms IS NULL",
        "CREATE INDEX crystals_memory ON crystals(memory_id, version)",
        "CREATE INDEX crystals_namespace ON crystals(namespace, created_at_ms)",
    ],
    # 4: the window vectors of long crystals (node.memory.search.windows): a crystal whose text the
    # embedder read in more than one window keeps each window's float32 vector, written in the
    # transaction that writes the crystal, and removed with its row.
    [
        """
        CREATE TABLE crystal_windows (
            crystal_rowid INTEGER PRIMARY KEY,
            embedder TEXT NOT NULL,
            vectors BLOB NOT NULL
        )
        """,
        """
        CREATE TRIGGER crystal_windows_delete AFTER DELETE ON crystals BEGIN
            DELETE FROM crystal_windows WHERE crystal_rowid = old.rowid;
        END
        """,
    ],
    # 5: a second encoder's vector of each crystal (node.memory.search.second_opinion), written in the
    # transaction that writes the crystal, and removed with its row. A store migrated from 4 has
    # none until `memory reembed` writes them; search then goes without the second opinion.
    [
        """
        CREATE TABLE crystal_second (
            crystal_rowid INTEGER PRIMARY KEY,
            encoder TEXT NOT NULL,
            vector BLOB NOT NULL
        )
        """,
        """
        CREATE TRIGGER crystal_second_delete AFTER DELETE ON crystals BEGIN
            DELETE FROM crystal_second WHERE crystal_rowid = old.rowid;
        END
        """,
        # How many crystals lack the vector is counted at every start: two index counts, not a
        # scan of the crystals' rows (0.9 s cold at 100k crystals; 8 ms with these).
        "CREATE INDEX crystal_second_encoder ON crystal_second(encoder)",
        "CREATE INDEX crystals_embedded ON crystals(version) WHERE embedding IS NOT NULL",
    ],
]

SCHEMA_VERSION = len(MIGRATIONS)
