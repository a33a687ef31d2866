"""Seed 003 on a real data dir: episodes fold into facts, confidence decays and is rated, warnings stay."""

from __future__ import annotations

import pytest

from node.config import NodeConfig
from node.crystals.model import Lifecycle, SemanticType
from node.crystals.store import CrystalNotFound
from node.memory.facade import Memory
from node.memory.learning.knowledge import Provenance
from node.memory.learning.learning import FeedbackError
from node.memory.search.pipeline import SearchRequest

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
T0 = 1_700_000_000_000
DEPLOY = "the staging deploy failed on friday because the users table migration held a lock, run {i}"
CAT = "the cat slept on the warm windowsill all afternoon"


def episode(memory: Memory, text: str, at_ms: int) -> str:
    return memory.add(text, semantic_type=SemanticType.EPISODE, created_at_ms=at_ms).id


def facts(memory: Memory) -> list[str]:
    return [c.id for c in memory.store.list_crystals(limit=100) if c.semantic_type is SemanticType.FACT]


def test_three_related_episodes_fold_into_a_fact_and_a_fourth_reinforces_it(memory: Memory) -> None:
    episodes = [episode(memory, DEPLOY.format(i=i), T0 + i) for i in range(3)]
    episode(memory, CAT, T0)
    memory.consolidate(now=T0 + HOUR_MS)
    [fact_id] = facts(memory)
    fact = memory.store.get(fact_id)
    assert fact.text.startswith("Learned from experience: the staging deploy failed")
    row = memory.learning.knowledge.get(fact_id)
    assert row is not None and row.provenance is Provenance.CONSOLIDATED
    assert (row.confidence, row.episode_count) == (0.7, 3)
    assert sorted(memory.learning.knowledge.sources(fact_id)) == sorted(episodes)
    detail = memory.learning.describe(fact, T0 + HOUR_MS)
    assert detail["confidence"] == 0.7 and sorted(detail["source_episodes"]) == sorted(episodes)
    assert [a["action"] for a in memory.store.audit_log(fact_id)].count("fact_born") == 1

    fourth = episode(memory, DEPLOY.format(i=9), T0 + 2 * HOUR_MS)
    memory.consolidate(now=T0 + 3 * HOUR_MS)
    assert facts(memory) == [fact_id]  # reinforced, not duplicated
    row = memory.learning.knowledge.get(fact_id)
    assert row is not None and row.episode_count == 4 and fourth in memory.learning.knowledge.sources(fact_id)
    assert row.confidence > 0.7 * 0.99


def test_fewer_than_three_or_other_namespaces_make_no_fact(memory: Memory) -> None:
    for i in range(2):
        episode(memory, DEPLOY.format(i=i), T0 + i)
    memory.add(DEPLOY.format(i=7), semantic_type=SemanticType.EPISODE, namespace="user:bob", created_at_ms=T0)
    memory.consolidate(now=T0 + HOUR_MS)
    assert facts(memory) == []
    for i in range(2):  # bob's own three fold into a fact of his namespace
        memory.add(DEPLOY.format(i=8 + i), semantic_type=SemanticType.EPISODE, namespace="user:bob",
                   created_at_ms=T0 + 2 * HOUR_MS)
    memory.consolidate(now=T0 + 3 * HOUR_MS)
    [fact_id] = facts(memory)
    assert memory.store.get(fact_id).namespace == "user:bob"


def test_facts_are_evicted_in_proportion_to_their_evidence(memory: Memory) -> None:
    for i in range(3):
        episode(memory, DEPLOY.format(i=i), T0 + i)
    for i in range(20):
        episode(memory, f"nightly backup to the blue bucket finished slowly, night {i}", T0 + i)
    memory.consolidate(now=T0)
    rows = memory.learning.knowledge.rows()
    small = next(i for i, r in rows.items() if r.episode_count == 3)
    large = next(i for i, r in rows.items() if r.episode_count == 20)
    # 0.7·e^(-t/(7 d · ln 3)) < 0.2 after 9.63 days; with ln 20 after 26.3 days
    memory.consolidate(now=T0 + 9 * DAY_MS)
    assert memory.store.get(small).lifecycle is not Lifecycle.EXPIRED
    memory.consolidate(now=T0 + 10 * DAY_MS)
    assert memory.store.get(small).lifecycle is Lifecycle.EXPIRED
    assert memory.store.get(large).lifecycle is not Lifecycle.EXPIRED
    reasons = [a["detail"].get("reason") for a in memory.store.audit_log(small) if a["action"] == "transition"]
    assert reasons == ["below_min_confidence"]
    memory.consolidate(now=T0 + 27 * DAY_MS)
    assert memory.store.get(large).lifecycle is Lifecycle.EXPIRED


