"""The database owner: per-concept schema versions, conversion of old data dirs, refusals.

An "old data dir" is built with the frozen SQL of the single migration list used
before per-concept versions (``tests/fixtures/legacy_schema.py``) and filled with
a row in every table; opening it through the product's repositories must keep
every row, byte for byte.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest
import trio

from node.crystals import schema as crystals_schema
from node.crystals.model import Crystal
from node.crystals.rows import crystal_values
from node.crystals.store import CrystalStore
from node.db import LEGACY_MIGRATIONS, Database, SchemaError
from node.market import schema as market_schema
from node.market.book.listings import ListingBook
from node.market.ledger import MarketLedger
from node.trust import schema as trust_schema
from node.trust.ledger import Ledger
from tests.fixtures.legacy_schema import LEGACY_MIGRATIONS as LEGACY_SQL
from tests.fixtures.legacy_schema import build_legacy_db

LATEST = {
    "crystals": crystals_schema.SCHEMA_VERSION,
    "market": market_schema.SCHEMA_VERSION,
    "trust": trust_schema.SCHEMA_VERSION,
}
USER_TABLES = (
    "crystals", "memory_audit_log", "skill_executions", "listings", "sales", "purchases",
    "trust_peers", "trust_events", "trust_decisions",
)


def fill_legacy(conn: sqlite3.Connection, version: int) -> None:
    """One row in every table that legacy migrations 1..version created, as old code wrote them."""
    crystal = Crystal(text="written by the old single-version code", embedding=[0.5, -0.25])
    values = crystal_values(crystal)[: len(crystals_schema.V2_COLUMNS.split(","))]
    conn.execute(f"INSERT INTO crystals({crystals_schema.V2_COLUMNS}) "
                 f"VALUES ({','.join('?' * len(values))})", values)
    conn.execute("INSERT INTO meta(key, value) VALUES('embedder_name', 'hash'), ('hormones', '{}')")
    conn.execute(
        "INSERT INTO memory_audit_log(at_ms, crystal_id, action, detail_json) VALUES (1, ?, 'created', '{}')",
        (crystal.id,),
    )
    if version >= 2:
        conn.execute(
            "INSERT INTO skill_executions(crystal_id, at_ms, success, reward) VALUES (?, 2, 1, 0.75)",
            (crystal.id,),
        )
    if version >= 3:
        conn.execute(
            "INSERT INTO listings VALUES ('l1', 'aa', 's1', 1, 'name', 'desc', '[]', 'cat', 'h', 10, "
            "1234567, '0xpay', 31337, '0xtoken', 3, 2, 500000, 1, 99, NULL, NULL, 5, 6, NULL, ?, "
            "x'0102', x'0304')",
            (crystal.id,),
        )
    if version >= 4:
        conn.execute(
            "INSERT INTO sales VALUES ('r1', 'l1', ?, 's1', 'bb', '0xbuyer', 1234567, 'n1', "
            "'settled', '0xtx', NULL, 7, 8)",
            (crystal.id,),
        )
        conn.execute(
            "INSERT INTO purchases(request_id, listing_id, seller_key, name, price_micro_usdc, "
            "pay_to, auth_nonce, state, tx_hash, crystal_id, reason, created_at_ms, updated_at_ms) "
            "VALUES ('p1', 'l9', 'cc', 'bought', 7654321, '0xseller', 'n2', 'paid', '0xtx2', NULL, "
            "NULL, 9, 10)"
        )
    if version >= 5:
        conn.execute(
            "INSERT INTO trust_peers VALUES ('dd', 2.5, 0.5, 3, 1, 0, 11, 12, 'delivered_ok')"
        )
        conn.execute(
            "INSERT INTO trust_events(at_ms, peer_key, kind, weight, offence, detail) "
            "VALUES (11, 'dd', 'delivered_ok', 1.0, 0, '')"
        )
        conn.execute(
            "INSERT INTO trust_decisions(at_ms, peer_key, kind, admitted, level, reason) "
            "VALUES (12, 'dd', 'skill', 1, 'provisional', 'ok')"
        )
    if version >= 6:
        conn.execute(
            "UPDATE purchases SET authorization_json='{\"v\": 1}', valid_before_s=13, payload='text'"
        )


def legacy_dir(tmp_path: Path, version: int) -> Path:
    path = tmp_path / f"legacy-{version}.db"
    conn = sqlite3.connect(path, isolation_level=None)
    build_legacy_db(conn, version)
    conn.execute("BEGIN")
    fill_legacy(conn, version)
    conn.execute("COMMIT")
    conn.close()
    return path


def dump(path: Path) -> dict[str, Any]:
    """Every row of every table (and the FTS index), read with plain sqlite3."""
    conn = sqlite3.connect(path)
    try:
        names = [row[0] for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name IN "
            f"({','.join('?' * len(USER_TABLES))})", USER_TABLES)]
        tables = {name: conn.execute(f"SELECT * FROM {name} ORDER BY 1").fetchall() for name in names}
        tables["meta"] = conn.execute(
            "SELECT * FROM meta WHERE key != 'schema_version' ORDER BY 1").fetchall()
        tables["fts"] = conn.execute("SELECT rowid, text FROM crystals_fts ORDER BY rowid").fetchall()
        return tables
    finally:
        conn.close()


def open_all(path: Path) -> Database:
    """Open a data dir the way a node does: the owner, then every concept's repository."""
    db = Database(path)
    CrystalStore(db)
    ListingBook(db)
    MarketLedger(db)
    Ledger(db)
    return db


