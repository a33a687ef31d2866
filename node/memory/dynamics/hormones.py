"""Hormonal state: dopamine, cortisol, oxytocin (seed 000, ``hormonal.ts``).

Three levels in [0, 1] that decay toward a resting (homeostasis) level and are
raised by events detected in text or reported by the node. They modulate
consolidation (decay resistance, merge threshold, ingestion halt) and retrieval
(importance boost, recency bias).

Network "cortisol weather": a management node's signed alert raises effective
cortisol to ``max(local, level)`` until the alert's signed *absolute* expiry
(``expires_at_ms``). Unlike Bitterbot, the halt is not timed from receipt, so a
delayed or replayed alert cannot extend a lockdown beyond what was signed.
Several alerts may be active at once; each counts until its own expiry.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from node.config import MemoryConfig
from node.crystals import HormonalInfluence, Origin, now_ms

MINUTE_MS = 60_000
HALF_LIFE_MS = {"dopamine": 30 * MINUTE_MS, "cortisol": 60 * MINUTE_MS, "oxytocin": 45 * MINUTE_MS}
HOMEOSTASIS = {"dopamine": 0.15, "cortisol": 0.02, "oxytocin": 0.10}
CLAMP_BELOW = 0.001
"""Levels under this are reported as exactly 0 (seed)."""
SESSION_OXYTOCIN_BASELINE = 0.1
DEFAULT_MERGE_THRESHOLD = MemoryConfig.merge_overlap_threshold
HORMONES = ("dopamine", "cortisol", "oxytocin")


class HormonalEvent(StrEnum):
    REWARD = "reward"
    ERROR = "error"
    SOCIAL = "social"
    ACHIEVEMENT = "achievement"
    URGENCY = "urgency"


# Seed spike table: added to the current level, then clamped to [0, 1].
SPIKES: dict[HormonalEvent, HormonalInfluence] = {
    HormonalEvent.REWARD: HormonalInfluence(dopamine=0.3),
    HormonalEvent.ERROR: HormonalInfluence(cortisol=0.3),
    HormonalEvent.SOCIAL: HormonalInfluence(oxytocin=0.3),
    HormonalEvent.ACHIEVEMENT: HormonalInfluence(dopamine=0.4, oxytocin=0.2),
    HormonalEvent.URGENCY: HormonalInfluence(cortisol=0.4),
}

# The seed lists trigger words per hormone; we split them over the five events so
# every word still raises its own hormone: "shipped"/"deployed"/"milestone" are
# achievements (dopamine + oxytocin), "urgent"/"deadline" are urgency (cortisol).
# Words match at the start of a word, so "failed", "errors", "thanks",
# "helpful", "teammate" all count, but "prefail" or "terror" do not.
EVENT_KEYWORDS: dict[HormonalEvent, tuple[str, ...]] = {
    HormonalEvent.REWARD: ("success", "fixed"),
    HormonalEvent.ACHIEVEMENT: ("shipped", "deployed", "milestone"),
    HormonalEvent.ERROR: ("fail", "error", "bug", "crash"),
    HormonalEvent.URGENCY: ("urgent", "deadline"),
    HormonalEvent.SOCIAL: ("thank", "help", "appreciate", "team", "collaborate"),
}
_EVENT_PATTERNS = {
    event: re.compile(r"\b(?:" + "|".join(words) + r")", re.IGNORECASE)
    for event, words in EVENT_KEYWORDS.items()
}


def _clamp01(value: float) -> float:
    return min(1.0, max(0.0, value))


def detect_events(text: str) -> list[HormonalEvent]:
    """Events whose trigger words occur in ``text`` (each at most once, table order).

    Seed trigger patterns: dopamine "success", "fixed", "shipped", "deployed",
    "milestone"; cortisol "fail", "error", "bug", "crash", "urgent", "deadline";
    oxytocin "thank", "help", "appreciate", "team", "collaborate".
    """
    return [event for event, pattern in _EVENT_PATTERNS.items() if pattern.search(text)]


def compute_crystal_influence(text: str, origin: Origin | str | None) -> HormonalInfluence:
    """Hormonal snapshot stored on a crystal at ingestion.

    Seed: detect events via keyword patterns, add their spikes; session-origin
    content gets a +0.1 oxytocin baseline. Each hormone is clamped to [0, 1].
    """
    dopamine = cortisol = 0.0
    oxytocin = SESSION_OXYTOCIN_BASELINE if origin == Origin.SESSION else 0.0
    for event in detect_events(text):
        spike = SPIKES[event]
        dopamine += spike.dopamine
        cortisol += spike.cortisol
        oxytocin += spike.oxytocin
    return HormonalInfluence(
        dopamine=_clamp01(dopamine), cortisol=_clamp01(cortisol), oxytocin=_clamp01(oxytocin)
    )


def emotional_valence(influence: HormonalInfluence) -> float:
    """Signed emotional tone in [-0.5, 1].

    Seed: ``emotionalValence = (dopamine + oxytocin - cortisol) / 2``.
    """
    return (influence.dopamine + influence.oxytocin - influence.cortisol) / 2


def decay_toward(level: float, homeostasis: float, elapsed_ms: float, half_life_ms: float) -> float:
    """Level after ``elapsed_ms`` of decay toward homeostasis.

    Seed: ``hormone(t) = homeostasis + (hormone(t0) - homeostasis) * 0.5^((t - t0) / halflife)``;
    values below 0.001 are clamped to 0.
    """
    value = homeostasis + (level - homeostasis) * 0.5 ** (max(0.0, elapsed_ms) / half_life_ms)
    return 0.0 if value < CLAMP_BELOW else value


@dataclass(frozen=True)
class HormonalState:
    dopamine: float
    cortisol: float
    oxytocin: float

    def to_influence(self) -> HormonalInfluence:
        return HormonalInfluence(self.dopamine, self.cortisol, self.oxytocin)


@dataclass(frozen=True)
class ConsolidationModulation:
    decay_resistance: float
    merge_threshold: float
    halt_untrusted_ingestion: bool


@dataclass(frozen=True)
class RetrievalModulation:
    importance_boost: float
    recency_bias: float


@dataclass(frozen=True)
class CortisolOverride:
    """One network weather alert, active until its signed absolute expiry (or its signer's lift).

    ``sender`` (the management key, hex) and ``issued_at_ms`` say which lifts end it; an
    override saved before lifts existed has neither and runs to its expiry.
    """

    level: float
    expires_at_ms: int
    reason: str
    issued_at_ms: int = 0
    sender: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"level": self.level, "expiresAtMs": self.expires_at_ms, "reason": self.reason,
                "issuedAtMs": self.issued_at_ms, "sender": self.sender}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CortisolOverride:
        return cls(float(data["level"]), int(data["expiresAtMs"]), str(data.get("reason", "")),
                   int(data.get("issuedAtMs", 0)), str(data.get("sender", "")))


@dataclass
class HormonalStateManager:
    """Hormone levels over time; ``now_ms`` is injected so tests control the clock.

    Levels are stored as of ``updated_at_ms`` and decayed lazily when read or spiked.
    """

    now_ms: Callable[[], int] = now_ms
    base_merge_threshold: float = DEFAULT_MERGE_THRESHOLD
    half_life_ms: dict[str, float] = field(default_factory=lambda: dict(HALF_LIFE_MS))
    homeostasis: dict[str, float] = field(default_factory=lambda: dict(HOMEOSTASIS))
    levels: dict[str, float] = field(default_factory=dict)
    updated_at_ms: int | None = None
    overrides: list[CortisolOverride] = field(default_factory=list)

    def __post_init__(self) -> None:
        for hormone in HORMONES:
            self.levels.setdefault(hormone, self.homeostasis[hormone])
        if self.updated_at_ms is None:
            self.updated_at_ms = self.now_ms()

    # --- local levels ----------------------------------------------------------------------
    def restore_levels(self, levels: dict[str, float], updated_at_ms: int) -> None:
        """Take over the local levels another store had at ``updated_at_ms`` (a memory restored
        from its export, node.memory.portable); levels are clamped to [0, 1], a time in the
        future counts as now, and the network's cortisol overrides stay as they are."""
        for hormone in HORMONES:
            if hormone in levels:
                self.levels[hormone] = _clamp01(float(levels[hormone]))
        self.updated_at_ms = min(int(updated_at_ms), self.now_ms())

    def _advance(self) -> int:
        current = self.now_ms()
        previous = self.updated_at_ms if self.updated_at_ms is not None else current
        elapsed = current - previous
        if elapsed > 0:
            for hormone in HORMONES:
                self.levels[hormone] = decay_toward(
                    self.levels[hormone],
                    self.homeostasis[hormone],
                    elapsed,
                    self.half_life_ms[hormone],
                )
            self.updated_at_ms = current
        self.overrides = [o for o in self.overrides if o.expires_at_ms > current]
        return current

    def local_state(self) -> HormonalState:
        """Levels from local events only (no network override)."""
        self._advance()
        return HormonalState(**{hormone: self.levels[hormone] for hormone in HORMONES})

    def spike(self, event: HormonalEvent | str) -> HormonalState:
        """Add the seed's spike for ``event`` to the decayed levels, clamped to [0, 1]."""
        spike = SPIKES[HormonalEvent(event)]
        self._advance()
        for hormone in HORMONES:
            self.levels[hormone] = _clamp01(self.levels[hormone] + getattr(spike, hormone))
        return self.state()

    def observe(self, text: str) -> list[HormonalEvent]:
        """Spike once for every event detected in ``text``; returns the events."""
        events = detect_events(text)
        for event in events:
            self.spike(event)
        return events

    # --- network weather -------------------------------------------------------------------
    def apply_network_cortisol_spike(self, level: float, expires_at_ms: int, reason: str,
                                     issued_at_ms: int = 0, sender: str = "") -> bool:
        """Record a verified weather alert until its signed absolute expiry.

        Seed: ``applyNetworkCortisolSpike(level, durationMs, reason)`` sets an override;
        ours takes the signed ``expires_at_ms`` instead of a duration from receipt.
        Returns False (and changes nothing) when the alert has already expired.
        Capping the duration and checking signatures is the network validator's job.
        """
        current = self._advance()
        if expires_at_ms <= current:
            return False
        self.overrides.append(CortisolOverride(_clamp01(level), int(expires_at_ms), reason,
                                               int(issued_at_ms), sender))
        return True

    def lift_network_cortisol(self, sender: str, issued_at_ms: int) -> int:
        """End early every alert ``sender`` issued at or before ``issued_at_ms`` (a verified
        lift); alerts of other keys, and ones issued after the lift, stay. Returns how many ended."""
        self._advance()
        kept = [o for o in self.overrides if not (o.sender == sender and o.issued_at_ms <= issued_at_ms)]
        ended = len(self.overrides) - len(kept)
        self.overrides = kept
        return ended

    def _strongest_override(self) -> CortisolOverride | None:
        self._advance()
        if not self.overrides:
            return None
        return max(self.overrides, key=lambda o: (o.level, o.expires_at_ms))

    def state(self) -> HormonalState:
        """Levels with ``cortisol = max(localCortisol, networkOverrideLevel)`` (seed)."""
        local = self.local_state()
        strongest = self._strongest_override()
        if strongest is None:
            return local
        return HormonalState(local.dopamine, max(local.cortisol, strongest.level), local.oxytocin)

    def weather(self) -> dict[str, Any]:
        """Network weather for the API/CLI: the strongest active alert, if any.

        ``expires_at_ms`` is when the last active alert ends (when ingestion resumes).
        """
        strongest = self._strongest_override()
        if strongest is None:
            return {
                "active": False,
                "level": 0.0,
                "expires_at_ms": None,
                "remaining_ms": 0,
                "reason": None,
            }
        expires_at = max(o.expires_at_ms for o in self.overrides)
        return {
            "active": True,
            "level": strongest.level,
            "expires_at_ms": expires_at,
            "remaining_ms": max(0, expires_at - self.now_ms()),
            "reason": strongest.reason,
        }

    # --- modulation ------------------------------------------------------------------------
    def consolidation_modulation(self) -> ConsolidationModulation:
        """How the current state changes a consolidation run.

        Seed: ``decayResistance = effectiveCortisol*0.3 + dopamine*0.2 + oxytocin*0.2``
        (max 0.5); ``mergeThreshold = 0.92 + effectiveCortisol*0.03`` (0.92 being the
        configured base); ``haltUntrustedIngestion`` while a network override is active.
        """
        state = self.state()
        resistance = state.cortisol * 0.3 + state.dopamine * 0.2 + state.oxytocin * 0.2
        return ConsolidationModulation(
            decay_resistance=min(0.5, resistance),
            merge_threshold=self.base_merge_threshold + state.cortisol * 0.03,
            halt_untrusted_ingestion=bool(self.overrides),
        )

    def retrieval_modulation(self) -> RetrievalModulation:
        """Seed: ``importanceBoost = 1 + dopamine*0.2``, ``recencyBias = 1 + cortisol*0.3``."""
        state = self.state()
        return RetrievalModulation(
            importance_boost=1 + state.dopamine * 0.2,
            recency_bias=1 + state.cortisol * 0.3,
        )

    # --- persistence -----------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        self._advance()
        return {
            "levels": dict(self.levels),
            "updatedAtMs": self.updated_at_ms,
            "overrides": [o.to_dict() for o in self.overrides],
        }

    @classmethod
    def from_dict(
        cls,
        data: dict[str, Any],
        now_ms: Callable[[], int] = now_ms,
        base_merge_threshold: float = DEFAULT_MERGE_THRESHOLD,
    ) -> HormonalStateManager:
        """Restore saved levels; time since ``updatedAtMs`` decays them on first read."""
        levels = {h: _clamp01(float(v)) for h, v in data.get("levels", {}).items() if h in HORMONES}
        updated = data.get("updatedAtMs")
        return cls(
            now_ms=now_ms,
            base_merge_threshold=base_merge_threshold,
            levels=levels,
            updated_at_ms=int(updated) if updated is not None else None,
            overrides=[CortisolOverride.from_dict(o) for o in data.get("overrides", [])],
        )
