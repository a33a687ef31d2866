"""Salvage what SQLite can still read from a damaged database into a new file.

The sqlite3 shell's ``.recover`` reads pages raw and would be the tool of choice,
but the shell is not always installed and the one in Debian 12 (3.40.1) fails on
our schema ("SQL logic error", even on a sound file). So this copies through
SQL, table by table and row by row:

* the schema (tables, then rows, then indexes, triggers and views, so that no
  trigger fires twice) comes from the damaged file's ``sqlite_master``;
* a rowid table is read in rowid order; when a read meets a damaged page the
  scan jumps ahead (rowid + 1, + 2, + 4, ...) until the b-tree answers again,
  and records the rowid range it could not read;
* a WITHOUT ROWID table is read forwards, then backwards from its end, so rows
  on both sides of a damaged page are kept;
* FTS5 tables kept outside their content (``content=``) are rebuilt from it;
* it reads a copy of the damaged file, padded with empty pages up to the page
  count its header states: a truncated file then still loads its schema (SQLite
  refuses a schema whose root pages lie past the end of the file) and only the
  rows of the missing pages are lost.

Rows before (``count(*)``, when the damaged file can still answer it) and after
are reported per table: the exact account of what was lost.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from node.errors import CrystalmeshError

MAX_JUMP_DOUBLINGS = 64
BATCH_ROWS = 256
MAX_PADDED_BYTES = 1 << 36  # a header claiming more is itself damage, not padded


class SalvageFailed(CrystalmeshError, RuntimeError):
    """Nothing could be salvaged (the schema itself is unreadable)."""


@dataclass
class TableSalvage:
    table: str
    before: int | None  # None: the damaged file could not count it
    after: int = 0
    unreadable: list[str] = field(default_factory=list)  # rowid ranges or errors met

    @property
    def lost(self) -> int | None:
        return None if self.before is None else self.before - self.after

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"lost": self.lost}


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def salvage(damaged: Path, out: Path) -> list[TableSalvage]:
    """Copy every readable row of ``damaged`` into a new database at ``out``."""
    if out.exists():
        raise SalvageFailed(f"{out} already exists")
    work = out.with_name(out.name + ".source")
    try:
        _padded_copy(damaged, work)
        source = sqlite3.connect(work.absolute().as_uri() + "?mode=ro", uri=True)
        try:
            try:
                schema = source.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
            except sqlite3.DatabaseError as exc:
                raise SalvageFailed(f"{damaged}: its schema is unreadable ({exc}); restore a backup") from exc
            target = sqlite3.connect(out, isolation_level=None)
            try:
                report = _copy(source, target, schema)
                target.execute("PRAGMA journal_mode=WAL")
            finally:
                target.close()
        finally:
            source.close()
    except BaseException:
        out.unlink(missing_ok=True)
        raise
    finally:
        for suffix in ("", "-wal", "-shm"):
            work.with_name(work.name + suffix).unlink(missing_ok=True)
    return report


def _padded_copy(damaged: Path, work: Path) -> None:
    """Copy ``damaged`` (and its log) to ``work``; pad a short file to its header's page count."""
    shutil.copyfile(damaged, work)
    wal = damaged.with_name(damaged.name + "-wal")
    if wal.exists():
        shutil.copyfile(wal, work.with_name(work.name + "-wal"))
    with open(work, "r+b") as handle:
        header = handle.read(100)
        if len(header) < 100 or not header.startswith(b"SQLite format 3\x00"):
            return  # nothing to pad against: the schema read below says what is wrong
        page_size = int.from_bytes(header[16:18], "big")
        page_size = 65536 if page_size == 1 else page_size
        pages = int.from_bytes(header[28:32], "big")
        size = handle.seek(0, os.SEEK_END)
        want = pages * page_size
        if page_size >= 512 and size < want <= MAX_PADDED_BYTES:
            handle.truncate(want)  # zero pages: read as damaged, skipped below


def _copy(source: sqlite3.Connection, target: sqlite3.Connection,
          schema: list[tuple[str, str, str, str | None]]) -> list[TableSalvage]:
    virtual = {name for kind, name, _, sql in schema
               if kind == "table" and sql and sql.upper().startswith("CREATE VIRTUAL TABLE")}

    def shadow(name: str) -> bool:
        return any(name.startswith(v + "_") for v in virtual)

    tables = [(name, sql) for kind, name, _, sql in schema
              if kind == "table" and sql and not name.startswith("sqlite_") and not shadow(name)]
    target.execute("BEGIN")
    for _name, sql in tables:
        target.execute(sql)
    report = [_copy_table(source, target, name) for name, _ in tables if name not in virtual]
    try:  # AUTOINCREMENT counters, so deleted ids are never handed out again
        sequences = source.execute("SELECT name, seq FROM sqlite_sequence").fetchall()
        target.execute("DELETE FROM sqlite_sequence")
        target.executemany("INSERT INTO sqlite_sequence(name, seq) VALUES (?, ?)", sequences)
    except sqlite3.DatabaseError:
        pass  # no AUTOINCREMENT table, or unreadable: SQLite then continues after the largest id
    for kind in ("index", "trigger", "view"):
        for row_kind, name, _, statement in schema:
            if row_kind == kind and statement and not shadow(name):
                target.execute(statement)
    for name, sql in tables:
        if name in virtual and "content=" in (sql or "").replace(" ", "").lower():
            target.execute(f"INSERT INTO {_quote(name)}({_quote(name)}) VALUES ('rebuild')")
    target.execute("COMMIT")
    return report


