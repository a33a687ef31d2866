"""Memory CRUD with history: update (a new version), delete (a tombstone), history, list, add outcome.

These run on the database's thread with a :class:`node.memory.facade.Memory`,
like the facade's own methods; the CLI (no node running), the API and the MCP
server all end here, so the rules are written once:

* **update** writes version n+1 (provenance ``mutated``, audit ``updated``) and
  closes version n (``valid_to_ms``, ``superseded_by``, audit ``superseded``).
  Any version's id names the memory; the change applies to its current version.
* **delete** tombstones every version (audit ``deleted``): gone from search, get
  and lists at once; consolidation purges the rows, the audit rows stay.
* **history** returns every version (oldest first) and every transition.
* **pin** / **unpin** set the current version's lifespan to ``permanent`` / ``decay``
  in place (audit ``pinned`` / ``unpinned``): a pinned memory never expires by
  importance, energy or doubt; pinning one that consolidation already expired
  brings it back (it was not purged yet). Updates keep the pin.
* **add** reports its outcome: ``created``, or ``exists`` when the namespace
  already holds exactly this text (nothing is written; ``differs`` names the
  requested fields that differ from the stored memory, e.g. its scope). The same
  text in another namespace is a new memory there.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from node.crystals import (
    AccessScope,
    Crystal,
    CrystalNotFound,
    Filters,
    Lifecycle,
    LifespanPolicy,
    now_ms,
)
from node.memory.facade import Memory, MemoryInputError
from node.memory.namespaces import validate_namespace
from node.memory.requests import parse_add_request, parse_lifespan
from node.memory.search import set_vectors
from node.memory.succession import next_version
from node.memory.text_limits import MAX_SKILL_TEXT_BYTES, check_text_size

UPDATE_KEYS = frozenset({"text", "scope"})


@dataclass
class AddOutcome:
    crystal: Crystal
    outcome: str  # "created" | "exists"
    differs: dict[str, dict[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return self.crystal.to_dict() | {"outcome": self.outcome} | (
            {"differs": self.differs} if self.differs else {})


def add_with_outcome(memory: Memory, body: Any) -> AddOutcome:
    """Validate an add request completely, then add it (or report the identical memory)."""
    text, kwargs = parse_add_request(body)
    crystal = memory.prepare(text, **kwargs)
    result = memory.add_crystals([crystal])[0]
    stored = memory.store.get(result.id)
    if result.created:
        return AddOutcome(stored, "created")
    differs: dict[str, dict[str, Any]] = {}
    requested_scope = body.get("scope")
    if requested_scope is not None and requested_scope != stored.governance.access_scope.value:
        differs["scope"] = {"stored": stored.governance.access_scope.value, "requested": requested_scope}
    if stored.semantic_type is not crystal.semantic_type:
        differs["type"] = {"stored": stored.semantic_type.value, "requested": crystal.semantic_type.value}
    if (crystal.governance.ttl_ms or None) != (stored.governance.ttl_ms or None):
        differs["ttl_ms"] = {"stored": stored.governance.ttl_ms, "requested": crystal.governance.ttl_ms}
    if body.get("lifespan") is not None and crystal.governance.lifespan_policy is not stored.governance.lifespan_policy:
        differs["lifespan"] = {"stored": stored.governance.lifespan_policy.value,
                               "requested": crystal.governance.lifespan_policy.value}  # `memory pin`
    if crystal.governance.explicit and crystal.governance.importance_floor != stored.governance.importance_floor:
        differs["importance"] = {"stored": stored.governance.importance_floor,
                                 "requested": crystal.governance.importance_floor}
    return AddOutcome(stored, "exists", differs)


def add_memory(memory: Memory, body: Any) -> dict[str, Any]:
    """``memory add`` and ``skill add`` (the API's crystals route too): :func:`add_with_outcome` as answered."""
    return add_with_outcome(memory, body).to_dict()


def detail(memory: Memory, crystal_id: str, audit_rows: int = 20) -> dict[str, Any]:
    """``memory show``: one crystal (any version) with its audit trail and what the node knows of it."""
    crystal = memory.get(crystal_id)
    return crystal.to_dict() | {"audit": memory.store.audit_log(crystal.id, audit_rows),
                                "knowledge": memory.learning.describe(crystal)}


def current_version(memory: Memory, crystal_id: str) -> Crystal:
    """The current version of the memory ``crystal_id`` belongs to (404 if deleted or expired)."""
    memory_id = memory.store.memory_id_of(crystal_id)
    now = now_ms()
    for crystal in reversed(memory.store.versions(memory_id)):
        if crystal.is_current(now):
            return crystal
    raise CrystalNotFound(crystal_id)


def update(memory: Memory, crystal_id: str, text: str | None = None,
           scope: AccessScope | None = None) -> Crystal:
    """Write the next version of a memory with a new text and/or scope."""
    current = current_version(memory, crystal_id)
    new_text = current.text if text is None else check_text_size(text, current.semantic_type)
    new_scope = current.governance.access_scope if scope is None else scope
    if new_text.strip() == current.text and new_scope is current.governance.access_scope:
        raise MemoryInputError("nothing to change: the text and scope are the memory's current ones")
    crystal = next_version(memory, current, new_text, new_scope)
    vectors, windows = memory.embed_windows([crystal.text])
    vector = vectors[0]
    set_vectors(crystal, vector, windows[0])
    memory.second_opinions([crystal])
    rowid = memory.store.supersede(current.id, crystal)
    memory.index.add(np.array([rowid], dtype=np.int64), vector.reshape(1, -1))
    return memory.store.get(crystal.id)


def update_from_request(memory: Memory, crystal_id: str, body: Any) -> dict[str, Any]:
    """Validate an update request (``text``, ``scope``), apply it; the new version as JSON."""
    if not isinstance(body, dict):
        raise MemoryInputError("the request must be a JSON object")
    unknown = sorted(set(body) - UPDATE_KEYS)
    if unknown:
        raise MemoryInputError(f"unknown field(s): {', '.join(unknown)}")
    text, scope = body.get("text"), body.get("scope")
    if text is None and scope is None:
        raise MemoryInputError("give text, scope, or both")
    if text is not None and (not isinstance(text, str) or not text.strip() or len(text) > MAX_SKILL_TEXT_BYTES):
        raise MemoryInputError(f"text must be a non-empty string of at most {MAX_SKILL_TEXT_BYTES} characters")
    try:
        chosen = None if scope is None else AccessScope(scope)
    except (ValueError, TypeError) as error:
        raise MemoryInputError(f"scope must be one of: {', '.join(s.value for s in AccessScope)}") from error
    crystal = update(memory, crystal_id, text, chosen)
    return crystal.to_dict() | {"previousId": crystal.provenance_dag[0].parent_ids[0]}


def delete(memory: Memory, crystal_id: str) -> dict[str, Any]:
    """Tombstone every version of the memory ``crystal_id`` belongs to."""
    memory_id = memory.store.memory_id_of(crystal_id)
    deleted = memory.store.tombstone(memory_id)
    if not deleted:
        raise CrystalNotFound(crystal_id)
    return {"memory_id": memory_id, "deleted": deleted, "versions": len(deleted)}


def set_lifespan(memory: Memory, crystal_id: str, lifespan: Any) -> dict[str, Any]:
    """``memory pin ID`` (``permanent``) / ``memory unpin ID`` (``decay``) on the memory's
    current version; returns it with ``changed`` (False: it already had that lifespan)."""
    policy = parse_lifespan(lifespan)
    if policy is None:
        raise MemoryInputError("lifespan must be one of: decay, permanent")
    current = current_version(memory, crystal_id)
    governance = current.governance
    if current.lifecycle is Lifecycle.ARCHIVED:
        raise MemoryInputError(f"{current.id} was merged into {current.parent_id}; pin that one")
    if policy is LifespanPolicy.DECAY and governance.lifespan_policy is LifespanPolicy.TTL:
        raise MemoryInputError(f"{current.id} has a TTL, not a pin: nothing to unpin")
    revive = policy is LifespanPolicy.PERMANENT and current.lifecycle is Lifecycle.EXPIRED
    if governance.lifespan_policy is policy and not revive:
        return current.to_dict() | {"changed": False}
    columns: dict[str, Any] = {"governance_json": json.dumps(
        replace(governance, lifespan_policy=policy, ttl_ms=None).to_dict())}
    if governance.lifespan_policy is LifespanPolicy.TTL:
        columns["expires_at_ms"] = None
    if revive:
        columns["lifecycle"] = Lifecycle.GENERATED.value
    action = "pinned" if policy is LifespanPolicy.PERMANENT else "unpinned"
    memory.store.update_fields(current.id, action, **columns)
    return memory.store.get(current.id).to_dict() | {"changed": True}


def history(memory: Memory, crystal_id: str) -> dict[str, Any]:
    memory_id = memory.store.memory_id_of(crystal_id)
    versions = memory.store.versions(memory_id)
    transitions = memory.store.memory_transitions(memory_id, [c.id for c in versions])
    deleted = any(t["action"] in ("deleted", "purged") for t in transitions)
    namespace = versions[0].namespace if versions else None
    return {"memory_id": memory_id, "namespace": namespace, "deleted": deleted,
            "purged": not versions, "versions": [c.to_dict() for c in versions],
            "transitions": transitions}


def list_memories(memory: Memory, namespace: str | None = None, types: tuple[str, ...] = (),
                  limit: int = 50) -> list[Crystal]:
    """The newest current memories of one namespace."""
    filters = Filters(semantic_types=tuple(types), namespaces=(validate_namespace(namespace),),
                      current_at_ms=now_ms())
    return memory.store.list_crystals(filters, limit=max(1, min(limit, 1000)))


def list_version(memory: Memory, namespace: str | None = None, types: tuple[str, ...] = (),
                 limit: int = 50) -> str:
    """A digest of what :func:`list_memories` returns that can change: each memory's id (a new
    text or scope is a new version, so a new id) and run counts, in order. A subscriber that
    polls compares digests instead of lists (the MCP server's ``skill://index.json``)."""
    rows = [[crystal.id, crystal.execution.executions, crystal.execution.successes]
            for crystal in list_memories(memory, namespace, types, limit)]
    return hashlib.sha256(json.dumps(rows).encode("utf-8")).hexdigest()


__all__ = ["AddOutcome", "add_with_outcome", "current_version", "delete", "history", "list_memories",
           "list_version", "set_lifespan", "update", "update_from_request"]
