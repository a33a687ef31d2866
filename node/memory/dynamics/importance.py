"""Ebbinghaus-style importance of a crystal (seed 000, ``importance.ts``).

Importance is recomputed from scratch on every consolidation run from the
access pattern alone, so repeated runs never compound decay. Emotion slows
decay but never inflates the score.
"""

from __future__ import annotations

import math

from node.config import MemoryConfig
from node.crystals import SemanticType

BASE_STRENGTH = 1.0
"""S(t): fixed at 1.0 in the seed so that semantic relevance never inflates importance."""

FREQUENCY_RATE = 0.1
"""The 0.1 in f(n) = 1 − e^(−0.1·(n + 1))."""

DIRECTIVE_IMPORTANCE_FLOOR = 0.5
"""Importance a directive never falls below (ours: the seed names no floor).

Above every never-retrieved crystal (f(0) ≈ 0.095) and the forget threshold (0.02),
so a directive nobody asks about is still there a year later; about the importance
of a crystal retrieved six times just now (f(6) ≈ 0.50); below the promote
threshold (0.7), so the floor alone never makes it a merge candidate."""


def frequency_factor(access_count: int) -> float:
    """Saturating access-frequency factor.

    Seed: ``f(n) = 1 - e^(-0.1 * (n + 1))``.
    """
    n = max(0, access_count)
    return 1.0 - math.exp(-FREQUENCY_RATE * (n + 1))


def effective_decay_rate(
    emotional_valence: float | None,
    decay_rate: float = MemoryConfig.decay_rate,
    emotion_decay_resistance: float = MemoryConfig.emotion_decay_resistance,
    decay_resistance: float = 0.0,
) -> float:
    """Per-millisecond decay constant after emotional and hormonal resistance.

    Seed: ``λ_eff = decayRate * (1 - |emotionalValence| * emotionDecayResistance)``.

    ``decay_resistance`` is the hormonal ``decayResistance`` from the consolidation
    modulation (seed: ``effectiveCortisol*0.3 + dopamine*0.2 + oxytocin*0.2``, max
    0.5). The seed names it but does not say where it enters the decay; we apply it
    as one more multiplier ``(1 - decayResistance)`` on λ_eff, so "high stress slows
    memory decay" holds for every crystal in that run, while the per-crystal
    emotional term keeps its own meaning. With resistance 0 this is exactly the seed
    formula. A missing valence counts as 0 (no emotional resistance); valence and
    resistance are clamped to [-1, 1] and [0, 1] so λ_eff never goes negative.
    """
    valence = 0.0 if emotional_valence is None else min(1.0, abs(emotional_valence))
    emotional = 1.0 - valence * emotion_decay_resistance
    hormonal = 1.0 - min(1.0, max(0.0, decay_resistance))
    return max(0.0, decay_rate * emotional * hormonal)


def importance(
    access_count: int,
    delta_t_ms: float,
    emotional_valence: float | None,
    decay_rate: float = MemoryConfig.decay_rate,
    emotion_decay_resistance: float = MemoryConfig.emotion_decay_resistance,
    decay_resistance: float = 0.0,
) -> float:
    """Importance in [0, 1] of a crystal last accessed ``delta_t_ms`` ago.

    Seed: ``I(t) = S(t) * f(accessCount) * e^(-λ_eff * Δt)`` with ``S(t) = 1.0``,
    ``f(n) = 1 - e^(-0.1 * (n + 1))``, Δt the milliseconds since last access and
    ``λ_eff = decayRate * (1 - |emotionalValence| * emotionDecayResistance)``
    (times ``1 - decay_resistance``, see :func:`effective_decay_rate`).

    The default decay rate 5e-10 /ms gives a half-life of ln 2 / 5e-10 ms ≈ 16 days.
    A negative Δt (clock skew) is treated as 0.
    """
    rate = effective_decay_rate(
        emotional_valence, decay_rate, emotion_decay_resistance, decay_resistance
    )
    elapsed_ms = max(0.0, float(delta_t_ms))
    return BASE_STRENGTH * frequency_factor(access_count) * math.exp(-rate * elapsed_ms)


def importance_floor(semantic_type: SemanticType | str) -> float:
    """The least importance a crystal of ``semantic_type`` may have: a directive's floor, else 0."""
    return DIRECTIVE_IMPORTANCE_FLOOR if str(semantic_type) == SemanticType.DIRECTIVE.value else 0.0
