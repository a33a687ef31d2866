"""How a crystal maps to a row of the ``crystals`` table and back (no I/O)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from node.crystals.model import (
    Crystal,
    ExecutionStats,
    Governance,
    HormonalInfluence,
    Lifecycle,
    Origin,
    ProvenanceNode,
    SemanticType,
    Source,
)


@dataclass(frozen=True)
class Filters:
    semantic_types: tuple[str, ...] = ()
    lifecycles: tuple[str, ...] = ()
    scopes: tuple[str, ...] = ()
    namespaces: tuple[str, ...] = ()  # empty: every namespace
    sources: tuple[str, ...] = ()  # empty: every source (node.crystals.model.Source)
    current_at_ms: int | None = None  # only crystals current then (not superseded/deleted/expired)

    def sql(self, alias: str = "c") -> tuple[str, list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        if self.current_at_ms is not None:
            clauses.append(
                f"{alias}.valid_to_ms IS NULL AND {alias}.deleted_at_ms IS NULL "
                f"AND ({alias}.expires_at_ms IS NULL OR {alias}.expires_at_ms > ?)")
            params.append(self.current_at_ms)
        for column, values in (
            ("semantic_type", self.semantic_types),
            ("lifecycle", self.lifecycles),
            ("access_scope", self.scopes),
            ("namespace", self.namespaces),
            ("source", self.sources),
        ):
            if values:
                clauses.append(f"{alias}.{column} IN ({','.join('?' * len(values))})")
                params.extend(values)
        return (" AND ".join(clauses) or "1=1"), params


COLUMNS = (
    "id, text, embedding, path, source, start_line, end_line, hash, semantic_type, origin, "
    "lifecycle, importance_score, access_count, last_accessed_at_ms, created_at_ms, "
    "emotional_valence, hormonal_json, steering_reward, access_scope, sensitivity, "
    "governance_json, provenance_json, parent_id, stable_skill_id, skill_version, "
    "previous_version_id, deprecated, deprecated_by, skill_tags_json, skill_category, "
    "is_verified, verified_by, executions, successes, reward_sum, "
    "namespace, memory_id, version, valid_from_ms, valid_to_ms, superseded_by, deleted_at_ms, "
    "expires_at_ms"
)
# For reads that never need the vector (row_to_crystal reads it only when asked).
COLUMNS_WITHOUT_EMBEDDING = COLUMNS.replace("embedding, ", "", 1)


def vector_bytes(embedding: Sequence[float] | Sequence[Sequence[float]] | np.ndarray | None) -> bytes | None:
    if embedding is None:
        return None
    return np.asarray(embedding, dtype=np.float32).tobytes()


def row_to_crystal(row: sqlite3.Row, with_embedding: bool = False) -> Crystal:
    """The crystal of one row; a row whose JSON columns have the wrong shape raises ``ValueError``.

    The JSON columns may have been crafted on disk (``[]`` where an object
    belongs, a number where a list does): every such shape error surfaces as
    one ``ValueError``, which readers already treat as an unreadable row.
    """
    try:
        return _row_to_crystal(row, with_embedding)
    except (AttributeError, TypeError) as exc:
        raise ValueError(f"crystal row has a malformed field: {exc}") from exc


def _row_to_crystal(row: sqlite3.Row, with_embedding: bool) -> Crystal:
    embedding = None
    if with_embedding and row["embedding"] is not None:
        embedding = np.frombuffer(row["embedding"], dtype=np.float32).tolist()
    hormonal = json.loads(row["hormonal_json"]) if row["hormonal_json"] else None
    return Crystal(
        id=row["id"],
        text=row["text"],
        embedding=embedding,
        path=row["path"],
        source=Source(row["source"]),
        start_line=row["start_line"],
        end_line=row["end_line"],
        hash=row["hash"],
        semantic_type=SemanticType(row["semantic_type"]),
        origin=Origin(row["origin"]),
        lifecycle=Lifecycle(row["lifecycle"]),
        importance_score=row["importance_score"],
        access_count=row["access_count"],
        last_accessed_at_ms=row["last_accessed_at_ms"],
        created_at_ms=row["created_at_ms"],
        emotional_valence=row["emotional_valence"],
        hormonal_influence=HormonalInfluence(**hormonal) if hormonal else None,
        steering_reward=row["steering_reward"],
        governance=Governance.from_dict(json.loads(row["governance_json"])),
        provenance_dag=[ProvenanceNode.from_dict(n) for n in json.loads(row["provenance_json"])],
        parent_id=row["parent_id"],
        stable_skill_id=row["stable_skill_id"],
        skill_version=row["skill_version"],
        previous_version_id=row["previous_version_id"],
        deprecated=bool(row["deprecated"]),
        deprecated_by=row["deprecated_by"],
        skill_tags=json.loads(row["skill_tags_json"]),
        skill_category=row["skill_category"],
        is_verified=bool(row["is_verified"]),
        verified_by=row["verified_by"],
        execution=ExecutionStats(row["executions"], row["successes"], row["reward_sum"]),
        namespace=row["namespace"],
        memory_id=row["memory_id"],
        version=row["version"],
        valid_from_ms=row["valid_from_ms"],
        valid_to_ms=row["valid_to_ms"],
        superseded_by=row["superseded_by"],
        deleted_at_ms=row["deleted_at_ms"],
    )




def crystal_values(crystal: Crystal) -> tuple[Any, ...]:
    """The values of ``COLUMNS`` for ``crystal``, in order."""
    governance = crystal.governance
    return (
        crystal.id,
        crystal.text,
        vector_bytes(crystal.embedding),
        crystal.path,
        crystal.source.value,
        crystal.start_line,
        crystal.end_line,
        crystal.hash,
        crystal.semantic_type.value,
        crystal.origin.value,
        crystal.lifecycle.value,
        crystal.importance_score,
        crystal.access_count,
        crystal.last_accessed_at_ms,
        crystal.created_at_ms,
        crystal.emotional_valence,
        json.dumps(asdict(crystal.hormonal_influence)) if crystal.hormonal_influence else None,
        crystal.steering_reward,
        governance.access_scope.value,
        governance.sensitivity.value,
        json.dumps(governance.to_dict()),
        json.dumps([node.to_dict() for node in crystal.provenance_dag]),
        crystal.parent_id,
        crystal.stable_skill_id,
        crystal.skill_version,
        crystal.previous_version_id,
        int(crystal.deprecated),
        crystal.deprecated_by,
        json.dumps(crystal.skill_tags),
        crystal.skill_category,
        int(crystal.is_verified),
        crystal.verified_by,
        crystal.execution.executions,
        crystal.execution.successes,
        crystal.execution.reward_sum,
        crystal.namespace,
        crystal.memory_id,
        crystal.version,
        crystal.valid_from_ms,
        crystal.valid_to_ms,
        crystal.superseded_by,
        crystal.deleted_at_ms,
        crystal.expires_at_ms,
    )
