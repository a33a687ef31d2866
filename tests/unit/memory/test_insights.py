"""Dream insight rules (seeds 001 / 003) against values worked out by hand."""

from __future__ import annotations

import pytest

from node.crystals import epistemic_layer
from node.memory.learning import insights as ins
from node.memory.learning.insights import InsightKind, SourceText

DAY_MS = ins.DAY_MS


@pytest.mark.parametrize(("sentence", "kind"), [
    ("Should we shard the cache by tenant?", InsightKind.QUESTION),
    ("TODO find the flaky arm64 runner", InsightKind.QUESTION),
    ("We decided to keep the ledger in Postgres", InsightKind.DECISION),
    ("Let's go with the blue theme for the dashboard", InsightKind.DECISION),
    ("I prefer tabs over spaces", InsightKind.PREFERENCE),
    ("Never deploy on a Friday afternoon", InsightKind.PREFERENCE),
    ("Jonas prefers tabs over spaces", InsightKind.PREFERENCE),
    ("My name is Priya Raman", InsightKind.FACT),
    ("The API migration deadline is March 20", InsightKind.FACT),
    ("the coffee machine was cleaned today", None),
])
def test_each_rule_finds_its_kind(sentence: str, kind: InsightKind | None) -> None:
    assert ins.classify(sentence) == kind


def test_extract_merges_restatements_and_keeps_every_source() -> None:
    found = ins.extract([
        SourceText("a", "I prefer tabs over spaces. The weather is fine."),
        SourceText("b", "Again: I prefer tabs over spaces"),  # Jaccard 4/5 = 0.8: the same one
        SourceText("c", "I prefer spaces over tabs, honestly, in all new code"),  # 4/8: another
        SourceText("d", "I prefer to check the logs first.", speaker="assistant"),  # not the user
        SourceText("e", "(1 May 2023) Priya: I prefer dark roast coffee.", speaker="Priya"),
        SourceText("f", "(2026-03-12 14:30) [subagent a1] user: We decided to ship on Monday.", speaker="user"),
        SourceText("g", "(2026-03-12 14:31) summary: The user prefers small commits.", speaker="summary"),
    ])
    assert [(c.kind, c.statement, c.source_ids) for c in found] == [
        (InsightKind.PREFERENCE, "I prefer tabs over spaces.", ["a", "b"]),
        (InsightKind.PREFERENCE, "I prefer spaces over tabs, honestly, in all new code", ["c"]),
        (InsightKind.PREFERENCE, "I prefer dark roast coffee.", ["e"]),
        (InsightKind.DECISION, "We decided to ship on Monday.", ["f"]),
    ]
    assert found[2].text() == "Preference (Priya): I prefer dark roast coffee."


def test_sentences_are_bounded_and_a_source_gives_at_most_five() -> None:
    assert ins.sentences("short. " + "x" * 301 + ". I prefer tea to coffee always.") == [
        "I prefer tea to coffee always."]
    words = ["apples", "boats", "cedar", "dunes", "elms", "ferns", "geese", "hills", "irises"]
    many = ". ".join(f"I prefer {word} in the garden" for word in words)
    assert len(ins.extract([SourceText("s", many)])) == ins.MAX_PER_SOURCE


def test_the_schedule_confirms_within_seven_days_and_renews_after() -> None:
    t0 = 1_000 * DAY_MS
    # within the window: confirmed, TTL lifted; 0.3 + 0.2·0.7 = 0.44
    seen = ins.sight(0.3, t0, False, t0 + 7 * DAY_MS)
    assert (seen.confidence, seen.confirmed, seen.expires_at_ms) == (pytest.approx(0.44), True, None)
    # after it: not confirmed, the trial renewed 14 days from this sighting; 0.44 → 0.552
    late = ins.sight(0.44, t0, False, t0 + 7 * DAY_MS + 1)
    assert late.confidence == pytest.approx(0.552) and not late.confirmed
    assert late.expires_at_ms == t0 + 21 * DAY_MS + 1
    # once confirmed, a sighting only raises confidence
    assert ins.sight(0.552, t0, True, t0 + 90 * DAY_MS).confirmed


@pytest.mark.parametrize(("type_word", "layer", "semantic_type", "directive"), [
    ("preference", "world_fact", "preference", False),
    ("decision", "world_fact", "fact", False),
    ("fact", "experience", "episode", False),
    ("fact", "mental_model", "insight", False),
    ("preference", "directive", "insight", True),
])
def test_a_classification_keeps_type_and_layer_consistent(type_word: str, layer: str, semantic_type: str,
                                                           directive: bool) -> None:
    found = ins.classification(type_word, layer)
    assert found is not None and (found.semantic_type, found.directive) == (semantic_type, directive)
    if layer != "directive":
        assert epistemic_layer(found.semantic_type).value == layer


@pytest.mark.parametrize(("type_word", "layer"), [("gossip", "world_fact"), ("fact", "truth"), (None, 3),
                                                  (["fact"], "world_fact")])
def test_an_unknown_classification_is_none(type_word: object, layer: object) -> None:
    assert ins.classification(type_word, layer) is None