def test_feedback_moves_confidence_and_refuses_bad_input(memory: Memory) -> None:
    crystal = memory.add("the build server is build-07 in rack 3")
    useful = memory.learning.feedback(crystal.id, "useful", at_ms=T0)
    assert useful["confidence_before"] == 1.0 and useful["confidence"] == 1.0
    wrong = memory.learning.feedback(crystal.id, "wrong", at_ms=T0)
    assert wrong["confidence"] == pytest.approx(0.5)
    again = memory.learning.feedback(crystal.id, "wrong", at_ms=T0)
    assert again["confidence"] == pytest.approx(0.25)
    assert memory.store.get(crystal.id).access_count == 1  # "useful" counted as an access
    before = memory.learning.knowledge.rows()
    with pytest.raises(CrystalNotFound):
        memory.learning.feedback("no-such-id", "useful")
    with pytest.raises(FeedbackError):
        memory.learning.feedback(crystal.id, "meh")
    assert memory.learning.knowledge.rows() == before


def test_a_warning_survives_a_year_of_consolidation_and_keeps_its_floor(node_config: NodeConfig) -> None:
    node_config.memory.decay_rate = 1e-9  # a harsh importance decay
    memory = Memory(node_config)
    try:
        warning = memory.add("never pay invoices from wallet 0xdead: it is a honeypot",
                             semantic_type=SemanticType.WARNING, created_at_ms=T0)
        other = memory.add("the coffee machine is on the second floor", created_at_ms=T0)
        memory.learning.feedback(warning.id, "wrong", at_ms=T0)
        memory.learning.feedback(warning.id, "wrong", at_ms=T0)
        memory.consolidate(now=T0 + 365 * DAY_MS, purge=True)
        kept = memory.store.get(warning.id)
        assert kept.lifecycle is not Lifecycle.EXPIRED
        with pytest.raises(CrystalNotFound):
            memory.store.get(other.id)
        assert memory.learning.confidences([kept], T0 + 365 * DAY_MS)[warning.id] == 0.3
    finally:
        memory.close()


def test_relevant_warnings_are_surfaced_first(memory: Memory) -> None:
    for i in range(5):
        memory.add(f"paying invoices from wallet 0xbeef number {i} went fine")
    warning = memory.add("warning: invoices from wallet 0xdead are a honeypot scam",
                         semantic_type=SemanticType.WARNING)
    coffee = memory.add("the coffee machine is on the second floor")
    hits = memory.search(SearchRequest("paying invoices from a wallet", k=3))
    assert hits[0].crystal.id == warning.id
    unrelated = memory.search(SearchRequest("where is the coffee machine", k=3))
    assert unrelated[0].crystal.id == coffee.id


def test_confidence_breaks_near_ties_in_search(memory: Memory) -> None:
    first = memory.add("the release checklist lives in the ops wiki page one")
    second = memory.add("the release checklist lives in the ops wiki page two")
    order = [h.crystal.id for h in memory.search(SearchRequest("release checklist ops wiki", k=2))]
    loser = order[0]
    memory.learning.feedback(loser, "wrong")
    reordered = [h.crystal.id for h in memory.search(SearchRequest("release checklist ops wiki", k=2))]
    assert reordered[0] != loser and {first.id, second.id} == set(reordered)


def test_search_as_of_a_time_finds_the_version_valid_then(memory: Memory) -> None:
    from node.crystals.model import now_ms
    from node.memory.versions import update

    day_ago = now_ms() - DAY_MS
    first = memory.add("the on-call phone number is 555-0101", created_at_ms=day_ago)
    second = update(memory, first.id, "the on-call phone number is 555-0199")
    request = SearchRequest("on-call phone number", k=5, record_access=False)
    assert [h.crystal.id for h in memory.search(request)] == [second.id]
    then = SearchRequest("on-call phone number", k=5, record_access=False, as_of_ms=day_ago + HOUR_MS)
    assert [h.crystal.id for h in memory.search(then)] == [first.id]
    before = SearchRequest("on-call phone number", k=5, record_access=False, as_of_ms=day_ago - HOUR_MS)
    assert memory.search(before) == []
