import math
from dataclasses import replace

import pytest

from node.config import MemoryConfig
from node.crystals.model import Lifecycle, LifespanPolicy, SemanticType
from node.memory.dynamics.consolidation import (
    Transition,
    TransitionReason,
    plan_consolidation,
    purge_candidates,
)
from node.memory.dynamics.hormones import ConsolidationModulation
from tests.fixtures.consolidation_inputs import NOW, crystal

F0 = 1 - math.exp(-0.1)  # f(0) = 0.0951626
F19 = 1 - math.exp(-2.0)  # f(19) = 0.8646647
F29 = 1 - math.exp(-3.0)  # f(29) = 0.9502129


def transitions_of(plan) -> dict[str, tuple[Lifecycle, Lifecycle, TransitionReason]]:
    return {t.crystal_id: (t.from_lifecycle, t.to_lifecycle, t.reason) for t in plan.transitions}


def test_scores_are_recomputed_by_hand() -> None:
    plan = plan_consolidation(
        [
            crystal("fresh"),  # Δt 0: I = f(0) = 0.095163
            crystal("old", age_ms=2_000_000_000),  # I = 0.095163·e^(−5e-10·2e9 = −1) = 0.035008
            crystal("never-accessed", age_ms=2_000_000_000, accessed=False),  # from created_at
        ],
        NOW,
    )
    scores = {u.crystal_id: u.importance for u in plan.score_updates}
    assert scores["fresh"] == pytest.approx(0.0951626, abs=1e-7)
    assert scores["old"] == pytest.approx(0.0350083, abs=1e-7)
    assert scores["never-accessed"] == pytest.approx(0.0350083, abs=1e-7)
    assert plan.transitions == [] and plan.merges == []


def test_unchanged_scores_are_not_rewritten() -> None:
    plan = plan_consolidation([crystal("same", importance=F0)], NOW)
    assert plan.score_updates == []


def test_below_forget_threshold_expires_except_immune() -> None:
    old = 4_000_000_000  # I = 0.095163·e^(−2) = 0.012879 < 0.02
    plan = plan_consolidation(
        [
            crystal("fact", age_ms=old),
            crystal("activated", age_ms=old, lifecycle=Lifecycle.ACTIVATED),
            crystal("skill", age_ms=old, semantic_type=SemanticType.SKILL),
            crystal("frozen", age_ms=old, lifecycle=Lifecycle.FROZEN),
            crystal("permanent", age_ms=old, policy=LifespanPolicy.PERMANENT),
            crystal("ttl-running", age_ms=old, policy=LifespanPolicy.TTL, ttl_ms=10**12),
            crystal("archived", age_ms=old, lifecycle=Lifecycle.ARCHIVED),
        ],
        NOW,
    )
    assert transitions_of(plan) == {
        "fact": (Lifecycle.GENERATED, Lifecycle.EXPIRED, TransitionReason.BELOW_FORGET_THRESHOLD),
        "activated": (
            Lifecycle.ACTIVATED,
            Lifecycle.EXPIRED,
            TransitionReason.BELOW_FORGET_THRESHOLD,
        ),
    }
    assert {u.crystal_id for u in plan.score_updates} >= {"skill", "frozen", "permanent"}


def test_ttl_elapsed_expires_even_when_important() -> None:
    plan = plan_consolidation(
        [crystal("ttl", access_count=50, age_ms=1_000, policy=LifespanPolicy.TTL, ttl_ms=1_000)],
        NOW,
    )
    assert plan.transitions == [
        Transition("ttl", Lifecycle.GENERATED, Lifecycle.EXPIRED, TransitionReason.TTL_ELAPSED)
    ]


def test_hormonal_decay_resistance_keeps_a_crystal() -> None:
    old = crystal("old", age_ms=4_000_000_000)
    # λ_eff = 5e-10·(1 − 0.5) = 2.5e-10 → I = 0.095163·e^(−1) = 0.035008 > 0.02
    calm = ConsolidationModulation(0.5, 0.92, False)
    plan = plan_consolidation([old], NOW, modulation=calm)
    assert plan.transitions == []
    assert plan.score_updates[0].importance == pytest.approx(0.0350083, abs=1e-7)


def test_promotion_and_merge_by_hand() -> None:
    # winner: I = f(29) = 0.950213; loser: I = f(19) = 0.864665 (both > 0.7)
    # cos([1, 0], [0.96, 0.28]) = 0.96 / (1 · √(0.9216 + 0.0784)) = 0.96 ≥ 0.92
    plan = plan_consolidation(
        [
            crystal("b-loser", access_count=19, embedding=[0.96, 0.28]),
            crystal("a-winner", access_count=29, embedding=[1.0, 0.0]),
            crystal("c-orthogonal", access_count=19, embedding=[0.0, 1.0]),  # cos 0 and 0.28
            crystal("d-elsewhere", access_count=19, embedding=[1.0, 0.0], path="other.md"),
        ],
        NOW,
    )
    [merge] = plan.merges
    assert (merge.winner_id, merge.loser_id) == ("a-winner", "b-loser")
    assert merge.similarity == pytest.approx(0.96)
    assert transitions_of(plan) == {
        "a-winner": (Lifecycle.GENERATED, Lifecycle.CONSOLIDATED, TransitionReason.MERGED_WINNER),
        "b-loser": (Lifecycle.GENERATED, Lifecycle.ARCHIVED, TransitionReason.MERGED_LOSER),
        "c-orthogonal": (Lifecycle.GENERATED, Lifecycle.ACTIVATED, TransitionReason.PROMOTED),
        "d-elsewhere": (Lifecycle.GENERATED, Lifecycle.ACTIVATED, TransitionReason.PROMOTED),
    }


