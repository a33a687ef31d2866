"""An existing data dir is migrated to namespaces and versions automatically on open: every
crystal lands in "default", local skill versions become one memory, TTL crystals get their
expiry, rowids (FTS and vector keys) and the AUTOINCREMENT high-water mark survive."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from node.crystals import schema as crystals_schema
from node.crystals.model import Crystal, Governance, LifespanPolicy, SemanticType
from node.crystals.rows import Filters, crystal_values
from node.crystals.store import CrystalStore
from node.db import Database
from tests.fixtures.legacy_schema import build_legacy_db

V2 = crystals_schema.V2_COLUMNS


def insert_v2(conn: sqlite3.Connection, crystal: Crystal) -> None:
    values = crystal_values(crystal)[: len(V2.split(","))]
    conn.execute(f"INSERT INTO crystals({V2}) VALUES ({','.join('?' * len(values))})", values)


def test_existing_data_dir_is_migrated(tmp_path: Path) -> None:
    path = tmp_path / "crystals.db"
    conn = sqlite3.connect(path, isolation_level=None)
    build_legacy_db(conn)
    skill_v1 = Crystal(text="Rerun the flaky job", semantic_type=SemanticType.SKILL, created_at_ms=1000)
    skill_v1.stable_skill_id, skill_v1.deprecated = skill_v1.id, True
    skill_v2 = Crystal(text="Rerun the flaky job five times", semantic_type=SemanticType.SKILL,
                       created_at_ms=2000, stable_skill_id=skill_v1.id, skill_version=2,
                       previous_version_id=skill_v1.id)
    skill_v1.deprecated_by = skill_v1.id
    ttl = Crystal(text="Maria has the on-call phone", created_at_ms=3000,
                  governance=Governance(lifespan_policy=LifespanPolicy.TTL, ttl_ms=500))
    doomed = Crystal(text="purged before the upgrade", created_at_ms=4000)
    conn.execute("BEGIN")
    for crystal in (skill_v1, skill_v2, ttl, doomed):
        insert_v2(conn, crystal)
    conn.execute("DELETE FROM crystals WHERE id=?", (doomed.id,))  # rowid 4 must never come back
    conn.execute("COMMIT")
    conn.close()

    db = Database(path)
    try:
        store = CrystalStore(db)
        assert db.schema_version("crystals") == len(crystals_schema.MIGRATIONS) == 5
        v1, v2, expiring = (store.get(c.id) for c in (skill_v1, skill_v2, ttl))
        assert {c.namespace for c in (v1, v2, expiring)} == {"default"}
        assert (v1.memory_id, v1.version, v1.valid_to_ms, v1.superseded_by) == (
            skill_v1.id, 1, 2000, skill_v2.id)
        assert (v2.memory_id, v2.version, v2.valid_to_ms) == (skill_v1.id, 2, None)
        assert expiring.memory_id == ttl.id and expiring.expires_at_ms == 3500
        row = db.one("SELECT expires_at_ms FROM crystals WHERE id=?", (ttl.id,))
        assert row is not None and row[0] == 3500
        assert store.fts('"flaky"', 5)  # the full-text index still points at the same rowids
        assert [c.id for c in store.list_crystals(Filters(current_at_ms=2500))] == [ttl.id, skill_v2.id]
        fresh = Crystal(text="written after the upgrade")
        assert store.add(fresh).rowid == 5
        # A text may now exist once per namespace, and again as a closed version.
        other = Crystal(text="Rerun the flaky job", namespace="agent:ci")
        assert store.add(other).created
        columns = [r[1] for r in db.all("PRAGMA table_info(crystals)")]
        assert columns[-8:] == ["namespace", "memory_id", "version", "valid_from_ms", "valid_to_ms",
                                "superseded_by", "deleted_at_ms", "expires_at_ms"]
        audit = db.all("SELECT detail_json FROM memory_audit_log")
        assert all(isinstance(json.loads(r[0]), dict) for r in audit)
    finally:
        db.close()
    again = Database(path)  # opening again migrates nothing
    try:
        assert again.migrate("crystals", crystals_schema.MIGRATIONS) == 0
    finally:
        again.close()
