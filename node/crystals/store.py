"""The crystal store: one SQLite file (WAL) that is the node's source of truth.

The store is synchronous and owned by one thread at a time: under trio the
node reaches it only through ``trio.to_thread.run_sync`` with a
``CapacityLimiter(1)`` (see ``node.memory.facade.AsyncMemory``). Every write
is one explicit transaction, and each lifecycle change is written to
``memory_audit_log`` inside the transaction that makes it.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from node.crystals.model import (
    AccessScope,
    Crystal,
    ExecutionStats,
    Governance,
    HormonalInfluence,
    Lifecycle,
    Origin,
    ProvenanceNode,
    SemanticType,
    Source,
    now_ms,
)
from node.crystals.schema import migrate
from node.errors import CrystalmeshError


class StoreError(CrystalmeshError, RuntimeError):
    """A store operation could not be carried out; nothing was written."""


class CrystalNotFound(StoreError):
    http_status = 404
    code = "not_found"

    def __init__(self, crystal_id: str) -> None:
        super().__init__(f"no crystal with id {crystal_id!r}")
        self.crystal_id = crystal_id


class EmbedderMismatch(StoreError):
    http_status = 409
    code = "embedder_mismatch"

    """The database holds vectors of another embedder: mixing them would give garbage."""


@dataclass(frozen=True)
class AddResult:
    id: str
    rowid: int
    created: bool  # False: an identical text was already stored (dedup by hash)


@dataclass(frozen=True)
class Filters:
    semantic_types: tuple[str, ...] = ()
    lifecycles: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()

    def sql(self, alias: str = "c") -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        for column, values in (
            ("semantic_type", self.semantic_types),
            ("lifecycle", self.lifecycles),
            ("access_scope", self.scopes),
        ):
            if values:
                clauses.append(f"{alias}.{column} IN ({','.join('?' * len(values))})")
                params.extend(values)
        return (" AND ".join(clauses) or "1=1"), params


_COLUMNS = (
    "id, text, embedding, path, source, start_line, end_line, hash, semantic_type, origin, "
    "lifecycle, importance_score, access_count, last_accessed_at_ms, created_at_ms, "
    "emotional_valence, hormonal_json, steering_reward, access_scope, sensitivity, "
    "governance_json, provenance_json, parent_id, stable_skill_id, skill_version, "
    "previous_version_id, deprecated, deprecated_by, skill_tags_json, skill_category, "
    "is_verified, verified_by, executions, successes, reward_sum"
)


def _vector_bytes(embedding: Sequence[float] | np.ndarray | None) -> bytes | None:
    if embedding is None:
        return None
    return np.asarray(embedding, dtype=np.float32).tobytes()


def _row_to_crystal(row: sqlite3.Row, with_embedding: bool = False) -> Crystal:
    embedding = None
    if with_embedding and row["embedding"] is not None:
        embedding = np.frombuffer(row["embedding"], dtype=np.float32).tolist()
    hormonal = json.loads(row["hormonal_json"]) if row["hormonal_json"] else None
    return Crystal(
        id=row["id"],
        text=row["text"],
        embedding=embedding,
        path=row["path"],
        source=Source(row["source"]),
        start_line=row["start_line"],
        end_line=row["end_line"],
        hash=row["hash"],
        semantic_type=SemanticType(row["semantic_type"]),
        origin=Origin(row["origin"]),
        lifecycle=Lifecycle(row["lifecycle"]),
        importance_score=row["importance_score"],
        access_count=row["access_count"],
        last_accessed_at_ms=row["last_accessed_at_ms"],
        created_at_ms=row["created_at_ms"],
        emotional_valence=row["emotional_valence"],
        hormonal_influence=HormonalInfluence(**hormonal) if hormonal else None,
        steering_reward=row["steering_reward"],
        governance=Governance.from_dict(json.loads(row["governance_json"])),
        provenance_dag=[ProvenanceNode.from_dict(n) for n in json.loads(row["provenance_json"])],
        parent_id=row["parent_id"],
        stable_skill_id=row["stable_skill_id"],
        skill_version=row["skill_version"],
        previous_version_id=row["previous_version_id"],
        deprecated=bool(row["deprecated"]),
        deprecated_by=row["deprecated_by"],
        skill_tags=json.loads(row["skill_tags_json"]),
        skill_category=row["skill_category"],
        is_verified=bool(row["is_verified"]),
        verified_by=row["verified_by"],
        execution=ExecutionStats(row["executions"], row["successes"], row["reward_sum"]),
    )


class CrystalStore:
    """SQLite-backed crystal storage. Not thread-safe: one owner thread at a time."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # isolation_level=None: we issue BEGIN/COMMIT ourselves so DDL and DML are
        # both transactional; check_same_thread=False because trio's worker
        # threads change, while CapacityLimiter(1) keeps access serial.
        self.conn = sqlite3.connect(str(self.path), isolation_level=None, check_same_thread=False)
        self.conn.row_factory = sqlite3.Row
        self.conn.execute("PRAGMA journal_mode=WAL")
        self.conn.execute("PRAGMA synchronous=NORMAL")
        self.conn.execute("PRAGMA foreign_keys=ON")
        self.conn.execute("PRAGMA busy_timeout=5000")
        try:
            migrate(self.conn)
        except BaseException:
            self.conn.close()  # a refused (newer) schema must not leak the connection
            raise

    def close(self) -> None:
        self.conn.close()

    # --- transactions -------------------------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; everything inside commits together or not at all."""
        if self.conn.in_transaction:
            # Nested use joins the outer transaction.
            yield self.conn
            return
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    # --- meta ---------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction() as conn:
            conn.execute(
                "INSERT INTO meta(key, value) VALUES(?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                (key, value),
            )

    def bind_embedder(self, name: str, dim: int) -> None:
        """Record the embedder on first use; refuse a different one afterwards."""
        stored_name, stored_dim = self.get_meta("embedder_name"), self.get_meta("embedder_dim")
        if stored_name is None:
            with self.transaction() as conn:
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

    def audit_log(self, crystal_id: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        if crystal_id:
            rows = self.conn.execute(
                "SELECT * FROM memory_audit_log WHERE crystal_id=? ORDER BY id DESC LIMIT ?",
                (crystal_id, limit),
            ).fetchall()
        else:
            rows = self.conn.execute(
                "SELECT * FROM memory_audit_log ORDER BY id DESC LIMIT ?", (limit,)
            ).fetchall()
        return [dict(row) | {"detail": json.loads(row["detail_json"])} for row in rows]

    # --- writes -------------------------------------------------------------------------------
    def _insert(self, conn: sqlite3.Connection, crystal: Crystal) -> int:
        governance = crystal.governance
        values = (
            crystal.id,
            crystal.text,
            _vector_bytes(crystal.embedding),
            crystal.path,
            crystal.source.value,
            crystal.start_line,
            crystal.end_line,
            crystal.hash,
            crystal.semantic_type.value,
            crystal.origin.value,
            crystal.lifecycle.value,
            crystal.importance_score,
            crystal.access_count,
            crystal.last_accessed_at_ms,
            crystal.created_at_ms,
            crystal.emotional_valence,
            json.dumps(asdict(crystal.hormonal_influence)) if crystal.hormonal_influence else None,
            crystal.steering_reward,
            governance.access_scope.value,
            governance.sensitivity.value,
            json.dumps(governance.to_dict()),
            json.dumps([node.to_dict() for node in crystal.provenance_dag]),
            crystal.parent_id,
            crystal.stable_skill_id,
            crystal.skill_version,
            crystal.previous_version_id,
            int(crystal.deprecated),
            crystal.deprecated_by,
            json.dumps(crystal.skill_tags),
            crystal.skill_category,
            int(crystal.is_verified),
            crystal.verified_by,
            crystal.execution.executions,
            crystal.execution.successes,
            crystal.execution.reward_sum,
        )
        cursor = conn.execute(
            f"INSERT INTO crystals({_COLUMNS}) VALUES ({','.join('?' * len(values))})", values
        )
        return int(cursor.lastrowid or 0)

    def add(self, crystal: Crystal) -> AddResult:
        """Insert a crystal unless one with the same content hash exists (dedup)."""
        return self.add_many([crystal])[0]

    def add_many(self, crystals: Sequence[Crystal]) -> list[AddResult]:
        """Insert a batch in one transaction; duplicates resolve to the stored crystal."""
        results: list[AddResult] = []
        with self.transaction() as conn:
            for crystal in crystals:
                existing = conn.execute(
                    "SELECT rowid, id FROM crystals WHERE hash=?", (crystal.hash,)
                ).fetchone()
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
        with self.transaction() as conn:
            if conn.execute("SELECT 1 FROM crystals WHERE hash=?", (crystal.hash,)).fetchone():
                raise StoreError("a crystal with exactly this text already exists")
            cursor = conn.execute(
                "UPDATE crystals SET deprecated=1, deprecated_by=? WHERE id=? AND deprecated=0",
                (crystal.stable_skill_id, previous_id),
            )
            if cursor.rowcount == 0:
                raise StoreError(f"{previous_id} is missing or already superseded by a newer version")
            rowid = self._insert(conn, crystal)
            self._audit(conn, previous_id, "deprecated", None, None, {"by": crystal.id})
            self._audit(
                conn, crystal.id, "created", None, crystal.lifecycle.value,
                {"version": crystal.skill_version, "previous": previous_id},
            )
        return AddResult(crystal.id, rowid, created=True)

    def record_access(self, crystal_ids: Sequence[str], at_ms: int | None = None) -> None:
        if not crystal_ids:
            return
        at = at_ms or now_ms()
        with self.transaction() as conn:
            conn.executemany(
                "UPDATE crystals SET access_count = access_count + 1, last_accessed_at_ms = ? "
                "WHERE id = ?",
                [(at, crystal_id) for crystal_id in crystal_ids],
            )

    def set_lifecycle(self, crystal_id: str, lifecycle: Lifecycle, reason: str) -> None:
        with self.transaction() as conn:
            row = conn.execute("SELECT lifecycle FROM crystals WHERE id=?", (crystal_id,)).fetchone()
            if row is None:
                raise CrystalNotFound(crystal_id)
            conn.execute("UPDATE crystals SET lifecycle=? WHERE id=?", (lifecycle.value, crystal_id))
            self._audit(conn, crystal_id, "transition", row[0], lifecycle.value, {"reason": reason})

    def record_execution(
        self, crystal_id: str, success: bool, reward: float, at_ms: int | None = None
    ) -> Crystal:
        """Add one skill execution outcome; steeringReward accumulates in [-1, 1]."""
        if not 0.0 <= reward <= 1.0:
            raise StoreError(f"reward must be between 0 and 1, got {reward}")
        at = at_ms or now_ms()
        with self.transaction() as conn:
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
            self._audit(
                conn, crystal_id, "execution", None, None, {"success": success, "reward": reward}, at
            )
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
            "stable_skill_id",
        }
        unknown = set(columns) - allowed
        if unknown:
            raise StoreError(f"cannot update {sorted(unknown)}")
        assignments = ", ".join(f"{name}=?" for name in columns)
        with self.transaction() as conn:
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
        with self.transaction() as conn:
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
        """Physically delete expired/archived crystals; returns the removed rowids."""
        with self.transaction() as conn:
            marks = ",".join("?" * len(lifecycles))
            rows = conn.execute(
                f"SELECT rowid, id, lifecycle FROM crystals WHERE lifecycle IN ({marks})",
                tuple(lifecycles),
            ).fetchall()
            for row in rows:
                self._audit(conn, row["id"], "purged", row["lifecycle"], None)
            conn.execute(f"DELETE FROM crystals WHERE lifecycle IN ({marks})", tuple(lifecycles))
            if rows:
                self._bump_checkpoint(conn, "vector_deletions")
        return [int(row["rowid"]) for row in rows]

    # --- reads --------------------------------------------------------------------------------
    def get(self, crystal_id: str, with_embedding: bool = False) -> Crystal:
        row = self.conn.execute(
            f"SELECT {_COLUMNS} FROM crystals WHERE id=?", (crystal_id,)
        ).fetchone()
        if row is None:
            # Let users type a unique id prefix, as with git hashes.
            if 4 <= len(crystal_id) < 36:
                rows = self.conn.execute(
                    f"SELECT {_COLUMNS} FROM crystals WHERE id LIKE ? LIMIT 2",
                    (crystal_id.replace("%", "") + "%",),
                ).fetchall()
                if len(rows) == 1:
                    return _row_to_crystal(rows[0], with_embedding)
            raise CrystalNotFound(crystal_id)
        return _row_to_crystal(row, with_embedding)

    def get_by_rowids(self, rowids: Sequence[int]) -> dict[int, Crystal]:
        if not rowids:
            return {}
        marks = ",".join("?" * len(rowids))
        rows = self.conn.execute(
            f"SELECT rowid AS rid, {_COLUMNS} FROM crystals WHERE rowid IN ({marks})", tuple(rowids)
        ).fetchall()
        return {int(row["rid"]): _row_to_crystal(row) for row in rows}

    def find_by_hash(self, text_hash: str) -> Crystal | None:
        row = self.conn.execute(
            f"SELECT {_COLUMNS} FROM crystals WHERE hash=?", (text_hash,)
        ).fetchone()
        return None if row is None else _row_to_crystal(row)

    def list_crystals(
        self, filters: Filters | None = None, limit: int = 50, order: str = "created_at_ms DESC"
    ) -> list[Crystal]:
        where, params = (filters or Filters()).sql()
        rows = self.conn.execute(
            f"SELECT {_COLUMNS} FROM crystals c WHERE {where} ORDER BY {order} LIMIT ?",
            (*params, limit),
        ).fetchall()
        return [_row_to_crystal(row) for row in rows]

    def skill_versions(self, stable_skill_id: str) -> list[Crystal]:
        rows = self.conn.execute(
            f"SELECT {_COLUMNS} FROM crystals WHERE stable_skill_id=? ORDER BY skill_version",
            (stable_skill_id,),
        ).fetchall()
        return [_row_to_crystal(row) for row in rows]

    def fts(self, match: str, limit: int) -> list[tuple[int, float]]:
        """BM25 top-k as (rowid, bm25) in FTS5's convention: negative, lower is better."""
        if not match:
            return []
        try:
            rows = self.conn.execute(
                "SELECT rowid, bm25(crystals_fts) AS score FROM crystals_fts "
                "WHERE crystals_fts MATCH ? ORDER BY score LIMIT ?",
                (match, limit),
            ).fetchall()
        except sqlite3.OperationalError:
            return []
        return [(int(row[0]), float(row[1])) for row in rows]

    def fts_doc_count(self) -> int:
        return int(self.conn.execute("SELECT COUNT(*) FROM crystals").fetchone()[0])

    def fts_doc_freq(self, term: str) -> int:
        """How many crystals contain ``term`` (for IDF weighting of the lexical side)."""
        try:
            row = self.conn.execute(
                "SELECT COUNT(*) FROM crystals_fts WHERE crystals_fts MATCH ?",
                ('"' + term.replace('"', '""') + '"',),
            ).fetchone()
        except sqlite3.OperationalError:
            return 0
        return int(row[0])

    def vectors(self, batch: int = 2048, after_rowid: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Yield (rowids, vectors) of every crystal with an embedding, in rowid order."""
        last = after_rowid
        while True:
            rows = self.conn.execute(
                "SELECT rowid, embedding FROM crystals WHERE embedding IS NOT NULL AND rowid > ? "
                "ORDER BY rowid LIMIT ?",
                (last, batch),
            ).fetchall()
            if not rows:
                return
            ids = np.array([row[0] for row in rows], dtype=np.int64)
            vectors = np.vstack([np.frombuffer(row[1], dtype=np.float32) for row in rows])
            yield ids, vectors
            last = int(ids[-1])

    def vector_stats(self) -> tuple[int, int]:
        """(count, max rowid) of crystals with embeddings: what the index must hold."""
        row = self.conn.execute(
            "SELECT COUNT(*), COALESCE(MAX(rowid), 0) FROM crystals WHERE embedding IS NOT NULL"
        ).fetchone()
        return int(row[0]), int(row[1])

    def consolidation_rows(self) -> list[sqlite3.Row]:
        return self.conn.execute(
            "SELECT id, path, semantic_type, lifecycle, access_count, last_accessed_at_ms, "
            "created_at_ms, emotional_valence, governance_json, importance_score, embedding "
            "FROM crystals WHERE lifecycle NOT IN ('expired', 'archived')"
        ).fetchall()

    def stats(self) -> dict[str, Any]:
        by_lifecycle = dict(
            self.conn.execute("SELECT lifecycle, COUNT(*) FROM crystals GROUP BY lifecycle").fetchall()
        )
        by_type = dict(
            self.conn.execute(
                "SELECT semantic_type, COUNT(*) FROM crystals GROUP BY semantic_type"
            ).fetchall()
        )
        by_scope = dict(
            self.conn.execute("SELECT access_scope, COUNT(*) FROM crystals GROUP BY access_scope").fetchall()
        )
        total = sum(by_lifecycle.values())
        return {
            "total": total,
            "by_lifecycle": by_lifecycle,
            "by_type": by_type,
            "by_scope": by_scope,
            "embedder": self.get_meta("embedder_name"),
            "dim": int(self.get_meta("embedder_dim") or 0),
            "last_consolidation_ms": int(self.get_meta("last_consolidation_ms") or 0) or None,
        }


__all__ = [
    "AccessScope",
    "AddResult",
    "CrystalNotFound",
    "CrystalStore",
    "EmbedderMismatch",
    "Filters",
    "StoreError",
]
