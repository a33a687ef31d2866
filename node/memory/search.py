"""The search path of memory: dense + lexical candidates, fusion, governance, re-weighting.

Seed 002: relevance comes from fusing the vector index's and FTS5's candidates;
importance and recency (modulated by hormones) only break near-ties, and an
exact identifier match ranks first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from node.crystals import governance as gov
from node.crystals.compound import coverage_order, merge_dense, split_clauses
from node.crystals.fusion import fts_query, fuse, identifier_tokens
from node.crystals.index import VectorIndex
from node.crystals.lexical import CONFIDENCE_DEPTH, exact_matcher, lexical_confidence
from node.crystals.model import Crystal, Lifecycle, now_ms
from node.crystals.reads import SearchRow
from node.crystals.store import CrystalStore, Filters, StoreError
from node.memory.hormones import HormonalStateManager

# Re-weighting after fusion stays small: relevance decides, importance and
# recency (modulated by hormones) only break near-ties.
IMPORTANCE_WEIGHT = 0.1
RECENCY_WEIGHT = 0.05
RECENCY_HALF_LIFE_MS = 7 * 24 * 3600 * 1000



class MemoryInputError(StoreError):
    """A memory operation was refused (bad input); nothing was written."""


@dataclass
class SearchHit:
    crystal: Crystal
    score: float
    dense: float | None = None
    lexical: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.crystal.id,
            "score": round(self.score, 6),
            "dense": self.dense,
            "lexical": self.lexical,
            "crystal": self.crystal.to_dict(),
        }


@dataclass
class SearchRequest:
    query: str
    k: int = 10
    semantic_types: tuple[str, ...] = ()
    lifecycles: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()
    requester: str = gov.Requester.LOCAL_AGENT.value
    record_access: bool = True


def search(
    store: CrystalStore,
    index: VectorIndex,
    embed: Callable[[Sequence[str]], np.ndarray],
    hormones: HormonalStateManager,
    request: SearchRequest,
    expansion: str | None = None,
) -> list[SearchHit]:
    """Answer ``request`` from one data dir (synchronous: the database's thread).

    ``expansion``: a HyDE passage (node.memory.llm_stage); the dense side then
    searches with ``normalise(v(query) + v(expansion))``.
    """
    query = request.query.strip()
    if not query:
        raise MemoryInputError("empty search query")
    k = max(1, min(request.k, 200))
    lifecycles = request.lifecycles or tuple(
        lc.value for lc in Lifecycle if lc not in (Lifecycle.EXPIRED, Lifecycle.ARCHIVED)
    )
    filters = Filters(request.semantic_types, lifecycles, request.scopes)
    candidates = max(50, k * 5)
    # A compound question ("which host runs the worker that stalled ...") is also
    # searched clause by clause (node.crystals.compound); a one-clause query is not.
    clauses = split_clauses(query)
    vectors = embed([query, *clauses, *([expansion] if expansion else [])])
    query_vector = vectors[0]
    if expansion:
        query_vector = query_vector + vectors[-1]
        query_vector = query_vector / max(float(np.linalg.norm(query_vector)), 1e-12)
        vectors = vectors[:-1]
    dense = index.query(query_vector, candidates)
    if clauses:
        dense = merge_dense(dense, [index.query(vector, candidates) for vector in vectors[1:]])
    lexical = store.fts(fts_query(query), candidates)
    total_docs: list[int] = []  # counted only if fusion asks for a document frequency

    def doc_freq(term: str) -> float:
        if not total_docs:
            # The index holds one vector per embedded crystal: a free count, close enough
            # for a rarity measured in decades; the store counts only when it is empty.
            total_docs.append(max(1, index.count or store.fts_doc_count()))
        return store.fts_doc_freq(term) / total_docs[0]

    # Rank and filter on a few plain columns; parse whole crystals for the top k only.
    rows = store.search_rows(list(dict.fromkeys([rowid for rowid, _ in dense + lexical])))
    confidence = lexical_confidence(
        query, [rows[rowid].text for rowid, _ in lexical[:CONFIDENCE_DEPTH] if rowid in rows]
    )
    fused = fuse(
        query,
        [(str(rowid), score) for rowid, score in dense],
        [(str(rowid), score) for rowid, score in lexical],
        k=candidates,
        doc_freq=doc_freq,
        lexical_confidence=confidence,
    )
    dense_by_id = dict(dense)
    lexical_by_id = dict(lexical)
    retrieval = hormones.retrieval_modulation()
    now = now_ms()
    allowed_types = set(filters.semantic_types)
    allowed_lifecycles = set(filters.lifecycles)
    allowed_scopes = set(filters.scopes)
    scored: list[tuple[int, float, str]] = []
    for rowid_text, fused_score in fused:
        rowid = int(rowid_text)
        row = rows.get(rowid)
        if row is None or not _admitted(row, request.requester):
            continue
        if allowed_types and row.semantic_type not in allowed_types:
            continue
        if row.lifecycle not in allowed_lifecycles:
            continue
        if allowed_scopes and row.access_scope not in allowed_scopes:
            continue
        age_ms = now - (row.last_accessed_at_ms or row.created_at_ms)
        recency = math.exp(-math.log(2) * max(age_ms, 0) / RECENCY_HALF_LIFE_MS)
        weight = (1 + IMPORTANCE_WEIGHT * row.importance_score * retrieval.importance_boost) * (
            1 + RECENCY_WEIGHT * recency * retrieval.recency_bias
        )
        scored.append((rowid, fused_score * weight, row.text))
    exact = exact_matcher(identifier_tokens(query))
    scored.sort(key=lambda item: (exact(item[2]), item[1]), reverse=True)
    if clauses:
        scored = coverage_order(
            query,
            scored,
            score=lambda item: item[1],
            text=lambda item: item[2],
            rank_first=lambda item: exact(item[2]),
        )
    top = scored[:k]
    crystals = store.get_by_rowids([rowid for rowid, _, _ in top])
    hits = [
        SearchHit(crystals[rowid], score, dense_by_id.get(rowid), lexical_by_id.get(rowid))
        for rowid, score, _ in top
        # The parsed governance decides too (defence in depth against a crafted row).
        if rowid in crystals
        and gov.can_access(
            crystals[rowid].governance.access_scope, crystals[rowid].lifecycle, request.requester
        )
    ]
    if request.record_access:
        record_hits(store, hits, now)
    return hits


def record_hits(store: CrystalStore, hits: list[SearchHit], now: int | None = None) -> None:
    """Count one access for every hit returned to the caller (seed 000's access_count)."""
    if not hits:
        return
    now = now_ms() if now is None else now
    store.record_access([hit.crystal.id for hit in hits], now)
    for hit in hits:
        hit.crystal.access_count += 1
        hit.crystal.last_accessed_at_ms = now


def _admitted(row: SearchRow, requester: str) -> bool:
    """Governance on the plain columns; a row with an unknown scope or lifecycle is skipped."""
    try:
        return gov.can_access(row.access_scope, row.lifecycle, requester)
    except ValueError:
        return False
