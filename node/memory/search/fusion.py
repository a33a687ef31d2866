"""Hybrid retrieval: fuse dense (HNSW cosine) and lexical (FTS5 BM25) results.

Seed 002 merges its two lists with Reciprocal Rank Fusion,
``score(d) = Σ_i 1 / (60 + rank_i(d))``. Measured on agent memories, plain
equal-weight RRF is worse than dense search alone: for reworded
("paraphrase") queries BM25 promotes memories that share only incidental
words, while for identifier queries (``ERR-4412``, ``JIRA-2231``,
``db-prod-07``) BM25 is what finds the one memory that names the identifier.

:func:`fuse` therefore weights the lexical side per query:

* ``lexical_weight = base_lexical_weight + confidence_weight * e * a + identifier_weight * s``,
  capped at ``max_lexical_weight``, where ``e`` is the lexical evidence
  (:func:`lexical_evidence`): the lexical confidence ``c`` in [0, 1] of the
  query (the idf-weighted share of its terms that the best BM25 hit contains,
  :func:`node.memory.search.lexical.lexical_confidence`, computed by the caller: 0
  when not given) when ``c >= confidence_floor``, else 0 ("do no harm": a query
  that shares no real word with the store ranks exactly as dense search);
  ``a`` in [0, 1] is the lists' agreement (:func:`agreement`): how close in
  meaning BM25's best hit is to the dense list's best, so that a reworded
  question whose few words an unrelated memory happens to share is not pulled
  towards it, unless BM25's list is the more peaked of the two (:func:`peakedness`,
  :func:`lexical_trust`): the dense list then says too little to overrule it; and ``s`` in [0, 1] is the rarity of the rarest
  code-like token in the query (see :func:`code_tokens`;
  rarity from ``doc_freq`` as ``clip(-log10(df) / rarity_decades, 0, 1)``, so
  an identifier in ≤ 1 % of memories counts fully and one that no memory
  contains counts zero);
* each document scores
  ``(1 - w) * cos / max_cos + w * bm25 / max_bm25 + rrf_weight * (w / max_w) * RRF_60 / RRF_max``,
  where scores are normalised by the best score in their list and a document
  missing from a list takes that list's floor (lowest cosine; zero BM25).

Pure functions only: the store runs the two searches and calls :func:`fuse`;
it builds its FTS5 ``MATCH`` argument with :func:`fts_query`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

RRF_K = 60

# Small on purpose: BM25's IDF handles the rest; these only keep OR-queries
# from matching every memory through "the" and "what".
STOPWORDS = frozenset(
    ["a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "could", "did", "do", "does", "for", "from", "had", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "no", "not", "of", "on", "or", "our", "should", "so", "than", "that", "the", "their", "them", "then", "there", "these", "they", "this", "to", "was", "we", "were", "what", "when", "where", "which", "who", "whom", "why", "will", "with", "would", "you", "your"]
)

# A query token: a run of word characters possibly joined by . - _ / : # (so
# hostnames, dates, error codes and paths stay whole).
_TOKEN = re.compile(r"\w+(?:[.\-_/:#]\w+)*", re.UNICODE)
_HAS_DIGIT = re.compile(r"\d")
_HAS_LETTER = re.compile(r"[^\W\d_]")


@dataclass(frozen=True)
class FusionParams:
    """Tunable constants of :func:`fuse` (docs/retrieval-tuning.md, "Retrieval v2", says how they were chosen).

    ``confidence_weight`` 0.6 with ``base_lexical_weight`` 0: BM25 gets weight
    as far as its best hit contains the query's words, so a reworded query
    (no shared word) ranks by meaning and a keyword or multi-part query leans
    on BM25; a flat base weight of 0.2 bought the multi-hop and negation-trap
    gains at the price of paraphrases. ``identifier_weight`` 0.9 leaves dense
    similarity as the tie-breaker between memories that all name the
    identifier. ``rrf_weight`` (seed 002's RRF, scaled by the lexical trust)
    showed no measurable effect and is off by default. ``confidence_floor``
    0.2: below it the lexical confidence counts as no evidence at all (middle of
    the tune plateau 0.15–0.25, docs/benchmarks.md "Third pass").
    ``agreement_low``/``agreement_high`` 0.2/0.4: the ramp of :func:`agreement`
    (on the tune plateau 0.2–0.5), and with it ``confidence_weight`` 0.7
    (docs/retrieval-tuning.md, "Agreement of the two lists").
    ``peaked_span`` 1.0: the width of the ramp of :func:`lexical_trust` in units of
    peakedness (docs/retrieval-tuning.md, "LoCoMo: which list to believe").
    """

    base_lexical_weight: float = 0.0
    confidence_weight: float = 0.7
    identifier_weight: float = 0.9
    max_lexical_weight: float = 0.9
    rrf_weight: float = 0.0
    rrf_k: int = RRF_K
    rarity_decades: float = 2.0
    confidence_floor: float = 0.2
    agreement_low: float = 0.2
    agreement_high: float = 0.4
    peaked_span: float = 1.0


DEFAULT_PARAMS = FusionParams()
CONVERSATION_PARAMS = FusionParams(base_lexical_weight=0.4, confidence_weight=0.0)
"""Fusion of a search whose candidates are mostly conversation turns
(:func:`node.memory.search.sessions.is_conversation`): BM25 a fixed 0.4 of the score, plus the
identifier weight as always. Score-level fusion with a fixed weight, as arXiv 2606.04194 fuses
BM25 and max-sim on LoCoMo; 0.4 is the middle of the tune plateau 0.35-0.45 (LoCoMo 26, 30, 41;
docs/retrieval-tuning.md, "LoCoMo: sessions"); the per-query weight of :data:`DEFAULT_PARAMS`
measured 0.02-0.03 nDCG@10 lower there."""


def query_tokens(text: str) -> list[str]:
    """Tokens of ``text`` as the user wrote them (case kept), punctuation-joined runs kept whole."""
    return _TOKEN.findall(text)


def is_identifier(token: str) -> bool:
    """Whether a token looks like an identifier rather than a word.

    Letters mixed with digits (``ERR-4412``, ``a41be07``, ``E1102``), numbers
    of three or more digits (ports, issue numbers), dates, dotted names with two
    or more dots (``search-03.prod.example.net``), ``snake_case`` names, and
    long all-caps or camelCase constants (``ECONNRESET``, ``OOMKilled``).
    """
    has_digit = bool(_HAS_DIGIT.search(token))
    has_letter = bool(_HAS_LETTER.search(token))
    if has_digit and has_letter:
        return True
    if has_digit:
        return sum(character.isdigit() for character in token) >= 3
    if "_" in token.strip("_") or token.count(".") >= 2:
        return True
    letters = token.replace("-", "")
    inner_capital = any(character.isupper() for character in letters[1:])
    return len(letters) >= 5 and (letters.isupper() or (inner_capital and not letters.isupper()))


def identifier_tokens(text: str) -> list[str]:
    return [token for token in query_tokens(text) if is_identifier(token)]


def is_code(token: str) -> bool:
    """Whether ranking treats a token as a code: an identifier not made of letters only.

    ``ERR-4091``, ``v2.3.1``, ``db-prod-03``, ``a41be07``, ``snake_case``, paths and
    dates pin a memory down; an all-caps or camelCase word (``HTTPS``, ``GitHub``,
    ``OOMKilled``) is vocabulary, left to BM25's own weighting: as an identifier it
    gave BM25 a high weight and put every memory naming it first, also for a
    reworded question that merely mentions it (docs/retrieval-tuning.md, "Fifth pass").
    """
    return is_identifier(token) and not token.isalpha()


def code_tokens(text: str) -> list[str]:
    """The tokens of ``text`` that ranking treats as codes (:func:`is_code`)."""
    return [token for token in query_tokens(text) if is_code(token)]


def _quote(token: str) -> str:
    # Inside an FTS5 string every character is literal except '"', escaped by doubling.
    return '"' + token.replace('"', '""') + '"'


def fts_query(text: str) -> str:
    """An FTS5 ``MATCH`` expression for free user text that never raises a syntax error.

    Each token becomes a quoted FTS5 string, so punctuation (``ERR-4412``,
    ``"``, ``*``, ``:``, ``NEAR``) is literal; a punctuated token is a phrase
    whose parts must be adjacent. Tokens are OR-ed (BM25 ranks partial matches)
    after dropping stopwords, unless only stopwords remain. Returns ``""``
    when the text has no word characters: the caller must then skip the
    lexical search (``MATCH ''`` is an FTS5 error).
    """
    tokens = list(dict.fromkeys(token.lower() for token in query_tokens(text)))
    content = [token for token in tokens if token not in STOPWORDS] or tokens
    return " OR ".join(_quote(token) for token in content)


def rarity(doc_fraction: float, decades: float = DEFAULT_PARAMS.rarity_decades) -> float:
    """How strongly a query token singles out memories: 1 if in ≤ 10^-decades of them, 0 if in none or all."""
    if doc_fraction <= 0.0:
        return 0.0
    return min(1.0, max(0.0, -math.log10(min(doc_fraction, 1.0)) / decades))


def lexical_evidence(confidence: float, params: FusionParams = DEFAULT_PARAMS) -> float:
    """The lexical confidence clipped to [0, 1], or 0 below ``params.confidence_floor``.

    0 means the BM25 list carries no evidence for this query: fusion gives it no
    weight and compound re-ordering by query terms is skipped.
    """
    confidence = min(1.0, max(0.0, confidence))
    return confidence if confidence >= params.confidence_floor else 0.0


def lexical_weight(
    query: str,
    doc_freq: Callable[[str], float] | None = None,
    params: FusionParams = DEFAULT_PARAMS,
    confidence: float = 0.0,
) -> float:
    """The share of the fused score given to BM25 for this query (see module docstring)."""
    identifiers = code_tokens(query)
    if not identifiers:
        strength = 0.0
    elif doc_freq is None:
        strength = 1.0
    else:
        strength = max(rarity(doc_freq(token), params.rarity_decades) for token in identifiers)
    confidence = lexical_evidence(confidence, params)
    return min(
        params.max_lexical_weight,
        params.base_lexical_weight
        + params.confidence_weight * confidence
        + params.identifier_weight * strength,
    )


def agreement(
    dense: Sequence[tuple[str, float]],
    lexical: Sequence[tuple[str, float]],
    params: FusionParams = DEFAULT_PARAMS,
) -> float:
    """How far the lexical list's best hit agrees in meaning with the dense list, in [0, 1].

    ``r = (dense(b) − lowest) / (best − lowest)``: where BM25's best hit ``b``
    falls between the dense list's lowest and best scores (0 if it is not in
    the list at all: it is then less similar than every dense candidate),
    mapped linearly from ``agreement_low`` (0) to ``agreement_high`` (1). A
    keyword question's best BM25 hit is usually near the top of the dense list
    too (1); a reworded question matches words of a memory about something
    else (0). 1 when either list is empty or the dense list says nothing (no
    positive score, or every score equal): there is no meaning to disagree with.
    """
    scores = dict(dense)
    return _agreement(scores, max(scores.values(), default=0.0), min(scores.values(), default=0.0),
                      lexical[0][0] if lexical else None, params)


def _agreement(scores: Mapping[str, float], best: float, lowest: float, top: str | None,
               params: FusionParams) -> float:
    """:func:`agreement` of dense ``scores`` (their ``best`` and ``lowest`` given, as :func:`fuse`
    has them already) with BM25's best hit ``top`` (``None``: no lexical list)."""
    if not scores or top is None or best <= 0.0 or best <= lowest:
        return 1.0
    if top not in scores:
        return 0.0
    ratio = (scores[top] - lowest) / (best - lowest)
    span = params.agreement_high - params.agreement_low
    if span <= 0.0:
        return 1.0 if ratio >= params.agreement_low else 0.0
    return min(1.0, max(0.0, (ratio - params.agreement_low) / span))


def peakedness(scores: Sequence[float]) -> float:
    """How far a list's best score stands out from the list: ``(best − mean) / std``, 0 for fewer than 3.

    A per-query calibration of a retriever by its own score distribution: a list whose best
    hit is many deviations above the rest has found something; a flat list has not (all of
    a conversation's turns are about equally close in meaning to a question about it).
    """
    count = len(scores)
    if count < 3:
        return 0.0
    # Plain Python: for the ~50 scores of a candidate list it is faster than a numpy round trip.
    mean = sum(scores) / count
    spread = math.sqrt(sum((score - mean) ** 2 for score in scores) / count)
    return (max(scores) - mean) / spread if spread > 0.0 else 0.0


def lexical_trust(dense_scores: Sequence[float], lexical_scores: Sequence[float],
                  params: FusionParams = DEFAULT_PARAMS) -> float:
    """How far BM25's list is the more peaked of the two, in [0, 1]: 0.5 when both are equally
    peaked, ramping over ``params.peaked_span`` units of :func:`peakedness` either way.

    :func:`fuse` lets the lists' :func:`agreement` veto BM25's weight only as far as this is
    below 1: a dense list flatter than BM25's is no judge of BM25's best hit.
    """
    if not dense_scores or not lexical_scores:
        return 0.0
    difference = peakedness(lexical_scores) - peakedness(dense_scores)
    if params.peaked_span <= 0.0:
        return 1.0 if difference > 0.0 else 0.0
    return min(1.0, max(0.0, difference / params.peaked_span + 0.5))


def rrf(rankings: Sequence[Sequence[str]], k: int = RRF_K) -> dict[str, float]:
    """Reciprocal Rank Fusion (seed 002): ``Σ 1 / (k + rank)`` with ranks starting at 1."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, doc_id in enumerate(ranking, start=1):
            scores[doc_id] = scores.get(doc_id, 0.0) + 1.0 / (k + rank)
    return scores


def fuse(
    query: str,
    dense: list[tuple[str, float]],
    lexical: list[tuple[str, float]],
    k: int,
    *,
    doc_freq: Callable[[str], float] | None = None,
    params: FusionParams = DEFAULT_PARAMS,
    lexical_confidence: float = 0.0,
) -> list[tuple[str, float]]:
    """The top ``k`` of the union of both lists, best first, as ``(doc_id, fused_score)``.

    ``dense``: ``(doc_id, cosine_similarity)`` best first, e.g. HNSW top-k.
    ``lexical``: ``(doc_id, bm25)`` best first, where ``bm25`` is the value of
    SQLite FTS5's ``bm25()`` as returned, i.e. negative with lower = better;
    a positive value raises ``ValueError`` (it means the sign was flipped
    already). ``doc_freq(token)``: fraction of stored memories in [0, 1]
    matching a raw query token (e.g. ``count(MATCH fts_query(token)) /
    total``); without it every identifier-like token counts as rare.
    ``lexical_confidence`` in [0, 1]: see :func:`lexical_weight`; it counts
    only as far as the two lists agree (:func:`agreement`) or BM25's list is the more peaked (:func:`lexical_trust`).
    Fused scores are comparable within one call only.
    """
    if k <= 0:
        return []
    if any(score > 0.0 for _, score in lexical):
        raise ValueError("lexical scores must be FTS5 bm25() values (<= 0, lower is better)")
    dense_scores = dict(dense)
    dense_best = max(dense_scores.values(), default=0.0)
    dense_floor = min(dense_scores.values(), default=0.0)
    top = lexical[0][0] if lexical else None
    lexical_scores = {doc_id: -score for doc_id, score in lexical}
    trust = lexical_trust(list(dense_scores.values()), list(lexical_scores.values()), params)
    confidence = lexical_confidence * max(trust, _agreement(dense_scores, dense_best, dense_floor, top, params))
    weight = lexical_weight(query, doc_freq, params, confidence) if lexical else 0.0
    lexical_best = max(lexical_scores.values(), default=0.0)
    rank_scores = rrf([[doc_id for doc_id, _ in dense], [doc_id for doc_id, _ in lexical]], params.rrf_k)
    rank_best = max(rank_scores.values(), default=0.0)

    # The rank bonus is lexical evidence too: it counts only as far as BM25 is trusted.
    rank_weight = params.rrf_weight * weight / params.max_lexical_weight if params.max_lexical_weight > 0 else 0.0

    def normalised(value: float, best: float) -> float:
        return value / best if best > 0.0 else 0.0

    fused: dict[str, float] = {}
    for doc_id in dict.fromkeys([doc_id for doc_id, _ in dense] + [doc_id for doc_id, _ in lexical]):
        dense_part = normalised(dense_scores.get(doc_id, dense_floor), dense_best)
        lexical_part = normalised(lexical_scores.get(doc_id, 0.0), lexical_best)
        rank_part = normalised(rank_scores[doc_id], rank_best)
        fused[doc_id] = (1.0 - weight) * dense_part + weight * lexical_part + rank_weight * rank_part
    ranked = sorted(fused.items(), key=lambda item: item[1], reverse=True)
    return ranked[:k]
