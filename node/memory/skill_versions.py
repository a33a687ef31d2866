"""Versions of a skill: version n+1 supersedes n and starts its execution record anew."""

from __future__ import annotations

import numpy as np

from node.crystals import Crystal, ProvenanceNode, ProvenanceOperation
from node.crystals import governance as gov
from node.memory.owner import MemoryOwner
from node.memory.search import MemoryInputError, set_vectors
from node.memory.text_limits import check_text_size


def new_skill_version(memory: MemoryOwner, crystal_id: str, text: str) -> Crystal:
    """Create version n+1 of a skill; the previous version becomes deprecated.

    Execution statistics start from zero: the new text has not proven itself
    yet, so it must pass the quality gates again before it can be listed.
    """
    previous = memory.store.get(crystal_id)
    if not previous.is_knowledge:
        raise MemoryInputError("only skill and task_pattern crystals have versions")
    check_text_size(text, previous.semantic_type)
    if previous.deprecated:
        raise MemoryInputError(
            f"{previous.id} is already superseded; version its newest version instead"
        )
    stable_id = previous.stable_skill_id or previous.id
    crystal = memory.prepare(
        text,
        semantic_type=previous.semantic_type,
        scope=previous.governance.access_scope,
        origin=previous.origin,
        source=previous.source,
        path=previous.path,
        stable_skill_id=stable_id,
        skill_version=previous.skill_version + 1,
        previous_version_id=previous.id,
        skill_tags=list(previous.skill_tags),
        skill_category=previous.skill_category,
        namespace=previous.namespace,
        memory_id=previous.memory_id,
        version=previous.version + 1,
    )
    crystal.provenance_dag = [
        ProvenanceNode(
            crystal.id,
            ProvenanceOperation.MUTATED,
            gov.Requester.LOCAL_AGENT.value,
            crystal.created_at_ms,
            [previous.id],
        )
    ]
    if previous.stable_skill_id is None:
        memory.store.update_fields(previous.id, "stable_skill_id_set", stable_skill_id=stable_id)
    vectors, windows = memory.embed_windows([crystal.text])
    set_vectors(crystal, vectors[0], windows[0])
    memory.second_opinions([crystal])
    result = memory.store.add_version(crystal, previous.id)
    memory.index.add(np.array([result.rowid], dtype=np.int64), vectors[:1])
    return memory.store.get(crystal.id)
