"""The settlement ledger: which authorizations we settled, in SQLite of its own.

One row per (authorizer, nonce), the key the token itself uses, so an authorization
is settled at most once however often it is presented. States move
``pending → submitted(tx_hash) → confirmed | failed``; the transaction hash is
written *before* the transaction is broadcast, so after a crash every row that might
have reached the chain names the transaction to look for (see
:meth:`SettlementEngine.reconcile`). WAL with synchronous=FULL: a committed state
survives a crash or power loss.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from node.chain.authorization import Authorization
from node.db import StoreGuard, check_on_open

PENDING = "pending"
SUBMITTED = "submitted"
CONFIRMED = "confirmed"
FAILED = "failed"
OPEN_STATES = (PENDING, SUBMITTED)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS settlements (
    authorizer      TEXT NOT NULL,
    nonce           TEXT NOT NULL,
    payee           TEXT NOT NULL,
    value_micro     INTEGER NOT NULL,
    valid_after_s   INTEGER NOT NULL,
    valid_before_s  INTEGER NOT NULL,
    signature       BLOB NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('pending', 'submitted', 'confirmed', 'failed')),
    tx_hash         TEXT,
    block_number    INTEGER,
    reason          TEXT,
    attempts        INTEGER NOT NULL DEFAULT 0,
    created_at_s    REAL NOT NULL,
    updated_at_s    REAL NOT NULL,
    PRIMARY KEY (authorizer, nonce)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS settlements_open ON settlements (state)
    WHERE state IN ('pending', 'submitted');
"""

Key = tuple[str, str]


@dataclass(frozen=True)
class Settlement:
    """One row of the ledger."""

    authorization: Authorization
    state: str
    tx_hash: str | None
    block_number: int | None
    reason: str | None
    attempts: int

    @property
    def key(self) -> Key:
        return self.authorization.key

    @property
    def settled(self) -> bool:
        return self.state == CONFIRMED


