"""The knowledge crystal: the unit of memory (seed 000, ``crystal-types.ts``).

Only the fields that carry behaviour are modelled. Everything is a plain
dataclass so it can be stored, sent to the API as JSON and round-tripped by
property tests without any I/O.
"""

from __future__ import annotations

import hashlib
import math
import time
import uuid
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from node.crystals.epistemic import Acquisition, acquisition, epistemic_layer, seller_of


class SemanticType(StrEnum):
    FACT = "fact"
    PREFERENCE = "preference"
    TASK_PATTERN = "task_pattern"
    SKILL = "skill"
    EPISODE = "episode"
    INSIGHT = "insight"
    RELATIONSHIP = "relationship"
    GOAL = "goal"
    GENERAL = "general"
    WARNING = "warning"  # anti-knowledge (seed 003): never pruned, confidence floor 0.3
    # What the user stated as an instruction or preference (seed 000's "directive" epistemic
    # layer, node.crystals.epistemic): importance floor, never decays away, wins conflicts.
    DIRECTIVE = "directive"


# Knowledge crystals are procedural and may be listed on the marketplace;
# every other type is a memory crystal and never leaves the node.
KNOWLEDGE_TYPES = frozenset({SemanticType.SKILL, SemanticType.TASK_PATTERN})


class Origin(StrEnum):
    INDEXED = "indexed"
    SESSION = "session"
    SKILL = "skill"
    DREAM = "dream"
    USER_INPUT = "user_input"
    INFERRED = "inferred"
    PEER = "peer"


class Source(StrEnum):
    """Where a crystal's text came from (seed 001's ``sources``; a search filter, docs/memory.md)."""

    MEMORY = "memory"  # what the agent or user stored: notes, memory_add, MEMORY.md
    SESSIONS = "sessions"  # the agent host's transcripts (and ingested conversations)
    FILES = "files"  # files and folders indexed by ``memory index``
    SKILLS = "skills"


class Lifecycle(StrEnum):
    GENERATED = "generated"
    ACTIVATED = "activated"
    CONSOLIDATED = "consolidated"
    ARCHIVED = "archived"
    EXPIRED = "expired"
    FROZEN = "frozen"


class AccessScope(StrEnum):
    CONFIDENTIAL = "confidential"
    PRIVATE = "private"
    SHARED = "shared"
    PUBLIC = "public"


# Scopes whose crystals never leave the node (seed 000 governance table).
LOCAL_ONLY_SCOPES = frozenset({AccessScope.CONFIDENTIAL, AccessScope.PRIVATE})


class LifespanPolicy(StrEnum):
    PERMANENT = "permanent"
    TTL = "ttl"
    DECAY = "decay"


class Sensitivity(StrEnum):
    NORMAL = "normal"
    PERSONAL = "personal"
    CONFIDENTIAL = "confidential"


class ProvenanceOperation(StrEnum):
    CREATED = "created"
    MUTATED = "mutated"
    MERGED = "merged"
    IMPORTED = "imported"
    FORKED = "forked"


@dataclass
class HormonalInfluence:
    dopamine: float = 0.0
    cortisol: float = 0.0
    oxytocin: float = 0.0