def test_frozen_legacy_sql_is_what_the_concepts_now_migrate() -> None:
    concepts = {"crystals": crystals_schema, "market": market_schema, "trust": trust_schema}
    for number, (concept, version) in enumerate(LEGACY_MIGRATIONS, start=1):
        migration = list(concepts[concept].MIGRATIONS[version - 1])
        legacy = [s for s in LEGACY_SQL[number - 1] if "CREATE TABLE IF NOT EXISTS meta" not in s]
        assert migration == legacy, f"legacy migration {number} != {concept} v{version}"
    assert len(LEGACY_MIGRATIONS) == len(LEGACY_SQL)


@pytest.mark.parametrize("version", range(1, len(LEGACY_SQL) + 1))
def test_old_data_dir_is_converted_without_losing_a_row(tmp_path: Path, version: int) -> None:
    path = legacy_dir(tmp_path, version)
    before = dump(path)
    assert sum(len(rows) for rows in before.values()) > 0

    db = open_all(path)
    try:
        assert db.schema_versions() == LATEST
        assert db.get_meta("schema_version") == "1000"  # old code now refuses this file
    finally:
        db.close()
    after = dump(path)
    for table, rows in before.items():
        if table in ("purchases", "sales"):
            # Market v3 added three purchase columns (NULL for existing rows), v7 the scheme that
            # paid ("exact" for every older row) and the voucher columns (NULL); nothing else changed.
            voucher_columns = ("exact", None, None, None) if table == "purchases" else ("exact", None, None)
            assert len(after[table]) == len(rows)
            for old_row, new_row in zip(rows, after[table], strict=True):
                width = len(tuple(old_row))
                assert tuple(new_row)[:width] == tuple(old_row)
                added = tuple(new_row)[width:]
                assert added[len(added) - len(voucher_columns):] == voucher_columns
                assert all(value is None for value in added[:len(added) - len(voucher_columns)])
        elif table == "crystals":
            # Crystals v3 (namespaces and versions) added eight columns: the old row lands in
            # "default" as version 1 of its own memory, valid since its creation, current.
            [old], [new] = rows, after[table]
            assert tuple(new)[:36] == tuple(old)
            crystal_id, created_at_ms = old[1], old[15]
            assert tuple(new)[36:] == ("default", crystal_id, 1, created_at_ms, None, None, None, None)
        else:
            assert after[table] == rows, table
    # The converted file opens again without migrating anything, and the data is usable.
    db = Database(path)
    try:
        assert db.migrate("crystals", crystals_schema.MIGRATIONS) == 0
        store = CrystalStore(db)
        crystal = store.list_crystals()[0]
        assert store.fts('"single"', 5)  # the FTS index came along
        store.record_execution(crystal.id, True, 1.0)
        if version >= 4:
            assert MarketLedger(db).purchases(10)[0].price_micro_usdc == 7654321
    finally:
        db.close()


