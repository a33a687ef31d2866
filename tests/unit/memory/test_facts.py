"""Episodic → semantic planning (seed 003): interleaved replay and clustering into facts."""

from __future__ import annotations

import numpy as np
import pytest

from node.memory.learning.facts import (
    EpisodeInput,
    EpisodeRef,
    FactInput,
    centroid,
    fact_text,
    plan_facts,
    select_replay,
)


def refs(prefix: str, start_ms: int, count: int) -> list[EpisodeRef]:
    return [EpisodeRef(f"{prefix}{i:02d}", start_ms + i) for i in range(count)]


def test_replay_is_seventy_thirty_recent_old() -> None:
    episodes = refs("old", 0, 20) + refs("new", 1000, 20)
    batch = select_replay(episodes, 1000, 10, 0.7, seed=1)
    assert len(batch) == 10
    assert sum(e.id.startswith("new") for e in batch) == 7
    assert sum(e.id.startswith("old") for e in batch) == 3
    # the newest recent ones come first
    assert [e.id for e in batch[:3]] == ["new19", "new18", "new17"]
    # the split is configurable
    assert sum(e.id.startswith("new") for e in select_replay(episodes, 1000, 10, 0.5)) == 5


def test_replay_fills_from_the_other_side_when_one_is_short() -> None:
    episodes = refs("old", 0, 20) + refs("new", 1000, 2)
    batch = select_replay(episodes, 1000, 10, 0.7, seed=3)
    assert sum(e.id.startswith("new") for e in batch) == 2
    assert len(batch) == 10
    only_new = select_replay(refs("new", 1000, 12), 1000, 10)
    assert len(only_new) == 10
    assert select_replay(episodes, 1000, 0) == []
    with pytest.raises(ValueError):
        select_replay(episodes, 1000, 5, 1.5)


def unit(*values: float) -> list[float]:
    vector = np.asarray(values, dtype=np.float64)
    return list(vector / np.linalg.norm(vector))


def test_three_similar_episodes_in_a_namespace_become_one_fact() -> None:
    replayed = [
        EpisodeInput("a1", "user:alice", unit(1, 0.05, 0)),
        EpisodeInput("a2", "user:alice", unit(1, 0, 0.05)),
        EpisodeInput("a3", "user:alice", unit(1, 0.02, 0.02)),
        EpisodeInput("a4", "user:alice", unit(0, 1, 0)),  # unrelated
        # two similar ones in another namespace: below the minimum of 3
        EpisodeInput("b1", "user:bob", unit(1, 0, 0)),
        EpisodeInput("b2", "user:bob", unit(1, 0.01, 0)),
        # same direction as alice's but another namespace: never joins her fact
        EpisodeInput("c1", "user:carol", unit(1, 0, 0)),
    ]
    plan = plan_facts(replayed, [], similarity_threshold=0.9)
    assert plan.reinforcements == {}
    assert len(plan.new_facts) == 1
    fact = plan.new_facts[0]
    assert fact.namespace == "user:alice"
    assert fact.episode_ids == ("a1", "a2", "a3")
    assert fact.medoid_id == "a3"  # the most central of the three


def test_a_new_similar_episode_reinforces_instead_of_duplicating() -> None:
    facts = [FactInput("f1", "user:alice", centroid([unit(1, 0.05, 0), unit(1, 0, 0.05)]))]
    replayed = [
        EpisodeInput("a5", "user:alice", unit(1, 0.03, 0.01)),
        EpisodeInput("a6", "user:bob", unit(1, 0.03, 0.01)),  # other namespace
    ]
    plan = plan_facts(replayed, facts, similarity_threshold=0.9)
    assert plan.reinforcements == {"f1": ["a5"]}
    assert plan.new_facts == []


def test_mixed_dimensions_do_not_crash() -> None:
    replayed = [EpisodeInput(f"e{i}", "ns", unit(1, 0, 0)) for i in range(3)]
    replayed.append(EpisodeInput("odd", "ns", [1.0, 0.0]))
    plan = plan_facts(replayed, [FactInput("f", "ns", [1.0, 0.0])], 0.9)
    assert [f.episode_ids for f in plan.new_facts] == [("e0", "e1", "e2")]


def test_fact_text_is_the_medoid_marked_as_learned() -> None:
    assert fact_text("  deploys  fail on\nFridays ") == "Learned from experience: deploys fail on Fridays"
