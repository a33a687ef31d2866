"""The crystal repository: the ``crystals`` concept's tables in the node's database.

It is synchronous and used by one thread at a time: under trio the node reaches
it only through :meth:`node.db.Database.run`. Every write is one explicit
transaction, and each lifecycle change is written to ``memory_audit_log``
inside the transaction that makes it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from node.crystals import schema
from node.crystals.model import AccessScope, Crystal, Lifecycle, now_ms
from node.crystals.reads import CrystalNotFound, CrystalReads, StoreError
from node.crystals.rows import COLUMNS, Filters, crystal_values, vector_bytes
from node.crystals.versions import CrystalVersions
from node.db import Database


class EmbedderMismatch(StoreError):
    http_status = 409
    code = "embedder_mismatch"

    """The database holds vectors of another embedder: mixing them would give garbage."""


@dataclass(frozen=True)
class AddResult:
    id: str
    rowid: int
    created: bool  # False: an identical text was already stored (dedup by hash)


class CrystalStore(CrystalReads, CrystalVersions):
    """SQLite-backed crystal storage. Not thread-safe: one owner thread at a time."""

    def __init__(self, db: Database | Path | str) -> None:
        """Use ``db`` (the node's database owner), or open one at a path and own it."""
        self._owns_db = not isinstance(db, Database)
        self.db = db if isinstance(db, Database) else Database(db)
        self.path = self.db.path
        try:
            self.db.migrate(schema.CONCEPT, schema.MIGRATIONS)
        except BaseException:
            if self._owns_db:
                self.db.close()  # a refused (newer) schema must not leak the connection
            raise

    def close(self) -> None:
        if self._owns_db:
            self.db.close()

    # --- meta ---------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        return self.db.get_meta(key)

    def set_meta(self, key: str, value: str) -> None:
        self.db.set_meta(key, value)

    def bind_embedder(self, name: str, dim: int) -> None:
        """Record the embedder on first use; refuse a different one afterwards."""
        stored_name, stored_dim = self.get_meta("embedder_name"), self.get_meta("embedder_dim")
        if stored_name is None:
            with self.db.transaction() as conn:
                conn.execute("INSERT INTO meta(key, value) VALUES('embedder_name', ?)", (name,))
                conn.execute("INSERT INTO meta(key, value) VALUES('embedder_dim', ?)", (str(dim),))
            return
        if stored_name != name or int(stored_dim or 0) != dim:
            raise EmbedderMismatch(
                f"{self.path} was built with embedder {stored_name!r} ({stored_dim}-d) but this "
                f"node is configured for {name!r} ({dim}-d); set [memory] embedder back, or start "
                f"a new data dir"
            )

    def _bump_checkpoint(self, conn: sqlite3.Connection, key: str) -> None:
        conn.execute(
            "INSERT INTO meta(key, value) VALUES(?, '1') "
            "ON CONFLICT(key) DO UPDATE SET value=CAST(value AS INTEGER) + 1",
            (key,),
        )

    def checkpoint(self, key: str = "vector_deletions") -> int:
        return int(self.get_meta(key) or 0)

    # --- audit --------------------------------------------------------------------------------
    @staticmethod
    def _audit(
        conn: sqlite3.Connection,
        crystal_id: str | None,
        action: str,
        from_state: str | None = None,
        to_state: str | None = None,
        detail: dict[str, Any] | None = None,
        at_ms: int | None = None,
    ) -> None:
        conn.execute(
            "INSERT INTO memory_audit_log(at_ms, crystal_id, action, from_state, to_state, detail_json) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (at_ms or now_ms(), crystal_id, action, from_state, to_state, json.dumps(detail or {})),
        )

    # --- writes -------------------------------------------------------------------------------
    def _insert(self, conn: sqlite3.Connection, crystal: Crystal) -> int:
        values = crystal_values(crystal)
        cursor = conn.execute(
            f"INSERT INTO crystals({COLUMNS}) VALUES ({','.join('?' * len(values))})", values
        )
        rowid = int(cursor.lastrowid or 0)
        windows = crystal.window_embeddings
        if windows is not None and len(windows) > 1 and crystal.embedding is not None:
            # Same transaction as the crystal: a crystal is never stored without its windows.
            # They belong to the store's embedder (re-embedding rewrites them all).
            bound = conn.execute("SELECT value FROM meta WHERE key='embedder_name'").fetchone()
            if bound is not None:
                conn.execute(
                    "INSERT INTO crystal_windows(crystal_rowid, embedder, vectors) VALUES (?, ?, ?)",
                    (rowid, bound[0], vector_bytes(windows)),
                )
        second = crystal.second_embedding
        if second is not None and crystal.embedding is not None:
            # Same transaction too: a crystal is never stored without its second opinion's vector.
            conn.execute(
                "INSERT INTO crystal_second(crystal_rowid, encoder, vector) VALUES (?, ?, ?)",
                (rowid, second[0], vector_bytes(second[1])),
            )
        return rowid

    def add(self, crystal: Crystal) -> AddResult:
        """Insert a crystal unless one with the same content hash exists (dedup)."""
        return self.add_many([crystal])[0]

    def add_many(self, crystals: Sequence[Crystal]) -> list[AddResult]:
        """Insert a batch in one transaction; duplicates resolve to the stored crystal."""
        results: list[AddResult] = []
        at = now_ms()
        with self.db.transaction() as conn:
            for crystal in crystals:
                # Dedup among the current crystals of the crystal's namespace only.
                existing = self.live_duplicate(conn, crystal.namespace, crystal.hash, at)
                if existing is not None:
                    results.append(AddResult(existing["id"], existing["rowid"], created=False))
                    continue
                rowid = self._insert(conn, crystal)
                self._audit(
                    conn,
                    crystal.id,
                    "created",
                    None,
                    crystal.lifecycle.value,
                    {"origin": crystal.origin.value, "type": crystal.semantic_type.value},
                    crystal.created_at_ms,
                )
                results.append(AddResult(crystal.id, rowid, created=True))
        return results

    def add_version(self, crystal: Crystal, previous_id: str) -> AddResult:
        """Insert a new skill version and deprecate the previous one, atomically."""
        with self.db.transaction() as conn:
            if self.live_duplicate(conn, crystal.namespace, crystal.hash, crystal.created_at_ms):
                raise StoreError("a crystal with exactly this text already exists")
            cursor = conn.execute(
                "UPDATE crystals SET deprecated=1, deprecated_by=?, valid_to_ms=?, superseded_by=? "
                "WHERE id=? AND deprecated=0 AND valid_to_ms IS NULL AND deleted_at_ms IS NULL",
                (crystal.stable_skill_id, crystal.created_at_ms, crystal.id, previous_id),
            )
            if cursor.rowcount == 0:
                raise StoreError(f"{previous_id} is missing or already superseded by a newer version")
            rowid = self._insert(conn, crystal)
            self._audit(conn, previous_id, "deprecated", None, None,
                        {"by": crystal.id, "memory_id": crystal.memory_id})
            self._audit(
                conn, crystal.id, "created", None, crystal.lifecycle.value,
                {"version": crystal.skill_version, "previous": previous_id,
                 "memory_id": crystal.memory_id},
            )
        return AddResult(crystal.id, rowid, created=True)

    def record_access(self, crystal_ids: Sequence[str], at_ms: int | None = None) -> None:
        if not crystal_ids:
            return
        at = at_ms or now_ms()
        with self.db.transaction() as conn:
            conn.executemany(
                "UPDATE crystals SET access_count = access_count + 1, last_accessed_at_ms = ? "
                "WHERE id = ?",
                [(at, crystal_id) for crystal_id in crystal_ids],
            )

    def set_lifecycle(self, crystal_id: str, lifecycle: Lifecycle, reason: str) -> None:
        with self.db.transaction() as conn:
            row = conn.execute("SELECT lifecycle FROM crystals WHERE id=?", (crystal_id,)).fetchone()
            if row is None:
                raise CrystalNotFound(crystal_id)
            conn.execute("UPDATE crystals SET lifecycle=? WHERE id=?", (lifecycle.value, crystal_id))
            self._audit(conn, crystal_id, "transition", row[0], lifecycle.value, {"reason": reason})

    def record_execution(
        self, crystal_id: str, success: bool, reward: float, at_ms: int | None = None,
        note: str | None = None,
    ) -> Crystal:
        """Add one skill execution outcome; steeringReward accumulates in [-1, 1].

        ``note`` (what happened, in the agent's words) is kept in the execution's audit row.
        """
        if not 0.0 <= reward <= 1.0:
            raise StoreError(f"reward must be between 0 and 1, got {reward}")
        at = at_ms or now_ms()
        with self.db.transaction() as conn:
            row = conn.execute(
                "SELECT semantic_type FROM crystals WHERE id=?", (crystal_id,)
            ).fetchone()
            if row is None:
                raise CrystalNotFound(crystal_id)
            conn.execute(
                "INSERT INTO skill_executions(crystal_id, at_ms, success, reward) VALUES (?,?,?,?)",
                (crystal_id, at, int(success), reward),
            )
            signed = reward if success else -max(reward, 0.1)
            conn.execute(
                "UPDATE crystals SET executions = executions + 1, successes = successes + ?, "
                "reward_sum = reward_sum + ?, "
                "steering_reward = MAX(-1.0, MIN(1.0, steering_reward + ? * 0.1)) WHERE id=?",
                (int(success), reward if success else 0.0, signed, crystal_id),
            )
            detail: dict[str, Any] = {"success": success, "reward": reward}
            if note:
                detail["note"] = note
            self._audit(conn, crystal_id, "execution", None, None, detail, at)
        return self.get(crystal_id)

    def update_fields(self, crystal_id: str, action: str, **columns: Any) -> None:
        """Update raw columns of one crystal (skill versioning, verification) with an audit row."""
        allowed = {
            "deprecated",
            "deprecated_by",
            "is_verified",
            "verified_by",
            "lifecycle",
            "access_scope",
            "governance_json",
            "expires_at_ms",
            "stable_skill_id",
        }
        unknown = set(columns) - allowed
        if unknown:
            raise StoreError(f"cannot update {sorted(unknown)}")
        assignments = ", ".join(f"{name}=?" for name in columns)
        with self.db.transaction() as conn:
            cursor = conn.execute(
                f"UPDATE crystals SET {assignments} WHERE id=?", (*columns.values(), crystal_id)
            )
            if cursor.rowcount == 0:
                raise CrystalNotFound(crystal_id)
            self._audit(conn, crystal_id, action, None, None, {k: str(v) for k, v in columns.items()})

    def apply_consolidation(
        self,
        scores: Sequence[tuple[str, float]],
        transitions: Sequence[tuple[str, str, str, str]],
        merges: Sequence[tuple[str, str, float]],
        at_ms: int | None = None,
    ) -> None:
        """Apply a consolidation plan: scores, transitions and merges in ONE transaction."""
        at = at_ms or now_ms()
        with self.db.transaction() as conn:
            conn.executemany(
                "UPDATE crystals SET importance_score=? WHERE id=?",
                [(score, crystal_id) for crystal_id, score in scores],
            )
            for crystal_id, from_state, to_state, reason in transitions:
                conn.execute("UPDATE crystals SET lifecycle=? WHERE id=?", (to_state, crystal_id))
                self._audit(conn, crystal_id, "transition", from_state, to_state, {"reason": reason}, at)
            # Lifecycle changes of merged pairs arrive as transitions; a merge adds
            # the lineage link (loser.parent_id = winner) and its own audit rows.
            for winner, loser, similarity in merges:
                conn.execute("UPDATE crystals SET parent_id=? WHERE id=?", (winner, loser))
                self._audit(
                    conn, loser, "merged", None, "archived", {"winner": winner, "cosine": similarity}, at
                )
                self._audit(
                    conn, winner, "merged", None, "consolidated", {"loser": loser, "cosine": similarity}, at
                )
            self._audit(
                conn,
                None,
                "consolidation_run",
                None,
                None,
                {"scored": len(scores), "transitions": len(transitions), "merges": len(merges)},
                at,
            )

    def purge(self, lifecycles: Sequence[str] = ("expired", "archived")) -> list[int]:
        """Physically delete expired/archived crystals and deleted memories (tombstones);
        returns the removed rowids. ``lifecycles=()`` purges the tombstones only."""
        with self.db.transaction() as conn:
            marks = ",".join("?" * len(lifecycles)) or "NULL"
            where = f"lifecycle IN ({marks}) OR deleted_at_ms IS NOT NULL"
            rows = conn.execute(
                f"SELECT rowid, id, lifecycle, memory_id FROM crystals WHERE {where}",
                tuple(lifecycles),
            ).fetchall()
            for row in rows:
                self._audit(conn, row["id"], "purged", row["lifecycle"], None,
                            {"memory_id": row["memory_id"]})
            conn.execute(f"DELETE FROM crystals WHERE {where}", tuple(lifecycles))
            if rows:
                self._bump_checkpoint(conn, "vector_deletions")
        return [int(row["rowid"]) for row in rows]


__all__ = [
    "AccessScope",
    "AddResult",
    "CrystalNotFound",
    "CrystalStore",
    "EmbedderMismatch",
    "Filters",
    "StoreError",
]
