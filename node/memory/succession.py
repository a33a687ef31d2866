"""The next version of a memory, built once for every writer that versions one.

``node.memory.versions.update`` (an agent or user changes a memory) and the
file index's re-sync (``node.memory.files``: a chunk of a file changed) both
write version n+1 through :meth:`node.crystals.CrystalStore.supersede`; the
crystal they write is built here, so both carry over the same fields: type,
scope, origin, source, path, lifespan, importance floor, namespace, the memory's id, the skill
fields of a knowledge crystal, the peer it came from, and a ``mutated``
provenance node naming version n.
"""

from __future__ import annotations

from typing import Any, Protocol

from node.crystals import AccessScope, Crystal, ProvenanceNode, ProvenanceOperation
from node.crystals import governance as gov


class Preparer(Protocol):
    """What building a version needs of memory (``node.memory.facade.Memory.prepare``)."""

    def prepare(self, text: str, **kwargs: Any) -> Crystal: ...


def next_version(memory: Preparer, current: Crystal, text: str, scope: AccessScope | None = None,
                 reason: str | None = None, **fields: Any) -> Crystal:
    """Version n+1 of ``current``'s memory holding ``text`` (``scope``: a new scope; ``fields``:
    more crystal fields, e.g. an indexed chunk's new lines; ``reason`` goes into its provenance)."""
    extra: dict[str, Any] = dict(fields)
    if current.is_knowledge:
        extra |= {"stable_skill_id": current.stable_skill_id or current.memory_id,
                  "skill_version": current.skill_version + 1, "previous_version_id": current.id,
                  "skill_tags": list(current.skill_tags), "skill_category": current.skill_category}
    crystal = memory.prepare(
        text, semantic_type=current.semantic_type,
        scope=current.governance.access_scope if scope is None else scope, origin=current.origin,
        source=current.source, path=current.path, lifespan=current.governance.lifespan_policy,
        ttl_ms=current.governance.ttl_ms, namespace=current.namespace, memory_id=current.memory_id,
        version=current.version + 1, importance_floor=current.governance.importance_floor, **extra)
    crystal.governance.peer_origin = current.governance.peer_origin
    crystal.provenance_dag = [ProvenanceNode(crystal.id, ProvenanceOperation.MUTATED,
                                             gov.Requester.LOCAL_AGENT.value, crystal.created_at_ms,
                                             [current.id], {"reason": reason} if reason else {})]
    return crystal


__all__ = ["Preparer", "next_version"]
