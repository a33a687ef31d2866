"""Episodic → semantic consolidation (seed 003, Complementary Learning Systems).

Episodes are stored verbatim (the fast, hippocampal system). A consolidation
cycle *replays* a batch of them — mostly recent, some old, so older patterns are
not forgotten (interleaved replay) — and folds related ones into ``fact``
crystals (the slow, neocortical system):

1. a replayed episode close enough to an existing fact of its namespace
   reinforces that fact (``episode_count`` + 1) instead of creating a
   near-duplicate;
2. the rest are clustered by embedding similarity inside their namespace; a
   cluster of at least ``min_episodes`` becomes a new fact whose text is its
   medoid episode's (no language model is needed to consolidate), with the
   cluster as ``source_episodes`` and confidence 0.7.

Pure: plain values in, a plan out; :mod:`node.memory.learning.learning` applies it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

DEFAULT_RECENT_FRACTION = 0.7
"""Seed 003: "a 70/30 split (recent/old) works well empirically"."""

MIN_EPISODES = 3
"""Seed 003: ``if episodes.len() < 3 { // Not enough data to extract a pattern.``"""

FACT_PREFIX = "Learned from experience: "


@dataclass(frozen=True)
class EpisodeRef:
    id: str
    created_at_ms: int


@dataclass(frozen=True)
class EpisodeInput:
    id: str
    namespace: str
    embedding: Sequence[float] | NDArray[np.floating]


@dataclass(frozen=True)
class FactInput:
    id: str
    namespace: str
    centroid: Sequence[float] | NDArray[np.floating]


@dataclass(frozen=True)
class NewFact:
    namespace: str
    episode_ids: tuple[str, ...]
    medoid_id: str


@dataclass
class FactPlan:
    reinforcements: dict[str, list[str]] = field(default_factory=dict)
    new_facts: list[NewFact] = field(default_factory=list)

    @property
    def is_empty(self) -> bool:
        return not (self.reinforcements or self.new_facts)


def select_replay(
    episodes: Sequence[EpisodeRef],
    recent_since_ms: int,
    batch_size: int,
    recent_fraction: float = DEFAULT_RECENT_FRACTION,
    seed: int = 0,
) -> list[EpisodeRef]:
    """Interleaved replay batch: ``recent_fraction`` recent episodes, the rest sampled from older ones.

    Seed 003: "Each consolidation cycle replays a mix of recent episodes (from the
    current Delta window) and older episodes sampled from the full episodic
    buffer. The ratio is configurable – a 70/30 split (recent/old)". Recent
    means created at or after ``recent_since_ms`` (the previous cycle); the
    newest recent ones are taken first; old ones are a seeded uniform sample.
    When one side has fewer than its share, the other side fills the batch.
    """
    if batch_size <= 0:
        return []
    if not 0.0 <= recent_fraction <= 1.0:
        raise ValueError("recent_fraction must lie in [0, 1]")
    recent = sorted(
        (e for e in episodes if e.created_at_ms >= recent_since_ms),
        key=lambda e: (-e.created_at_ms, e.id),
    )
    old = sorted((e for e in episodes if e.created_at_ms < recent_since_ms), key=lambda e: e.id)
    recent_quota = round(batch_size * recent_fraction)
    old_quota = batch_size - recent_quota
    take_recent = min(len(recent), max(recent_quota, batch_size - len(old)))
    take_old = min(len(old), max(old_quota, batch_size - take_recent))
    sampled = random.Random(seed).sample(old, take_old)
    return recent[:take_recent] + sorted(sampled, key=lambda e: (e.created_at_ms, e.id))


def unit_rows(vectors: Sequence[Sequence[float] | NDArray[np.floating]]) -> NDArray[np.float64]:
    matrix = np.asarray([np.asarray(v, dtype=np.float64).ravel() for v in vectors])
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return np.asarray(matrix / norms, dtype=np.float64)


def centroid(vectors: Sequence[Sequence[float] | NDArray[np.floating]]) -> NDArray[np.float64]:
    """Mean of the unit vectors, re-normalised: what a fact is compared with."""
    mean = unit_rows(vectors).mean(axis=0)
    norm = float(np.linalg.norm(mean))
    return np.asarray(mean / norm if norm else mean, dtype=np.float64)


def plan_facts(
    replayed: Sequence[EpisodeInput],
    facts: Sequence[FactInput],
    similarity_threshold: float,
    min_episodes: int = MIN_EPISODES,
) -> FactPlan:
    """Reinforce existing facts and cluster the rest into new ones; see the module docstring.

    Clustering is greedy and deterministic: inside a namespace the episode with
    the most neighbours at cosine ≥ ``similarity_threshold`` (ties: smaller id)
    seeds a cluster of itself and its unassigned neighbours; a cluster smaller
    than ``min_episodes`` is dropped and its episodes wait for a later cycle.
    """
    plan = FactPlan()
    by_namespace: dict[str, list[EpisodeInput]] = {}
    for episode in sorted(replayed, key=lambda e: e.id):
        by_namespace.setdefault(episode.namespace, []).append(episode)
    facts_by_namespace: dict[str, list[FactInput]] = {}
    for fact in sorted(facts, key=lambda f: f.id):
        facts_by_namespace.setdefault(fact.namespace, []).append(fact)

    for namespace in sorted(by_namespace):
        group = _same_dimension(by_namespace[namespace])
        if not group:
            continue
        units = unit_rows([e.embedding for e in group])
        dim = units.shape[1]
        known = [f for f in facts_by_namespace.get(namespace, []) if np.asarray(f.centroid).size == dim]
        unassigned: list[int] = []
        if known:
            fact_units = unit_rows([f.centroid for f in known])
            similarity = units @ fact_units.T
            for row, episode in enumerate(group):
                best = int(np.argmax(similarity[row]))
                if similarity[row, best] >= similarity_threshold:
                    plan.reinforcements.setdefault(known[best].id, []).append(episode.id)
                else:
                    unassigned.append(row)
        else:
            unassigned = list(range(len(group)))
        plan.new_facts.extend(
            _clusters(namespace, group, units, unassigned, similarity_threshold, min_episodes)
        )
    return plan


def _same_dimension(group: list[EpisodeInput]) -> list[EpisodeInput]:
    # Vectors from another embedder are not comparable: keep the majority dimension.
    sizes = [np.asarray(e.embedding).size for e in group]
    if not sizes:
        return []
    common = max(set(sizes), key=lambda size: (sizes.count(size), size))
    return [e for e, size in zip(group, sizes, strict=True) if size == common and size > 0]


def _clusters(
    namespace: str,
    group: list[EpisodeInput],
    units: NDArray[np.float64],
    rows: list[int],
    threshold: float,
    min_episodes: int,
) -> list[NewFact]:
    if len(rows) < min_episodes:
        return []
    sub = units[rows]
    similarity = sub @ sub.T
    close = similarity >= threshold
    remaining = set(range(len(rows)))
    out: list[NewFact] = []
    while remaining:
        order = sorted(remaining, key=lambda i: (-int(close[i, list(remaining)].sum()), group[rows[i]].id))
        seed = order[0]
        members = sorted(i for i in remaining if close[seed, i])
        if len(members) < min_episodes:
            remaining.discard(seed)
            continue
        remaining.difference_update(members)
        inner = similarity[np.ix_(members, members)].sum(axis=1)
        medoid = members[int(np.argmax(inner))]
        out.append(
            NewFact(
                namespace,
                tuple(sorted(group[rows[i]].id for i in members)),
                group[rows[medoid]].id,
            )
        )
    return out


def fact_text(medoid_text: str) -> str:
    """The text a new fact is born with: its medoid episode's, marked as learned."""
    return FACT_PREFIX + " ".join(medoid_text.split())
