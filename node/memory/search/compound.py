"""Compound questions: one query that needs two memories ("multi-hop").

"which host runs the worker that stalled in the April payouts incident" is
answered by two memories: the incident names the worker, another memory names
its host. One embedding of the whole question is a blend that matches neither
memory well, and a ranked list that puts two near-copies of the incident first
pushes the second memory out of the top hits. Two measured remedies (see
docs/retrieval-tuning.md, "Retrieval v2"), both applied only when
:func:`split_clauses` finds at least two clauses, so single-clause queries rank
exactly as before:

* **Clause vectors**: each clause is embedded and searched on its own too; a
  memory's dense score is ``max(cos(query), alpha * max_c cos(clause_c))``
  (:func:`merge_dense`).
* **Query-term coverage**: the top hits are re-ordered greedily so that each
  next hit adds query terms the hits above it did not contain
  (:func:`coverage_order`); a hit's value is
  ``score / best_score + weight * Σ_{t ∈ new terms} idf(t) / Σ_{t ∈ query terms} idf(t)``,
  with ``idf(t) = ln((n + 1) / (0.5 + df(t)))`` counted over the ``n``
  candidates themselves (no database round trip).

Pure functions only; :func:`node.memory.search.pipeline.search` calls them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence
from typing import TypeVar

from node.memory.search.lexical import content_words, terms

T = TypeVar("T")

CLAUSE_ALPHA = 0.9
COVERAGE_WEIGHT = 0.8
COVERAGE_DEPTH = 20
MIN_CLAUSE_WORDS = 2
# Each clause costs one embedding and one HNSW query: a crafted 4 KB query must
# not turn into hundreds of them.
MAX_CLAUSES = 4

# Clause boundaries: punctuation, coordination and the relative/interrogative
# words that open a sub-question.
_BOUNDARY = re.compile(
    r"[,;?]|\b(?:and|who|which|that|where|when|whose|what|after|before|while)\b", re.IGNORECASE
)


def split_clauses(query: str) -> list[str]:
    """The clauses of a compound question (at most :data:`MAX_CLAUSES`), or ``[]`` below two.

    A clause is a piece between boundaries with at least
    :data:`MIN_CLAUSE_WORDS` content words (stopwords aside).
    """
    pieces = (piece.strip() for piece in _BOUNDARY.split(query))
    clauses = [piece for piece in pieces if len(content_words(piece)) >= MIN_CLAUSE_WORDS]
    return clauses[:MAX_CLAUSES] if len(clauses) >= 2 else []


def merge_dense(
    full: Sequence[tuple[T, float]],
    clauses: Sequence[Sequence[tuple[T, float]]],
    alpha: float = CLAUSE_ALPHA,
) -> list[tuple[T, float]]:
    """Union of the whole query's and the clauses' ``(id, cosine)`` lists, best first.

    ``score = max(cos(query), alpha * max over clauses of cos(clause))``, each
    term taken only where that list holds the id.
    """
    scores: dict[T, float] = dict(full)
    for ranking in clauses:
        for doc_id, cosine in ranking:
            scaled = alpha * cosine
            if doc_id not in scores or scaled > scores[doc_id]:
                scores[doc_id] = scaled
    return sorted(scores.items(), key=lambda item: item[1], reverse=True)


def coverage_order(
    query: str,
    hits: Sequence[T],
    score: Callable[[T], float],
    text: Callable[[T], str],
    *,
    rank_first: Callable[[T], int] = lambda hit: 0,
    weight: float = COVERAGE_WEIGHT,
    depth: int = COVERAGE_DEPTH,
) -> list[T]:
    """``hits`` (best first) with the first ``depth`` re-ordered by query-term coverage.

    Greedy: repeatedly take the hit with the highest ``(rank_first(hit), value)``
    where value is defined in the module docstring; hits past ``depth`` keep
    their order. ``rank_first`` lets exact identifier matches stay on top.
    """
    query_terms = terms(query)
    if not hits or not query_terms:
        return list(hits)
    hit_terms = [terms(text(hit)) & query_terms for hit in hits]
    doc_freq: dict[str, int] = {}
    for found in hit_terms:
        for term in found:
            doc_freq[term] = doc_freq.get(term, 0) + 1
    count = len(hits)

    def idf(term: str) -> float:
        return math.log((count + 1) / (0.5 + doc_freq.get(term, 0)))

    mass = sum(idf(term) for term in query_terms)
    best = max((score(hit) for hit in hits), default=0.0)
    scale = best if best > 0.0 else 1.0
    pool = list(range(min(depth, count)))
    chosen: list[int] = []
    covered: set[str] = set()
    first = [rank_first(hit) for hit in hits]
    relative = [score(hit) / scale for hit in hits]

    def value(index: int, covered: set[str]) -> tuple[int, float]:
        gain = sum(idf(term) for term in hit_terms[index] - covered) / mass if mass > 0 else 0.0
        return first[index], relative[index] + weight * gain

    while pool:
        pick = max(pool, key=lambda index: value(index, covered))
        pool.remove(pick)
        chosen.append(pick)
        covered |= hit_terms[pick]
    return [hits[index] for index in chosen] + list(hits[len(chosen) :])
