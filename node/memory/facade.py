"""A node's local memory: store + vector index + embedder + hormones, as one object.

``Memory`` is synchronous (CLI, benchmarks, tests) and runs on the database's
thread; trio code uses it through :class:`node.memory.async_memory.AsyncMemory`.
The search path lives in :mod:`node.memory.search.pipeline`.
"""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

from node.config import NodeConfig
from node.crystals import (
    LOCAL_ONLY_SCOPES,
    AccessScope,
    Acquisition,
    Crystal,
    CrystalNotFound,
    CrystalStore,
    Governance,
    IndexParams,
    Lifecycle,
    LifespanPolicy,
    Origin,
    ProgressCallback,
    ProvenanceOperation,
    SemanticType,
    Sensitivity,
    Source,
    VectorIndex,
    now_ms,
    provenance,
)
from node.crystals import governance as gov
from node.db import Database
from node.memory.conversations import CONCEPT as TURNS_CONCEPT
from node.memory.conversations import MIGRATIONS as TURNS_MIGRATIONS
from node.memory.conversations import attach_turns, session_keys
from node.memory.dynamics import (
    ConsolidationInput,
    HormonalEvent,
    HormonalStateManager,
    compute_crystal_influence,
    emotional_valence,
    plan_consolidation,
)
from node.memory.embedding import Embedder, embed_windows, get_embedder
from node.memory.files import CONCEPT as FILES_CONCEPT
from node.memory.files import MIGRATIONS as FILES_MIGRATIONS
from node.memory.learning import run_tiers, tier_status
from node.memory.reembedding import configured_embedder_key
from node.memory.search import (
    RERANK_DEPTH,
    LlmSettings,
    LlmStage,
    MemoryInputError,
    SearchHit,
    SearchRequest,
    give_opinions,
    llm_search_steps,
    open_second_opinion,
    opinion_status,
    record_hits,
    run_steps,
    search,
    set_vectors,
)
from node.memory.skill_versions import new_skill_version
from node.memory.transcripts import CONCEPT as TRANSCRIPTS_CONCEPT
from node.memory.transcripts import MIGRATIONS as TRANSCRIPTS_MIGRATIONS

log = logging.getLogger(__name__)

INDEX_SAVE_EVERY = 1000

_SCOPE_RANK = {
    AccessScope.PUBLIC: 0,
    AccessScope.SHARED: 1,
    AccessScope.PRIVATE: 2,
    AccessScope.CONFIDENTIAL: 3,
}


@dataclass
class ConsolidationReport:
    scored: int = 0
    expired: int = 0
    merged: int = 0
    ttl_expired: int = 0
    purged: int = 0
    transitions: list[dict[str, Any]] = field(default_factory=list)
    learning: dict[str, Any] = field(default_factory=dict)  # facts born/reinforced/evicted
    tiers: dict[str, Any] = field(default_factory=dict)  # energy policy: promoted/expired
    at_ms: int = 0  # the time the cycle ran as of (``consolidate --at``)
    dry_run: bool = False  # True: nothing was written
    forgotten: list[dict[str, Any]] = field(default_factory=list)  # every expiry, whichever phase


FORGOTTEN_TEXT_CHARS = 120


def _forgotten(gone: list[tuple[str, str]], inputs: dict[str, ConsolidationInput]) -> list[dict[str, Any]]:
    """One line per crystal a cycle expires (the first reason wins), for an operator to read."""
    out: dict[str, dict[str, Any]] = {}
    for crystal_id, reason in gone:
        if crystal_id not in out:
            item = inputs.get(crystal_id)
            out[crystal_id] = {"id": crystal_id, "reason": reason,
                               "type": item.semantic_type.value if item else None,
                               "namespace": item.namespace if item else None}
    return list(out.values())


@dataclass
class ExecutionOutcome:
    """What one recorded run of a skill changed (``Memory.record_execution``)."""

    crystal: Crystal
    confidence_before: float
    confidence: float
    hormone_event: str  # seed 000's "reward" or "error"

    def to_dict(self) -> dict[str, Any]:
        """The crystal's JSON plus what the run taught: its confidence and the hormone event."""
        return self.crystal.to_dict() | {"confidenceBefore": round(self.confidence_before, 6),
                                         "confidence": round(self.confidence, 6),
                                         "hormoneEvent": self.hormone_event}


