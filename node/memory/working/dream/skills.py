"""Emerging skills: repeated task patterns before they become skills (seed 001).

Detection is pure. A crystal that the agent keeps coming back to (retrieved by
search, executed as a task pattern) is a task it repeats; once it recurs often
enough it is listed in MEMORY.md's Emerging Skills with a confidence, and
``crystalmesh skill crystallize`` turns it into a skill crystal.
"""

from __future__ import annotations

from collections.abc import Sequence

from node.memory.working.dream.inputs import CrystalView, EmergingSkill
from node.memory.working.dream.pointers import topic_of

MIN_OCCURRENCES = 3
MAX_EMERGING = 6
# Types that describe something done (not who the user is, nor what they prefer).
TASK_TYPES = frozenset({"task_pattern", "general", "episode", "fact", "insight", "goal"})
LIVE = frozenset({"generated", "activated", "consolidated"})


def occurrences(crystal: CrystalView) -> int:
    """How often the task came up: every retrieval and every recorded execution."""
    return crystal.access_count + crystal.executions


def confidence(occurrence_count: int, executions: int, successes: int) -> float:
    """Confidence that a repeated pattern is a skill worth crystallising.

    Ours (the seed shows "Confidence: 85% | Occurrences: 7" without a formula):
    ``confidence = n / (n + 2) × q`` with ``n`` the occurrences and ``q`` the
    success rate of recorded executions (1 when there are none yet). Evidence
    saturates: 3 occurrences → 0.6, 8 → 0.8; failures pull it down.
    """
    if occurrence_count <= 0:
        return 0.0
    quality = successes / executions if executions else 1.0
    return occurrence_count / (occurrence_count + 2) * quality


def detect_emerging(crystals: Sequence[CrystalView], limit: int = MAX_EMERGING) -> list[EmergingSkill]:
    """Patterns with at least ``MIN_OCCURRENCES``, best first (confidence, occurrences, id)."""
    found = []
    for crystal in crystals:
        if crystal.semantic_type not in TASK_TYPES or crystal.lifecycle not in LIVE:
            continue
        count = occurrences(crystal)
        if count < MIN_OCCURRENCES:
            continue
        found.append(EmergingSkill(crystal.id, topic_of(crystal.text),
                                   confidence(count, crystal.executions, crystal.successes), count))
    found.sort(key=lambda s: (-s.confidence, -s.occurrences, s.crystal_id))
    return found[:limit]


def emerging_line(skill: EmergingSkill) -> str:
    """The seed's line, plus the id ``skill crystallize`` takes."""
    return (f"- {skill.topic} → Confidence: {round(skill.confidence * 100)}% | "
            f"Occurrences: {skill.occurrences} | id: {skill.crystal_id[:8]}")