def test_each_crystal_merges_at_most_once_and_order_is_deterministic() -> None:
    inputs = [crystal(name, access_count=19, embedding=[1.0, 1.0]) for name in "cab"]
    plan = plan_consolidation(inputs, NOW)
    # equal importance → smaller id wins; pairs by (−similarity, index): (a, b) first
    assert [(m.winner_id, m.loser_id) for m in plan.merges] == [("a", "b")]
    assert plan.merges[0].similarity == pytest.approx(1.0)
    assert plan == plan_consolidation(list(reversed(inputs)), NOW)


def test_stress_tightens_merge_threshold() -> None:
    # cos = 0.93: merges at 0.92, not at 0.92 + 0.9·0.03 = 0.947
    pair = [
        crystal("a", access_count=19, embedding=[1.0, 0.0]),
        crystal("b", access_count=19, embedding=[0.93, math.sqrt(1 - 0.93**2)]),
    ]
    assert len(plan_consolidation(pair, NOW).merges) == 1
    stressed = ConsolidationModulation(0.0, 0.947, True)
    assert plan_consolidation(pair, NOW, modulation=stressed).merges == []
    strict = MemoryConfig(merge_overlap_threshold=0.95)
    assert plan_consolidation(pair, NOW, config=strict).merges == []


def test_skills_frozen_and_unembedded_never_merge() -> None:
    plan = plan_consolidation(
        [
            crystal("skill-a", access_count=19, semantic_type=SemanticType.SKILL, embedding=[1, 0]),
            crystal("skill-b", access_count=19, semantic_type=SemanticType.SKILL, embedding=[1, 0]),
            crystal("frozen", access_count=19, lifecycle=Lifecycle.FROZEN, embedding=[1, 0]),
            crystal("no-vector", access_count=19),
            crystal("fact", access_count=19, embedding=[1, 0]),
        ],
        NOW,
    )
    assert plan.merges == []


def test_consolidated_winner_keeps_its_lifecycle() -> None:
    plan = plan_consolidation(
        [
            crystal("a", access_count=29, lifecycle=Lifecycle.CONSOLIDATED, embedding=[1, 0]),
            crystal("b", access_count=19, lifecycle=Lifecycle.ACTIVATED, embedding=[1, 0]),
        ],
        NOW,
    )
    assert [m.winner_id for m in plan.merges] == ["a"]
    assert plan.transitions == [
        Transition("b", Lifecycle.ACTIVATED, Lifecycle.ARCHIVED, TransitionReason.MERGED_LOSER)
    ]


def test_purge_candidates() -> None:
    rows = [
        ("e", Lifecycle.EXPIRED),
        ("a", "archived"),
        ("g", Lifecycle.GENERATED),
        ("f", Lifecycle.FROZEN),
        ("c", Lifecycle.CONSOLIDATED),
    ]
    assert purge_candidates(rows) == ["a", "e"]


def test_namespaces_never_merge_across() -> None:
    import dataclasses

    same = [crystal("a", access_count=19, embedding=[1.0, 0.0]),
            crystal("b", access_count=19, embedding=[1.0, 0.0])]
    assert len(plan_consolidation(same, NOW).merges) == 1
    apart = [same[0], dataclasses.replace(same[1], namespace="user:jonas")]
    assert plan_consolidation(apart, NOW).merges == []


def test_an_explicit_importance_is_a_floor_and_never_decay_expires() -> None:
    ninety_days = 90 * 86_400_000  # I = 0.095163·e^(−5e-10·7.776e9) = 0.001949 < 0.02
    said = replace(crystal("said", age_ms=ninety_days, importance=0.8), importance_floor=0.8)
    zero = replace(crystal("zero", age_ms=ninety_days, importance=0.0), importance_floor=0.0)
    plan = plan_consolidation([said, zero, crystal("gathered", age_ms=ninety_days)], NOW)
    assert {k: v[1] for k, v in transitions_of(plan).items()} == {
        "gathered": Lifecycle.EXPIRED, "said": Lifecycle.ACTIVATED}  # 0.8 > 0.7: promoted, never expired
    scores = {u.crystal_id: u.importance for u in plan.score_updates}
    assert "said" not in scores  # 0.8 is its floor: unchanged, not rewritten
    assert scores["zero"] == pytest.approx(0.095163 * math.exp(-5e-10 * ninety_days), rel=1e-4)
    # Recently retrieved, the decayed score above the floor wins.
    busy = replace(crystal("busy", access_count=50, importance=0.1), importance_floor=0.1)
    [update] = plan_consolidation([busy], NOW).score_updates
    assert update.importance == pytest.approx(1 - math.exp(-0.1 * 51))


def test_explicit_and_pinned_crystals_are_never_merged_away() -> None:
    same = [1.0, 0.0, 0.0]
    pairs = [
        (replace(crystal("a-note", importance=0.9), importance_floor=0.9), crystal("b-gathered", embedding=same)),
        (crystal("a-pinned", policy=LifespanPolicy.PERMANENT), crystal("b-gathered")),
    ]
    for first, second in pairs:
        first = replace(first, embedding=same, access_count=60)
        second = replace(second, embedding=same, access_count=60)
        assert plan_consolidation([first, second], NOW).merges == []
    ordinary = [replace(crystal(name), embedding=same, access_count=60) for name in ("a", "b")]
    assert len(plan_consolidation(ordinary, NOW).merges) == 1  # the same pair, ordinary, merges