def _most_restrictive(a: AccessScope, b: AccessScope) -> AccessScope:
    return a if _SCOPE_RANK[a] >= _SCOPE_RANK[b] else b


class Memory:
    """Owns the store, the index and the hormonal state of one data dir."""

    def __init__(
        self,
        config: NodeConfig,
        embedder: Embedder | None = None,
        progress: ProgressCallback | None = None,
    ) -> None:
        self.config = config
        self.db = Database(config.db_path)
        try:
            self.store = CrystalStore(self.db)
            self.db.migrate(TURNS_CONCEPT, TURNS_MIGRATIONS)  # where ingested turns came from
            self.db.migrate(TRANSCRIPTS_CONCEPT, TRANSCRIPTS_MIGRATIONS)  # how far each transcript was read
            self.db.migrate(FILES_CONCEPT, FILES_MIGRATIONS)  # what indexed files and chunks became
            # node.toml's embedder, unless a re-embed committed and died before rewriting it.
            self.embedder = embedder or get_embedder(configured_embedder_key(config, self.db))
            self.store.bind_embedder(self.embedder.name, self.embedder.dim)
            self.index = VectorIndex(
                config.index_path,
                IndexParams(
                    dim=self.embedder.dim,
                    m=config.memory.hnsw_m,
                    ef_construction=config.memory.hnsw_ef_construction,
                    ef_search=config.memory.hnsw_ef_search,
                ),
                self.embedder.name,
            )
            self.index_state = self.index.open(self.store, progress)
            # A second encoder's opinion on the dense candidates (node.memory.search.second_opinion).
            self.second = open_second_opinion(config.memory.second_opinion, self.embedder, self.db)
        except BaseException:
            self.db.close()
            raise
        from node.memory.learning import Learning  # seed 003/004 (docs/memory.md)

        self.learning = Learning(self)
        base_merge = config.memory.merge_overlap_threshold
        self.hormones = HormonalStateManager(base_merge_threshold=base_merge)
        saved = self.store.get_meta("hormones")
        if saved:
            self.hormones = HormonalStateManager.from_dict(
                json.loads(saved), base_merge_threshold=base_merge
            )
        settings = LlmSettings.from_config(config.memory)
        self.llm = LlmStage(settings) if settings else None  # off by default

    def close(self) -> None:
        if self.llm is not None:
            self.llm.close()
        if self.db.damage is None:  # a damaged store takes no more writes, nor an index saved from it
            if self.index.dirty:
                self.index.save()
            self.save_hormones()
        self.db.close()

    def save_hormones(self) -> None:
        self.store.set_meta("hormones", json.dumps(self.hormones.to_dict()))

    # --- ingestion ----------------------------------------------------------------------------
    def prepare(
        self,
        text: str,
        *,
        semantic_type: SemanticType = SemanticType.GENERAL,
        scope: AccessScope | None = None,
        origin: Origin = Origin.USER_INPUT,
        source: Source = Source.MEMORY,
        path: str | None = None,
        lifespan: LifespanPolicy | None = None,
        ttl_ms: int | None = None,
        actor: str = gov.Requester.LOCAL_AGENT.value,
        importance_floor: float | None = None,
        **extra: Any,
    ) -> Crystal:
        """Build a crystal with governance, hormonal influence and provenance filled in.

        ``importance_floor``: the user stated it explicitly (a note, ``--importance``): it starts
        at that importance and consolidation never decays it below it nor expires it."""
        text = text.strip()
        if not text:
            raise MemoryInputError("a crystal needs some text")
        sensitivity = gov.classify_sensitivity(text)
        derived = gov.default_scope_for(sensitivity, semantic_type)
        # An explicit scope may tighten but never loosen what the content demands:
        # a text holding a secret stays confidential even if asked to be public.
        # Normal content demands nothing, so there the explicit scope is honoured.
        floor = AccessScope.PUBLIC if sensitivity is Sensitivity.NORMAL else derived
        chosen = derived if scope is None else _most_restrictive(scope, floor)
        if lifespan is None:
            lifespan = LifespanPolicy.TTL if ttl_ms else LifespanPolicy.DECAY
        if lifespan is LifespanPolicy.TTL and not ttl_ms:
            raise MemoryInputError("a ttl lifespan needs --ttl")
        influence = compute_crystal_influence(text, origin)
        crystal = Crystal(
            text=text,
            path=path,
            source=source,
            semantic_type=semantic_type,
            origin=origin,
            lifecycle=Lifecycle.FROZEN if semantic_type is SemanticType.SKILL else Lifecycle.GENERATED,
            hormonal_influence=influence,
            emotional_valence=emotional_valence(influence),
            governance=Governance(
                access_scope=chosen,
                lifespan_policy=lifespan,
                ttl_ms=ttl_ms,
                sensitivity=sensitivity,
                provenance_chain=[actor],
                importance_floor=importance_floor,
            ),
            **extra,
        )
        if importance_floor is not None:
            crystal.importance_score = importance_floor
        crystal.provenance_dag.append(
            provenance.created_node(crystal.id, actor=actor, timestamp_ms=crystal.created_at_ms)
        )
        return crystal

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.embedder.embed(list(texts))

    def second_opinions(self, crystals: Sequence[Crystal], packed: bool = False) -> None:
        """Give each of ``crystals`` the second encoder's vector of its text (stored beside it);
        ``packed`` as for :meth:`embed_windows`."""
        give_opinions(self.second, crystals, packed)

    def embed_windows(self, texts: Sequence[str],
                      packed: bool = False) -> tuple[np.ndarray, list[np.ndarray | None]]:
        """Vectors to store: each text's vector and, for a long text, its window vectors.
        ``packed``: batches packed by token count (less CPU for many texts; the embedder's
        ``PACKED_BATCH_SIZE``)."""
        return embed_windows(self.embedder, list(texts), packed)

    def add_crystals(self, crystals: Sequence[Crystal], vectors: np.ndarray | None = None,
                     windows: Sequence[np.ndarray | None] | None = None,
                     beside: Callable[[sqlite3.Connection, list[Any]], None] | None = None) -> list[Any]:
        """Store crystals (one transaction) and index the new ones (``vectors``, ``windows``: as
        :meth:`embed_windows` gives them, computed here if not given). ``beside`` writes rows that
        belong with them (given the add results) in the same transaction, before anything is indexed."""
        if vectors is None:
            vectors, windows = self.embed_windows([c.text for c in crystals])
        for crystal, vector, split in zip(crystals, vectors, windows or [None] * len(crystals), strict=True):
            set_vectors(crystal, vector, split)
        self.second_opinions(crystals)
        with self.db.transaction() as conn:
            results = self.store.add_many(crystals)
            # Bought knowledge enters at the market's confidence, atomically with the crystal.
            self.learning.admit_bought([c for c, r in zip(crystals, results, strict=True)
                                        if r.created and c.acquisition is Acquisition.BOUGHT])
            if beside is not None:
                beside(conn, results)
        new = [(r.rowid, i) for i, r in enumerate(results) if r.created]
        if new:
            self.index.add(
                np.array([rowid for rowid, _ in new], dtype=np.int64),
                np.vstack([vectors[i] for _, i in new]),
            )
            for crystal, result in zip(crystals, results, strict=True):
                # A seller's words never move this node's hormones (no cortisol by keyword).
                if result.created and crystal.acquisition is not Acquisition.BOUGHT:
                    self.hormones.observe(crystal.text)
            if self.index.dirty >= INDEX_SAVE_EVERY:
                self.index.save()
        return results

    def add(self, text: str, **kwargs: Any) -> Crystal:
        crystal = self.prepare(text, **kwargs)
        result = self.add_crystals([crystal])[0]
        return self.store.get(result.id)

    # --- retrieval ----------------------------------------------------------------------------
    def search(self, request: SearchRequest) -> list[SearchHit]:
        if self.llm is None:
            hits = search(
                self.store, self.index, self.embed, self.hormones, request, self.learning.confidences_by_id,
                second=self.second, sessions=self.session_keys,
            )
        else:
            hits = run_steps(llm_search_steps(self, self.llm, request))
        attach_turns(self, hits)  # a turn's hit names its transcript (source_id, speaker, ...)
        return hits

    def search_candidates(self, request: SearchRequest, expansion: str | None) -> list[SearchHit]:
        """The fused hits the LLM stage works on (no access recorded)."""
        depth = max(request.k, RERANK_DEPTH) if self.llm and self.llm.settings.rerank else request.k
        wide = replace(request, k=depth, record_access=False)
        return search(
            self.store, self.index, self.embed, self.hormones, wide, self.learning.confidences_by_id,
            expansion, second=self.second, sessions=self.session_keys,
        )

    def session_keys(self, rowids: Sequence[int]) -> dict[int, tuple[str, str, str]]:
        """Which search candidates are turns of which conversation session (search ranks them together)."""
        return session_keys(self.db, rowids)

    def record_hits(self, hits: list[SearchHit]) -> None:
        record_hits(self.store, hits)

    def get(self, crystal_id: str, requester: str = gov.Requester.LOCAL_AGENT.value) -> Crystal:
        crystal = self.store.get(crystal_id)
        # Deleted and expired (TTL, checked now) crystals are gone for readers; a superseded
        # version stays readable (its validTo and supersededBy say it is not current).
        expires = crystal.expires_at_ms
        if crystal.deleted_at_ms is not None or (expires is not None and expires <= now_ms()) or (
            not gov.can_access(crystal.governance.access_scope, crystal.lifecycle, requester)
        ):
            # Same answer as a missing crystal: do not reveal that it exists.
            raise CrystalNotFound(crystal_id)
        return crystal

    # --- consolidation ------------------------------------------------------------------------
    def consolidate(self, now: int | None = None, purge: bool = False,
                    dry_run: bool = False) -> ConsolidationReport:
        """Run one consolidation cycle (seed 000, then seed 003's fold and eviction, then seed
        004's tiers under the energy policy) as of ``now``, each phase applied in one transaction.

        ``dry_run``: the same plans, reported and not written, so an operator sees what would be
        forgotten (``report.forgotten``) before it is. A dry run does not fold episodes into facts
        (that writes new facts); its evictions are those of confidence as it stands at ``now``.
        """
        at = now or now_ms()
        inputs = [self._consolidation_input(row) for row in self.store.consolidation_rows()]
        by_id = {item.id: item for item in inputs}
        plan = plan_consolidation(
            inputs, at, self.config.memory, self.hormones.consolidation_modulation(),
            forget=self.config.memory.policy == "importance",
        )
        transitions = [
            (t.crystal_id, t.from_lifecycle.value, t.to_lifecycle.value, t.reason.value)
            for t in plan.transitions
        ]
        merges = [(m.winner_id, m.loser_id, m.similarity) for m in plan.merges]
        if not dry_run:
            self.store.apply_consolidation(
                [(u.crystal_id, u.importance) for u in plan.score_updates], transitions, merges, at
            )
            self.store.set_meta("last_consolidation_ms", str(at))
        report = ConsolidationReport(
            scored=len(plan.score_updates),
            expired=sum(1 for t in plan.transitions if t.to_lifecycle is Lifecycle.EXPIRED),
            merged=len(merges),
            ttl_expired=sum(1 for t in transitions if t[3] == "ttl_elapsed"),
            transitions=[
                {"id": t[0], "from": t[1], "to": t[2], "reason": t[3]} for t in transitions
            ],
            at_ms=at,
            dry_run=dry_run,
        )
        learned = self.learning.cycle(at, apply=not dry_run)
        report.learning = learned.to_dict()
        gone = [(t[0], t[3]) for t in transitions if t[2] == Lifecycle.EXPIRED.value]
        gone += [(crystal_id, "below_min_confidence") for crystal_id in learned.evicted]
        if self.config.memory.policy == "energy":
            tiers = run_tiers(self, self.learning, at, apply=not dry_run)
            report.tiers = tiers.to_dict()
            gone += [(crystal_id, "energy_expired") for crystal_id in tiers.expired]
        report.forgotten = _forgotten(gone, by_id)
        for item in report.forgotten:
            try:
                item["text"] = self.store.get(item["id"]).text[:FORGOTTEN_TEXT_CHARS]
            except CrystalNotFound:
                item["text"] = None
        # Deleted memories (tombstones) are removed by every cycle; expired and archived
        # crystals only when asked (they stay inspectable until then).
        if not dry_run:
            report.purged = self.purge(() if not purge else ("expired", "archived"))
        return report

    def _consolidation_input(self, row: Any) -> ConsolidationInput:
        governance = Governance.from_dict(json.loads(row["governance_json"]))
        return ConsolidationInput(
            id=row["id"],
            path=row["path"],
            semantic_type=SemanticType(row["semantic_type"]),
            lifecycle=Lifecycle(row["lifecycle"]),
            access_count=row["access_count"],
            last_accessed_at_ms=row["last_accessed_at_ms"],
            created_at_ms=row["created_at_ms"],
            emotional_valence=row["emotional_valence"],
            lifespan_policy=governance.lifespan_policy,
            embedding=np.frombuffer(row["embedding"], dtype=np.float32)
            if row["embedding"] is not None
            else None,
            importance=row["importance_score"],
            ttl_ms=governance.ttl_ms,
            namespace=row["namespace"],
            importance_floor=governance.importance_floor,
        )

    def purge(self, lifecycles: Sequence[str] = ("expired", "archived")) -> int:
        removed = self.store.purge(lifecycles)
        if removed:
            self.index.mark_deleted(removed, self.store.checkpoint("vector_deletions"))
            self.index.save()
        return len(removed)

    def record_execution(self, crystal_id: str, success: bool, reward: float | None = None,
                         note: str | None = None) -> ExecutionOutcome:
        """One run of a skill, as this node saw it: the counts, ``steeringReward`` and the
        skill's confidence move in one transaction (``Learning.apply_outcome``); then the
        seed-000 hormone event fires, ``reward`` (dopamine + 0.3) for a success, ``error``
        (cortisol + 0.3) for a failure. Also for a bought skill: a seller's *words* never move
        the hormones, but an outcome is this node's own observation of what the skill did."""
        at = now_ms()
        with self.db.transaction():
            crystal = self.store.record_execution(
                crystal_id, success, reward if reward is not None else (1.0 if success else 0.0),
                at_ms=at, note=note)
            before, after = self.learning.apply_outcome(crystal, success, at)
        event = HormonalEvent.REWARD if success else HormonalEvent.ERROR
        self.hormones.spike(event)
        return ExecutionOutcome(crystal, before, after, event.value)

    def ensure_stable_skill_id(self, crystal_id: str) -> Crystal:
        """A skill's first listing fixes its stable id (its first version's crystal id)."""
        crystal = self.store.get(crystal_id)
        if crystal.stable_skill_id is None:
            self.store.update_fields(crystal.id, "stable_skill_id_set", stable_skill_id=crystal.id)
            crystal.stable_skill_id = crystal.id
        return crystal

    def new_skill_version(self, crystal_id: str, text: str) -> Crystal:
        """Create version n+1 of a skill (:func:`node.memory.skill_versions.new_skill_version`)."""
        return new_skill_version(self, crystal_id, text)

    def status(self) -> dict[str, Any]:
        stats = self.store.stats()
        stats["index"] = {"vectors": self.index.count, "state": self.index_state}
        stats["hormones"] = asdict(self.hormones.state()) | {"weather": self.hormones.weather()}
        stats["db_path"] = str(self.config.db_path)
        stats["tiers"] = tier_status(self, self.learning)
        stats.update(opinion_status(self.second, self.db))
        return stats

    def local_only(self, crystal: Crystal) -> bool:
        return crystal.governance.access_scope in LOCAL_ONLY_SCOPES or (
            crystal.governance.sensitivity is Sensitivity.CONFIDENTIAL
        )


__all__ = ["ConsolidationReport", "ExecutionOutcome", "Memory", "MemoryInputError", "ProvenanceOperation", "SearchHit",
           "SearchRequest"]
