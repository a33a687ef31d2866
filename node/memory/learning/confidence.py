"""Confidence of learned knowledge: birth, demurrage with stability, feedback, inheritance (seed 003).

Pure functions of plain values. A knowledge row stores the confidence it had at
its last reinforcement (``reference``) and when that was; the confidence *now*
is always derived from those two, never decayed in place, so running the
consolidation cycle twice never decays a fact twice.

Facts start at :data:`FACT_BIRTH_CONFIDENCE`; warnings (anti-knowledge) never go
below :data:`WARNING_FLOOR`; inherited entries are discounted by
:data:`GENERATION_DECAY` per generation; bought ones enter at :data:`BOUGHT_CONFIDENCE`.
"""

from __future__ import annotations

import math

FACT_BIRTH_CONFIDENCE = 0.7
"""Seed 003: a semantic fact extracted from a cluster of episodes starts at ``confidence: 0.7``."""

WARNING_FLOOR = 0.3
"""Seed 003: "Facts tagged as AntiKnowledge never decay below a floor (e.g., confidence 0.3)"."""

GENERATION_DECAY = 0.85
"""Seed 003: "The generational decay factor (0.85x per generation)"."""

BOUGHT_CONFIDENCE = 0.2
"""Seed 003's knowledge weighting table: "Lethe / Marketplace 0.2 — Unknown provenance,
buyer-beware". A bought skill enters at this and keeps it (no demurrage: no episode of
this node ever supported it) until this node's own feedback moves it."""

DREAM_CONFIDENCE_FLOOR = 0.3
"""Seed 003's shared constants: "Dream confidence floor 0.3". A dream's insight is born at
it and, while it lives, never doubted below it (its trial window decides if it stays)."""

SELF_LEARNED_CONFIDENCE = 1.0
"""Confidence of a crystal that never went through consolidation or feedback (as produced)."""

EPISODE_REINFORCEMENT = 0.1
"""Share of the remaining doubt ``1 - c`` removed when a new episode confirms a fact."""

USEFUL_REINFORCEMENT = 0.2
"""Share of the remaining doubt removed when a retrieval is marked useful."""

WRONG_FACTOR = 0.5
"""Multiplier applied when a retrieval is marked wrong (the cost of a wrong fact is higher)."""

OUTCOME_STEP = 0.2
"""Share of the way one execution outcome moves a skill's confidence toward what it showed
(ours: the seed says outcomes accumulate into ``steeringReward`` but names no rate; 0.2 is the
step of a retrieval marked useful, so one good run counts as much as one useful recall)."""

MS_PER_DAY = 24 * 3600 * 1000


def stability(episode_count: int) -> float:
    """Stability multiplier of a fact supported by ``episode_count`` episodes.

    Seed 003: ``let stability = (fact.episode_count as f64).ln().max(1.0);`` — so a
    fact seen 3 times (ln 3 ≈ 1.10) is barely more stable than one seen once,
    and one seen 50 times (ln 50 ≈ 3.91) decays almost four times slower.
    """
    return max(1.0, math.log(episode_count)) if episode_count > 1 else 1.0


def retention(elapsed_ms: int, tau_ms: float, episode_count: int) -> float:
    """Share of confidence kept after ``elapsed_ms`` without reinforcement.

    Seed 003 (Ebbinghaus-modulated demurrage): ``R = e^(-t/S)`` with ``S`` scaling
    with ``episode_count``, implemented in the seed as
    ``(-t / (decay_blocks * stability)).exp()``; here
    ``R = e^(−t / (τ · max(1, ln episode_count)))`` with ``t`` and ``τ`` in ms.
    """
    if tau_ms <= 0:
        raise ValueError("tau must be positive")
    elapsed = max(0, elapsed_ms)
    return math.exp(-elapsed / (tau_ms * stability(episode_count)))


def current_confidence(
    reference: float,
    elapsed_ms: int,
    tau_ms: float,
    episode_count: int,
    *,
    warning: bool = False,
) -> float:
    """Confidence now: the reference confidence times :func:`retention`, floored for warnings."""
    value = clamp(reference) * retention(elapsed_ms, tau_ms, episode_count)
    return max(value, WARNING_FLOOR) if warning else value


def reinforce(confidence: float, step: float) -> float:
    """Move ``confidence`` a share ``step`` of the way to 1: ``c + step · (1 − c)``."""
    return clamp(confidence + step * (1.0 - confidence))


def weaken(confidence: float, *, warning: bool = False) -> float:
    """Confidence after a retrieval was marked wrong; a warning stays at or above its floor."""
    value = clamp(confidence) * WRONG_FACTOR
    return max(value, WARNING_FLOOR) if warning else value


def outcome_confidence(confidence: float, success: bool, *, warning: bool = False) -> float:
    """Confidence after one execution outcome observed by this node (issue 35).

    An exponential moving average toward what the run showed:
    ``c' = c + 0.2 · (y − c)`` with ``y = 1`` for a success and ``y = 0`` for a failure
    (:data:`OUTCOME_STEP`). Bounded: it stays in [0, 1] and never crosses its target, so
    no run of outcomes can push it outside the range or make it oscillate. A bought
    skill at 0.2 rises 0.36, 0.488, 0.590 … through its successes (``1 − 0.8^(n+1)``)
    and falls by a fifth at each failure (0.36 → 0.288); the reward score is not used
    here (it already feeds the price's ``avgRewardScore`` and ``steeringReward``).
    """
    target = 1.0 if success else 0.0
    value = clamp(clamp(confidence) + OUTCOME_STEP * (target - clamp(confidence)))
    return max(value, WARNING_FLOOR) if warning else value


def generational_confidence(base_confidence: float, generation: int) -> float:
    """Confidence an inherited entry arrives with.

    Seed 003: ``confidence(generation N) = base_confidence * 0.85^N``.
    """
    if generation < 0:
        raise ValueError("generation cannot be negative")
    return clamp(base_confidence) * GENERATION_DECAY**generation


def evictable(confidence: float, minimum: float, *, warning: bool = False) -> bool:
    """Seed 003: facts "below ``min_confidence`` are candidates for eviction"; warnings never are."""
    return not warning and confidence < minimum


def clamp(confidence: float) -> float:
    if math.isnan(confidence):
        return 0.0
    return min(1.0, max(0.0, confidence))


def to_ppm(confidence: float) -> int:
    """Integer parts-per-million: how confidence travels in canonical CBOR (no floats)."""
    return round(clamp(confidence) * 1_000_000)


def from_ppm(ppm: int) -> float:
    return clamp(ppm / 1_000_000)
