"""Working memory's one door into the crystal store: ``MemoryBackend`` over ``Memory``.

Everything else in ``node.memory.working`` takes plain values; this module is
where crystals are read, written and searched. Calls are serialised with a
lock, so threads sharing one ``Memory`` (tests, a CLI) never interleave on its
SQLite connection and vector index; inside the node they already run one at a
time on the memory worker thread.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar, cast

from node.crystals import (
    AccessScope,
    Crystal,
    ExecutionStats,
    Filters,
    Lifecycle,
    LifespanPolicy,
    Origin,
    ProvenanceNode,
    ProvenanceOperation,
    SemanticType,
    Source,
    content_hash,
    now_ms,
)
from node.crystals import governance as gov
from node.memory.facade import Memory, MemoryInputError, SearchRequest
from node.memory.learning import (
    Candidate,
    Classification,
    InsightReport,
    Material,
    apply_findings,
    new_material,
)
from node.memory.namespaces import DEFAULT_NAMESPACE, validate_namespace
from node.memory.text_limits import check_text_size
from node.memory.working.dream import LIVE, TASK_TYPES, CrystalView, HormoneLevels
from node.memory.working.migration import SEED_IMPORTANCE, Chunk
from node.memory.working.scratch import ScratchNote, clean_note_text

SNAPSHOT_RECENT = 200
SNAPSHOT_RANKED = 100
_LIVE = tuple(sorted(LIVE | {"frozen"}))
R = TypeVar("R")


@dataclass(frozen=True)
class NoteKind:
    """How a note's crystal is typed when the caller says so (the MCP ``memory_add``)."""

    semantic_type: SemanticType = SemanticType.GENERAL
    scope: AccessScope | None = None
    lifespan: LifespanPolicy | None = None  # ``permanent``: pinned from the start


def note_kind(semantic_type: str | None = None, scope: str | None = None,
              lifespan: str | None = None) -> NoteKind | None:
    """The :class:`NoteKind` a note request asks for (None: an ordinary note)."""
    if semantic_type is None and scope is None and lifespan is None:
        return None
    if lifespan not in (None, LifespanPolicy.DECAY.value, LifespanPolicy.PERMANENT.value):
        raise MemoryInputError("lifespan must be one of: decay, permanent")
    return NoteKind(SemanticType(semantic_type or SemanticType.GENERAL), AccessScope(scope) if scope else None,
                    LifespanPolicy(lifespan) if lifespan else None)


@dataclass(frozen=True)
class NoteCrystal:
    id: str
    created: bool  # False: a crystal with exactly this text already existed
    differs: dict[str, dict[str, str]] = field(default_factory=dict)


def view_of(crystal: Crystal) -> CrystalView:
    influence = crystal.hormonal_influence
    return CrystalView(
        id=crystal.id, text=crystal.text, semantic_type=crystal.semantic_type.value,
        lifecycle=crystal.lifecycle.value, importance=crystal.importance_score,
        access_count=crystal.access_count, created_at_ms=crystal.created_at_ms,
        last_accessed_at_ms=crystal.last_accessed_at_ms,
        dopamine=influence.dopamine if influence else 0.0,
        cortisol=influence.cortisol if influence else 0.0,
        oxytocin=influence.oxytocin if influence else 0.0,
        executions=crystal.execution.executions, successes=crystal.execution.successes,
        origin=crystal.origin.value, skill_category=crystal.skill_category, path=crystal.path,
    )


