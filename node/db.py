"""The node's database owner: one SQLite file, one connection, one writer.

Every concept that keeps state in the node's database (crystals, trust, market)
has a schema module with an ordered list of migrations and a repository that
receives a :class:`Database`; nothing else opens or reaches a connection.

* The connection runs in WAL mode with foreign keys on and a busy timeout.
* Writes are explicit transactions (``with db.transaction() as conn``); a
  nested use joins the outer transaction, so a repository method can be
  composed into a larger atomic write.
* Under trio every call goes through :meth:`Database.run`, which hands it to a
  worker thread behind a ``CapacityLimiter(1)``: SQLite sees one thread at a
  time, whichever concept is writing.
* Migrations are versioned per concept in ``schema_versions``. A data dir from
  before this table existed (one ``meta.schema_version`` counting a single
  list of migrations) is converted on open, in one transaction, without
  touching a row. A database written by newer code is refused.

The chain's settlement ledger (``node/chain/ledger.py``) keeps its own file on
purpose: it needs ``synchronous=FULL`` (money moved on chain), it is written by
the settlement engine's threads while they wait on the chain, which must not
hold up this single writer, and it belongs to the wallet, not to this memory.

Damage is found and said (issue 30): every file store is checked on open with
``PRAGMA quick_check`` (it reads every page once but skips the index-vs-table
cross checks, the costly part of ``integrity_check``), and a damaged file is
refused with :class:`StoreDamaged`, one line naming the file and the way out.
A corruption error met later (SQLite's ``SQLITE_CORRUPT`` / ``SQLITE_NOTADB``)
is turned into the same error by :class:`StoreGuard`, logged and counted, and
from then on the store refuses every write: writing on a damaged b-tree can
spread the damage, and the user who is told can still restore or repair.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import trio

from node import metrics
from node.errors import CrystalmeshError

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

Migration = Sequence[str]

# The single migration list of the data dirs written before per-concept versions
# (``meta.schema_version`` = N meant migrations 1..N had run). Migration i of that
# list became version ``v`` of ``concept``: LEGACY_MIGRATIONS[i - 1] = (concept, v).
LEGACY_MIGRATIONS: tuple[tuple[str, int], ...] = (
    ("crystals", 1),  # crystals, full-text index, audit log, meta
    ("crystals", 2),  # skill execution log
    ("market", 1),  # listing book
    ("market", 2),  # sales and purchases
    ("trust", 1),  # trust peers, events, decisions
    ("market", 3),  # purchase authorization, valid_before, undelivered payload
)
# Written to ``meta.schema_version`` once converted: code from before the
# conversion reads it as "newer than I understand" and refuses the file instead
# of re-running its first migration over existing tables.
LEGACY_SENTINEL_VERSION = 1000


class SchemaError(CrystalmeshError, RuntimeError):
    """The database was written by a newer crystalmesh or is not a crystalmesh database."""

    http_status = 500
    code = "schema"


# SQLite's primary result codes that mean "the file is damaged" (extended codes such as
# SQLITE_CORRUPT_VTAB keep them in their low byte).
SQLITE_CORRUPT = 11
SQLITE_NOTADB = 26


class StoreDamaged(CrystalmeshError, RuntimeError):
    """A database file is damaged: refused on open, and refuses writes once damage is seen."""

    http_status = 503
    code = "store_damaged"

    def __init__(self, path: Path, detail: str, *, writes_stopped: bool = False) -> None:
        self.path = Path(path)
        self.detail = detail
        stopped = ": writes to it are stopped" if writes_stopped else ""
        super().__init__(
            f"{self.path} is damaged ({detail}){stopped}; restore a backup "
            f"(`crystalmesh restore FILE --data-dir NEW_DIR`) or salvage it "
            f"(`crystalmesh doctor --repair --data-dir {self.path.parent}`)"
        )


def is_corruption(error: BaseException) -> bool:
    """Whether a sqlite3 error says the file itself is damaged (not a busy or full disk)."""
    if not isinstance(error, sqlite3.DatabaseError):
        return False
    code = getattr(error, "sqlite_errorcode", None)
    if isinstance(code, int):
        return code & 0xFF in (SQLITE_CORRUPT, SQLITE_NOTADB)
    text = str(error).lower()
    return "malformed" in text or "not a database" in text or "corrupt" in text


def integrity_problems(conn: sqlite3.Connection, *, full: bool = False, limit: int = 10) -> list[str]:
    """What ``quick_check`` (or ``integrity_check`` with ``full``) finds; [] for a sound file."""
    pragma = "integrity_check" if full else "quick_check"
    try:
        rows = [str(row[0]) for row in conn.execute(f"PRAGMA {pragma}({int(limit)})")]
    except sqlite3.DatabaseError as exc:
        if not is_corruption(exc):
            raise
        return [str(exc)]
    return [] if rows == ["ok"] else rows


class StoreGuard:
    """Says damage once, then stops writes: wrap every statement of one store in it.

    ``reading()`` turns a corruption error into :class:`StoreDamaged` (logged and
    counted in ``crystalmesh_store_damaged``); ``writing()`` also refuses to start
    once the store is known to be damaged.
    """

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.damage: StoreDamaged | None = None

    def mark(self, detail: str) -> StoreDamaged:
        if self.damage is None:
            self.damage = StoreDamaged(self.path, detail)
            log.error("store damaged path=%s detail=%s; writes stopped", self.path, detail)
            metrics.STORE_DAMAGED.labels(store=self.path.name).set(1)
        return self.damage

    def said(self, error: sqlite3.DatabaseError) -> BaseException:
        """What to raise for ``error``: :class:`StoreDamaged` if it is damage, else itself."""
        return self.mark(str(error)) if is_corruption(error) else error

    @contextmanager
    def reading(self) -> Iterator[None]:
        try:
            yield
        except sqlite3.DatabaseError as exc:
            if not is_corruption(exc):
                raise
            raise self.mark(str(exc)) from exc

    @contextmanager
    def writing(self) -> Iterator[None]:
        if self.damage is not None:
            raise StoreDamaged(self.path, self.damage.detail, writes_stopped=True)
        with self.reading():
            yield

    def status(self) -> str:
        """``ok``, or ``damaged: <what SQLite said>``."""
        return "ok" if self.damage is None else f"damaged: {self.damage.detail}"


class _GuardedCursor(sqlite3.Cursor):
    """A cursor whose rows, fetched later by the caller, still pass through its store's guard
    (``try``, not a context manager, per row: free unless SQLite raises)."""

    guard: StoreGuard

    def execute(self, sql: str, parameters: Any = (), /) -> _GuardedCursor:
        try:
            super().execute(sql, parameters)
        except sqlite3.DatabaseError as exc:
            raise self.guard.said(exc) from exc
        return self

    def fetchone(self) -> Any:
        try:
            return super().fetchone()
        except sqlite3.DatabaseError as exc:
            raise self.guard.said(exc) from exc

    def fetchmany(self, size: int | None = None) -> list[Any]:
        try:
            return super().fetchmany(self.arraysize if size is None else size)
        except sqlite3.DatabaseError as exc:
            raise self.guard.said(exc) from exc

    def fetchall(self) -> list[Any]:
        try:
            return super().fetchall()
        except sqlite3.DatabaseError as exc:
            raise self.guard.said(exc) from exc

    def __next__(self) -> Any:
        try:
            return super().__next__()
        except sqlite3.DatabaseError as exc:
            raise self.guard.said(exc) from exc


def check_on_open(conn: sqlite3.Connection, path: Path) -> None:
    """Refuse a damaged file before anything is written to it (``quick_check``)."""
    problems = integrity_problems(conn, limit=3)
    if problems:
        raise StoreDamaged(path, "; ".join(problems))


class Database:
    """One SQLite connection and its schema. Not thread-safe: one owner thread at a time."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        in_memory = str(path) == ":memory:"
        if not in_memory:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.guard = StoreGuard(self.path)
        # isolation_level=None: we issue BEGIN/COMMIT ourselves so DDL and DML are
        # both transactional; check_same_thread=False because trio's worker threads
        # change, while the CapacityLimiter(1) in run() keeps access serial.
        self._conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        self._conn.row_factory = sqlite3.Row
        self._limiter: trio.CapacityLimiter | None = None
        try:
            if not in_memory:
                check_on_open(self._conn, self.path)
            with self.guard.reading():
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=NORMAL")
                self._conn.execute("PRAGMA foreign_keys=ON")
                self._conn.execute("PRAGMA busy_timeout=5000")
                self._bootstrap()
        except BaseException:
            self._conn.close()  # a refused schema must not leak the connection
            raise

    def close(self) -> None:
        self._conn.close()

    # --- the single writer ----------------------------------------------------------------------
    async def run(self, function: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run ``function`` on a worker thread, one at a time for the whole database."""
        if self._limiter is None:
            # Created lazily: a Database is opened before (or outside) trio.
            self._limiter = trio.CapacityLimiter(1)
        return await trio.to_thread.run_sync(
            lambda: function(*args, **kwargs), limiter=self._limiter
        )

    # --- statements -------------------------------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; everything inside commits together or not at all."""
        if self._conn.in_transaction:
            yield self._conn  # nested use joins the outer transaction
            return
        with self.guard.writing():
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                if self._conn.in_transaction:
                    self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    @property
    def in_transaction(self) -> bool:
        return self._conn.in_transaction

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        """One statement outside an explicit transaction (reads, mostly); the rows the caller
        fetches from the cursor later pass through the store's guard too."""
        cursor = self._conn.cursor(_GuardedCursor)
        cursor.guard = self.guard
        return cursor.execute(sql, params)

    def one(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        with self.guard.reading():
            row: sqlite3.Row | None = self._conn.execute(sql, params).fetchone()
        return row

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        with self.guard.reading():
            return self._conn.execute(sql, params).fetchall()

    @property
    def damage(self) -> StoreDamaged | None:
        """The damage met at run time, if any (the store then refuses writes)."""
        return self.guard.damage

    # --- meta (small key/value settings shared by the concepts) --------------------------------
    def get_meta(self, key: str) -> str | None:
        row = self.one("SELECT value FROM meta WHERE key=?", (key,))
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO meta(key, value) VALUES(?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                (key, value),
            )

    # --- migrations -------------------------------------------------------------------------------
    def schema_version(self, concept: str) -> int:
        row = self.one("SELECT version FROM schema_versions WHERE concept=?", (concept,))
        return 0 if row is None else self._version(row[0], f"schema_versions[{concept!r}]")

    def _version(self, value: Any, where: str) -> int:
        """A stored version number; anything else means the file is not ours or was damaged."""
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        if isinstance(value, str) and value.isascii() and value.isdigit():
            return int(value)
        raise SchemaError(f"{self.path}: {where} holds {value!r}, not a schema version")

    def schema_versions(self) -> dict[str, int]:
        rows = self.all("SELECT concept, version FROM schema_versions")
        return {row[0]: self._version(row[1], f"schema_versions[{row[0]!r}]") for row in rows}

    def migrate(self, concept: str, migrations: Sequence[Migration]) -> int:
        """Bring ``concept`` up to ``len(migrations)``; returns how many migrations ran.

        Each migration and its version bump share one transaction.
        """
        current = self.schema_version(concept)
        latest = len(migrations)
        if current > latest:
            raise SchemaError(
                f"{self.path}: schema of {concept!r} is at version {current}, newer than this "
                f"crystalmesh understands ({latest}); upgrade crystalmesh"
            )
        for version in range(current + 1, latest + 1):
            with self.transaction() as conn:
                for statement in migrations[version - 1]:
                    conn.execute(statement)
                conn.execute(
                    "INSERT INTO schema_versions(concept, version) VALUES(?, ?) "
                    "ON CONFLICT(concept) DO UPDATE SET version=excluded.version",
                    (concept, version),
                )
        if latest > current:
            log.info("migrated concept=%s from=%d to=%d", concept, current, latest)
        return latest - current

    def _bootstrap(self) -> None:
        """Create the owner's own tables; convert a single-version data dir once."""
        with self.transaction() as conn:
            tables = {
                row[0]
                for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            }
            conn.execute(
                "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)"
            )
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_versions ("
                "concept TEXT PRIMARY KEY, version INTEGER NOT NULL)"
            )
            if "schema_versions" in tables or "meta" not in tables:
                return
            row = conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            legacy = self._version(row[0], "meta.schema_version") if row else 0
            if legacy > len(LEGACY_MIGRATIONS):
                raise SchemaError(
                    f"{self.path}: database schema version {legacy} is newer than this "
                    f"crystalmesh understands ({len(LEGACY_MIGRATIONS)}); upgrade crystalmesh"
                )
            versions: dict[str, int] = {}
            for concept, version in LEGACY_MIGRATIONS[:legacy]:
                versions[concept] = version
            conn.executemany(
                "INSERT INTO schema_versions(concept, version) VALUES(?, ?)", sorted(versions.items())
            )
            conn.execute(
                "INSERT INTO meta(key, value) VALUES('schema_version', ?) "
                "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                (str(LEGACY_SENTINEL_VERSION),),
            )
            log.info("converted single schema version=%d to per-concept %s", legacy, versions)


__all__ = [
    "LEGACY_MIGRATIONS", "Database", "Migration", "SchemaError", "StoreDamaged", "StoreGuard",
    "check_on_open", "integrity_problems", "is_corruption",
]
