"""Crystal <-> dict round trips (the JSON view the API and peers see)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from node.crystals.model import (
    AccessScope,
    Crystal,
    ExecutionStats,
    Governance,
    HormonalInfluence,
    Lifecycle,
    LifespanPolicy,
    Origin,
    ProvenanceNode,
    ProvenanceOperation,
    SemanticType,
    Sensitivity,
    Source,
    content_hash,
)

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)
finite32 = st.floats(allow_nan=False, allow_infinity=False, width=32)
unit = st.floats(min_value=-1.0, max_value=1.0, allow_nan=False)
ms = st.integers(min_value=1, max_value=2**53)
short_text = st.text(max_size=40)
ids = st.uuids().map(str)
json_scalars = st.none() | st.booleans() | st.integers(-(2**53), 2**53) | finite | short_text
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(short_text, inner, max_size=3),
    max_leaves=6,
)

hormonal = st.builds(HormonalInfluence, dopamine=unit, cortisol=unit, oxytocin=unit)
governance = st.builds(
    Governance,
    access_scope=st.sampled_from(AccessScope),
    lifespan_policy=st.sampled_from(LifespanPolicy),
    ttl_ms=st.none() | ms,
    priority=finite,
    sensitivity=st.sampled_from(Sensitivity),
    provenance_chain=st.lists(short_text, max_size=3),
    peer_origin=st.none() | short_text,
)
provenance_nodes = st.builds(
    ProvenanceNode,
    crystal_id=ids,
    operation=st.sampled_from(ProvenanceOperation),
    actor=st.sampled_from(["local_agent", "dream_engine"]) | short_text.map("peer:{}".format),
    timestamp_ms=ms,
    parent_ids=st.lists(ids, max_size=3),
    metadata=st.dictionaries(short_text, json_values, max_size=3),
)
executions = st.integers(0, 10_000).flatmap(
    lambda runs: st.builds(
        ExecutionStats,
        executions=st.just(runs),
        successes=st.integers(0, runs),
        reward_sum=st.floats(0, runs, allow_nan=False),
    )
)


@st.composite
def crystals(draw: st.DrawFn, with_embedding: bool = True) -> Crystal:
    return Crystal(
        text=draw(st.text(min_size=1, max_size=200)),
        id=draw(ids),
        embedding=draw(st.none() | st.lists(finite32, min_size=1, max_size=8))
        if with_embedding
        else None,
        path=draw(st.none() | short_text),
        source=draw(st.sampled_from(Source)),
        start_line=draw(st.none() | st.integers(0, 10**6)),
        end_line=draw(st.none() | st.integers(0, 10**6)),
        semantic_type=draw(st.sampled_from(SemanticType)),
        origin=draw(st.sampled_from(Origin)),
        lifecycle=draw(st.sampled_from(Lifecycle)),
        importance_score=draw(st.floats(0, 1)),
        access_count=draw(st.integers(0, 10**6)),
        last_accessed_at_ms=draw(st.none() | ms),
        created_at_ms=draw(ms),
        emotional_valence=draw(st.none() | unit),
        hormonal_influence=draw(st.none() | hormonal),
        steering_reward=draw(unit),
        governance=draw(governance),
        provenance_dag=draw(st.lists(provenance_nodes, max_size=3)),
        parent_id=draw(st.none() | ids),
        stable_skill_id=draw(st.none() | ids),
        skill_version=draw(st.integers(1, 1000)),
        previous_version_id=draw(st.none() | ids),
        deprecated=draw(st.booleans()),
        deprecated_by=draw(st.none() | ids),
        skill_tags=draw(st.lists(short_text, max_size=4)),
        skill_category=draw(st.none() | short_text),
        is_verified=draw(st.booleans()),
        verified_by=draw(st.none() | short_text),
        execution=draw(executions),
    )


@settings(max_examples=80, deadline=None)
@given(crystals())
def test_to_dict_from_dict_round_trip(crystal: Crystal) -> None:
    data = crystal.to_dict(include_embedding=True)
    assert Crystal.from_dict(data) == crystal


@settings(max_examples=40, deadline=None)
@given(crystals())
def test_round_trip_survives_json(crystal: Crystal) -> None:
    text = json.dumps(crystal.to_dict(include_embedding=True))
    assert Crystal.from_dict(json.loads(text)) == crystal


@settings(max_examples=20, deadline=None)
@given(crystals())
def test_embedding_only_exported_when_asked(crystal: Crystal) -> None:
    assert "embedding" not in crystal.to_dict()
    restored = Crystal.from_dict(crystal.to_dict())
    assert restored.embedding is None


def test_hash_defaults_to_sha256_of_text() -> None:
    crystal = Crystal(text="héllo")
    assert crystal.hash == content_hash("héllo")
    assert len(crystal.hash) == 64
    assert Crystal.from_dict(crystal.to_dict() | {"hash": ""}).hash == crystal.hash


def test_from_dict_fills_defaults_for_a_minimal_dict() -> None:
    crystal = Crystal.from_dict({"id": "abc", "text": "just text", "createdAt": 5})
    assert crystal.semantic_type is SemanticType.GENERAL
    assert crystal.lifecycle is Lifecycle.GENERATED
    assert crystal.governance == Governance()
    assert crystal.execution == ExecutionStats()
    assert crystal.created_at_ms == 5


def test_seed_field_names_are_camel_case() -> None:
    data = Crystal(
        text="t",
        hormonal_influence=HormonalInfluence(dopamine=0.5),
        governance=Governance(access_scope=AccessScope.SHARED, ttl_ms=10),
    ).to_dict()
    assert data["governance"]["accessScope"] == "shared"
    assert data["governance"]["ttlMs"] == 10
    assert data["hormonalInfluence"] == {"dopamine": 0.5, "cortisol": 0.0, "oxytocin": 0.0}
    for key in ("semanticType", "importanceScore", "lastAccessedAt", "provenanceDag", "skillVersion"):
        assert key in data


def test_execution_rates() -> None:
    stats = ExecutionStats(executions=4, successes=3, reward_sum=2.0)
    assert stats.success_rate == 0.75
    assert stats.avg_reward == 0.5
    assert ExecutionStats().success_rate == 0.0
    assert Crystal(text="x", semantic_type=SemanticType.SKILL).is_knowledge
    assert not Crystal(text="x", semantic_type=SemanticType.FACT).is_knowledge
