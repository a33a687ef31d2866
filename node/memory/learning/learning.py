"""How a node's memory learns: episodes fold into facts, confidence decays, feedback moves it.

One model (seed 003, docs/memory.md): episodes are kept verbatim; each
consolidation cycle replays a 70/30 recent/old batch of the episodes not yet
folded, reinforces the facts they confirm and clusters the rest into new facts
(confidence 0.7). A fact's confidence decays as ``e^(−t/(τ·max(1, ln n)))``
since its last reinforcement; below ``min_confidence`` it is evicted (expired,
audited). Warnings are never evicted and never fall below 0.3. A crystal
without a knowledge row is self-learned and counts as confidence 1.0.

Runs on the database's thread, like :class:`node.memory.facade.Memory`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from node.config import ConfigError
from node.crystals import (
    Crystal,
    Lifecycle,
    LifespanPolicy,
    Origin,
    ProvenanceNode,
    ProvenanceOperation,
    SemanticType,
    now_ms,
)
from node.memory.learning import confidence as conf
from node.memory.learning import facts
from node.memory.learning.dreaming import InsightStore, set_lifespan
from node.memory.learning.knowledge import (
    KnowledgeRow,
    KnowledgeStore,
    Provenance,
    audit,
    link_sources,
    upsert,
)
from node.memory.search import MemoryInputError, set_vectors

if TYPE_CHECKING:
    from node.memory.owner import MemoryOwner as Memory

log = logging.getLogger(__name__)

POLICIES = ("importance", "energy")
CONSOLIDATION_ACTOR = "consolidation"
LAST_FOLD_META = "last_fact_consolidation_ms"
DEAD = (Lifecycle.EXPIRED, Lifecycle.ARCHIVED)
NO_DEMURRAGE = (Provenance.BOUGHT, Provenance.EXECUTED)
"""Confidence that only evidence of use moves: skills are immune to decay (seed 000), and
nothing this node observed ever supported a bought one (seed 003's buyer-beware 0.2)."""


class FeedbackError(MemoryInputError):
    """Feedback names something other than ``useful`` or ``wrong``, or a crystal that is gone."""


@dataclass
class FactReport:
    replayed: int = 0
    recent: int = 0
    facts_born: list[str] = field(default_factory=list)
    reinforced: dict[str, int] = field(default_factory=dict)
    evicted: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "replayed": self.replayed,
            "recent": self.recent,
            "facts_born": list(self.facts_born),
            "reinforced": dict(self.reinforced),
            "evicted": list(self.evicted),
        }


def namespace_of(crystal: Crystal) -> str:
    """The crystal's namespace (``default``, ``user:…``, ``agent:…``, ``session:…``)."""
    return crystal.namespace


def is_warning(crystal: Crystal) -> bool:
    return crystal.semantic_type is SemanticType.WARNING


