"""How confidence and warnings enter search ranking (seed 003).

Relevance decides; confidence, like importance, only re-weights near-ties; a
relevant warning (anti-knowledge) is surfaced before everything else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

H = TypeVar("H")

CONFIDENCE_WEIGHT = 0.1
"""Largest share of a hit's score that doubt can take away (at confidence 0)."""

WARNING_RELEVANCE = 0.75
"""A warning is "relevant" when it scores at least this share of the best hit."""


def confidence_weight(confidence: float) -> float:
    """Multiplier of a hit's fused score: ``1 − 0.1 · (1 − confidence)``, in [0.9, 1]."""
    bounded = min(1.0, max(0.0, confidence))
    return 1.0 - CONFIDENCE_WEIGHT * (1.0 - bounded)


def surface_warnings(
    ranked: Sequence[H], k: int, is_warning: Callable[[H], bool], score: Callable[[H], float]
) -> list[H]:
    """The top ``k`` of ``ranked`` with every relevant warning moved first.

    Seed 003: "The Golem should always remember that a particular contract is a
    honeypot" — a warning that scores within :data:`WARNING_RELEVANCE` of the
    best hit is put first (best warning first) even when it ranked below ``k``;
    the other hits keep their order behind it.
    """
    if not ranked or k <= 0:
        return []
    best = max(score(hit) for hit in ranked)
    relevant = [hit for hit in ranked if is_warning(hit) and score(hit) >= WARNING_RELEVANCE * best]
    relevant.sort(key=score, reverse=True)
    chosen = {id(hit) for hit in relevant}
    rest = [hit for hit in ranked if id(hit) not in chosen]
    return (relevant + rest)[:k]
