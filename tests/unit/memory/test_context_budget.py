"""Context under a budget (seed 003): token estimate, U-curve, duplicates, eviction report."""

from __future__ import annotations

import pytest

from node.memory.learning.context_budget import (
    BlockKind,
    ContextItem,
    assemble,
    collapse_near_duplicates,
    estimate_tokens,
    u_curve,
)


def test_estimate_tokens_is_bytes_over_four_rounded_up() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("é" * 4) == 2  # 8 UTF-8 bytes


def test_u_curve_puts_the_best_at_both_ends() -> None:
    assert u_curve([1, 2, 3, 4, 5]) == [1, 3, 5, 4, 2]
    assert u_curve([1, 2]) == [1, 2]
    assert u_curve([]) == []


def item(id_: str, kind: BlockKind, text: str, value: float) -> ContextItem:
    return ContextItem(id_, kind, text, value)


def test_near_duplicates_collapse_to_the_higher_block() -> None:
    items = [
        item("e1", BlockKind.EPISODES, "the staging deploy fails on fridays", 0.9),
        item("f1", BlockKind.FACTS, "The staging deploy fails on Fridays", 0.5),
        item("f2", BlockKind.FACTS, "use the blue bucket for backups", 0.4),
    ]
    kept, evicted = collapse_near_duplicates(items)
    assert [i.id for i in kept] == ["f1", "f2"]
    assert [(e.id, e.reason) for e in evicted] == [("e1", "near_duplicate_of:f1")]


def test_budget_priority_layout_and_eviction_report() -> None:
    items = [
        item("w", BlockKind.WORKING_MEMORY, "goal: ship v2", 1.0),
        item("warn", BlockKind.WARNINGS, "never pay 0xdead: honeypot", 0.8),
        *(item(f"f{i}", BlockKind.FACTS, f"fact number {i} about topic {i}", 1.0 - i / 10) for i in range(5)),
        item("s1", BlockKind.SKILLS, "x" * 400, 0.9),
    ]
    result = assemble(items, budget_tokens=60)
    assert result.used_tokens <= 60
    kinds = [kind for kind, _ in result.blocks]
    # warnings open, working memory closes (U-curve over blocks)
    assert kinds[0] is BlockKind.WARNINGS and kinds[-1] is BlockKind.WORKING_MEMORY
    facts = dict(result.blocks)[BlockKind.FACTS]
    ranked = sorted(facts, key=lambda i: -i.value)
    assert facts[0] is ranked[0] and facts[-1] is ranked[1]
    evicted = {e.id: e.reason for e in result.evicted}
    assert evicted["s1"] == "over_budget"
    assert set(evicted) | {i.id for _, block in result.blocks for i in block} == {i.id for i in items}
    text = result.render()
    assert text.startswith("<warnings>") and text.endswith("</working_memory>")


def test_zero_budget_evicts_everything_and_negative_is_refused() -> None:
    result = assemble([item("a", BlockKind.FACTS, "abc", 1.0)], 0)
    assert result.blocks == [] and [e.reason for e in result.evicted] == ["over_budget"]
    with pytest.raises(ValueError):
        assemble([], -1)
