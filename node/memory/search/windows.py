"""A long memory scores by its best window (docs/memory.md, "Long memories").

The vector index holds one vector per crystal; for a text longer than the
model's window that is the token-weighted mean of its windows' vectors
(:mod:`node.memory.embedding.embedder`), which matches each part of a long text less
sharply than the part's own vector does. So a crystal read in more than one
window also keeps each window's vector (table ``crystal_windows``, written in
the transaction that writes the crystal, removed with its row), and search
gives it the dense score ``max(cosine to its mean, best cosine to one of its
windows)`` (:func:`rescore`). Short crystals have no windows: their scores are
untouched.

The table is a file on disk and may be crafted: a row of another embedder, a
value that is not a blob, a length that is not a whole number of ``dim``-vectors
or holds fewer than 2 or more than ``max_windows`` of them, a non-finite value
or a vector that is not unit length is ignored (and logged); a blob longer than
``max_windows`` vectors is never read.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterable, Sequence

import numpy as np

from node.crystals import Crystal
from node.db import Database
from node.memory.embedding import MAX_WINDOWS

log = logging.getLogger(__name__)

NORM_TOLERANCE = 1e-3  # stored rows are the model's unit vectors, as float32


def set_vectors(crystal: Crystal, vector: np.ndarray, windows: np.ndarray | None) -> None:
    """Give ``crystal`` the vectors to store: its own, and its window vectors if it has several."""
    crystal.embedding = vector.tolist()
    crystal.window_embeddings = windows.tolist() if windows is not None and len(windows) > 1 else None


# The tables of vectors kept beside crystals: the column naming their model, the column of their bytes.
VECTOR_TABLES = {"crystal_windows": ("embedder", "vectors"), "crystal_second": ("encoder", "vector")}


def vector_rows(db: Database, table: str, rowids: Iterable[int], max_bytes: int) -> list[sqlite3.Row]:
    """Rows ``(crystal_rowid, model, size, vectors)`` of ``table`` (one of :data:`VECTOR_TABLES`) for
    those of ``rowids`` it holds; ``vectors`` is ``None`` where the blob is longer than ``max_bytes``
    (a crafted row is never read whole)."""
    model, blob = VECTOR_TABLES[table]
    wanted = sorted(set(rowids))
    if not wanted:
        return []
    # One statement text per table whatever the count (prepared once), the rowids as a JSON array.
    return db.all(
        f"SELECT crystal_rowid, {model} AS model, length({blob}) AS size, "
        f"CASE WHEN length({blob}) <= ? THEN {blob} END AS vectors "
        f"FROM {table} WHERE crystal_rowid IN (SELECT value FROM json_each(?))",
        (max_bytes, json.dumps(wanted)),
    )


def read_windows(db: Database, rowids: Iterable[int], embedder: str, dim: int,
                 max_windows: int = MAX_WINDOWS) -> dict[int, np.ndarray]:
    """The valid window vectors (``(windows, dim)`` float32) of those of ``rowids`` that have any."""
    found: dict[int, np.ndarray] = {}
    for row in vector_rows(db, "crystal_windows", rowids, max_windows * dim * 4):
        rowid = int(row["crystal_rowid"])
        windows = _valid(row["model"], row["vectors"], embedder, dim, max_windows)
        if windows is None:
            log.warning("window_vectors_ignored rowid=%d size=%s (not %s's windows of %d dimensions)",
                        rowid, row["size"], embedder, dim)
            continue
        found[rowid] = windows
    return found


def _valid(stored_embedder: object, blob: object, embedder: str, dim: int,
           max_windows: int) -> np.ndarray | None:
    if stored_embedder != embedder or not isinstance(blob, bytes) or dim <= 0:
        return None
    if len(blob) % (dim * 4) or not 2 <= len(blob) // (dim * 4) <= max_windows:
        return None
    windows = np.frombuffer(blob, dtype=np.float32).reshape(-1, dim)
    return windows if unit_rows(windows).all() else None


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Which rows of a stored ``(n, dim)`` float32 matrix are as a model writes them: finite, and
    of unit length within :data:`NORM_TOLERANCE` (window and second-opinion rows are read alike)."""
    finite = np.isfinite(vectors).all(axis=1)
    norms = np.linalg.norm(np.where(finite[:, None], vectors, 0.0).astype(np.float64), axis=1)
    return finite & (np.abs(norms - 1.0) <= NORM_TOLERANCE)


def rescore(dense: Sequence[tuple[int, float]], others: Iterable[int],
            windows: dict[int, np.ndarray], vector: np.ndarray) -> list[tuple[int, float]]:
    """``dense`` (``(rowid, cosine)``, from the index) with each long crystal scored by
    ``max(cosine, best window cosine)``, best first.

    A crystal of ``others`` (found another way, e.g. by full-text search) with windows
    joins the list when its best window beats the lowest cosine of ``dense``: its mean
    was below that, so its best window is its score.
    """
    query = np.asarray(vector, dtype=np.float32)
    best = {rowid: float(np.max(matrix @ query)) for rowid, matrix in windows.items()}
    scores = {rowid: max(cosine, best.get(rowid, cosine)) for rowid, cosine in dense}
    floor = min((cosine for _, cosine in dense), default=-1.0)
    for rowid in others:
        if rowid not in scores and rowid in best and best[rowid] > floor:
            scores[rowid] = best[rowid]
    return sorted(scores.items(), key=lambda item: item[1], reverse=True)


def best_window_dense(db: Database, embedder: str, vector: np.ndarray,
                      dense: Sequence[tuple[int, float]],
                      others: Sequence[tuple[int, float]] = ()) -> list[tuple[int, float]]:
    """:func:`rescore` of ``dense`` (and of ``others``' rowids) with the store's window vectors."""
    rowids = [rowid for rowid, _ in dense] + [rowid for rowid, _ in others]
    windows = read_windows(db, rowids, embedder, int(np.asarray(vector).shape[-1]))
    if not windows:
        return list(dense)
    return rescore(dense, (rowid for rowid, _ in others), windows, vector)
