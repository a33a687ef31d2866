"""Dense candidates re-scored against the store's common component.

Sentence embeddings of one user's memories share a common direction (here
MiniLM: the store's mean unit vector has norm ~0.32). "All-but-the-top"
(Mu & Viswanath 2018) removes it: ``x̃ = x − μ``. Measured on the tune split
(docs/benchmarks.md, "Fourth pass: the dense side"), removing it from the
*memories only* helps, from the query too does not (the query is a question,
not a draw from the store), so each HNSW candidate ``d`` of query ``q`` is
re-scored as

    ``s(d) = cos(q, d − μ)``,

then mapped affinely onto the range of the candidates' raw cosines
(``lo + (s − s_min) · (hi − lo) / (s_max − s_min)``) so that fusion, the
clause merge and the lexical gate, whose constants were set on raw cosines,
see the same scale: only the order and spacing inside the list change.

:func:`centered_scores` is pure; :func:`node.memory.search.search` calls
:func:`rescore` on each dense candidate list: the mean comes from the vector
index (:meth:`node.crystals.index.VectorIndex.mean_vector`, recomputed from the
index after a restart, never read from disk), the candidates' vectors from the
store's rows (one indexed read; hnswlib's ``get_items`` is ~10x slower).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeVar

import numpy as np

from node.crystals.store import CrystalStore

T = TypeVar("T")


class MeanSource(Protocol):
    def mean_vector(self) -> np.ndarray | None: ...


def centered_scores(
    query: np.ndarray, candidates: Sequence[tuple[T, float]], vectors: np.ndarray, mean: np.ndarray
) -> list[tuple[T, float]]:
    """``candidates`` (``(id, cosine)``, any order) re-scored and sorted best first.

    ``vectors[i]`` is the stored vector of ``candidates[i]`` (normalised here);
    ``mean`` the store's mean unit vector. See the module docstring for the formula. A list
    of fewer than two candidates, or one whose centred scores are all equal,
    comes back unchanged (sorted).
    """
    if len(candidates) < 2:
        return sorted(candidates, key=lambda item: item[1], reverse=True)
    query = np.asarray(query, dtype=np.float64)
    query = query / max(float(np.linalg.norm(query)), 1e-12)
    units = np.asarray(vectors, dtype=np.float64)
    units = units / np.maximum(np.linalg.norm(units, axis=1, keepdims=True), 1e-12)
    centred = units - np.asarray(mean, dtype=np.float64)
    centred /= np.maximum(np.linalg.norm(centred, axis=1, keepdims=True), 1e-12)
    scores = centred @ query
    raw = np.array([cosine for _, cosine in candidates], dtype=np.float64)
    spread = float(scores.max() - scores.min())
    if spread <= 1e-12 or not np.isfinite(scores).all():
        return sorted(candidates, key=lambda item: item[1], reverse=True)
    mapped = raw.min() + (scores - scores.min()) * (raw.max() - raw.min()) / spread
    ranked = [(doc_id, float(value)) for (doc_id, _), value in zip(candidates, mapped, strict=True)]
    return sorted(ranked, key=lambda item: item[1], reverse=True)


def stored_vectors(store: CrystalStore, rowids: list[int], dim: int) -> np.ndarray | None:
    """The stored embeddings of ``rowids`` in order, or None if one is missing or malformed."""
    placeholders = ",".join("?" * len(rowids))
    rows = store.db.execute(
        f"SELECT rowid, embedding FROM crystals WHERE rowid IN ({placeholders})", rowids
    ).fetchall()
    blobs = {int(row[0]): row[1] for row in rows}
    vectors = np.empty((len(rowids), dim), dtype=np.float64)
    for position, rowid in enumerate(rowids):
        blob = blobs.get(rowid)
        if not isinstance(blob, bytes) or len(blob) != 4 * dim:
            return None  # a row without (or with a crafted) embedding: leave the list as it is
        vectors[position] = np.frombuffer(blob, dtype=np.float32)
    return vectors


def rescore(
    store: CrystalStore, means: MeanSource, query: np.ndarray, candidates: list[tuple[int, float]]
) -> list[tuple[int, float]]:
    """:func:`centered_scores` for rowid candidates; the list unchanged if it cannot tell."""
    if len(candidates) < 2:
        return candidates
    mean = means.mean_vector()
    if mean is None or mean.shape != np.shape(query):
        return candidates
    vectors = stored_vectors(store, [rowid for rowid, _ in candidates], mean.shape[0])
    if vectors is None:
        return candidates
    return centered_scores(query, candidates, vectors, mean)
