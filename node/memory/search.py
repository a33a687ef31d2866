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
from node.crystals.fusion import fts_query, fuse, identifier_tokens, lexical_evidence
from node.crystals.index import VectorIndex
from node.crystals.lexical import CONFIDENCE_DEPTH, exact_matcher, lexical_confidence
from node.crystals.model import Crystal, Lifecycle, SemanticType, now_ms
from node.crystals.store import CrystalStore, Filters, StoreError
from node.memory.hormones import HormonalStateManager
from node.memory.ranking import confidence_weight, surface_warnings
from node.memory.temporal import valid_at

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
    namespaces: tuple[str, ...] = ("default",)  # empty: every namespace
    as_of_ms: int | None = None  # None: what is valid now; else the versions valid then (seed 004)


def search(
    store: CrystalStore,
    index: VectorIndex,
    embed: Callable[[Sequence[str]], np.ndarray],
    hormones: HormonalStateManager,
    request: SearchRequest,
    confidence: Callable[[list[Crystal], int], dict[str, float]] | None = None,
    expansion: str | None = None,
) -> list[SearchHit]:
    """Answer ``request`` from one data dir (synchronous: the database's thread).

    ``confidence`` (seed 003, :mod:`node.memory.ranking`) re-weights near-ties by
    how sure the node is of each hit; relevant warnings are put first.
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
    now = now_ms()
    as_of = request.as_of_ms
    filters = Filters(request.semantic_types, lifecycles, request.scopes, request.namespaces, now)
    candidates = max(50, k * 5)
    # A compound question ("which host runs the worker that stalled ...") is also
    # searched clause by clause (node.crystals.compound); a one-clause query is not.
    clauses = split_clauses(query)
    vectors = embed([query, *clauses, *([expansion] if expansion else [])])
    vector = vectors[0]
    if expansion:
        vector = vector + vectors[-1]
        vector = vector / max(float(np.linalg.norm(vector)), 1e-12)
        vectors = vectors[:-1]
    if as_of is None:
        dense = _dense(store, index, vector, candidates, k, request.namespaces, now)
        lexical = store.fts(fts_query(query), candidates, Filters(namespaces=request.namespaces,
                                                                   current_at_ms=now))
    else:  # every version is a candidate; validity at ``as_of`` is checked below
        dense = index.query(vector, candidates)
        lexical = store.fts(fts_query(query), candidates, Filters(namespaces=request.namespaces))
    if clauses:
        dense = merge_dense(dense, [index.query(clause, candidates) for clause in vectors[1:]])
    total_docs: list[int] = []  # counted only if fusion asks for a document frequency

    def doc_freq(term: str) -> float:
        if not total_docs:
            # The index holds one vector per embedded crystal: a free count, close enough
            # for a rarity measured in decades; the store counts only when it is empty.
            total_docs.append(max(1, index.count or store.fts_doc_count()))
        return store.fts_doc_freq(term) / total_docs[0]

    top_lexical = [rowid for rowid, _ in lexical[:CONFIDENCE_DEPTH]]
    lexical_texts = store.search_rows(top_lexical)
    confidence_of_bm25 = lexical_confidence(
        query, [lexical_texts[rowid].text for rowid in top_lexical if rowid in lexical_texts]
    )
    fused = fuse(
        query,
        [(str(rowid), score) for rowid, score in dense],
        [(str(rowid), score) for rowid, score in lexical],
        k=candidates,
        doc_freq=doc_freq,
        lexical_confidence=confidence_of_bm25,
    )
    rowids = [int(rowid) for rowid, _ in fused]
    crystals = store.get_by_rowids(rowids)
    dense_by_id = dict(dense)
    lexical_by_id = dict(lexical)
    retrieval = hormones.retrieval_modulation()
    allowed_namespaces = set(request.namespaces)
    allowed_types = set(filters.semantic_types)
    allowed_lifecycles = set(filters.lifecycles)
    allowed_scopes = set(filters.scopes)
    hits: list[SearchHit] = []
    for rowid_text, fused_score in fused:
        rowid = int(rowid_text)
        crystal = crystals.get(rowid)
        if crystal is None or not (crystal.is_current(now) if as_of is None else valid_then(crystal, as_of)):
            continue
        if allowed_namespaces and crystal.namespace not in allowed_namespaces:
            continue
        if allowed_types and crystal.semantic_type.value not in allowed_types:
            continue
        if crystal.lifecycle.value not in allowed_lifecycles:
            continue
        if allowed_scopes and crystal.governance.access_scope.value not in allowed_scopes:
            continue
        if not gov.can_access(crystal.governance.access_scope, crystal.lifecycle, request.requester):
            continue
        age_ms = now - (crystal.last_accessed_at_ms or crystal.created_at_ms)
        recency = math.exp(-math.log(2) * max(age_ms, 0) / RECENCY_HALF_LIFE_MS)
        weight = (1 + IMPORTANCE_WEIGHT * crystal.importance_score * retrieval.importance_boost) * (
            1 + RECENCY_WEIGHT * recency * retrieval.recency_bias
        )
        hits.append(
            SearchHit(crystal, fused_score * weight, dense_by_id.get(rowid), lexical_by_id.get(rowid))
        )
    if confidence is not None:
        sure = confidence([hit.crystal for hit in hits], now)
        for hit in hits:
            hit.score *= confidence_weight(sure[hit.crystal.id])
    exact = exact_matcher(identifier_tokens(query))
    hits.sort(key=lambda hit: (exact(hit.crystal.text), hit.score), reverse=True)
    if clauses and lexical_evidence(confidence_of_bm25) > 0.0:  # no lexical evidence: dense order
        hits = coverage_order(
            query,
            hits,
            score=lambda hit: hit.score,
            text=lambda hit: hit.crystal.text,
            rank_first=lambda hit: exact(hit.crystal.text),
        )
    hits = surface_warnings(hits, k, is_warning_hit, lambda hit: hit.score)
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


def _dense(store: CrystalStore, index: VectorIndex, vector: np.ndarray, candidates: int, k: int,
           namespaces: tuple[str, ...], now: int) -> list[tuple[int, float]]:
    """Dense candidates among the current crystals of ``namespaces``.

    The plain HNSW walk is tried first; when too few of its candidates are current
    crystals of the asked namespaces (a small namespace beside a big one, many
    superseded versions), the walk is redone with hnswlib's filter over exactly
    those rowids, so a small namespace still gets its k nearest.
    """
    dense = index.query(vector, candidates)
    if len(dense) < candidates:
        return dense  # the whole index was read; fusion filters what is not allowed
    if len(store.current_rowids(namespaces, now, among=[rowid for rowid, _ in dense])) >= k:
        return dense
    kept = store.current_rowids(namespaces, now)
    return index.query(vector, min(candidates, len(kept)), kept.__contains__) if kept else []


def is_warning_hit(hit: SearchHit) -> bool:
    return hit.crystal.semantic_type is SemanticType.WARNING


def valid_then(crystal: Crystal, at_ms: int) -> bool:
    """The version of its memory that held at ``at_ms`` (and not yet expired then)."""
    expires = crystal.expires_at_ms
    return valid_at(crystal.valid_from_ms, crystal.valid_to_ms, crystal.deleted_at_ms, at_ms) and (
        expires is None or expires > at_ms)