def _copy_table(source: sqlite3.Connection, target: sqlite3.Connection, table: str) -> TableSalvage:
    quoted = _quote(table)
    try:
        before: int | None = int(source.execute(f"SELECT count(*) FROM {quoted}").fetchone()[0])
    except sqlite3.DatabaseError:
        before = None
    columns = source.execute(f"PRAGMA table_info({quoted})").fetchall()
    names = [str(column[1]) for column in columns]
    without_rowid = not _has_rowid(source, quoted)
    result = TableSalvage(table, before)
    column_list = ", ".join(_quote(name) for name in names)
    placeholders = ", ".join("?" for _ in names)
    if without_rowid:
        insert = f"INSERT OR IGNORE INTO {quoted} ({column_list}) VALUES ({placeholders})"
        keys = [str(c[1]) for c in sorted(columns, key=lambda c: c[5]) if c[5]]
        for descending in (False, True):
            _copy_in_key_order(source, target, quoted, names, keys, descending, insert, result)
    else:
        insert = f"INSERT OR IGNORE INTO {quoted} (rowid, {column_list}) VALUES (?, {placeholders})"
        _copy_by_rowid(source, target, quoted, column_list, insert, result)
    result.after = int(target.execute(f"SELECT count(*) FROM {quoted}").fetchone()[0])
    return result


def _has_rowid(source: sqlite3.Connection, quoted: str) -> bool:
    try:
        source.execute(f"SELECT rowid FROM {quoted} LIMIT 0")
        return True
    except sqlite3.OperationalError:
        return False


def _copy_by_rowid(source: sqlite3.Connection, target: sqlite3.Connection, quoted: str,
                   column_list: str, insert: str, result: TableSalvage) -> None:
    # Pages of BATCH_ROWS, one row at a time where a page fails: sqlite3 steps to the next
    # row before it hands over the current one, so a plain scan would lose the last good
    # row before a damaged page along with it.
    select = f"SELECT rowid, {column_list} FROM {quoted} WHERE rowid > ? ORDER BY rowid LIMIT ?"
    last = -(1 << 63)
    batch = BATCH_ROWS
    while True:
        try:
            rows = source.execute(select, (last, batch)).fetchall()
        except sqlite3.DatabaseError as exc:
            if batch > 1:
                batch = 1
                continue
            resume = _next_readable(source, quoted, last)
            if resume is None:
                result.unreadable.append(f"rowid > {last}: {exc}")
                return
            result.unreadable.append(f"rowid {last + 1}..{resume}: {exc}")
            last, batch = resume, BATCH_ROWS
            continue
        target.executemany(insert, rows)
        if len(rows) < batch:
            return
        last, batch = int(rows[-1][0]), BATCH_ROWS


def _copy_in_key_order(source: sqlite3.Connection, target: sqlite3.Connection, quoted: str,
                       names: list[str], keys: list[str], descending: bool, insert: str,
                       result: TableSalvage) -> None:
    """A WITHOUT ROWID table in primary-key order (keyset pages, one row at a time where a
    page fails) until a read fails; called once forwards and once backwards."""
    column_list = ", ".join(_quote(name) for name in names)
    key_list = ", ".join(_quote(key) for key in keys)
    direction, compare = ("DESC", "<") if descending else ("ASC", ">")
    order = ", ".join(f"{_quote(key)} {direction}" for key in keys)
    key_columns = [names.index(key) for key in keys]
    last: tuple[Any, ...] | None = None
    batch = BATCH_ROWS
    while True:
        where = "" if last is None else f"WHERE ({key_list}) {compare} ({', '.join('?' for _ in keys)})"
        try:
            rows = source.execute(f"SELECT {column_list} FROM {quoted} {where} ORDER BY {order} LIMIT ?",
                                  (*(last or ()), batch)).fetchall()
        except sqlite3.DatabaseError as exc:
            if batch > 1:
                batch = 1
                continue
            result.unreadable.append(f"{'backward' if descending else 'forward'} scan stopped: {exc}")
            return
        target.executemany(insert, rows)
        if len(rows) < batch:
            return
        last, batch = tuple(rows[-1][i] for i in key_columns), BATCH_ROWS


def _next_readable(source: sqlite3.Connection, quoted: str, last: int) -> int | None:
    """The rowid to continue after: the b-tree answers a seek past ``last + step`` again."""
    step = 1
    for _ in range(MAX_JUMP_DOUBLINGS):
        start = last + step
        if start >= (1 << 63) - 1:
            return None
        try:
            row = source.execute(f"SELECT rowid FROM {quoted} WHERE rowid > ? ORDER BY rowid LIMIT 1",
                                 (start,)).fetchone()
        except sqlite3.DatabaseError:
            step *= 2
            continue
        return None if row is None else int(row[0]) - 1
    return None
