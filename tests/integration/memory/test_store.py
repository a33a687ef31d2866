"""CrystalStore over a real SQLite file: schema, dedup, atomicity, audit, FTS, executions."""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings

from node.crystals.model import Crystal, Lifecycle, SemanticType
from node.crystals.schema import CONCEPT, MIGRATIONS, SCHEMA_VERSION
from node.crystals.store import (
    CrystalNotFound,
    CrystalStore,
    EmbedderMismatch,
    Filters,
    StoreError,
)
from node.db import Database, SchemaError
from tests.fixtures.crystal_strategies import crystals


@pytest.fixture
def store(tmp_path: Path) -> Iterator[CrystalStore]:
    opened = CrystalStore(tmp_path / "crystals.db")
    try:
        yield opened
    finally:
        opened.close()


def count(store: CrystalStore, table: str) -> int:
    return int(store.db.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])


def snapshot(store: CrystalStore) -> dict[str, Any]:
    """Everything a failed write must leave untouched."""
    return {
        table: store.db.execute(f"SELECT * FROM {table} ORDER BY 1").fetchall()
        for table in ("crystals", "memory_audit_log", "meta", "skill_executions")
    } | {"fts": store.db.execute("SELECT rowid, text FROM crystals_fts ORDER BY rowid").fetchall()}


def fts_consistent(store: CrystalStore) -> None:
    # FTS5 compares its index with the external content table and raises if they disagree.
    store.db.execute("INSERT INTO crystals_fts(crystals_fts) VALUES('integrity-check')")


# --- schema -----------------------------------------------------------------------------------


def test_wal_mode_and_schema_version(store: CrystalStore) -> None:
    assert store.db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert store.db.execute("PRAGMA foreign_keys").fetchone()[0] == 1
    assert store.db.schema_version("crystals") == SCHEMA_VERSION
    tables = {row[0] for row in store.db.execute("SELECT name FROM sqlite_master")}
    assert {"crystals", "crystals_fts", "memory_audit_log", "skill_executions", "meta"} <= tables
    assert "listings" not in tables  # the market's tables are the market repository's


def test_reopening_applies_no_migration(tmp_path: Path) -> None:
    CrystalStore(tmp_path / "c.db").close()
    db = Database(tmp_path / "c.db")
    assert db.migrate(CONCEPT, MIGRATIONS) == 0
    again = CrystalStore(db)
    assert again.db.schema_versions() == {"crystals": SCHEMA_VERSION}
    db.close()


def test_newer_schema_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    CrystalStore(path).close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("UPDATE schema_versions SET version=? WHERE concept='crystals'", (SCHEMA_VERSION + 1,))
    conn.close()
    with pytest.raises(SchemaError, match=f"version {SCHEMA_VERSION + 1}, newer"):
        CrystalStore(path)
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT version FROM schema_versions").fetchall() == [(SCHEMA_VERSION + 1,)]
    conn.close()


# --- round trip -------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None)
@given(crystals())
def test_add_then_get_round_trips(crystal: Crystal) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = CrystalStore(Path(tmp) / "c.db")
        try:
            result = store.add(crystal)
            assert result.created and result.id == crystal.id
            stored = store.get(crystal.id, with_embedding=True)
            without = store.get(crystal.id)
        finally:
            store.close()
    expected_embedding = (
        None
        if crystal.embedding is None
        else np.asarray(crystal.embedding, dtype=np.float32).tolist()
    )
    assert stored.embedding == expected_embedding
    assert without.embedding is None
    stored.embedding = crystal.embedding
    assert stored == crystal


# --- dedup and atomicity ----------------------------------------------------------------------


def test_dedup_by_hash_returns_the_existing_id(store: CrystalStore) -> None:
    first = store.add(Crystal(text="the build cache lives in /var/cache/ci"))
    again = store.add(Crystal(text="the build cache lives in /var/cache/ci"))
    assert first.created
    assert not again.created
    assert (again.id, again.rowid) == (first.id, first.rowid)
    assert count(store, "crystals") == 1
    assert [row["action"] for row in store.audit_log()] == ["created"]


def test_duplicates_within_one_batch_resolve_to_the_first(store: CrystalStore) -> None:
    results = store.add_many([Crystal(text="same"), Crystal(text="other"), Crystal(text="same")])
    assert [r.created for r in results] == [True, True, False]
    assert results[2].id == results[0].id
    assert count(store, "crystals") == 2


def test_failing_write_mid_batch_leaves_nothing(store: CrystalStore) -> None:
    store.add(Crystal(text="already here", id="fixed-id"))
    before = snapshot(store)
    batch = [
        Crystal(text="first new one"),
        Crystal(text="second new one"),
        Crystal(text="collides on id", id="fixed-id"),  # UNIQUE(id) fails on the third insert
        Crystal(text="never reached"),
    ]
    with pytest.raises(sqlite3.IntegrityError):
        store.add_many(batch)
    assert snapshot(store) == before
    assert not store.db.in_transaction
    fts_consistent(store)
    # The store is still usable afterwards.
    assert store.add(Crystal(text="first new one")).created


