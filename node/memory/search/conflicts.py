"""When two hits contradict each other, the higher epistemic layer ranks first (seed 000).

Seed 000: "Directives (explicit user preferences) take priority over inferred
knowledge"; issue 28 orders the layers directive > world fact > experience
(:mod:`node.crystals.epistemic`). Relevance still decides everything else: the
layers only settle a *conflict*, so a store of episodes and facts that never
contradict one another ranks exactly as before.

Two memories **conflict** when they are about the same thing and one negates
what the other does not: at least :data:`MIN_SHARED` content terms in common
(:func:`node.memory.search.lexical.terms`, negation words left out), making up
at least :data:`MIN_OVERLAP` of the shorter one's terms, and exactly one of
them holds a negation (``not``, ``n't``, ``never``, ``no``, ``without``, …).
"The user never wants semicolons" and "Learned from experience: the user wants
semicolons at the end of lines" conflict (three of the first's four terms); "the
user never wants meetings on Friday" and "the user wants semicolons" do not (two
of three). A lexical test, so it
misses a contradiction said in other words ("likes" / "hates"); no language
model is called.

Pure functions over the ranked candidates.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TypeVar

from node.memory.search.lexical import terms

H = TypeVar("H")

MIN_SHARED = 2
MIN_OVERLAP = 0.75
"""Share of the shorter memory's content terms the other must hold to be "about the same thing"."""

MAX_CLAIM_CHARS = 1_000
"""Only a memory's opening is read for a conflict: what a directive says fits, and a long
crystal cannot make every search pay for reading all of it."""

# "n't" alone: what is left of "doesn't" ("does") is a stopword, and a leading \w+ would make
# the search backtrack at every position.
_NEGATION = re.compile(r"\b(?:not|no|never|none|nobody|nothing|without|neither|nor)\b|n['’]t\b",
                       re.IGNORECASE)


def _negates(text: str) -> bool:
    return _NEGATION.search(text[:MAX_CLAIM_CHARS]) is not None


def _terms(text: str) -> frozenset[str]:
    """A memory's content terms, negation words left out."""
    return frozenset(terms(_NEGATION.sub(" ", text[:MAX_CLAIM_CHARS])))


def _claim(text: str) -> tuple[frozenset[str], bool]:
    """A memory's content terms and whether it negates."""
    return _terms(text), _negates(text)


def conflicts(first: str, second: str) -> bool:
    """Whether two memory texts contradict each other (see the module docstring)."""
    return _claims_conflict(_claim(first), _claim(second))


def _claims_conflict(first: tuple[frozenset[str], bool], second: tuple[frozenset[str], bool]) -> bool:
    (terms_a, negated_a), (terms_b, negated_b) = first, second
    if negated_a == negated_b:
        return False
    shared = len(terms_a & terms_b)
    shorter = min(len(terms_a), len(terms_b))
    return shared >= MIN_SHARED and shared >= MIN_OVERLAP * shorter


def settle_conflicts(ranked: Sequence[H], k: int, precedence: Callable[[H], int],
                     text: Callable[[H], str]) -> list[H]:
    """``ranked`` with every conflict among its first ``2k`` settled by layer.

    A hit that conflicts with one ranked above it and has a higher precedence moves to
    just before that one; nothing else moves. The depth ``2k`` lets a directive just
    below the cut win over a contradicting experience inside it. Costs nothing when the
    candidates are all of one layer; otherwise each hit's polarity is read once, and its
    terms only if it differs in polarity from a hit of another layer.
    """
    depth = min(len(ranked), 2 * max(k, 1))
    pool = [(precedence(hit), hit) for hit in ranked[:depth]]
    if len({rank for rank, _ in pool}) < 2:
        return list(ranked)
    negates: dict[int, bool] = {}
    words: dict[int, frozenset[str]] = {}

    def contradict(low: H, high: H) -> bool:
        for hit in (low, high):
            if id(hit) not in negates:
                negates[id(hit)] = _negates(text(hit))
        if negates[id(low)] == negates[id(high)]:
            return False
        for hit in (low, high):
            if id(hit) not in words:
                words[id(hit)] = _terms(text(hit))
        return _claims_conflict((words[id(low)], negates[id(low)]), (words[id(high)], negates[id(high)]))

    # A move puts a higher layer just before a lower one it contradicts; the hits above that
    # position were already compared with it, so the scan goes on from there. Each hit can
    # pass each lower-layer hit at most once, so the loop ends.
    i = 0
    while i < min(k, len(pool)):
        low_rank, low = pool[i]
        for j in range(i + 1, len(pool)):
            high_rank, high = pool[j]
            if high_rank > low_rank and contradict(low, high):
                pool.insert(i, pool.pop(j))
                break
        else:
            i += 1
    return [hit for _, hit in pool] + list(ranked[depth:])
