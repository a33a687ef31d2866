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

_NEGATION = re.compile(
    r"\b(?:not|no|never|none|nobody|nothing|without|neither|nor)\b|\b\w+n['’]t\b", re.IGNORECASE)


def _claim(text: str) -> tuple[frozenset[str], bool]:
    """A memory's content terms (negation words left out) and whether it negates."""
    affirmed = _NEGATION.sub(" ", text)
    return frozenset(terms(affirmed)), affirmed != text


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
    candidates are all of one layer.
    """
    depth = min(len(ranked), 2 * max(k, 1))
    pool = list(ranked[:depth])
    if len({precedence(hit) for hit in pool}) < 2:
        return list(ranked)
    claims: dict[int, tuple[frozenset[str], bool]] = {}

    def claim(hit: H) -> tuple[frozenset[str], bool]:
        key = id(hit)
        if key not in claims:
            claims[key] = _claim(text(hit))
        return claims[key]

    # Each move puts a strictly higher layer ahead of a lower one it contradicts; with
    # a handful of layers the loop ends long before this bound.
    for _ in range(depth * len({precedence(hit) for hit in pool})):
        moved = False
        for i in range(min(k, len(pool))):
            low = pool[i]
            for j in range(i + 1, len(pool)):
                high = pool[j]
                if precedence(high) > precedence(low) and _claims_conflict(claim(low), claim(high)):
                    pool.insert(i, pool.pop(j))
                    moved = True
                    break
            if moved:
                break
        if not moved:
            break
    return pool + list(ranked[depth:])
