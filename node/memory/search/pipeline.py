"""The search path of memory: dense + lexical candidates, fusion, governance, re-weighting.

Seed 002: relevance comes from fusing the vector index's and FTS5's candidates;
importance and recency (modulated by hormones) only break near-ties, and an
exact identifier match ranks first.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from node.crystals import (
    Crystal,
    CrystalStore,
    Lifecycle,
    SearchRow,
    SemanticType,
    Source,
    StoreError,
    VectorIndex,
    now_ms,
    precedence,
)
from node.crystals import governance as gov
from node.memory.dynamics import HormonalStateManager
from node.memory.embedding import Embedder
from node.memory.namespaces import DEFAULT_NAMESPACE, validate_namespace
from node.memory.search.candidates import Rows, Visibility, lexical_candidates, sparse
from node.memory.search.compound import coverage_order, merge_dense, split_clauses
from node.memory.search.conflicts import settle_conflicts
from node.memory.search.fusion import (
    CONVERSATION_PARAMS,
    DEFAULT_PARAMS,
    code_tokens,
    fts_query,
    fuse,
    lexical_evidence,
)
from node.memory.search.lexical import CONFIDENCE_DEPTH, exact_matcher, lexical_confidence
from node.memory.search.negation import negated_share, split_negation
from node.memory.search.origin import origin_of
from node.memory.search.ranking import confidence_weight, surface_warnings
from node.memory.search.relevance import relevance
from node.memory.search.second_opinion import opinion_of
from node.memory.search.sessions import (
    DEFAULT_SESSION_PARAMS,
    SessionParams,
    is_conversation,
    with_sessions,
)
from node.memory.search.temporal import valid_at
from node.memory.search.windows import best_window_dense

# Re-weighting after fusion stays small: relevance decides, importance and
# recency (modulated by hormones) only break near-ties.
IMPORTANCE_WEIGHT = 0.1
RECENCY_WEIGHT = 0.05
RECENCY_HALF_LIFE_MS = 7 * 24 * 3600 * 1000
WARNING = SemanticType.WARNING.value
# A selection question's negated phrase ("the flight that was not to Amsterdam") counts against
# a memory: its score is scaled by 1 - NEGATION_WEIGHT * (share of the negated words it affirms).
# Middle of the tune plateau 0.15-0.4 (docs/retrieval-tuning.md, "Negated questions").
NEGATION_WEIGHT = 0.3
SOURCES = tuple(source.value for source in Source)


class MemoryInputError(StoreError):
    """A memory operation was refused (bad input); nothing was written."""


@dataclass
class SearchHit:
    crystal: Crystal
    score: float
    dense: float | None = None
    lexical: float | None = None
    # Where a conversation turn came from (node.memory.conversations.attach_turns): source_id, speaker, ...
    turn: dict[str, Any] | None = None
    relevance: float = 0.0  # calibrated probability that the hit is relevant (node.memory.search.relevance)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.crystal.id,
            "score": round(self.score, 6),
            "relevance": self.relevance,  # not rounded: a caller may pass it back as min_relevance
            "dense": self.dense,
            "lexical": self.lexical,
            "crystal": self.crystal.to_dict(),
            "source_id": self.turn["source_id"] if self.turn else None,
            # Where it came from: session + turn + time, file + lines, skill id, or memory
            # (node.memory.search.origin).
            "origin": origin_of(self.crystal, self.turn),
        } | ({"turn": self.turn} if self.turn else {})


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
    min_relevance: float = 0.0  # hits whose calibrated relevance is below it are left out
    sources: tuple[str, ...] = ()  # empty: every source; else node.crystals.Source values


def search_request(query: str, k: int = 10, *, types: Sequence[str] = (), lifecycles: Sequence[str] = (),
                   scopes: Sequence[str] = (), namespace: str | None = None, all_namespaces: bool = False,
                   as_of_ms: int | None = None, min_relevance: float = 0.0,
                   sources: Sequence[str] = ()) -> SearchRequest:
    """A search as the doors ask for it (``memory search``, the API's search route, whose body
    fields are these parameters): one namespace (default "default") or, with
    ``all_namespaces``, every one. A new filter is a parameter here and a field above."""
    spaces = () if all_namespaces else (validate_namespace(namespace or DEFAULT_NAMESPACE),)
    return SearchRequest(query, k, tuple(types), tuple(lifecycles), tuple(scopes), namespaces=spaces,
                         as_of_ms=as_of_ms, min_relevance=min_relevance, sources=tuple(sources))


def search(
    store: CrystalStore,
    index: VectorIndex,
    embed: Callable[[Sequence[str]], np.ndarray],
    hormones: HormonalStateManager,
    request: SearchRequest,
    confidence: Callable[[Sequence[tuple[str, bool]], int], dict[str, float]] | None = None,
    expansion: str | None = None,
    second: Embedder | None = None,
    sessions: Callable[[Sequence[int]], Mapping[int, Hashable]] | None = None,
    session_params: SessionParams = DEFAULT_SESSION_PARAMS,
) -> list[SearchHit]:
    """Answer ``request`` from one data dir (synchronous: the database's thread).

    ``confidence`` (seed 003, :mod:`node.memory.search.ranking`) re-weights near-ties by
    how sure the node is of each hit, given ``(crystal id, is a warning)`` pairs;
    relevant warnings are put first.
    ``expansion``: a HyDE passage (node.memory.search.llm_stage); the dense side then
    searches with ``normalise(v(query) + v(expansion))``.
    ``second``: a second encoder whose opinion re-scores the dense candidates
    (:mod:`node.memory.search.second_opinion`).
    ``sessions``: the session of each candidate rowid that is a conversation turn
    (:func:`node.memory.conversations.session_keys`); a turn's score then also counts its
    session's best candidates (:mod:`node.memory.search.sessions`).
    Candidates are filtered and ranked on light rows (:mod:`node.memory.search.candidates`);
    only the top ``k`` are read as whole crystals.
    """
    query = request.query.strip()
    if not query:
        raise MemoryInputError("empty search query")
    if not 0.0 <= request.min_relevance <= 1.0:  # also refuses NaN
        raise MemoryInputError(f"min_relevance must be within 0..1, not {request.min_relevance}")
    unknown = sorted(str(source) for source in request.sources if source not in SOURCES)
    if unknown:
        raise MemoryInputError(f"unknown source {', '.join(map(repr, unknown))}: "
                               f"choose from {', '.join(SOURCES)}")
    k = max(1, min(request.k, 200))
    lifecycles = request.lifecycles or tuple(
        lc.value for lc in Lifecycle if lc not in (Lifecycle.EXPIRED, Lifecycle.ARCHIVED)
    )
    now = now_ms()
    as_of = request.as_of_ms
    visibility = Visibility(frozenset(request.namespaces), frozenset(request.semantic_types),
                            frozenset(lifecycles), frozenset(request.scopes), request.requester, now, as_of,
                            frozenset(request.sources))
    candidates = max(50, k * 5)
    # A compound question ("which host runs the worker that stalled ...") is also
    # searched clause by clause (node.memory.search.compound); a one-clause query is not.
    # A selection question's negated phrase is left out of the words searched for (and of the
    # clauses) and counts against the memories that affirm its words (node.memory.search.negation);
    # the dense side embeds the whole question (embedding only the rest measured worse).
    negation = split_negation(query)
    wanted = negation.positive if negation else query
    codes = code_tokens(wanted)
    clauses = split_clauses(wanted)
    # The query is embedded on its own: the int8 embedder quantises activations per
    # batch, so a vector embedded beside its clauses would not be the query's own
    # (and would differ from what a plain dense search of the same text sees).
    vector = embed([query])[0]
    if expansion:
        vector = vector + embed([expansion])[0]
        vector = vector / max(float(np.linalg.norm(vector)), 1e-12)
    match = fts_query(wanted)
    dense = index.query(vector, candidates)
    rows = Rows(store)  # light rows: of the nearest k now, the lexical and fused candidates later
    rows.fetch(rowid for rowid, _ in dense[:k])
    lexical = lexical_candidates(store, rows, match, candidates, visibility,
                                 joined_first=sparse(rows, dense[:k], visibility))
    if as_of is None:
        dense = _dense(store, index, rows, vector, dense, candidates, k, visibility)
    # else every version is a candidate; validity at ``as_of`` is checked below
    # A long crystal scores by its best window where that beats its mean (node.memory.search.windows).
    dense = best_window_dense(store.db, index.embedder_name, vector, dense, lexical)
    # A second encoder's opinion: cos + w·cos₂, if every dense candidate has its vector.
    dense = opinion_of(store.db, second, query, dense)
    by_rowid = rows.by_rowid
    confidence_of_bm25 = lexical_confidence(
        wanted, [by_rowid[rowid].text for rowid, _ in lexical[:CONFIDENCE_DEPTH]]
    )
    # Below the lexical floor the words carry no evidence: a reworded question then ranks
    # as dense search of the whole question (no clause vectors, no coverage re-ordering).
    has_evidence = lexical_evidence(confidence_of_bm25) > 0.0
    if clauses and has_evidence:
        dense = merge_dense(dense, [index.query(clause, candidates) for clause in embed(clauses)])
    total_docs: list[int] = []  # counted only if fusion asks for a document frequency
    counts: dict[str, int] = {}

    def doc_freq(term: str) -> float:
        if not total_docs:
            # The index holds one vector per embedded crystal: a free count, close enough
            # for a rarity measured in decades; the store counts only when it is empty.
            total_docs.append(max(1, index.count or store.fts_doc_count()))
            # Fusion asks about the query's identifier tokens: count them all in one go.
            counts.update(store.fts_doc_freqs(codes))
        if term not in counts:
            counts[term] = store.fts_doc_freq(term)
        return counts[term] / total_docs[0]

    # Conversation turns among the candidates (node.memory.search.sessions): mostly turns, and
    # fusion weighs BM25 as for a conversation; each turn is then ranked with its session.
    pool = list(dict.fromkeys([rowid for rowid, _ in dense] + [rowid for rowid, _ in lexical]))
    turns = sessions(pool) if sessions is not None and session_params.weight > 0.0 else {}
    fused = fuse(
        wanted,
        [(str(rowid), score) for rowid, score in dense],
        [(str(rowid), score) for rowid, score in lexical],
        k=candidates,
        doc_freq=doc_freq,
        lexical_confidence=confidence_of_bm25,
        params=CONVERSATION_PARAMS if is_conversation(len(turns), len(pool), session_params) else DEFAULT_PARAMS,
    )
    rows.fetch(int(rowid) for rowid, _ in fused)
    dense_by_id = dict(dense)
    lexical_by_id = dict(lexical)
    retrieval = hormones.retrieval_modulation()
    ranked: list[_Candidate] = []
    for rowid_text, fused_score in fused:
        rowid = int(rowid_text)
        row = by_rowid.get(rowid)
        if row is None or not visibility.visible(row):
            continue
        age_ms = now - (row.last_accessed_at_ms or row.created_at_ms)
        recency = math.exp(-math.log(2) * max(age_ms, 0) / RECENCY_HALF_LIFE_MS)
        weight = (1 + IMPORTANCE_WEIGHT * row.importance_score * retrieval.importance_boost) * (
            1 + RECENCY_WEIGHT * recency * retrieval.recency_bias
        )
        if negation:
            weight *= 1 - NEGATION_WEIGHT * negated_share(negation, row.text)
        ranked.append(_Candidate(rowid, row, fused_score * weight, dense_by_id.get(rowid),
                                 lexical_by_id.get(rowid), row.semantic_type == WARNING))
    if turns and ranked:
        blended = with_sessions([(item.rowid, item.score) for item in ranked], turns, session_params)
        for item in ranked:
            item.score = blended[item.rowid]
    if confidence is not None:
        sure = confidence([(item.row.id, item.warning) for item in ranked], now)
        for item in ranked:
            item.score *= confidence_weight(sure[item.row.id])
    exact = exact_matcher(codes)
    ranked.sort(key=lambda item: (exact(item.row.text), item.score), reverse=True)
    if clauses and has_evidence:
        ranked = coverage_order(
            wanted,
            ranked,
            score=lambda item: item.score,
            text=lambda item: item.row.text,
            rank_first=lambda item: exact(item.row.text),
        )
    # Two hits that contradict each other: the higher epistemic layer first (directive > world
    # fact > experience; node.memory.search.conflicts). Relevant warnings still go first, below.
    ranked = settle_conflicts(ranked, k, lambda item: precedence(item.row.semantic_type), lambda item: item.row.text)
    ranked = surface_warnings(ranked, len(ranked), lambda item: item.warning, lambda item: item.score)
    hits = _whole(store, ranked, k, visibility)
    evidence = lexical_evidence(confidence_of_bm25)
    dense_scores = [score for _, score in dense] or [0.0]
    dense_floor = min(dense_scores)
    dense_mean = sum(dense_scores) / len(dense_scores)
    dense_spread = max(math.sqrt(sum((score - dense_mean) ** 2 for score in dense_scores) / len(dense_scores)), 1e-9)
    lexical_best = max((-score for _, score in lexical), default=0.0)
    for rank, hit in enumerate(hits):
        lexical_share = -hit.lexical / lexical_best if hit.lexical is not None and lexical_best > 0 else 0.0
        dense_z = ((dense_floor if hit.dense is None else hit.dense) - dense_mean) / dense_spread
        hit.relevance = relevance(dense_z, lexical_share * evidence, rank)
    hits = [hit for hit in hits if hit.relevance >= request.min_relevance]
    if request.record_access:
        record_hits(store, hits, now)
    return hits


@dataclass
class _Candidate:
    """A search candidate ranked on its light row; read whole only if it makes the top k."""

    rowid: int
    row: SearchRow
    score: float
    dense: float | None
    lexical: float | None
    warning: bool


def _whole(store: CrystalStore, ranked: list[_Candidate], k: int, visibility: Visibility) -> list[SearchHit]:
    """The first ``k`` of ``ranked`` as whole crystals, skipping any whose row cannot be read or
    whose parsed crystal fails the request's filters (its JSON is the authority on scope and TTL)."""
    hits: list[SearchHit] = []
    start = 0
    while len(hits) < k and start < len(ranked):
        batch = ranked[start : start + k - len(hits)]
        start += len(batch)
        crystals = store.get_by_rowids([item.rowid for item in batch])
        for item in batch:
            crystal = crystals.get(item.rowid)
            if crystal is not None and _still_visible(crystal, visibility):
                hits.append(SearchHit(crystal, item.score, item.dense, item.lexical))
    return hits


def _still_visible(crystal: Crystal, visibility: Visibility) -> bool:
    as_of = visibility.as_of_ms
    scope = crystal.governance.access_scope
    return (
        (crystal.is_current(visibility.now_ms) if as_of is None else valid_then(crystal, as_of))
        and (not visibility.scopes or scope.value in visibility.scopes)
        and (not visibility.sources or crystal.source.value in visibility.sources)
        and visibility.can_access(scope.value, crystal.lifecycle.value)
    )


def record_hits(store: CrystalStore, hits: list[SearchHit], now: int | None = None) -> None:
    """Count one access for every hit returned to the caller (seed 000's access_count)."""
    if not hits:
        return
    now = now_ms() if now is None else now
    store.record_access([hit.crystal.id for hit in hits], now)
    for hit in hits:
        hit.crystal.access_count += 1
        hit.crystal.last_accessed_at_ms = now


def _dense(store: CrystalStore, index: VectorIndex, rows: Rows, vector: np.ndarray,
           dense: list[tuple[int, float]], candidates: int, k: int,
           visibility: Visibility) -> list[tuple[int, float]]:
    """Dense candidates among the current crystals of the asked namespaces.

    ``dense`` is the plain HNSW walk (the rows of its first ``k`` are in ``rows``); when too few of
    its candidates are current crystals of the asked namespaces and sources (a small namespace
    beside a big one, one source among others, many superseded versions), the walk is redone with hnswlib's
    filter over exactly those rowids, so a small namespace still gets its k nearest.
    """
    if len(dense) < candidates:
        return dense  # the whole index was read; fusion filters what is not allowed
    if len(rows.keep(dense[:k], visibility.listed)) == k:  # the first k rows are fetched
        return dense
    rows.fetch(rowid for rowid, _ in dense)
    if len(rows.keep(dense, visibility.listed)) >= k:
        return dense
    kept = store.current_rowids(tuple(sorted(visibility.namespaces)), visibility.now_ms,
                                sources=tuple(sorted(visibility.sources)))
    return index.query(vector, min(candidates, len(kept)), kept.__contains__) if kept else []


def is_warning_hit(hit: SearchHit) -> bool:
    return hit.crystal.semantic_type is SemanticType.WARNING


def valid_then(crystal: Crystal, at_ms: int) -> bool:
    """The version of its memory that held at ``at_ms`` (and not yet expired then)."""
    expires = crystal.expires_at_ms
    return valid_at(crystal.valid_from_ms, crystal.valid_to_ms, crystal.deleted_at_ms, at_ms) and (
        expires is None or expires > at_ms)
