"""Reads of the crystal repository: lookups, lexical (FTS5) and vector scans, statistics.

A base of :class:`node.crystals.store.CrystalStore`; kept apart so the writes,
with their transactions and audit rows, read on their own.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterator, Sequence
from typing import Any, NamedTuple

import numpy as np

from node.crystals.model import Crystal
from node.crystals.rows import COLUMNS, COLUMNS_WITHOUT_EMBEDDING, Filters, row_to_crystal
from node.db import Database
from node.errors import CrystalmeshError

log = logging.getLogger(__name__)


class StoreError(CrystalmeshError, RuntimeError):
    """A store operation could not be carried out; nothing was written."""


class CrystalNotFound(StoreError):
    http_status = 404
    code = "not_found"

    def __init__(self, crystal_id: str) -> None:
        super().__init__(f"no crystal with id {crystal_id!r}")
        self.crystal_id = crystal_id


class CrystalUnreadable(StoreError):
    """The crystal's row is stored damaged or crafted (a JSON column of the wrong shape, a bad
    enum value): it cannot be read as a crystal. Lists skip such rows; asking for one by id says so."""

    http_status = 500
    code = "crystal_unreadable"

    def __init__(self, crystal_id: str) -> None:
        super().__init__(f"crystal {crystal_id!r} is stored damaged and cannot be read "
                         "(see the node log; `crystalmesh memory delete` removes it)")
        self.crystal_id = crystal_id


def _crystal(row: sqlite3.Row, with_embedding: bool = False) -> Crystal:
    """``row_to_crystal``, with a damaged row reported as :class:`CrystalUnreadable`."""
    try:
        return row_to_crystal(row, with_embedding)
    except (ValueError, KeyError, TypeError) as exc:
        log.warning("crystal_row_unreadable id=%s error=%s", row["id"], exc)
        raise CrystalUnreadable(str(row["id"])) from exc


def readable_crystals(rows: Sequence[sqlite3.Row]) -> list[Crystal]:
    """The crystals of ``rows``, a damaged row left out (and logged): one crafted row must not
    make a whole list unreadable."""
    crystals: list[Crystal] = []
    for row in rows:
        try:
            crystals.append(_crystal(row))
        except CrystalUnreadable:
            continue
    return crystals


class SearchRow(NamedTuple):
    """What search filters and ranks a candidate on: plain columns, no vector, no enums; only the
    access scope is read from the governance record (the authority, as in the parsed crystal)."""

    id: str
    text: str
    semantic_type: str
    lifecycle: str
    access_scope: str
    importance_score: float
    last_accessed_at_ms: int | None
    created_at_ms: int
    namespace: str
    valid_from_ms: int | None
    valid_to_ms: int | None
    deleted_at_ms: int | None
    expires_at_ms: int | None
    source: str  # node.crystals.model.Source: memory, sessions, files, skills (a search filter)


# The scope as ``Governance.from_dict`` reads it ("private" when absent); NULL when the record
# is not JSON at all (that row cannot be parsed, so search never returns it).
_GOVERNANCE_SCOPE = (
    "CASE WHEN json_valid(governance_json) "
    "THEN COALESCE(json_extract(governance_json, '$.accessScope'), 'private') END"
)
SEARCH_ROW_COLUMNS = ", ".join(
    _GOVERNANCE_SCOPE if name == "access_scope" else name for name in SearchRow._fields
)


class CrystalReads:
    db: Database

    def audit_log(self, crystal_id: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
        if crystal_id:
            rows = self.db.execute(
                "SELECT * FROM memory_audit_log WHERE crystal_id=? ORDER BY id DESC LIMIT ?",
                (crystal_id, limit),
            ).fetchall()
        else:
            rows = self.db.execute(
                "SELECT * FROM memory_audit_log ORDER BY id DESC LIMIT ?", (limit,)
            ).fetchall()
        return [dict(row) | {"detail": json.loads(row["detail_json"])} for row in rows]

    def get(self, crystal_id: str, with_embedding: bool = False) -> Crystal:
        row = self.db.execute(
            f"SELECT {COLUMNS} FROM crystals WHERE id=?", (crystal_id,)
        ).fetchone()
        if row is None:
            # Let users type a unique id prefix, as with git hashes.
            if 4 <= len(crystal_id) < 36:
                rows = self.db.execute(
                    f"SELECT {COLUMNS} FROM crystals WHERE id LIKE ? LIMIT 2",
                    (crystal_id.replace("%", "") + "%",),
                ).fetchall()
                if len(rows) == 1:
                    return _crystal(rows[0], with_embedding)
            raise CrystalNotFound(crystal_id)
        return _crystal(row, with_embedding)

    def get_by_rowids(self, rowids: Sequence[int]) -> dict[int, Crystal]:
        """Crystals by rowid, without their embedding (never read here: 1.5 kB a row)."""
        if not rowids:
            return {}
        marks = ",".join("?" * len(rowids))
        rows = self.db.execute(
            f"SELECT rowid AS rid, {COLUMNS_WITHOUT_EMBEDDING} FROM crystals "
            f"WHERE rowid IN ({marks})",
            tuple(rowids),
        ).fetchall()
        crystals: dict[int, Crystal] = {}
        for row in rows:
            try:
                crystals[int(row["rid"])] = row_to_crystal(row)
            except (ValueError, KeyError, TypeError) as exc:
                # A crafted or damaged row must not stop every search that meets it.
                log.warning("crystal_row_unreadable rowid=%s error=%s", row["rid"], exc)
        return crystals

    def search_rows(self, rowids: Sequence[int]) -> dict[int, SearchRow]:
        """The columns search filters and ranks on, for many candidates at once."""
        if not rowids:
            return {}
        marks = ",".join("?" * len(rowids))
        cursor = self.db.execute(
            f"SELECT rowid, {SEARCH_ROW_COLUMNS} FROM crystals WHERE rowid IN ({marks})",
            tuple(rowids),
        )
        cursor.row_factory = None  # plain tuples: cheaper than sqlite3.Row for a hundred rows
        return {int(row[0]): SearchRow._make(row[1:]) for row in cursor.fetchall()}

    def find_by_hash(self, text_hash: str, namespace: str = "default") -> Crystal | None:
        """The current crystal with this content hash in ``namespace``."""
        row = self.db.execute(
            f"SELECT {COLUMNS} FROM crystals WHERE hash=? AND namespace=? "
            "AND valid_to_ms IS NULL AND deleted_at_ms IS NULL", (text_hash, namespace)
        ).fetchone()
        return None if row is None else _crystal(row)

    def list_crystals(
        self, filters: Filters | None = None, limit: int = 50, order: str = "created_at_ms DESC"
    ) -> list[Crystal]:
        where, params = (filters or Filters()).sql()
        rows = self.db.execute(
            f"SELECT {COLUMNS} FROM crystals c WHERE {where} ORDER BY {order} LIMIT ?",
            (*params, limit),
        ).fetchall()
        return readable_crystals(rows)

    def skill_versions(self, stable_skill_id: str) -> list[Crystal]:
        rows = self.db.execute(
            f"SELECT {COLUMNS} FROM crystals WHERE stable_skill_id=? ORDER BY skill_version",
            (stable_skill_id,),
        ).fetchall()
        return readable_crystals(rows)

    def fts(self, match: str, limit: int, filters: Filters | None = None) -> list[tuple[int, float]]:
        """BM25 top-k as (rowid, bm25) in FTS5's convention: negative, lower is better;
        with ``filters``, only among the crystals they select (a join into the crystal
        rows: each match costs a row lookup, so search filters an unfiltered list first)."""
        if not match:
            return []
        try:
            if filters is None:
                rows = self.db.execute(
                    "SELECT rowid, bm25(crystals_fts) AS score FROM crystals_fts "
                    "WHERE crystals_fts MATCH ? ORDER BY score LIMIT ?",
                    (match, limit),
                ).fetchall()
            else:
                where, params = filters.sql()
                rows = self.db.execute(
                    "SELECT crystals_fts.rowid, bm25(crystals_fts) AS score FROM crystals_fts "
                    "JOIN crystals c ON c.rowid = crystals_fts.rowid "
                    f"WHERE crystals_fts MATCH ? AND {where} ORDER BY score LIMIT ?",
                    (match, *params, limit),
                ).fetchall()
        except sqlite3.OperationalError:
            return []
        return [(int(row[0]), float(row[1])) for row in rows]

    def fts_doc_count(self) -> int:
        return int(self.db.execute("SELECT COUNT(*) FROM crystals").fetchone()[0])

    def fts_doc_freq(self, term: str) -> int:
        """How many crystals contain ``term`` (for IDF weighting of the lexical side)."""
        try:
            row = self.db.execute(
                "SELECT COUNT(*) FROM crystals_fts WHERE crystals_fts MATCH ?",
                ('"' + term.replace('"', '""') + '"',),
            ).fetchone()
        except sqlite3.OperationalError:
            return 0
        return int(row[0])

    def fts_doc_freqs(self, terms: Sequence[str]) -> dict[str, int]:
        """:meth:`fts_doc_freq` of several terms, counted in one statement."""
        unique = list(dict.fromkeys(terms))
        if not unique:
            return {}
        count = "(SELECT COUNT(*) FROM crystals_fts WHERE crystals_fts MATCH ?)"
        try:
            row = self.db.execute(
                f"SELECT {', '.join([count] * len(unique))}",
                tuple('"' + term.replace('"', '""') + '"' for term in unique),
            ).fetchone()
        except sqlite3.OperationalError:  # one term FTS5 refuses: count them one by one
            return {term: self.fts_doc_freq(term) for term in unique}
        return {term: int(value) for term, value in zip(unique, row, strict=True)}

    def vectors(self, batch: int = 2048, after_rowid: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Yield (rowids, vectors) of every crystal with an embedding, in rowid order."""
        last = after_rowid
        while True:
            rows = self.db.execute(
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
        row = self.db.execute(
            "SELECT COUNT(*), COALESCE(MAX(rowid), 0) FROM crystals WHERE embedding IS NOT NULL"
        ).fetchone()
        return int(row[0]), int(row[1])

    def consolidation_rows(self) -> list[sqlite3.Row]:
        return self.db.execute(
            "SELECT id, path, semantic_type, lifecycle, access_count, last_accessed_at_ms, "
            "created_at_ms, emotional_valence, governance_json, importance_score, embedding, "
            "namespace FROM crystals WHERE lifecycle NOT IN ('expired', 'archived') "
            "AND valid_to_ms IS NULL AND deleted_at_ms IS NULL"
        ).fetchall()

    def stats(self) -> dict[str, Any]:
        by_lifecycle = dict(
            self.db.execute("SELECT lifecycle, COUNT(*) FROM crystals GROUP BY lifecycle").fetchall()
        )
        by_type = dict(
            self.db.execute(
                "SELECT semantic_type, COUNT(*) FROM crystals GROUP BY semantic_type"
            ).fetchall()
        )
        by_scope = dict(
            self.db.execute("SELECT access_scope, COUNT(*) FROM crystals GROUP BY access_scope").fetchall()
        )
        total = sum(by_lifecycle.values())
        by_namespace = dict(
            self.db.execute("SELECT namespace, COUNT(*) FROM crystals GROUP BY namespace").fetchall()
        )
        return {
            "by_namespace": by_namespace,
            "total": total,
            "by_lifecycle": by_lifecycle,
            "by_type": by_type,
            "by_scope": by_scope,
            "embedder": self.db.get_meta("embedder_name"),
            "dim": int(self.db.get_meta("embedder_dim") or 0),
            "last_consolidation_ms": int(self.db.get_meta("last_consolidation_ms") or 0) or None,
        }

