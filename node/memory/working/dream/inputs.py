"""What a dream synthesises from: plain snapshots, no store, no I/O.

``New_State = f(Old_State + Scratch_Delta + New_Crystals + Dream_Insights)`` (seed 001):
``SynthesisInput`` carries each term, plus the hormonal state that weights the
sections, the market economics for The Niche, and the detected emerging skills.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from node.memory.learning import Candidate, Classification
from node.memory.working.scratch import ScratchNote

SearchFn = Callable[[str, int], list[str]]
"""``search(query, k)`` → ids of the crystals ``Memory.search`` returns, best first."""

# "Elevated" in the seed's auto-scratch rule, and the level a section reacts to.
SPIKE_LEVEL = 0.7


@dataclass(frozen=True)
class CrystalView:
    """The parts of a crystal a synthesiser may use."""

    id: str
    text: str
    semantic_type: str = "general"
    lifecycle: str = "generated"
    importance: float = 1.0
    access_count: int = 0
    created_at_ms: int = 0
    last_accessed_at_ms: int | None = None
    dopamine: float = 0.0
    cortisol: float = 0.0
    oxytocin: float = 0.0
    executions: int = 0
    successes: int = 0
    origin: str = "user_input"
    skill_category: str | None = None
    path: str | None = None

    @property
    def success_rate(self) -> float:
        return self.successes / self.executions if self.executions else 0.0


@dataclass(frozen=True)
class HormoneLevels:
    dopamine: float = 0.0
    cortisol: float = 0.0
    oxytocin: float = 0.0

    def spikes(self) -> list[str]:
        """Hormones above the seed's 0.7, in a fixed order."""
        return [name for name in ("dopamine", "cortisol", "oxytocin") if getattr(self, name) > SPIKE_LEVEL]


@dataclass(frozen=True)
class TopSkill:
    name: str
    sales: int
    unique_buyers: int
    earned_micro_usdc: int


@dataclass(frozen=True)
class NicheData:
    """The Niche's inputs (seed: MarketplaceEconomics), money in integer micro-USDC."""

    earned_micro_usdc: int = 0
    spent_micro_usdc: int = 0
    listed_skills: int = 0
    unique_buyers: int = 0
    top_skills: tuple[TopSkill, ...] = ()
    trend_7d: tuple[tuple[str, int, int], ...] = ()  # (day, earned, spent)
    reputation: float | None = None

    @classmethod
    def from_market(cls, stats: dict[str, Any], listed_skills: int, unique_buyers: int,
                    reputation: float | None = None) -> NicheData:
        """From ``MarketLedger.stats()`` plus the counts it does not hold."""
        top = tuple(
            TopSkill(str(row.get("name") or str(row.get("stable_skill_id", ""))[:12]),
                     int(row.get("sales") or 0), int(row.get("unique_buyers") or 0),
                     int(row.get("earned") or 0))
            for row in stats.get("top_skills", [])
        )
        trend = tuple(
            (str(day["day"]), int(day.get("earned_micro_usdc", 0)), int(day.get("spent_micro_usdc", 0)))
            for day in stats.get("trend_7d", [])
        )
        return cls(int(stats.get("earned_micro_usdc", 0)), int(stats.get("spent_micro_usdc", 0)),
                   listed_skills, unique_buyers, top, trend, reputation)


@dataclass(frozen=True)
class EmergingSkill:
    crystal_id: str
    topic: str
    confidence: float
    occurrences: int


@dataclass
class SynthesisInput:
    old_state: str
    notes: Sequence[ScratchNote]
    crystals: Sequence[CrystalView]
    new_crystal_ids: frozenset[str]
    hormones: HormoneLevels
    now_ms: int
    last_dream_ms: int | None = None
    niche: NicheData | None = None
    emerging: Sequence[EmergingSkill] = ()
    note_crystal_ids: dict[str, str] = field(default_factory=dict)  # note id -> crystal id

    @property
    def insights(self) -> list[CrystalView]:
        """Dream insights: crystals the dream engine or inference produced."""
        return [c for c in self.crystals if c.semantic_type == "insight" or c.origin == "dream"]


@dataclass
class Pointer:
    topic: str
    keywords: str
    source_ids: tuple[str, ...]

    def line(self) -> str:
        return f"- Past: {self.topic} → search: `{self.keywords}`"


@dataclass
class Synthesis:
    text: str
    synthesiser: str
    pointers: list[Pointer] = field(default_factory=list)
    fallback_reason: str | None = None


@dataclass
class Classified:
    """A synthesiser's reading of a dream's insight candidates (seed 000's type and layer)."""

    by: str  # "rules" (nothing beyond the extraction rules) or the synthesiser's name
    classes: dict[int, Classification] = field(default_factory=dict)  # candidate index -> class
    fallback_reason: str | None = None


class Synthesiser(Protocol):
    name: str

    def synthesise(self, data: SynthesisInput, search: SearchFn) -> Synthesis: ...

    def classify(self, candidates: Sequence[Candidate]) -> Classified: ...


def describe_mood(levels: HormoneLevels) -> str:
    """The header's mood line: words for elevated hormones, then the levels.

    Thresholds are ours (the seed shows only the words): 0.5 and up is
    "elevated", the seed's auto-scratch level 0.7 and up "high".
    """
    words = []
    for name, elevated, high in (("dopamine", "motivated", "energised by a breakthrough"),
                                 ("cortisol", "cautious", "stressed"),
                                 ("oxytocin", "socially engaged", "closely bonded")):
        level = getattr(levels, name)
        if level > SPIKE_LEVEL:
            words.append(high)
        elif level >= 0.5:
            words.append(elevated)
    text = ", ".join(words) or "calm"
    return (f"{text} (dopamine {levels.dopamine:.2f}, cortisol {levels.cortisol:.2f}, "
            f"oxytocin {levels.oxytocin:.2f})")


def section_weight(level: float) -> float:
    """How much of a hormone-weighted section is refreshed from new material this dream.

    Ours (the seed says only "updated aggressively" when the hormone is high):
    ``weight = 0.3 + 0.7 × level`` — a calm section keeps most of its old lines,
    a spiking one is mostly rewritten from what just happened.
    """
    return 0.3 + 0.7 * min(1.0, max(0.0, level))
