"""Issue 30: damage met while a store is open is said once (error, log, metric) and stops
every write to that store; a damaged settlement ledger is refused on open and salvaged
row by row (a WITHOUT ROWID table, read from both ends)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from node import metrics
from node.chain.ledger import SettlementLedger
from node.db import Database, StoreDamaged
from node.ops import salvage


def leaf_pages(path: Path, table: str) -> list[int]:
    conn = sqlite3.connect(path)
    try:
        return [row[0] for row in conn.execute(
            "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno", (table,))]
    finally:
        conn.close()


def cells_on(path: Path, page: int) -> int:
    conn = sqlite3.connect(path)
    try:
        return int(conn.execute("SELECT ncell FROM dbstat WHERE pageno = ?", (page,)).fetchone()[0])
    finally:
        conn.close()


def smash(path: Path, page: int) -> None:
    with open(path, "r+b") as handle:
        handle.seek((page - 1) * 4096)
        handle.write(b"\xa5" * 4096)  # not a page type: read as damage, never as rows


def test_damage_met_at_run_time_stops_writes(tmp_path: Path) -> None:
    path = tmp_path / "crystals.db"
    db = Database(path)
    with db.transaction() as conn:
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, text TEXT)")
        conn.execute("CREATE TABLE other (id INTEGER PRIMARY KEY)")
        conn.executemany("INSERT INTO notes(text) VALUES (?)", [("n" * 500,) for _ in range(400)])
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    pages = leaf_pages(path, "notes")
    db = Database(path)  # sound on open
    db.execute("PRAGMA cache_size=0")  # read the file again, not the pages the open check cached
    smash(path, pages[len(pages) // 2])
    assert db.damage is None

    with pytest.raises(StoreDamaged) as seen:
        db.all("SELECT * FROM notes")
    assert str(path) in str(seen.value) and "doctor --repair" in str(seen.value)
    assert seen.value.http_status == 503 and seen.value.code == "store_damaged"
    assert db.damage is not None and db.guard.status().startswith("damaged: ")
    assert metrics.REGISTRY.get_sample_value("crystalmesh_store_damaged", {"store": "crystals.db"}) == 1
    # Every later write is refused before it starts, even one the file could still take.
    with pytest.raises(StoreDamaged, match="writes to it are stopped"), db.transaction() as conn:
        conn.execute("INSERT INTO other(id) VALUES (1)")
    db.close()
    assert sqlite3.connect(path).execute("SELECT count(*) FROM other").fetchone()[0] == 0


def test_damaged_ledger_is_refused_and_salvaged_from_both_ends(tmp_path: Path) -> None:
    path = tmp_path / "settlements.db"
    SettlementLedger(path).close()
    conn = sqlite3.connect(path)
    conn.executemany(
        "INSERT INTO settlements (authorizer, nonce, payee, value_micro, valid_after_s, valid_before_s,"
        " signature, state, created_at_s, updated_at_s) VALUES (?, ?, 'payee', ?, 0, 1, ?, 'confirmed', 0, 0)",
        [(f"0x{number:040x}", f"0x{number:064x}", 1000 + number, b"s" * 65) for number in range(600)])
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    pages = leaf_pages(path, "settlements")
    assert len(pages) >= 3
    middle = pages[len(pages) // 2]
    cells = cells_on(path, middle)
    smash(path, middle)

    with pytest.raises(StoreDamaged, match=r"settlements\.db is damaged"):
        SettlementLedger(path)
    tables = {t.table: t for t in salvage(path, tmp_path / "salvaged.db")}
    assert tables["settlements"].after == 600 - cells  # both sides of the damaged page kept
    assert tables["settlements"].lost in (None, cells)
    ledger = SettlementLedger(tmp_path / "salvaged.db")
    try:
        assert ledger.count("confirmed") == 600 - cells
    finally:
        ledger.close()
