"""Consolidation planner (seed 000, ``ConsolidationEngine.run()``).

Pure: it reads a snapshot of crystals and returns a plan; the store applies the
plan (score updates, lifecycle transitions, merges, audit log) in one SQLite
transaction. Running the planner twice on the same snapshot gives the same plan.

Phases, as in the seed:
1. recompute every crystal's importance from scratch (a directive's never below
   its floor, ``importance.DIRECTIVE_IMPORTANCE_FLOOR``; an explicit note's never
   below the importance the user gave it, ``importance_floor``);
2. crystals below ``forget_threshold`` expire (skills, warnings, directives, explicit
   notes, frozen crystals and the ``permanent`` / ``ttl`` lifespan policies never decay-expire;
   TTL crystals expire when their TTL runs out, see ``governance.lifespan_expired``);
3. crystals above ``promote_threshold`` are promoted (generated → activated) and
   (unless a directive, an explicit note or pinned) become merge candidates: two candidates with the same path and cosine
   similarity ≥ the (hormonally modulated) merge threshold merge — the more
   important one becomes ``consolidated``, the other ``archived`` with
   ``parent_id`` = winner;
4. the caller applies everything in one transaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
from numpy.typing import NDArray

from node.config import MemoryConfig
from node.crystals import Lifecycle, LifespanPolicy, SemanticType, ttl_elapsed
from node.memory.dynamics.hormones import ConsolidationModulation
from node.memory.dynamics.importance import importance, importance_floor

SCORE_TOLERANCE = 1e-12
"""Scores that moved less than this are not rewritten."""

# Lifecycles that consolidation may still move; archived and expired wait for purge.
LIVE = frozenset({Lifecycle.GENERATED, Lifecycle.ACTIVATED, Lifecycle.CONSOLIDATED})
PURGEABLE = frozenset({Lifecycle.EXPIRED, Lifecycle.ARCHIVED})


class TransitionReason(StrEnum):
    TTL_ELAPSED = "ttl_elapsed"
    BELOW_FORGET_THRESHOLD = "below_forget_threshold"
    PROMOTED = "promoted"
    MERGED_WINNER = "merged_winner"
    MERGED_LOSER = "merged_loser"


@dataclass
class ConsolidationInput:
    id: str
    path: str | None
    semantic_type: SemanticType
    lifecycle: Lifecycle
    access_count: int
    last_accessed_at_ms: int | None
    created_at_ms: int
    emotional_valence: float | None
    lifespan_policy: LifespanPolicy
    embedding: NDArray[np.floating] | Sequence[float] | None
    importance: float
    ttl_ms: int | None = None
    namespace: str = "default"
    importance_floor: float | None = None  # governance: what the user said explicitly


@dataclass(frozen=True)
class ScoreUpdate:
    crystal_id: str
    importance: float


@dataclass(frozen=True)
class Transition:
    crystal_id: str
    from_lifecycle: Lifecycle
    to_lifecycle: Lifecycle
    reason: TransitionReason


@dataclass(frozen=True)
class Merge:
    winner_id: str
    loser_id: str
    similarity: float


@dataclass
class ConsolidationPlan:
    score_updates: list[ScoreUpdate] = field(default_factory=list)
    transitions: list[Transition] = field(default_factory=list)
    merges: list[Merge] = field(default_factory=list)

    @property
    def is_empty(self) -> bool:
        return not (self.score_updates or self.transitions or self.merges)


def _decay_immune(crystal: ConsolidationInput) -> bool:
    # Warnings (anti-knowledge, seed 003) are never pruned; directives and explicit notes
    # (what the user said) neither: seed 001's notes exist to end amnesia, not to fade in 40 days.
    return (
        crystal.semantic_type in (SemanticType.SKILL, SemanticType.WARNING, SemanticType.DIRECTIVE)
        or crystal.importance_floor is not None
        or crystal.lifecycle == Lifecycle.FROZEN
        or crystal.lifespan_policy in (LifespanPolicy.PERMANENT, LifespanPolicy.TTL)
    )


def _mergeable(crystal: ConsolidationInput) -> bool:
    # Skills are versioned, not merged; frozen crystals are immutable; a warning is never archived;
    # a directive, an explicit note or a pinned crystal is never merged away (into another note,
    # or an inferred fact that happens to be close: "prefers tabs" next to "prefers spaces" is
    # a correction, and the more important of the two is not always the newer).
    return (
        crystal.lifecycle in LIVE
        and crystal.importance_floor is None
        and crystal.lifespan_policy is not LifespanPolicy.PERMANENT
        and crystal.semantic_type not in (SemanticType.SKILL, SemanticType.WARNING, SemanticType.DIRECTIVE)
        and crystal.path is not None
        and crystal.embedding is not None
    )


def _unit_rows(vectors: list[NDArray[np.floating] | Sequence[float]]) -> NDArray[np.float64]:
    matrix = np.asarray([np.asarray(v, dtype=np.float64).ravel() for v in vectors])
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return matrix / norms


def plan_merges(
    candidates: list[ConsolidationInput], scores: dict[str, float], merge_threshold: float
) -> list[Merge]:
    """Pairs to merge among promoted crystals.

    Seed: "Two promoted crystals from the same file path with cosine similarity >=
    mergeOverlapThreshold are merged: the higher-importance one becomes
    consolidated, the lower one becomes archived."

    Greedy and deterministic: within each path, pairs are taken by descending
    similarity (ties by ids) and each crystal merges at most once per run. The
    winner is the higher new importance; on a tie, the smaller id. Crystals of
    different namespaces never merge, even with the same path.
    """
    by_path: dict[tuple[str, str], list[ConsolidationInput]] = {}
    for crystal in candidates:
        if crystal.path is not None and crystal.embedding is not None:
            by_path.setdefault((crystal.namespace, crystal.path), []).append(crystal)
    merges: list[Merge] = []
    for path in sorted(by_path):
        group = sorted(by_path[path], key=lambda c: c.id)
        if len(group) < 2:
            continue
        dims = {np.asarray(c.embedding).size for c in group}
        if len(dims) != 1:
            continue  # embeddings from different models are not comparable
        units = _unit_rows([c.embedding for c in group if c.embedding is not None])
        similarity = units @ units.T
        rows, cols = np.triu_indices(len(group), k=1)
        values = similarity[rows, cols]
        keep = values >= merge_threshold
        pairs = sorted(
            zip(values[keep].tolist(), rows[keep].tolist(), cols[keep].tolist(), strict=True),
            key=lambda pair: (-pair[0], pair[1], pair[2]),
        )
        merged: set[int] = set()
        for value, i, j in pairs:
            if i in merged or j in merged:
                continue
            merged.update((i, j))
            first, second = group[i], group[j]  # first.id < second.id
            if scores[second.id] > scores[first.id]:
                first, second = second, first
            merges.append(Merge(first.id, second.id, float(value)))
    return merges


def plan_consolidation(
    crystals: Iterable[ConsolidationInput],
    now_ms: int,
    config: MemoryConfig | None = None,
    modulation: ConsolidationModulation | None = None,
    forget: bool = True,
) -> ConsolidationPlan:
    """One consolidation run over a snapshot; see the module docstring for the phases.

    Importance (seed): ``I(t) = S(t) * f(accessCount) * e^(-λ_eff * Δt)`` with Δt
    measured from ``last_accessed_at_ms`` (or ``created_at_ms`` if never accessed),
    and λ_eff further scaled by ``1 - modulation.decay_resistance``. The merge
    threshold is ``modulation.merge_threshold`` when given, else the configured
    ``merge_overlap_threshold``. Every crystal gets at most one transition, from its
    current lifecycle to its final one (a generated crystal that is promoted and
    merged in the same run goes straight to consolidated). ``forget=False`` (the
    energy policy, which expires by energy instead) skips the forget threshold.
    """
    settings = config or MemoryConfig()
    decay_resistance = modulation.decay_resistance if modulation else 0.0
    merge_threshold = modulation.merge_threshold if modulation else settings.merge_overlap_threshold
    ordered = sorted(crystals, key=lambda c: c.id)
    plan = ConsolidationPlan()
    scores: dict[str, float] = {}
    final: dict[str, tuple[Lifecycle, TransitionReason]] = {}
    candidates: list[ConsolidationInput] = []

    for crystal in ordered:
        reference_ms = crystal.last_accessed_at_ms or crystal.created_at_ms
        floor = max(importance_floor(crystal.semantic_type), crystal.importance_floor or 0.0)
        score = max(floor, importance(
            crystal.access_count,
            now_ms - reference_ms,
            crystal.emotional_valence,
            decay_rate=settings.decay_rate,
            emotion_decay_resistance=settings.emotion_decay_resistance,
            decay_resistance=decay_resistance,
        ))
        scores[crystal.id] = score
        if abs(score - crystal.importance) > SCORE_TOLERANCE:
            plan.score_updates.append(ScoreUpdate(crystal.id, score))
        if crystal.lifecycle not in LIVE:
            continue
        if crystal.lifespan_policy == LifespanPolicy.TTL and ttl_elapsed(
            crystal.ttl_ms, crystal.created_at_ms, now_ms
        ):
            final[crystal.id] = (Lifecycle.EXPIRED, TransitionReason.TTL_ELAPSED)
        elif forget and score < settings.forget_threshold and not _decay_immune(crystal):
            final[crystal.id] = (Lifecycle.EXPIRED, TransitionReason.BELOW_FORGET_THRESHOLD)
        elif score > settings.promote_threshold:
            if crystal.lifecycle == Lifecycle.GENERATED:
                final[crystal.id] = (Lifecycle.ACTIVATED, TransitionReason.PROMOTED)
            if _mergeable(crystal):
                candidates.append(crystal)

    for merge in plan_merges(candidates, scores, merge_threshold):
        plan.merges.append(merge)
        final[merge.winner_id] = (Lifecycle.CONSOLIDATED, TransitionReason.MERGED_WINNER)
        final[merge.loser_id] = (Lifecycle.ARCHIVED, TransitionReason.MERGED_LOSER)

    for crystal in ordered:
        if crystal.id in final:
            to_lifecycle, reason = final[crystal.id]
            if to_lifecycle != crystal.lifecycle:
                plan.transitions.append(
                    Transition(crystal.id, crystal.lifecycle, to_lifecycle, reason)
                )
    return plan


def is_purgeable(lifecycle: Lifecycle | str) -> bool:
    """Seed: ``purgeExpired()`` physically deletes expired and archived crystals."""
    return Lifecycle(lifecycle) in PURGEABLE


def purge_candidates(crystals: Iterable[tuple[str, Lifecycle | str]]) -> list[str]:
    """Ids (sorted) of ``(id, lifecycle)`` pairs that ``purgeExpired()`` would delete."""
    return sorted(crystal_id for crystal_id, lifecycle in crystals if is_purgeable(lifecycle))