@dataclass
class Governance:
    access_scope: AccessScope = AccessScope.PRIVATE
    lifespan_policy: LifespanPolicy = LifespanPolicy.DECAY
    ttl_ms: int | None = None
    priority: float = 0.5
    sensitivity: Sensitivity = Sensitivity.NORMAL
    provenance_chain: list[str] = field(default_factory=list)
    peer_origin: str | None = None
    importance_floor: float | None = None
    """Set when the user said it explicitly (a working-memory note, ``memory add --importance``):
    consolidation never scores it below this and never expires it by decay (importance or
    energy); ``None`` for everything the node gathered by itself, which decays as seed 000 says."""

    @property
    def explicit(self) -> bool:
        """Whether someone stated this on purpose (it then never decays away)."""
        return self.importance_floor is not None

    def to_dict(self) -> dict[str, Any]:
        return {
            "accessScope": self.access_scope.value,
            "lifespanPolicy": self.lifespan_policy.value,
            "ttlMs": self.ttl_ms,
            "priority": self.priority,
            "sensitivity": self.sensitivity.value,
            "provenanceChain": list(self.provenance_chain),
            "peerOrigin": self.peer_origin,
            "importanceFloor": self.importance_floor,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Governance:
        return cls(
            access_scope=AccessScope(data.get("accessScope", "private")),
            lifespan_policy=LifespanPolicy(data.get("lifespanPolicy", "decay")),
            ttl_ms=data.get("ttlMs"),
            priority=float(data.get("priority", 0.5)),
            sensitivity=Sensitivity(data.get("sensitivity", "normal")),
            provenance_chain=list(data.get("provenanceChain", [])),
            peer_origin=data.get("peerOrigin"),
            importance_floor=importance_floor_of(data.get("importanceFloor")),
        )


def importance_floor_of(value: Any) -> float | None:
    """A stored or imported ``importanceFloor``: a number in [0, 1], else none (a crafted or
    damaged value never makes a crystal immortal by accident, nor stops consolidation)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    floor = float(value)
    return floor if math.isfinite(floor) and 0.0 <= floor <= 1.0 else None


@dataclass
class ProvenanceNode:
    crystal_id: str
    operation: ProvenanceOperation
    actor: str  # "local_agent" | "dream_engine" | "peer:<pubkey>"
    timestamp_ms: int
    parent_ids: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "crystalId": self.crystal_id,
            "operation": self.operation.value,
            "actor": self.actor,
            "timestamp": self.timestamp_ms,
            "parentIds": list(self.parent_ids),
            "metadata": dict(self.metadata),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProvenanceNode:
        return cls(
            crystal_id=str(data["crystalId"]),
            operation=ProvenanceOperation(data["operation"]),
            actor=str(data["actor"]),
            timestamp_ms=int(data["timestamp"]),
            parent_ids=[str(p) for p in data.get("parentIds", [])],
            metadata=dict(data.get("metadata", {})),
        )


@dataclass
class ExecutionStats:
    """Outcomes of running a skill; feeds quality gates and pricing."""

    executions: int = 0
    successes: int = 0
    reward_sum: float = 0.0

    @property
    def success_rate(self) -> float:
        return self.successes / self.executions if self.executions else 0.0

    @property
    def avg_reward(self) -> float:
        return self.reward_sum / self.executions if self.executions else 0.0


def content_hash(text: str) -> str:
    """sha256 of the UTF-8 text, hex: the dedup key and the marketplace content hash."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def now_ms() -> int:
    return int(time.time() * 1000)


def new_crystal_id() -> str:
    return str(uuid.uuid4())


@dataclass
class Crystal:
    text: str
    id: str = field(default_factory=new_crystal_id)
    embedding: list[float] | None = None
    path: str | None = None
    source: Source = Source.MEMORY
    start_line: int | None = None
    end_line: int | None = None
    hash: str = ""
    semantic_type: SemanticType = SemanticType.GENERAL
    origin: Origin = Origin.USER_INPUT
    lifecycle: Lifecycle = Lifecycle.GENERATED
    importance_score: float = 1.0
    access_count: int = 0
    last_accessed_at_ms: int | None = None
    created_at_ms: int = field(default_factory=now_ms)
    emotional_valence: float | None = None
    hormonal_influence: HormonalInfluence | None = None
    steering_reward: float = 0.0
    governance: Governance = field(default_factory=Governance)
    provenance_dag: list[ProvenanceNode] = field(default_factory=list)
    parent_id: str | None = None
    # skill versioning
    stable_skill_id: str | None = None
    skill_version: int = 1
    previous_version_id: str | None = None
    deprecated: bool = False
    deprecated_by: str | None = None
    skill_tags: list[str] = field(default_factory=list)
    skill_category: str | None = None
    # management endorsement
    is_verified: bool = False
    verified_by: str | None = None
    execution: ExecutionStats = field(default_factory=ExecutionStats)
    # namespaces and versions (issue 14): a memory is the chain of crystals sharing
    # memory_id (its first version's id); an update closes the old version (valid_to_ms,
    # superseded_by) and a delete tombstones every version (deleted_at_ms).
    namespace: str = "default"
    memory_id: str = ""
    version: int = 1
    valid_from_ms: int | None = None
    valid_to_ms: int | None = None
    superseded_by: str | None = None
    deleted_at_ms: int | None = None
    # A long text's window vectors (node.memory.embedding.embedder), written beside the crystal by the
    # store and read by search only (node.memory.search.windows); never serialised.
    window_embeddings: list[list[float]] | None = field(default=None, repr=False, compare=False)
    # The second encoder's name and vector of the text (node.memory.search.second_opinion), written
    # beside the crystal by the store and read by search only; never serialised.
    second_embedding: tuple[str, list[float]] | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.hash:
            self.hash = content_hash(self.text)
        if not self.memory_id:
            self.memory_id = self.id
        if self.valid_from_ms is None:
            self.valid_from_ms = self.created_at_ms

    @property
    def expires_at_ms(self) -> int | None:
        """When a TTL crystal stops being visible (checked at every read, not only by consolidation)."""
        ttl = self.governance.ttl_ms
        if self.governance.lifespan_policy is not LifespanPolicy.TTL or not ttl:
            return None
        return self.created_at_ms + int(ttl)

    def is_current(self, at_ms: int) -> bool:
        """Neither superseded, deleted nor expired at ``at_ms``."""
        expires = self.expires_at_ms
        return (self.valid_to_ms is None and self.deleted_at_ms is None
                and (expires is None or expires > at_ms))

    @property
    def acquisition(self) -> Acquisition:
        """Own, inherited or bought (:mod:`node.crystals.epistemic`)."""
        return acquisition(self.origin.value, self.governance.provenance_chain)

    @property
    def seller(self) -> str | None:
        """The seller's key (hex) of a bought crystal, else None."""
        return seller_of(self.origin.value, self.governance.provenance_chain, self.governance.peer_origin)

    @property
    def is_knowledge(self) -> bool:
        return self.semantic_type in KNOWLEDGE_TYPES

    def to_dict(self, include_embedding: bool = False) -> dict[str, Any]:
        """JSON-friendly view with the seed's camelCase field names."""
        out: dict[str, Any] = {
            "id": self.id,
            "text": self.text,
            "path": self.path,
            "source": self.source.value,
            "startLine": self.start_line,
            "endLine": self.end_line,
            "hash": self.hash,
            "semanticType": self.semantic_type.value,
            "origin": self.origin.value,
            "lifecycle": self.lifecycle.value,
            "importanceScore": self.importance_score,
            "accessCount": self.access_count,
            "lastAccessedAt": self.last_accessed_at_ms,
            "createdAt": self.created_at_ms,
            "emotionalValence": self.emotional_valence,
            "hormonalInfluence": asdict(self.hormonal_influence)
            if self.hormonal_influence
            else None,
            "steeringReward": self.steering_reward,
            "governance": self.governance.to_dict(),
            "provenanceDag": [node.to_dict() for node in self.provenance_dag],
            "parentId": self.parent_id,
            "stableSkillId": self.stable_skill_id,
            "skillVersion": self.skill_version,
            "previousVersionId": self.previous_version_id,
            "deprecated": self.deprecated,
            "deprecatedBy": self.deprecated_by,
            "skillTags": list(self.skill_tags),
            "skillCategory": self.skill_category,
            "isVerified": self.is_verified,
            "verifiedBy": self.verified_by,
            "executions": self.execution.executions,
            "successes": self.execution.successes,
            "rewardSum": self.execution.reward_sum,
            "namespace": self.namespace,
            "memoryId": self.memory_id,
            "version": self.version,
            "validFrom": self.valid_from_ms,
            "validTo": self.valid_to_ms,
            "supersededBy": self.superseded_by,
            "deletedAt": self.deleted_at_ms,
            "expiresAt": self.expires_at_ms,
            # Derived, read-only: the seed's layer and where the node got the crystal.
            "epistemicLayer": epistemic_layer(self.semantic_type.value).value,
            "provenance": self.acquisition.value,
            "seller": self.seller,
        }
        if include_embedding:
            out["embedding"] = self.embedding
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Crystal:
        influence = data.get("hormonalInfluence")
        return cls(
            id=str(data["id"]),
            text=str(data["text"]),
            embedding=data.get("embedding"),
            path=data.get("path"),
            source=Source(data.get("source", "memory")),
            start_line=data.get("startLine"),
            end_line=data.get("endLine"),
            hash=str(data.get("hash") or ""),
            semantic_type=SemanticType(data.get("semanticType", "general")),
            origin=Origin(data.get("origin", "user_input")),
            lifecycle=Lifecycle(data.get("lifecycle", "generated")),
            importance_score=float(data.get("importanceScore", 1.0)),
            access_count=int(data.get("accessCount", 0)),
            last_accessed_at_ms=data.get("lastAccessedAt"),
            created_at_ms=int(data.get("createdAt") or now_ms()),
            emotional_valence=data.get("emotionalValence"),
            hormonal_influence=HormonalInfluence(**influence) if influence else None,
            steering_reward=float(data.get("steeringReward", 0.0)),
            governance=Governance.from_dict(data.get("governance") or {}),
            provenance_dag=[ProvenanceNode.from_dict(n) for n in data.get("provenanceDag", [])],
            parent_id=data.get("parentId"),
            stable_skill_id=data.get("stableSkillId"),
            skill_version=int(data.get("skillVersion", 1)),
            previous_version_id=data.get("previousVersionId"),
            deprecated=bool(data.get("deprecated", False)),
            deprecated_by=data.get("deprecatedBy"),
            skill_tags=list(data.get("skillTags", [])),
            skill_category=data.get("skillCategory"),
            is_verified=bool(data.get("isVerified", False)),
            verified_by=data.get("verifiedBy"),
            execution=ExecutionStats(
                executions=int(data.get("executions", 0)),
                successes=int(data.get("successes", 0)),
                reward_sum=float(data.get("rewardSum", 0.0)),
            ),
            namespace=str(data.get("namespace") or "default"),
            memory_id=str(data.get("memoryId") or ""),
            version=int(data.get("version", 1)),
            valid_from_ms=data.get("validFrom"),
            valid_to_ms=data.get("validTo"),
            superseded_by=data.get("supersededBy"),
            deleted_at_ms=data.get("deletedAt"),
        )