class SettlementLedger:
    """Thread-safe: one connection, one lock; every method is one SQLite transaction."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        if str(path) != ":memory:":
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self.guard = StoreGuard(self.path)  # damage is said, then writes stop (node/db.py)
        self._db = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
        try:
            if str(path) != ":memory:":
                check_on_open(self._db, self.path)
            with self.guard.reading():
                self._db.execute("PRAGMA journal_mode=WAL")
                self._db.execute("PRAGMA synchronous=FULL")
                self._db.execute("PRAGMA busy_timeout=5000")
                self._db.executescript(_SCHEMA)
        except BaseException:
            self._db.close()
            raise

    def close(self) -> None:
        with self._lock:
            self._db.close()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        with self._lock, self.guard.writing():
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    # --- writes -----------------------------------------------------------------------
    def claim(self, authorizations: Iterable[Authorization]) -> list[bool]:
        """Record each authorization as pending unless already known.

        Returns, per authorization, whether this call created its row (only then
        may the caller submit it).
        """
        now = time.time()
        created = []
        with self._transaction() as db:
            for item in authorizations:
                cursor = db.execute(
                    "INSERT OR IGNORE INTO settlements (authorizer, nonce, payee, value_micro,"
                    " valid_after_s, valid_before_s, signature, state, created_at_s, updated_at_s)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?)",
                    (
                        *item.key,
                        item.to,
                        item.value_micro,
                        item.valid_after_s,
                        item.valid_before_s,
                        item.signature,
                        now,
                        now,
                    ),
                )
                created.append(cursor.rowcount == 1)
        return created

    def mark_submitted(self, keys: Sequence[Key], tx_hash: str) -> None:
        self._update(
            keys,
            "state = 'submitted', tx_hash = ?, attempts = attempts + 1, reason = NULL",
            (tx_hash,),
            only_open=True,
        )

    def mark_confirmed(self, key: Key, tx_hash: str | None, block_number: int | None) -> None:
        self.mark_confirmed_many([key], tx_hash, block_number)

    def mark_confirmed_many(self, keys: Sequence[Key], tx_hash: str | None,
                            block_number: int | None) -> None:
        self._update(keys, "state = 'confirmed', tx_hash = ?, block_number = ?, reason = NULL",
                     (tx_hash, block_number), only_open=True)

    def mark_failed(self, key: Key, reason: str, tx_hash: str | None = None) -> None:
        self._update([key], "state = 'failed', reason = ?, tx_hash = COALESCE(?, tx_hash)",
                     (reason, tx_hash), only_open=True)

    def mark_pending(self, keys: Sequence[Key], reason: str) -> None:
        """Back to pending (to be retried): the transaction is known not to have settled it."""
        self._update(keys, "state = 'pending', reason = ?", (reason,), only_open=True)

    def _update(self, keys: Sequence[Key], assignments: str, values: tuple[object, ...],
                *, only_open: bool) -> None:
        now = time.time()
        guard = " AND state IN ('pending', 'submitted')" if only_open else ""
        with self._transaction() as db:
            db.executemany(
                f"UPDATE settlements SET {assignments}, updated_at_s = ?"
                f" WHERE authorizer = ? AND nonce = ?{guard}",
                [(*values, now, *key) for key in keys],
            )

    # --- reads ------------------------------------------------------------------------
    def get(self, key: Key) -> Settlement | None:
        with self._lock, self.guard.reading():
            row = self._db.execute(f"SELECT {_COLUMNS} FROM settlements WHERE authorizer = ? AND nonce = ?",
                                   key).fetchone()
        return _settlement(row) if row else None

    def get_many(self, keys: Sequence[Key]) -> list[Settlement | None]:
        return [self.get(key) for key in keys]

    def open_settlements(self) -> list[Settlement]:
        """Rows a crash or an outage may have left unfinished (pending or submitted)."""
        with self._lock, self.guard.reading():
            rows = self._db.execute(
                f"SELECT {_COLUMNS} FROM settlements WHERE state IN ('pending', 'submitted')"
                " ORDER BY created_at_s"
            ).fetchall()
        return [_settlement(row) for row in rows]

    def count(self, state: str | None = None) -> int:
        with self._lock, self.guard.reading():
            if state is None:
                return int(self._db.execute("SELECT COUNT(*) FROM settlements").fetchone()[0])
            return int(
                self._db.execute("SELECT COUNT(*) FROM settlements WHERE state = ?", (state,)).fetchone()[0]
            )

    def confirmed_total_micro(self, payee: str | None = None) -> int:
        query = "SELECT COALESCE(SUM(value_micro), 0) FROM settlements WHERE state = 'confirmed'"
        with self._lock, self.guard.reading():
            if payee is None:
                return int(self._db.execute(query).fetchone()[0])
            return int(self._db.execute(query + " AND payee = ?", (payee,)).fetchone()[0])


_COLUMNS = (
    "authorizer, nonce, payee, value_micro, valid_after_s, valid_before_s, signature,"
    " state, tx_hash, block_number, reason, attempts"
)


def _settlement(row: tuple[object, ...]) -> Settlement:
    (authorizer, nonce, payee, value, after, before, signature, state, tx_hash, block, reason,
     attempts) = row
    return Settlement(
        authorization=Authorization(
            from_address=str(authorizer),
            to=str(payee),
            value_micro=int(value),  # type: ignore[call-overload]
            valid_after_s=int(after),  # type: ignore[call-overload]
            valid_before_s=int(before),  # type: ignore[call-overload]
            nonce=bytes.fromhex(str(nonce)[2:]),
            signature=bytes(signature),  # type: ignore[call-overload]
        ),
        state=str(state),
        tx_hash=str(tx_hash) if tx_hash is not None else None,
        block_number=int(block) if block is not None else None,  # type: ignore[call-overload]
        reason=str(reason) if reason is not None else None,
        attempts=int(attempts),  # type: ignore[call-overload]
    )
