"""Exact identifier matching for search: a memory naming the query's rare token ranks first.

FTS5's ``unicode61`` tokenizer splits ``ERR-4091`` into ``err`` + ``4091`` and
``v2.3.1`` into ``v2`` + ``3`` + ``1``; :func:`node.memory.search.fusion.fts_query`
turns such a token into an adjacent-phrase query, which finds the right rows
but lets BM25 weigh them against incidental word matches, and dense
similarity cannot tell ``ERR-4091`` from ``ERR-4019``. After fusion,
:meth:`Memory.search` therefore orders hits first by how many of the query's
code-like identifier tokens (:func:`node.memory.search.fusion.code_tokens`) the
memory's text contains *whole* — not as part of a longer token, so
``v2.3.1`` does not match ``v2.3.10`` and ``ERR-4091`` does not match
``ERR-40912`` — and only then by fused score.
"""

from __future__ import annotations

import math
import re
import string
from collections.abc import Callable, Sequence

from node.memory.search.fusion import STOPWORDS

# Characters that continue a token (see fusion._TOKEN): a match must not be
# preceded by one, nor followed by one (a '.' or ':' only when a word character follows,
# so trailing punctuation ends the token).
_BEFORE = r"(?<![\w.\-/:#])"
_AFTER = r"(?![\w\-/#]|[.:]\w)"
_WORD = re.compile(r"\w+", re.UNICODE)
# The same character classes for ASCII text (where \w is [A-Za-z0-9_]).
_ASCII_WORD = frozenset(string.ascii_letters + string.digits + "_")
_CONTINUES_BEFORE = _ASCII_WORD | frozenset(".-/:#")
_CONTINUES_AFTER = _ASCII_WORD | frozenset("-/#")
_ASCII_TOKEN = re.compile(r"[A-Za-z0-9_]+(?:[.\-_/:#][A-Za-z0-9_]+)*")  # fusion._TOKEN, in ASCII
STEM_LENGTH = 5
CONFIDENCE_DEPTH = 10


def exact_matcher(identifiers: Sequence[str]) -> Callable[[str], int]:
    """A function counting how many distinct ``identifiers`` a text contains as whole tokens.

    Case-insensitive. An ASCII text is scanned with ``str.find`` when every
    identifier is an ASCII token of ``fusion._TOKEN``'s shape (what search passes:
    the same rules as the pattern, without compiling one per query, which cost
    ~0.1 ms, a twentieth of a search at 100k); any other text or identifier goes
    through one compiled alternation, built the first time it is needed.
    """
    tokens = list(dict.fromkeys(token.lower() for token in identifiers))
    if not tokens:
        return lambda text: 0
    ascii_tokens = all(token.isascii() and _ASCII_TOKEN.fullmatch(token) for token in tokens)
    compiled: list[re.Pattern[str]] = []

    def count(text: str) -> int:
        if ascii_tokens and text.isascii():
            lowered = text.lower()
            return sum(1 for token in tokens if token in lowered and _whole_ascii(token, lowered))
        if not compiled:
            alternation = "|".join(re.escape(token) for token in sorted(tokens, key=len, reverse=True))
            compiled.append(re.compile(_BEFORE + "(?:" + alternation + ")" + _AFTER, re.IGNORECASE))
        return len({match.group(0).lower() for match in compiled[0].finditer(text)})

    return count


def _whole_ascii(token: str, text: str) -> bool:
    """Whether lower-case ASCII ``text`` holds ``token`` as a whole token (``_BEFORE``/``_AFTER``).

    Tokens are ``fusion._TOKEN`` matches, so a match never starts inside another
    one: counting each token on its own equals the alternation's count.
    """
    size = len(text)
    start = text.find(token)
    while start >= 0:
        end = start + len(token)
        if (start == 0 or text[start - 1] not in _CONTINUES_BEFORE) and (
            end == size or (text[end] not in _CONTINUES_AFTER
                            and not (text[end] in ".:" and end + 1 < size and text[end + 1] in _ASCII_WORD))
        ):
            return True
        start = text.find(token, start + 1)
    return False


def exact_matches(identifiers: Sequence[str], text: str) -> int:
    """How many distinct ``identifiers`` occur in ``text`` as whole tokens (case-insensitive)."""
    return exact_matcher(identifiers)(text)


def content_words(text: str) -> list[str]:
    """Lower-cased words of ``text`` without stopwords."""
    return [word for word in _WORD.findall(text.lower()) if word not in STOPWORDS]


def terms(text: str) -> set[str]:
    """Content terms of ``text``, crudely stemmed to their first :data:`STEM_LENGTH` characters."""
    return {word[:STEM_LENGTH] for word in content_words(text) if len(word) > 1}


def lexical_confidence(query: str, best_first: Sequence[str]) -> float:
    """How much of the query the best BM25 hit contains, in [0, 1]: trust in the lexical list.

    ``best_first``: texts of the top BM25 hits, best first (the first
    :data:`CONFIDENCE_DEPTH` are used). The share is weighted by
    ``idf(t) = ln((n + 1) / (0.5 + df(t)))`` counted over those ``n`` hits,
    so a term every hit shares counts little:
    ``Σ_{t ∈ q ∩ best} idf(t) / Σ_{t ∈ q} idf(t)``. A reworded query whose
    words the memories do not use scores near 0; a keyword query that the
    best hit answers word for word scores near 1.
    """
    query_terms = terms(query)
    hits = [terms(text) & query_terms for text in best_first[:CONFIDENCE_DEPTH]]
    if not query_terms or not hits:
        return 0.0
    doc_freq: dict[str, int] = {}
    for found in hits:
        for term in found:
            doc_freq[term] = doc_freq.get(term, 0) + 1

    def idf(term: str) -> float:
        return math.log((len(hits) + 1) / (0.5 + doc_freq.get(term, 0)))

    mass = sum(idf(term) for term in query_terms)
    return sum(idf(term) for term in hits[0]) / mass if mass > 0 else 0.0