class MemoryBackend:
    """``run`` executes each store call where the owner wants it (the node: on its memory
    worker thread, so a dream waiting on an LLM holds nothing); by default, under a lock."""

    def __init__(self, memory: Memory, run: Callable[[Callable[[], Any]], Any] | None = None,
                 namespace: str = DEFAULT_NAMESPACE) -> None:
        self.memory = memory
        self.namespace = validate_namespace(namespace)
        self._lock = threading.RLock()
        self._runner = run

    def _run(self, function: Callable[[], R]) -> R:
        if self._runner is not None:
            return cast(R, self._runner(function))
        with self._lock:
            return function()

    def call(self, function: Callable[[], R]) -> R:
        """Run a caller's own store read (The Niche's ledger query) where store calls run."""
        return self._run(function)

    # --- meta --------------------------------------------------------------------------------
    def get_meta(self, key: str) -> str | None:
        return self._run(lambda: self.memory.store.get_meta(key))

    def set_meta(self, key: str, value: str) -> None:
        self._run(lambda: self.memory.store.set_meta(key, value))

    # --- writes ------------------------------------------------------------------------------
    def note_crystal(self, note: ScratchNote, path: str, kind: NoteKind | None = None) -> NoteCrystal:
        """The crystal holding ``note`` (created if missing; dedup by content hash)."""
        return self._run(lambda: self._note_crystal(note, path, kind or NoteKind()))

    def existing_note(self, text: str, kind: NoteKind | None = None) -> NoteCrystal | None:
        """The current crystal already holding exactly ``text`` in this namespace, with the
        requested fields that differ from it (as ``memory add`` reports them), or None."""
        cleaned = clean_note_text(text)
        stored = self._run(lambda: self.memory.store.find_by_hash(content_hash(cleaned), self.namespace))
        if stored is None:
            return None
        differs: dict[str, dict[str, str]] = {}
        if kind is not None and kind.scope is not None and kind.scope is not stored.governance.access_scope:
            differs["scope"] = {"stored": stored.governance.access_scope.value, "requested": kind.scope.value}
        if kind is not None and kind.semantic_type is not stored.semantic_type:
            differs["type"] = {"stored": stored.semantic_type.value, "requested": kind.semantic_type.value}
        return NoteCrystal(stored.id, False, differs)

    def hold(self, crystal_id: str, importance: float) -> bool:
        """Raise a stored crystal's importance floor to ``importance`` (a note repeating it
        word for word); False when it already had that much. Audited as ``held``."""
        return self._run(lambda: self._hold(crystal_id, importance))

    def _hold(self, crystal_id: str, importance: float) -> bool:
        governance = self.memory.store.get(crystal_id).governance
        if governance.importance_floor is not None and governance.importance_floor >= importance:
            return False
        raised = replace(governance, importance_floor=importance)
        self.memory.store.update_fields(crystal_id, "held", governance_json=json.dumps(raised.to_dict()))
        return True

    def _note_crystal(self, note: ScratchNote, path: str, kind: NoteKind) -> NoteCrystal:
        existing = self.memory.store.find_by_hash(content_hash(note.text), self.namespace)
        if existing is not None:
            return NoteCrystal(existing.id, False)
        # A note is what the agent was told to keep (seed 001: names, deadlines, preferences,
        # "remember this"): its importance is a floor. An [AUTO] note is the hormones' guess
        # and decays like anything else the node gathered by itself.
        crystal = self.memory.prepare(note.text, origin=Origin.SESSION, source=Source.MEMORY,
                                      path=path, created_at_ms=note.at_ms,
                                      semantic_type=kind.semantic_type, scope=kind.scope,
                                      namespace=self.namespace, lifespan=kind.lifespan,
                                      importance_floor=None if note.auto else note.importance)
        crystal.importance_score = note.importance
        # An [AUTO] note records a hormonal event; its words must not spike the
        # hormones again (or every consolidation cycle would note the same spike).
        levels = dict(self.memory.hormones.levels) if note.auto else None
        result = self.memory.add_crystals([crystal])[0]
        if levels is not None:
            self.memory.hormones.levels.update(levels)
        return NoteCrystal(result.id, result.created)

    def add_seed_chunks(self, chunks: Sequence[Chunk], path: str) -> int:
        """Seed migration: chunks as consolidated crystals of importance 0.75; returns new ones."""
        crystals = []
        for chunk in chunks:
            crystal = self.memory.prepare(chunk.text, origin=Origin.INDEXED, source=Source.MEMORY,
                                          path=path, start_line=chunk.start_line,
                                          end_line=chunk.end_line, namespace=self.namespace)
            crystal.lifecycle = Lifecycle.CONSOLIDATED
            crystal.importance_score = SEED_IMPORTANCE
            crystals.append(crystal)
        if not crystals:
            return 0
        results = self._run(lambda: self.memory.add_crystals(crystals))
        return sum(1 for result in results if result.created)

    def crystallize(self, crystal_id: str, text: str | None = None, category: str | None = None,
                    tags: Sequence[str] = ()) -> Crystal:
        """A skill crystal from a repeated task pattern, ready for the quality gates.

        The pattern's recorded executions move with it (they are its track record);
        provenance links the skill to the pattern it was forked from.
        """
        if text is not None and not text.strip():
            raise MemoryInputError("text must not be empty")
        if text is not None:
            check_text_size(text, SemanticType.SKILL)
        if category is not None and not 0 < len(category) <= 64:
            raise MemoryInputError("category must be 1 to 64 characters")
        if len(tags) > 16 or not all(isinstance(t, str) and 0 < len(t) <= 32 for t in tags):
            raise MemoryInputError("tags: at most 16, each 1 to 32 characters")
        return self._run(lambda: self._crystallize(crystal_id, text, category, tags))

    def _crystallize(self, crystal_id: str, text: str | None, category: str | None,
                     tags: Sequence[str]) -> Crystal:
        source = self.memory.get(crystal_id)
        if source.semantic_type.value not in TASK_TYPES or source.lifecycle.value not in LIVE:
            raise MemoryInputError(
                f"{source.id} is a {source.lifecycle.value} {source.semantic_type.value} crystal; "
                "only live task patterns can be crystallised")
        skill = self.memory.prepare(
            (text or f"Skill: {source.text}").strip(), semantic_type=SemanticType.SKILL,
            origin=Origin.INFERRED, source=Source.SKILLS, skill_category=category,
            skill_tags=list(tags), namespace=source.namespace,
            execution=replace(source.execution) if source.execution.executions else ExecutionStats())
        skill.provenance_dag = [ProvenanceNode(skill.id, ProvenanceOperation.FORKED,
                                               gov.Requester.LOCAL_AGENT.value, skill.created_at_ms,
                                               [source.id], {"crystallized_from": source.id})]
        result = self.memory.add_crystals([skill])[0]
        if not result.created:
            raise MemoryInputError(f"a crystal with this text already exists: {result.id}")
        return self.memory.store.get(result.id)

    # --- dream insights (node.memory.learning.dreaming) ---------------------------------------
    def insight_material(self) -> Material:
        """What this namespace gained since the previous dream read it (notes, session turns)."""
        return self._run(lambda: new_material(self.memory, self.namespace))

    def store_insights(self, material: Material, candidates: Sequence[Candidate],
                       classes: dict[int, Classification], at_ms: int, classified_by: str) -> InsightReport:
        return self._run(lambda: apply_findings(self.memory, self.memory.learning, self.namespace, material,
                                                candidates, classes, at_ms, classified_by))

    def proposals(self, status: str | None = "pending") -> list[dict[str, Any]]:
        return self._run(lambda: self.memory.learning.insights.proposals(self.namespace, status))

    def proposal(self, proposal_id: str) -> dict[str, Any]:
        return self._run(lambda: self.memory.learning.insights.proposal(proposal_id, self.namespace))

    def decide_proposal(self, proposal_id: str, status: str, at_ms: int, crystal_id: str | None) -> None:
        self._run(lambda: self.memory.learning.insights.decide(proposal_id, self.namespace, status, at_ms,
                                                               crystal_id))

    # --- reads -------------------------------------------------------------------------------
    def _filters(self, semantic_types: tuple[str, ...] = ()) -> Filters:
        """Live, current crystals of this namespace."""
        return Filters(semantic_types=semantic_types, lifecycles=_LIVE, namespaces=(self.namespace,),
                       current_at_ms=now_ms())

    def snapshot(self, since_ms: int) -> tuple[list[CrystalView], frozenset[str]]:
        """Crystals in view of a dream (recent, most used, most important, skills) and the
        ids of those created after ``since_ms``."""
        return self._run(lambda: self._snapshot(since_ms))

    def _snapshot(self, since_ms: int) -> tuple[list[CrystalView], frozenset[str]]:
        store = self.memory.store
        live = self._filters()
        recent = store.list_crystals(live, SNAPSHOT_RECENT, "created_at_ms DESC")
        seen = {c.id: c for c in recent}
        for order in ("access_count DESC", "importance_score DESC"):
            for crystal in store.list_crystals(live, SNAPSHOT_RANKED, order):
                seen.setdefault(crystal.id, crystal)
        skills = self._filters(("skill", "task_pattern"))
        for crystal in store.list_crystals(skills, SNAPSHOT_RANKED, "executions DESC"):
            seen.setdefault(crystal.id, crystal)
        views = [view_of(c) for c in seen.values() if not c.deprecated]
        return views, frozenset(c.id for c in recent if c.created_at_ms > since_ms)

    def search_ids(self, query: str, k: int) -> list[str]:
        """``Memory.search`` as an agent would run it, without counting it as an access."""
        if not query.strip():
            return []
        request = SearchRequest(query, k, record_access=False, namespaces=(self.namespace,))
        hits = self._run(lambda: self.memory.search(request))
        return [hit.crystal.id for hit in hits]

    def hormones(self) -> HormoneLevels:
        state = self._run(self.memory.hormones.state)
        return HormoneLevels(state.dopamine, state.cortisol, state.oxytocin)

    def latest_tagged(self, hormone: str, level: float = 0.3) -> str | None:
        """Text of the newest crystal carrying ``hormone`` at ``level`` or more (auto-scratch context)."""
        recent = self._run(lambda: self.memory.store.list_crystals(
            self._filters(), 50, "created_at_ms DESC"))
        for crystal in recent:
            influence = crystal.hormonal_influence
            if influence is not None and getattr(influence, hormone) >= level:
                return crystal.text
        return None