def test_exception_between_insert_and_audit_rolls_back(
    store: CrystalStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(store)
    calls = {"n": 0}
    real_audit = CrystalStore._audit

    def failing_audit(*args: Any, **kwargs: Any) -> None:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("disk on fire")
        real_audit(*args, **kwargs)

    monkeypatch.setattr(CrystalStore, "_audit", staticmethod(failing_audit))
    with pytest.raises(RuntimeError, match="disk on fire"):
        store.add_many([Crystal(text="a"), Crystal(text="b"), Crystal(text="c")])
    assert snapshot(store) == before


# --- audit ------------------------------------------------------------------------------------


def actions(store: CrystalStore, crystal_id: str) -> list[str]:
    return [row["action"] for row in reversed(store.audit_log(crystal_id))]


def test_audit_rows_for_create_transition_merge_purge(store: CrystalStore) -> None:
    winner = store.add(Crystal(text="deploy with make release", path="notes.md")).id
    loser = store.add(Crystal(text="deploy using make release", path="notes.md")).id
    stale = store.add(Crystal(text="old lunch order")).id
    store.set_lifecycle(winner, Lifecycle.ACTIVATED, "manual")
    store.apply_consolidation(
        scores=[(winner, 0.9), (loser, 0.8), (stale, 0.001)],
        transitions=[
            (winner, "activated", "consolidated", "merged_winner"),
            (loser, "generated", "archived", "merged_loser"),
            (stale, "generated", "expired", "below_forget_threshold"),
        ],
        merges=[(winner, loser, 0.97)],
        at_ms=1_000,
    )
    assert store.get(loser).parent_id == winner
    assert store.get(stale).importance_score == 0.001
    assert actions(store, winner) == ["created", "transition", "transition", "merged"]
    assert actions(store, loser) == ["created", "transition", "merged"]
    run = store.audit_log()[0]
    assert run["action"] == "consolidation_run"
    assert run["detail"] == {"scored": 3, "transitions": 3, "merges": 1}

    removed = store.purge()
    assert len(removed) == 2
    assert actions(store, loser)[-1] == "purged"
    assert actions(store, stale)[-1] == "purged"
    purged = store.audit_log(stale)[0]
    assert (purged["from_state"], purged["to_state"]) == ("expired", None)
    with pytest.raises(CrystalNotFound):
        store.get(stale)
    assert store.checkpoint("vector_deletions") == 1


def test_consolidation_is_one_transaction(
    store: CrystalStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = store.add(Crystal(text="alpha", path="p")).id
    b = store.add(Crystal(text="beta", path="p")).id
    before = snapshot(store)
    real_audit = CrystalStore._audit

    def fail_on_merge(conn: Any, crystal_id: Any, action: str, *args: Any) -> None:
        if action == "merged":
            raise RuntimeError("crash during merge")
        real_audit(conn, crystal_id, action, *args)

    monkeypatch.setattr(CrystalStore, "_audit", staticmethod(fail_on_merge))
    with pytest.raises(RuntimeError):
        store.apply_consolidation(
            [(a, 0.9), (b, 0.8)],
            [(a, "generated", "consolidated", "merged_winner"), (b, "generated", "archived", "x")],
            [(a, b, 0.99)],
        )
    assert snapshot(store) == before
    assert store.get(b).lifecycle is Lifecycle.GENERATED


def test_set_lifecycle_on_unknown_crystal_writes_nothing(store: CrystalStore) -> None:
    before = snapshot(store)
    with pytest.raises(CrystalNotFound):
        store.set_lifecycle("no-such-id", Lifecycle.EXPIRED, "test")
    assert snapshot(store) == before


# --- FTS --------------------------------------------------------------------------------------


def test_fts_stays_in_sync_after_purge(store: CrystalStore) -> None:
    keep = store.add(Crystal(text="zebra crossings near the station"))
    drop = store.add(Crystal(text="zebra stripes are unique", lifecycle=Lifecycle.EXPIRED))
    assert {rowid for rowid, _ in store.fts("zebra", 10)} == {keep.rowid, drop.rowid}
    assert store.fts_doc_freq("stripes") == 1
    assert store.purge() == [drop.rowid]
    assert [rowid for rowid, _ in store.fts("zebra", 10)] == [keep.rowid]
    assert store.fts("stripes", 10) == []
    assert store.fts_doc_freq("stripes") == 0
    fts_consistent(store)


def test_fts_ranks_and_tolerates_bad_syntax(store: CrystalStore) -> None:
    store.add(Crystal(text="rust borrow checker explained"))
    store.add(Crystal(text="the borrow checker and the borrow checker again"))
    ranked = store.fts("borrow", 10)
    assert len(ranked) == 2 and ranked[0][1] <= ranked[1][1]
    assert store.fts('"unbalanced', 10) == []
    assert store.fts("", 10) == []


# --- reads and filters ------------------------------------------------------------------------


def test_get_by_unique_prefix_and_unknown_id(store: CrystalStore) -> None:
    crystal = Crystal(text="prefix lookup", id="abcdef12-0000-0000-0000-000000000000")
    store.add(crystal)
    assert store.get("abcdef12").id == crystal.id
    with pytest.raises(CrystalNotFound, match="no crystal with id 'zzzz'"):
        store.get("zzzz")


def test_list_filters(store: CrystalStore) -> None:
    store.add(Crystal(text="a fact", semantic_type=SemanticType.FACT))
    store.add(Crystal(text="a skill", semantic_type=SemanticType.SKILL, lifecycle=Lifecycle.FROZEN))
    facts = store.list_crystals(Filters(semantic_types=("fact",)))
    assert [c.text for c in facts] == ["a fact"]
    assert [c.text for c in store.list_crystals(Filters(lifecycles=("frozen",)))] == ["a skill"]
    assert store.list_crystals(Filters(scopes=("public",))) == []


def test_vectors_and_stats(store: CrystalStore) -> None:
    rows = store.add_many(
        [Crystal(text=f"v{i}", embedding=[float(i), 1.0]) for i in range(5)]
        + [Crystal(text="no vector")]
    )
    batches = list(store.vectors(batch=2))
    rowids = np.concatenate([ids for ids, _ in batches]).tolist()
    assert rowids == [r.rowid for r in rows[:5]]
    assert np.vstack([v for _, v in batches])[:, 0].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert store.vector_stats() == (5, rows[4].rowid)
    assert [ids.tolist() for ids, _ in store.vectors(after_rowid=rows[3].rowid)] == [[rows[4].rowid]]


# --- skill executions -------------------------------------------------------------------------


def test_record_execution_accumulates_stats(store: CrystalStore) -> None:
    skill = store.add(Crystal(text="run the migration", semantic_type=SemanticType.SKILL)).id
    store.record_execution(skill, True, 0.8, at_ms=10)
    store.record_execution(skill, True, 1.0, at_ms=11)
    after = store.record_execution(skill, False, 0.0, at_ms=12)
    assert after.execution.executions == 3
    assert after.execution.successes == 2
    assert after.execution.reward_sum == pytest.approx(1.8)
    # +0.08 +0.10 -0.01 (a failure counts at least 0.1 against, times 0.1)
    assert after.steering_reward == pytest.approx(0.17)
    rows = store.db.execute(
        "SELECT at_ms, success, reward FROM skill_executions WHERE crystal_id=? ORDER BY id",
        (skill,),
    ).fetchall()
    assert [tuple(row) for row in rows] == [(10, 1, 0.8), (11, 1, 1.0), (12, 0, 0.0)]
    assert actions(store, skill).count("execution") == 3


def test_steering_reward_is_clamped(store: CrystalStore) -> None:
    skill = store.add(Crystal(text="clamp me", steering_reward=0.95)).id
    assert store.record_execution(skill, True, 1.0).steering_reward == 1.0


@pytest.mark.parametrize("reward", [-0.1, 1.5])
def test_record_execution_rejects_bad_reward(store: CrystalStore, reward: float) -> None:
    skill = store.add(Crystal(text="a skill")).id
    before = snapshot(store)
    with pytest.raises(StoreError, match="reward must be between 0 and 1"):
        store.record_execution(skill, True, reward)
    assert snapshot(store) == before


def test_record_execution_unknown_crystal(store: CrystalStore) -> None:
    before = snapshot(store)
    with pytest.raises(CrystalNotFound):
        store.record_execution("missing", True, 1.0)
    assert snapshot(store) == before


# --- embedder binding -------------------------------------------------------------------------


def test_bind_embedder_records_then_refuses_another(store: CrystalStore) -> None:
    store.bind_embedder("hashing-384", 384)
    store.bind_embedder("hashing-384", 384)  # same one: fine
    with pytest.raises(EmbedderMismatch) as caught:
        store.bind_embedder("all-MiniLM-L6-v2-onnx-int8", 384)
    message = str(caught.value)
    assert "'hashing-384' (384-d)" in message
    assert "'all-MiniLM-L6-v2-onnx-int8' (384-d)" in message
    assert "new data dir" in message
    with pytest.raises(EmbedderMismatch, match="512-d"):
        store.bind_embedder("hashing-384", 512)
    assert store.get_meta("embedder_name") == "hashing-384"
    assert store.get_meta("embedder_dim") == "384"
