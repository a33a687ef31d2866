"""Crystal Pointers: fading topics compressed to one search directive each (seed 001).

``Past: <topic> → search: `<keywords>``` — the keywords are chosen so that
``Memory.search`` really returns the source crystal: each candidate pointer is
checked with the node's own search and grows one keyword at a time until it
does; a pointer that never retrieves its source is not written.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

from node.memory.search import STOPWORDS, is_identifier, query_tokens
from node.memory.working.dream.inputs import CrystalView, Pointer, SearchFn

POINTER_TOP_K = 5
"""A pointer counts as retrieving its source when the source is in the top 5 hits."""
MIN_KEYWORDS = 3
MAX_KEYWORDS = 6
TOPIC_WORDS = 8
TOPIC_CHARS = 70
_WORD_CHARS = re.compile(r"[^\w.\-_/:#]+")
_EXTRA_STOPWORDS = frozenset(["also", "after", "before", "about", "just", "very", "some", "all",
                              "any", "more", "most", "only", "over", "such", "here", "each", "one",
                              "two", "auto", "user", "note", "past", "search"])


def topic_of(text: str) -> str:
    """A short label: the first sentence, at most 8 words / 70 characters."""
    first = re.split(r"(?<=[.!?])\s", " ".join(text.split()), maxsplit=1)[0]
    words = first.rstrip(".!?").split()
    label = " ".join(words[:TOPIC_WORDS])
    if len(label) > TOPIC_CHARS:
        label = label[: TOPIC_CHARS - 1].rstrip() + "…"
    return label.replace("`", "'").replace("→", "->") or "untitled"


def content_terms(text: str) -> list[str]:
    terms = []
    for token in query_tokens(text):
        token = token.strip(".-_/:#")
        lowered = token.lower()
        if len(token) < 3 or lowered in STOPWORDS or lowered in _EXTRA_STOPWORDS:
            continue
        if token.isdigit() and len(token) < 4:
            continue
        terms.append(token)
    return terms


def ranked_keywords(crystal: CrystalView, corpus: Sequence[CrystalView]) -> list[str]:
    """The crystal's terms, most distinctive first (tf × idf over ``corpus``; identifiers first).

    A term names the topic well when it is frequent here and rare elsewhere;
    identifiers (``ERR-4412``, ``db-prod-07``) are what exact search matches best.
    """
    terms = content_terms(crystal.text)
    if not terms:
        return []
    frequency = Counter(term.lower() for term in terms)
    document_frequency: Counter[str] = Counter()
    for other in corpus:
        document_frequency.update({term.lower() for term in content_terms(other.text)})
    total = max(1, len(corpus))
    first_seen: dict[str, str] = {}
    for term in terms:
        first_seen.setdefault(term.lower(), term)

    def score(lowered: str) -> tuple[int, float, int]:
        rarity = math.log((1 + total) / (1 + document_frequency.get(lowered, 0))) + 1
        order = list(first_seen).index(lowered)
        return (int(is_identifier(first_seen[lowered])), frequency[lowered] * rarity, -order)

    ordered = sorted(first_seen, key=score, reverse=True)
    return [first_seen[lowered] for lowered in ordered]


def _in_text_order(keywords: list[str], text: str) -> list[str]:
    lowered = text.lower()
    return sorted(keywords, key=lambda k: (lowered.find(k.lower()), k))


def make_pointer(crystal: CrystalView, corpus: Sequence[CrystalView], search: SearchFn) -> Pointer | None:
    """A pointer whose keywords retrieve ``crystal`` via ``search``, or None."""
    ranked = ranked_keywords(crystal, corpus)
    if not ranked:
        return None
    for size in range(min(MIN_KEYWORDS, len(ranked)), min(MAX_KEYWORDS, len(ranked)) + 1):
        keywords = " ".join(_in_text_order(ranked[:size], crystal.text))
        if crystal.id in search(keywords, POINTER_TOP_K):
            return Pointer(topic_of(crystal.text), keywords, (crystal.id,))
    return None


def fading_candidates(
    crystals: Sequence[CrystalView], shown: set[str], now_ms: int, min_age_ms: int
) -> list[CrystalView]:
    """Crystals that should be remembered as pointers, most valuable first.

    Fading = not shown in any other section and not touched for ``min_age_ms``
    (or a consolidated crystal: a migrated seed chunk, a merge winner); skills
    live in Emerging Skills and the market, not here. Value = importance ×
    (1 + ln(1 + accesses)), so what mattered and was used outlives the rest; among
    equals, the most recently touched (the topic that is fading now) comes first.
    """
    out = []
    for crystal in crystals:
        if crystal.id in shown or crystal.semantic_type in ("skill", "task_pattern"):
            continue
        if crystal.lifecycle in ("expired", "archived"):
            continue
        touched = crystal.last_accessed_at_ms or crystal.created_at_ms
        if crystal.lifecycle != "consolidated" and now_ms - touched < min_age_ms:
            continue
        out.append(crystal)
    out.sort(key=lambda c: (-(c.importance * (1 + math.log1p(c.access_count))),
                            -(c.last_accessed_at_ms or c.created_at_ms), c.id))
    return out


def carried_pointers(old_lines: Sequence[tuple[str, str]], search: SearchFn) -> list[Pointer]:
    """Pointers of the previous state whose keywords still retrieve something."""
    kept = []
    for topic, keywords in old_lines:
        clean = _WORD_CHARS.sub(" ", keywords).strip()
        if not clean:
            continue
        hits = search(clean, POINTER_TOP_K)
        if hits:
            kept.append(Pointer(topic.replace("`", "'"), clean, ()))
    return kept
