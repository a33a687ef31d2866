"""Memories as versioned records in namespaces: the crystal store's version and tombstone writes.

A *memory* is the chain of crystals sharing ``memory_id`` (its first version's
id), all in one namespace. ``supersede`` writes version n+1 and closes version
n (``valid_to_ms``, ``superseded_by``) in one transaction; ``tombstone`` marks
every version deleted (``deleted_at_ms``) so it leaves search, get and lists at
once, and consolidation purges it later. Each change writes audit rows carrying
``memory_id``, so the history survives the purge.

A crystal is *current* at time t when it is not superseded, not deleted and its
TTL (``expires_at_ms``) has not passed: :func:`current_clause` is that test in
SQL, the one every read of "what the agent remembers" applies.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from node.crystals.model import Crystal, now_ms
from node.crystals.reads import CrystalNotFound, StoreError, readable_crystals
from node.crystals.rows import COLUMNS
from node.db import Database


class MemorySuperseded(StoreError):
    """The version was replaced meanwhile: update the current one (HTTP 409)."""

    http_status = 409
    code = "superseded"


def current_clause(alias: str = "c") -> str:
    """SQL for "current at ?" (one parameter: the time in ms)."""
    return (f"{alias}.valid_to_ms IS NULL AND {alias}.deleted_at_ms IS NULL "
            f"AND ({alias}.expires_at_ms IS NULL OR {alias}.expires_at_ms > ?)")


class CrystalVersions:
    """Mixed into ``CrystalStore``: versions, tombstones and namespaces of memories."""

    db: Database

    def _insert(self, conn: sqlite3.Connection, crystal: Crystal) -> int:
        raise NotImplementedError

    @staticmethod
    def _audit(conn: sqlite3.Connection, crystal_id: str | None, action: str,
               from_state: str | None = None, to_state: str | None = None,
               detail: dict[str, Any] | None = None, at_ms: int | None = None) -> None:
        raise NotImplementedError

    def live_duplicate(self, conn: sqlite3.Connection, namespace: str, text_hash: str,
                       at_ms: int, exclude_id: str | None = None) -> sqlite3.Row | None:
        """The current crystal with this text in this namespace; an expired one is closed first
        (its validity ends at its expiry), so the same text can be remembered again."""
        rows = conn.execute(
            "SELECT rowid, id, expires_at_ms FROM crystals WHERE namespace=? AND hash=? "
            "AND valid_to_ms IS NULL AND deleted_at_ms IS NULL", (namespace, text_hash),
        ).fetchall()
        for row in rows:
            if row["id"] == exclude_id:
                continue
            if row["expires_at_ms"] is not None and row["expires_at_ms"] <= at_ms:
                conn.execute("UPDATE crystals SET valid_to_ms=? WHERE id=?", (row["expires_at_ms"], row["id"]))
                self._audit(conn, row["id"], "expired", None, None, {"reason": "ttl_elapsed"}, at_ms)
                continue
            return row
        return None

    def supersede(self, previous_id: str, crystal: Crystal) -> int:
        """Insert ``crystal`` as the next version of ``previous_id`` and close that one; returns rowid."""
        at = crystal.created_at_ms
        with self.db.transaction() as conn:
            row = conn.execute(
                "SELECT id, memory_id, version, valid_to_ms, deleted_at_ms, superseded_by, semantic_type "
                "FROM crystals WHERE id=?", (previous_id,)).fetchone()
            if row is None or row["deleted_at_ms"] is not None:
                raise CrystalNotFound(previous_id)
            if row["valid_to_ms"] is not None:
                raise MemorySuperseded(
                    f"{previous_id} is no longer current (superseded by {row['superseded_by']}); "
                    "update the current version")
            if crystal.memory_id != row["memory_id"] or crystal.version != row["version"] + 1:
                raise StoreError("a new version must continue its memory's chain")
            if self.live_duplicate(conn, crystal.namespace, crystal.hash, at, exclude_id=previous_id):
                raise StoreError("this namespace already holds a memory with exactly this text")
            knowledge = row["semantic_type"] in ("skill", "task_pattern")
            conn.execute(
                "UPDATE crystals SET valid_to_ms=?, superseded_by=?, "
                "deprecated=CASE WHEN ? THEN 1 ELSE deprecated END, "
                "deprecated_by=CASE WHEN ? THEN ? ELSE deprecated_by END WHERE id=?",
                (at, crystal.id, knowledge, knowledge, crystal.stable_skill_id, previous_id))
            rowid = self._insert(conn, crystal)
            self._audit(conn, previous_id, "superseded", None, None,
                        {"by": crystal.id, "memory_id": crystal.memory_id}, at)
            self._audit(conn, crystal.id, "updated", None, crystal.lifecycle.value,
                        {"previous": previous_id, "version": crystal.version,
                         "memory_id": crystal.memory_id}, at)
        return rowid

    def tombstone(self, memory_id: str, at_ms: int | None = None, reason: str | None = None) -> list[str]:
        """Mark every version of a memory deleted; returns their ids (empty: nothing to delete).
        ``reason`` goes into the audit rows (an indexed file's chunk: ``file_deleted``, ...)."""
        at = at_ms or now_ms()
        with self.db.transaction() as conn:
            ids = [row[0] for row in conn.execute(
                "SELECT id FROM crystals WHERE memory_id=? AND deleted_at_ms IS NULL ORDER BY version",
                (memory_id,)).fetchall()]
            conn.execute("UPDATE crystals SET deleted_at_ms=? WHERE memory_id=? AND deleted_at_ms IS NULL",
                         (at, memory_id))
            for crystal_id in ids:
                self._audit(conn, crystal_id, "deleted", None, None,
                            {"memory_id": memory_id} | ({"reason": reason} if reason else {}), at)
        return ids

    def set_lines(self, moves: list[tuple[str, int, int]]) -> None:
        """Where unchanged crystals now sit in their file: ``(id, start_line, end_line)`` each.
        Their text is what it was, so this is neither a version nor an audited change."""
        with self.db.transaction() as conn:
            conn.executemany("UPDATE crystals SET start_line=?, end_line=? WHERE id=?",
                             [(start, end, crystal_id) for crystal_id, start, end in moves])

    def memory_id_of(self, crystal_id: str) -> str:
        """The memory a crystal id (any version, even a purged one) belongs to."""
        row = self.db.one("SELECT memory_id FROM crystals WHERE id=?", (crystal_id,))
        if row is not None:
            return str(row[0])
        if 4 <= len(crystal_id) < 36:
            rows = self.db.all("SELECT memory_id FROM crystals WHERE id LIKE ? LIMIT 2",
                               (crystal_id.replace("%", "").replace("_", "") + "%",))
            if len(rows) == 1:
                return str(rows[0][0])
        for audit in self.db.all("SELECT detail_json FROM memory_audit_log WHERE crystal_id=? "
                                 "ORDER BY id", (crystal_id,)):
            detail = json.loads(audit[0])
            if isinstance(detail, dict) and isinstance(detail.get("memory_id"), str):
                return str(detail["memory_id"])
        raise CrystalNotFound(crystal_id)

    def versions(self, memory_id: str) -> list[Crystal]:
        rows = self.db.all(f"SELECT {COLUMNS} FROM crystals WHERE memory_id=? ORDER BY version",
                           (memory_id,))
        return readable_crystals(rows)

    def memory_transitions(self, memory_id: str, crystal_ids: list[str]) -> list[dict[str, Any]]:
        """Every audit row of a memory's versions, oldest first (purged versions included)."""
        ids = {memory_id, *crystal_ids}
        ids.update(row[0] for row in self.db.all(
            "SELECT DISTINCT crystal_id FROM memory_audit_log "
            "WHERE json_extract(detail_json, '$.memory_id')=?", (memory_id,)))
        ordered = sorted(ids)
        rows = self.db.all(f"SELECT * FROM memory_audit_log WHERE crystal_id IN "
                           f"({','.join('?' * len(ordered))}) ORDER BY id", ordered)
        return [{key: row[key] for key in row.keys() if key != "detail_json"}  # noqa: SIM118
                | {"detail": json.loads(row["detail_json"])} for row in rows]

    def namespaces(self, at_ms: int | None = None) -> list[dict[str, Any]]:
        rows = self.db.all(
            f"SELECT namespace, COUNT(*) AS memories FROM crystals c WHERE {current_clause()} "
            "GROUP BY namespace ORDER BY namespace", (at_ms or now_ms(),))
        return [{"namespace": row[0], "memories": int(row[1])} for row in rows]

    def current_rowids(self, namespaces: tuple[str, ...], at_ms: int,
                       among: list[int] | None = None, sources: tuple[str, ...] = ()) -> set[int]:
        """Rowids of the current crystals of ``namespaces`` (all namespaces when empty) and of
        ``sources`` (all sources when empty), optionally only among the rowids ``among``."""
        where = current_clause()
        params: list[Any] = [at_ms]
        if namespaces:
            # With ``among``, "+" keeps SQLite on rowid lookups instead of the namespace index.
            plus = "+" if among is not None else ""
            where += f" AND {plus}c.namespace IN ({','.join('?' * len(namespaces))})"
            params.extend(namespaces)
        if sources:
            where += f" AND c.source IN ({','.join('?' * len(sources))})"
            params.extend(sources)
        if among is not None:
            where += f" AND c.rowid IN ({','.join('?' * len(among)) or 'NULL'})"
            params.extend(among)
        return {int(row[0]) for row in self.db.all(f"SELECT rowid FROM crystals c WHERE {where}", params)}

    def not_current_count(self, at_ms: int) -> int:
        row = self.db.one(f"SELECT COUNT(*) FROM crystals c WHERE NOT ({current_clause()})", (at_ms,))
        return int(row[0]) if row else 0


__all__ = ["CrystalVersions", "MemorySuperseded", "current_clause"]
