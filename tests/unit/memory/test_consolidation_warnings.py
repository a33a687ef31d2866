"""Seed 000 consolidation meets seed 003/004: warnings are never pruned; the energy policy does not forget by importance."""

from __future__ import annotations

from node.config import MemoryConfig
from node.crystals.model import Lifecycle, SemanticType
from node.memory.dynamics.consolidation import TransitionReason, plan_consolidation
from tests.fixtures.consolidation_inputs import NOW, crystal

YEAR_MS = 365 * 24 * 3600 * 1000
# a strong decay so that a year-old, never-accessed crystal falls below the forget threshold
FAST = MemoryConfig(decay_rate=1e-9)


def test_a_warning_is_never_forgotten_but_a_fact_is() -> None:
    plan = plan_consolidation(
        [
            crystal("fact", age_ms=YEAR_MS, semantic_type=SemanticType.FACT),
            crystal("warn", age_ms=YEAR_MS, semantic_type=SemanticType.WARNING),
        ],
        NOW,
        FAST,
    )
    moved = {t.crystal_id: t.reason for t in plan.transitions}
    assert moved == {"fact": TransitionReason.BELOW_FORGET_THRESHOLD}


def test_a_warning_is_never_merged_away() -> None:
    same = [1.0, 0.0, 0.0]
    plan = plan_consolidation(
        [
            crystal("w1", access_count=30, semantic_type=SemanticType.WARNING, embedding=same),
            crystal("w2", access_count=30, semantic_type=SemanticType.WARNING, embedding=same),
        ],
        NOW,
    )
    assert plan.merges == []
    assert all(t.to_lifecycle is not Lifecycle.ARCHIVED for t in plan.transitions)


def test_energy_policy_skips_the_importance_forget_threshold() -> None:
    old = [crystal("fact", age_ms=YEAR_MS)]
    assert plan_consolidation(old, NOW, FAST).transitions
    assert plan_consolidation(old, NOW, FAST, forget=False).transitions == []


# --- directives (issue 28): what the user said keeps a floor and is never forgotten or merged ---


def test_a_directive_keeps_its_importance_floor_and_is_never_forgotten() -> None:
    # A forget threshold above the floor: only decay-immunity keeps the directive.
    strict = MemoryConfig(decay_rate=1e-9, forget_threshold=0.6)
    plan = plan_consolidation(
        [
            crystal("note", age_ms=YEAR_MS, semantic_type=SemanticType.GENERAL, importance=0.75),
            crystal("said", age_ms=YEAR_MS, semantic_type=SemanticType.DIRECTIVE, importance=0.75),
        ],
        NOW,
        strict,
    )
    assert {t.crystal_id: t.reason for t in plan.transitions} == {
        "note": TransitionReason.BELOW_FORGET_THRESHOLD}
    scores = {u.crystal_id: u.importance for u in plan.score_updates}
    assert scores["said"] == 0.5 and scores["note"] < 1e-6


def test_a_directive_is_never_merged_into_a_close_note() -> None:
    same = [1.0, 0.0, 0.0]
    pair = [crystal("a", access_count=30, semantic_type=SemanticType.GENERAL, embedding=same),
            crystal("b", access_count=30, semantic_type=SemanticType.GENERAL, embedding=same)]
    assert len(plan_consolidation(pair, NOW).merges) == 1  # two plain notes this close do merge
    pair[1] = crystal("b", access_count=30, semantic_type=SemanticType.DIRECTIVE, embedding=same)
    plan = plan_consolidation(pair, NOW)
    assert plan.merges == []
    assert all(t.to_lifecycle is not Lifecycle.ARCHIVED for t in plan.transitions)
