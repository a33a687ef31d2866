"""Crystal <-> dict round trips (the JSON view the API and peers see)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings

from node.crystals.model import (
    AccessScope,
    Crystal,
    ExecutionStats,
    Governance,
    HormonalInfluence,
    Lifecycle,
    SemanticType,
    content_hash,
)
from tests.fixtures.crystal_strategies import crystals


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


@pytest.mark.parametrize(("stored", "read"), [
    (0.8, 0.8), (0, 0.0), (1, 1.0), (None, None), ("0.8", None), (True, None), (-0.1, None), (1.01, None),
    (float("nan"), None), (float("inf"), None), (1e308, None), ([0.8], None), ({"floor": 0.8}, None),
])
def test_a_stored_importance_floor_is_read_only_when_it_is_a_number_in_0_1(stored: object, read: object) -> None:
    governance = Governance.from_dict({"importanceFloor": stored})
    assert governance.importance_floor == read and governance.explicit is (read is not None)
    assert Governance.from_dict(governance.to_dict()) == governance