class Learning:
    """Facts, confidence and feedback over one :class:`Memory`."""

    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self.settings = memory.config.memory
        if self.settings.policy not in POLICIES:
            raise ConfigError(f"memory.policy must be one of {POLICIES}, not {self.settings.policy!r}")
        self.knowledge = KnowledgeStore(memory.db)
        self.insights = InsightStore(memory.db)

    @property
    def tau_ms(self) -> float:
        return self.settings.confidence_tau_days * conf.MS_PER_DAY

    # --- confidence -------------------------------------------------------------------------------
    def confidence(self, crystal: Crystal, row: KnowledgeRow | None, at_ms: int) -> float:
        return self._confidence(row, at_ms, is_warning(crystal))

    def _confidence(self, row: KnowledgeRow | None, at_ms: int, warning: bool) -> float:
        if row is None:
            return conf.SELF_LEARNED_CONFIDENCE
        if row.provenance in NO_DEMURRAGE:
            return conf.clamp(row.confidence)  # set by evidence of use only (conf.BOUGHT_CONFIDENCE)
        if row.provenance is Provenance.DREAM:
            # Seed 003's dream confidence floor: an insight is doubted, never disbelieved,
            # while it lives; its trial window (not doubt) decides whether it stays.
            return max(conf.DREAM_CONFIDENCE_FLOOR, conf.current_confidence(
                row.confidence, at_ms - row.reference_ms, self.tau_ms, row.episode_count))
        return conf.current_confidence(
            row.confidence, at_ms - row.reference_ms, self.tau_ms, row.episode_count, warning=warning
        )

    def confidences(self, crystals: Sequence[Crystal], at_ms: int | None = None) -> dict[str, float]:
        """Confidence now of each crystal (1.0 for self-learned ones without a row)."""
        return self.confidences_by_id([(c.id, is_warning(c)) for c in crystals], at_ms)

    def confidences_by_id(self, crystals: Sequence[tuple[str, bool]], at_ms: int | None = None) -> dict[str, float]:
        """:meth:`confidences` from ``(crystal id, is a warning)`` pairs (search ranks on light rows)."""
        at = at_ms if at_ms is not None else now_ms()
        rows = self.knowledge.rows([crystal_id for crystal_id, _ in crystals])
        return {crystal_id: self._confidence(rows.get(crystal_id), at, warning)
                for crystal_id, warning in crystals}

    def describe(self, crystal: Crystal, at_ms: int | None = None) -> dict[str, Any]:
        """What the node knows about a crystal's confidence and evidence (for ``memory get``)."""
        at = at_ms if at_ms is not None else now_ms()
        row = self.knowledge.get(crystal.id)
        out: dict[str, Any] = {"confidence": round(self.confidence(crystal, row, at), 6)}
        if row is not None:
            out |= row.to_dict()
            if row.provenance is Provenance.CONSOLIDATED:
                out["source_episodes"] = self.knowledge.sources(crystal.id)
        out |= self.insights.mark(crystal.id) or {}  # seed 000's dreamCount / lastDreamedAt
        insight = self.insights.row(crystal.id)
        if insight is not None:
            out["insight"] = {"kind": insight["kind"], "born_at_ms": insight["born_at_ms"],
                              "last_seen_ms": insight["last_seen_ms"], "sightings": insight["sightings"],
                              "confirmed_at_ms": insight["confirmed_at_ms"],
                              "classified_by": insight["classified_by"],
                              "sources": self.insights.sources(crystal.id)}
        return out

    def feedback(self, crystal_id: str, verdict: str, at_ms: int | None = None) -> dict[str, Any]:
        """``useful`` reinforces a crystal's confidence (and counts as an access); ``wrong`` halves it."""
        if verdict not in ("useful", "wrong"):
            raise FeedbackError("feedback is 'useful' or 'wrong'")
        at = at_ms if at_ms is not None else now_ms()
        crystal = self.memory.get(crystal_id)
        if crystal.lifecycle in DEAD:
            raise FeedbackError(f"{crystal_id} is {crystal.lifecycle.value}; feedback needs a live crystal")
        row = self.knowledge.get(crystal.id)
        before = self.confidence(crystal, row, at)
        if verdict == "useful":
            after = conf.reinforce(before, conf.USEFUL_REINFORCEMENT)
        else:
            after = conf.weaken(before, warning=is_warning(crystal))
        updated = KnowledgeRow(
            crystal.id,
            after,
            at,
            row.episode_count if row else 1,
            row.generation if row else 0,
            row.provenance if row else Provenance.LOCAL,
            row.signer if row else None,
            row.namespace if row else namespace_of(crystal),
        )
        with self.memory.db.transaction():
            self.knowledge.set_confidence(updated, f"feedback_{verdict}", at, {"before": round(before, 6)})
            if verdict == "useful":
                self.memory.store.record_access([crystal.id], at)
                if self.insights.confirm(crystal.id, at):  # the user vouched for a dream's insight
                    set_lifespan(self.memory, crystal, LifespanPolicy.DECAY, None, "insight_confirmed")
        return {"id": crystal.id, "verdict": verdict, "confidence_before": before, "confidence": after}

    def apply_outcome(self, crystal: Crystal, success: bool, at_ms: int) -> tuple[float, float]:
        """Move ``crystal``'s confidence by one execution outcome (:func:`conf.outcome_confidence`);
        returns (before, after). Runs inside the caller's transaction (``Memory.record_execution``
        writes the counts in the same one). An own skill's row becomes ``executed`` (no
        demurrage: seed 000's skills never decay); a bought, inherited or learned one keeps its
        provenance and signer."""
        row = self.knowledge.get(crystal.id)
        before = self.confidence(crystal, row, at_ms)
        after = conf.outcome_confidence(before, success, warning=is_warning(crystal))
        provenance = Provenance.EXECUTED if row is None or row.provenance is Provenance.LOCAL else row.provenance
        updated = KnowledgeRow(
            crystal.id, after, at_ms, row.episode_count if row else 1, row.generation if row else 0,
            provenance, row.signer if row else None, row.namespace if row else namespace_of(crystal),
        )
        self.knowledge.set_confidence(updated, "outcome_success" if success else "outcome_failure", at_ms,
                                      {"before": round(before, 6)})
        return before, after

    # --- episodes → facts -------------------------------------------------------------------------
    def fold_episodes(self, at_ms: int) -> FactReport:
        """Replay a batch of unconsolidated episodes; reinforce facts and create new ones."""
        report = FactReport()
        pending = self.knowledge.unconsolidated_episodes()
        since = int(self.memory.store.get_meta(LAST_FOLD_META) or 0)
        batch = facts.select_replay(
            [facts.EpisodeRef(row["id"], int(row["created_at_ms"])) for row in pending],
            since,
            self.settings.replay_batch,
            self.settings.replay_recent_fraction,
            seed=at_ms,
        )
        report.replayed = len(batch)
        report.recent = sum(1 for e in batch if e.created_at_ms >= since)
        episodes = {e.id: self.memory.store.get(e.id, with_embedding=True) for e in batch}
        replayed = [
            facts.EpisodeInput(c.id, namespace_of(c), c.embedding)
            for c in episodes.values()
            if c.embedding is not None
        ]
        if not replayed:
            self.memory.store.set_meta(LAST_FOLD_META, str(at_ms))
            return report
        fact_inputs = self._fact_inputs({e.namespace for e in replayed})
        plan = facts.plan_facts(replayed, fact_inputs, self.settings.fact_similarity)
        for fact_id, episode_ids in sorted(plan.reinforcements.items()):
            self._reinforce(fact_id, episode_ids, at_ms)
            report.reinforced[fact_id] = len(episode_ids)
        for new in plan.new_facts:
            born = self._birth(new, episodes, at_ms)
            if born:
                report.facts_born.append(born)
        self.memory.store.set_meta(LAST_FOLD_META, str(at_ms))
        return report

    def _fact_inputs(self, namespaces: set[str]) -> list[facts.FactInput]:
        """Facts of the replayed namespaces only: their centroids are all a cycle compares with."""
        rows = [row for row in self.knowledge.fact_rows() if row["namespace"] in namespaces]
        embeddings = self.knowledge.source_embeddings([row["crystal_id"] for row in rows])
        out = []
        for row in rows:
            # A fact is compared with the centroid of its episodes; an inherited fact has
            # no episodes here yet, so with its own embedding.
            blobs = embeddings.get(row["crystal_id"]) or ([row["embedding"]] if row["embedding"] else [])
            vectors = [np.frombuffer(blob, dtype=np.float32) for blob in blobs]
            if vectors:
                out.append(facts.FactInput(row["crystal_id"], row["namespace"], facts.centroid(vectors)))
        return out

    def _reinforce(self, fact_id: str, episode_ids: list[str], at_ms: int) -> None:
        row = self.knowledge.get(fact_id)
        if row is None:
            return
        crystal = self.memory.store.get(fact_id)
        value = self.confidence(crystal, row, at_ms)
        for _ in episode_ids:
            value = conf.reinforce(value, conf.EPISODE_REINFORCEMENT)
        updated = KnowledgeRow(
            fact_id, value, at_ms, row.episode_count + len(episode_ids), row.generation,
            row.provenance, row.signer, row.namespace,
        )
        with self.memory.db.transaction() as conn:
            upsert(conn, updated)
            link_sources(conn, fact_id, episode_ids, at_ms)
            # a confirming episode is a use of the fact: +1 access (importance, energy)
            self.memory.store.record_access([fact_id] * len(episode_ids), at_ms)
            audit(conn, fact_id, "fact_reinforced", at_ms, None, f"{value:.6f}",
                  {"episodes": sorted(episode_ids), "episode_count": updated.episode_count})

    def _birth(self, new: facts.NewFact, episodes: dict[str, Crystal], at_ms: int) -> str | None:
        medoid = episodes[new.medoid_id]
        crystal = self.memory.prepare(
            facts.fact_text(medoid.text),
            semantic_type=SemanticType.FACT,
            origin=Origin.INFERRED,
            path=medoid.path,
            scope=medoid.governance.access_scope,
            actor=CONSOLIDATION_ACTOR,
        )
        crystal.created_at_ms = crystal.valid_from_ms = at_ms
        crystal.provenance_dag = [
            ProvenanceNode(crystal.id, ProvenanceOperation.MERGED, CONSOLIDATION_ACTOR, at_ms, list(new.episode_ids))
        ]
        crystal.namespace = new.namespace or crystal.namespace
        vectors, windows = self.memory.embed_windows([crystal.text])
        set_vectors(crystal, vectors[0], windows[0])
        self.memory.second_opinions([crystal])

        def knowledge_rows(conn: Any, stored_id: str) -> None:
            upsert(conn, KnowledgeRow(stored_id, conf.FACT_BIRTH_CONFIDENCE, at_ms, len(new.episode_ids), 0,
                                      Provenance.CONSOLIDATED, None, new.namespace))
            link_sources(conn, stored_id, new.episode_ids, at_ms)
            self.memory.store.record_access([stored_id] * len(new.episode_ids), at_ms)
            audit(conn, stored_id, "fact_born", at_ms, None, f"{conf.FACT_BIRTH_CONFIDENCE:.6f}",
                  {"episodes": list(new.episode_ids), "namespace": new.namespace})

        stored = store_with_rows(self.memory, crystal, vectors, knowledge_rows)
        return stored

    # --- bought knowledge -------------------------------------------------------------------------
    def admit_bought(self, crystals: Sequence[Crystal]) -> None:
        """Give each newly stored bought crystal its knowledge row: the market's confidence
        (:data:`conf.BOUGHT_CONFIDENCE`), provenance ``bought``, the seller as signer. Runs inside
        the caller's transaction, so a bought crystal is never stored at full confidence."""
        for crystal in crystals:
            at = crystal.created_at_ms
            self.knowledge.set_confidence(
                KnowledgeRow(crystal.id, conf.BOUGHT_CONFIDENCE, at, 1, 0, Provenance.BOUGHT,
                             crystal.seller, crystal.namespace),
                "bought", at, {"seller": crystal.seller})

    # --- eviction ---------------------------------------------------------------------------------
    def evict_unconfident(self, at_ms: int, apply: bool = True) -> list[str]:
        """Expire (audited) every live non-warning crystal whose confidence fell below the minimum;
        ``apply=False`` only names them (``consolidate --dry-run``)."""
        rows = self.knowledge.rows()
        transitions: list[tuple[str, str, str, str]] = []
        for crystal_id, row in sorted(rows.items()):
            crystal = self.memory.store.get(crystal_id)
            if (crystal.lifecycle in DEAD or crystal.lifecycle is Lifecycle.FROZEN
                    or crystal.semantic_type is SemanticType.DIRECTIVE
                    or crystal.governance.lifespan_policy is LifespanPolicy.PERMANENT):
                continue  # a directive or a pinned memory goes when the user says so, not by doubt
            value = self.confidence(crystal, row, at_ms)
            if conf.evictable(value, self.settings.min_confidence, warning=is_warning(crystal)):
                transitions.append((crystal_id, crystal.lifecycle.value, Lifecycle.EXPIRED.value,
                                    "below_min_confidence"))
        if transitions and apply:
            self.memory.store.apply_consolidation([], transitions, [], at_ms)
        return [t[0] for t in transitions]

    def cycle(self, at_ms: int, apply: bool = True) -> FactReport:
        """The seed-003 half of a consolidation cycle: fold episodes, then evict what is no longer
        believed. ``apply=False`` (a dry run) folds nothing and only names the evictions."""
        report = self.fold_episodes(at_ms) if apply else FactReport()
        report.evicted = self.evict_unconfident(at_ms, apply)
        return report


def store_with_rows(memory: Memory, crystal: Crystal, vectors: np.ndarray, rows: Any) -> str | None:
    """Store a new crystal and its knowledge rows in one transaction, then index it.

    ``rows(conn, crystal_id)`` writes the rows. When the text is already stored
    (content-hash dedup) nothing is written and ``None`` is returned.
    """
    crystal.embedding = vectors[0].tolist()
    with memory.db.transaction() as conn:
        result = memory.store.add_many([crystal])[0]
        if not result.created:
            return None
        rows(conn, result.id)
    memory.index.add(np.array([result.rowid], dtype=np.int64), vectors[:1])
    memory.hormones.observe(crystal.text)
    return str(result.id)