def test_a_failed_conversion_leaves_the_old_file_as_it_was(tmp_path: Path) -> None:
    path = legacy_dir(tmp_path, len(LEGACY_SQL))
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("UPDATE meta SET value='7' WHERE key='schema_version'")  # newer than we know
    conn.close()
    before = dump(path)
    with pytest.raises(SchemaError, match="version 7 is newer"):
        Database(path)
    conn = sqlite3.connect(path)
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert "schema_versions" not in tables
    assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == ("7",)
    conn.close()
    assert dump(path) == before


def test_a_concept_written_by_newer_code_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new.db"
    open_all(path).close()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("UPDATE schema_versions SET version=version+1 WHERE concept='trust'")
    conn.close()
    db = Database(path)
    try:
        CrystalStore(db)  # other concepts still open
        with pytest.raises(SchemaError, match="'trust' is at version 2, newer than this"):
            Ledger(db)
    finally:
        db.close()


@pytest.mark.parametrize("table, value", [
    ("meta", "'six'"), ("meta", "'-1'"), ("schema_versions", "'x'"), ("schema_versions", "2.5"),
])
def test_a_damaged_version_is_a_clear_error(tmp_path: Path, table: str, value: str) -> None:
    path = legacy_dir(tmp_path, 2)
    if table == "schema_versions":
        open_all(path).close()
    conn = sqlite3.connect(path, isolation_level=None)
    if table == "meta":
        conn.execute(f"UPDATE meta SET value={value} WHERE key='schema_version'")
    else:
        conn.execute(f"UPDATE schema_versions SET version={value} WHERE concept='crystals'")
    conn.close()
    with pytest.raises(SchemaError, match="not a schema version"):
        CrystalStore(path)


def test_a_failing_migration_rolls_back_with_its_version(tmp_path: Path) -> None:
    db = Database(tmp_path / "m.db")
    try:
        broken = [["CREATE TABLE ok_table (x INTEGER)"], ["CREATE TABLE t2 (x)", "NOT SQL"]]
        with pytest.raises(sqlite3.OperationalError):
            db.migrate("probe", broken)
        assert db.schema_version("probe") == 1
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        assert "ok_table" in tables and "t2" not in tables
    finally:
        db.close()


def test_writes_of_every_concept_share_one_writer(tmp_path: Path) -> None:
    """Database.run serialises callers across concepts: never two inside SQLite at once."""
    db = Database(tmp_path / "w.db")
    ledger = Ledger(db)
    store = CrystalStore(db)
    inside = 0
    most = 0

    def guarded(function: Any, *args: Any) -> None:
        nonlocal inside, most
        inside += 1
        most = max(most, inside)
        try:
            function(*args)
        finally:
            inside -= 1

    async def main() -> None:
        async with trio.open_nursery() as nursery:
            for i in range(20):
                nursery.start_soon(db.run, guarded, store.add, Crystal(text=f"note {i}"))
                nursery.start_soon(db.run, guarded, ledger.record, bytes([i + 1]) * 32, "delivered_ok")

    try:
        trio.run(main)
        assert most == 1
        assert store.stats()["total"] == 20 and len(ledger.peers()) == 20
    finally:
        db.close()
