"""Main's ``Memory.search`` before the light-row search (frozen at 661676b): a baseline only.

``scripts/bench_search.py --compare-baseline`` runs it query by query beside the
product search on the same store, to time both in one process and to check
that both return the same ids in the same order. The store reads it needs are
copied here with their SQL of that commit (FTS5 joined with the
namespace/current filter; whole crystals parsed for every fused candidate), and
so is the identifier matcher (one compiled regex per query), so later changes
to those reads do not move the baseline; fusion, compound ordering, confidence
and warnings are imported from ``node/`` and shared by both sides, so a change
there moves both. ``record_access`` is ignored (the bench never records).
Not a product path.
"""

from __future__ import annotations

import logging
import math
import re
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from node.crystals import governance as gov
from node.crystals.index import VectorIndex
from node.crystals.model import Crystal, Lifecycle, now_ms
from node.crystals.rows import COLUMNS_WITHOUT_EMBEDDING, Filters, row_to_crystal
from node.crystals.store import CrystalStore
from node.memory.dynamics.hormones import HormonalStateManager
from node.memory.search.compound import coverage_order, merge_dense, split_clauses
from node.memory.search.fusion import code_tokens, fts_query, fuse, lexical_evidence
from node.memory.search.lexical import _AFTER, _BEFORE, CONFIDENCE_DEPTH, lexical_confidence
from node.memory.search.pipeline import (
    IMPORTANCE_WEIGHT,
    RECENCY_HALF_LIFE_MS,
    RECENCY_WEIGHT,
    MemoryInputError,
    SearchHit,
    SearchRequest,
    is_warning_hit,
    valid_then,
)
from node.memory.search.ranking import confidence_weight, surface_warnings

log = logging.getLogger(__name__)

CURRENT = ("c.valid_to_ms IS NULL AND c.deleted_at_ms IS NULL "
           "AND (c.expires_at_ms IS NULL OR c.expires_at_ms > ?)")


def exact_matcher(identifiers: Sequence[str]) -> Callable[[str], int]:
    tokens = list(dict.fromkeys(token.lower() for token in identifiers))
    if not tokens:
        return lambda text: 0
    alternation = "|".join(re.escape(token) for token in sorted(tokens, key=len, reverse=True))
    pattern = re.compile(_BEFORE + "(?:" + alternation + ")" + _AFTER, re.IGNORECASE)

    def count(text: str) -> int:
        return len({match.group(0).lower() for match in pattern.finditer(text)})

    return count


def _fts(store: CrystalStore, match: str, limit: int, filters: Filters) -> list[tuple[int, float]]:
    if not match:
        return []
    where, params = filters.sql()
    try:
        rows = store.db.execute(
            "SELECT crystals_fts.rowid, bm25(crystals_fts) AS score FROM crystals_fts "
            "JOIN crystals c ON c.rowid = crystals_fts.rowid "
            f"WHERE crystals_fts MATCH ? AND {where} ORDER BY score LIMIT ?",
            (match, *params, limit),
        ).fetchall()
    except sqlite3.OperationalError:
        return []
    return [(int(row[0]), float(row[1])) for row in rows]


def _texts(store: CrystalStore, rowids: Sequence[int]) -> dict[int, str]:
    if not rowids:
        return {}
    marks = ",".join("?" * len(rowids))
    rows = store.db.execute(
        "SELECT rowid, text, semantic_type, lifecycle, access_scope, importance_score, "
        f"last_accessed_at_ms, created_at_ms FROM crystals WHERE rowid IN ({marks})",
        tuple(rowids),
    ).fetchall()
    return {int(row[0]): row[1] for row in rows}


def _crystals(store: CrystalStore, rowids: Sequence[int]) -> dict[int, Crystal]:
    if not rowids:
        return {}
    marks = ",".join("?" * len(rowids))
    rows = store.db.execute(
        f"SELECT rowid AS rid, {COLUMNS_WITHOUT_EMBEDDING} FROM crystals WHERE rowid IN ({marks})",
        tuple(rowids),
    ).fetchall()
    crystals: dict[int, Crystal] = {}
    for row in rows:
        try:
            crystals[int(row["rid"])] = row_to_crystal(row)
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("crystal_row_unreadable rowid=%s error=%s", row["rid"], exc)
    return crystals


def _current_rowids(store: CrystalStore, namespaces: tuple[str, ...], at_ms: int,
                    among: list[int] | None = None) -> set[int]:
    where = CURRENT
    params: list[Any] = [at_ms]
    if namespaces:
        plus = "+" if among is not None else ""
        where += f" AND {plus}c.namespace IN ({','.join('?' * len(namespaces))})"
        params.extend(namespaces)
    if among is not None:
        where += f" AND c.rowid IN ({','.join('?' * len(among)) or 'NULL'})"
        params.extend(among)
    return {int(row[0]) for row in store.db.all(f"SELECT rowid FROM crystals c WHERE {where}", params)}


def baseline_search(
    store: CrystalStore,
    index: VectorIndex,
    embed: Callable[[Sequence[str]], np.ndarray],
    hormones: HormonalStateManager,
    request: SearchRequest,
    confidence: Callable[[list[Crystal], int], dict[str, float]] | None = None,
    expansion: str | None = None,
) -> list[SearchHit]:
    """Answer ``request`` from one data dir (synchronous: the database's thread).

    ``confidence`` (seed 003, :mod:`node.memory.search.ranking`) re-weights near-ties by
    how sure the node is of each hit; relevant warnings are put first.
    ``expansion``: a HyDE passage (node.memory.search.llm_stage); the dense side then
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
    # searched clause by clause (node.memory.search.compound); a one-clause query is not.
    clauses = split_clauses(query)
    vector = embed([query])[0]  # as the product: the query's own vector (stop 20)
    if expansion:
        vector = vector + embed([expansion])[0]
        vector = vector / max(float(np.linalg.norm(vector)), 1e-12)
    if as_of is None:
        dense = _dense(store, index, vector, candidates, k, request.namespaces, now)
        lexical = _fts(store, fts_query(query), candidates, Filters(namespaces=request.namespaces,
                                                                   current_at_ms=now))
    else:  # every version is a candidate; validity at ``as_of`` is checked below
        dense = index.query(vector, candidates)
        lexical = _fts(store, fts_query(query), candidates, Filters(namespaces=request.namespaces))
    total_docs: list[int] = []  # counted only if fusion asks for a document frequency

    def doc_freq(term: str) -> float:
        if not total_docs:
            # The index holds one vector per embedded crystal: a free count, close enough
            # for a rarity measured in decades; the store counts only when it is empty.
            total_docs.append(max(1, index.count or store.fts_doc_count()))
        return store.fts_doc_freq(term) / total_docs[0]

    top_lexical = [rowid for rowid, _ in lexical[:CONFIDENCE_DEPTH]]
    lexical_texts = _texts(store, top_lexical)
    confidence_of_bm25 = lexical_confidence(
        query, [lexical_texts[rowid] for rowid in top_lexical if rowid in lexical_texts]
    )
    if clauses and lexical_evidence(confidence_of_bm25) > 0.0:  # as the product (stop 20)
        dense = merge_dense(dense, [index.query(clause, candidates) for clause in embed(clauses)])
    fused = fuse(
        query,
        [(str(rowid), score) for rowid, score in dense],
        [(str(rowid), score) for rowid, score in lexical],
        k=candidates,
        doc_freq=doc_freq,
        lexical_confidence=confidence_of_bm25,
    )
    rowids = [int(rowid) for rowid, _ in fused]
    crystals = _crystals(store, rowids)
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
    exact = exact_matcher(code_tokens(query))  # as the product (stop 20)
    hits.sort(key=lambda hit: (exact(hit.crystal.text), hit.score), reverse=True)
    if clauses and lexical_evidence(confidence_of_bm25) > 0.0:  # as the product (para's floor)
        hits = coverage_order(
            query,
            hits,
            score=lambda hit: hit.score,
            text=lambda hit: hit.crystal.text,
            rank_first=lambda hit: exact(hit.crystal.text),
        )
    return surface_warnings(hits, k, is_warning_hit, lambda hit: hit.score)


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
    if len(_current_rowids(store, namespaces, now, among=[rowid for rowid, _ in dense])) >= k:
        return dense
    kept = _current_rowids(store, namespaces, now)
    return index.query(vector, min(candidates, len(kept)), kept.__contains__) if kept else []


