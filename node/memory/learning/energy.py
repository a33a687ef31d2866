"""Energy tiers: the ``memory.policy = "energy"`` consolidation policy (seed 004).

Every live crystal carries an energy and a tier (working, short-term,
long-term). Energy decays exponentially at the tier's rate and every access
adds 1.0; enough energy promotes a crystal one tier up, too little expires it.

Pure functions of plain values. A stored energy is the value at a reference
time; :func:`energy_at` derives the value at any later time, so evaluating a
crystal twice at the same instant gives the same answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum


class Tier(StrEnum):
    WORKING = "working"
    SHORT_TERM = "short_term"
    LONG_TERM = "long_term"


DECAY_PER_HOUR: dict[Tier, float] = {
    Tier.WORKING: 0.5,
    Tier.SHORT_TERM: 0.05,
    Tier.LONG_TERM: 0.001,
}
"""Seed 004 table: decay constant λ per hour — working 0.5, short-term 0.05, long-term 0.001."""

PROMOTE_AT: dict[Tier, float] = {Tier.WORKING: 2.0, Tier.SHORT_TERM: 5.0}
"""Seed 004 table: "2.0 → Short-term", "5.0 → Long-term"; long-term has no promotion."""

SESSION_BOUNDARY_PROMOTE_AT = 1.5
"""Seed 004: "Session boundaries: Promotion threshold lowered to 1.5 for working memories"."""

EXPIRE_BELOW = 0.1
"""Seed 004: "Memories with energy < 0.1 expire"."""

INITIAL_ENERGY = 1.0
"""Seed 004: "All new memories start at 1.0 in working tier"."""

ACCESS_ENERGY = 1.0
"""Seed 004: "Each access adds +1.0 energy"."""

NEXT_TIER = {Tier.WORKING: Tier.SHORT_TERM, Tier.SHORT_TERM: Tier.LONG_TERM}
MS_PER_HOUR = 3_600_000


def energy_at(initial: float, decay_per_hour: float, hours: float, accesses: float = 0.0) -> float:
    """Energy ``hours`` after a reference point, plus the access energy gained since.

    Seed 004: ``E(t) = E₀ × e^(-λt) + Σ(access_events)`` with ``t`` in hours and
    each access adding +1.0.
    """
    return initial * math.exp(-decay_per_hour * max(0.0, hours)) + accesses


def half_life_hours(tier: Tier) -> float:
    """Seed 004 table's half-lives (~1.4 h, ~14 h, ~700 h) are ``ln 2 / λ``."""
    return math.log(2) / DECAY_PER_HOUR[tier]


class TierChange(StrEnum):
    STAY = "stay"
    PROMOTED = "promoted"
    EXPIRED = "expired"


@dataclass(frozen=True)
class EnergyState:
    tier: Tier
    energy: float
    at_ms: int
    access_count: int


@dataclass(frozen=True)
class TierDecision:
    change: TierChange
    before: EnergyState
    after: EnergyState


def evaluate(
    state: EnergyState,
    now_ms: int,
    access_count: int,
    last_accessed_at_ms: int | None,
    *,
    session_boundary: bool = False,
    expirable: bool = True,
) -> TierDecision:
    """Bring ``state`` to ``now_ms`` and decide promotion or expiry.

    Accesses counted since ``state`` (``access_count - state.access_count``) are
    taken to have happened at ``last_accessed_at_ms`` (the store keeps only the
    newest access time), so each adds ``ACCESS_ENERGY`` decayed from then.
    A crystal rises at most one tier per evaluation; one that is not
    ``expirable`` (a warning, a skill, a permanent crystal) keeps its tier
    instead of expiring.
    """
    decay = DECAY_PER_HOUR[state.tier]
    new_accesses = max(0, access_count - state.access_count)
    access_energy = 0.0
    if new_accesses:
        accessed_at = last_accessed_at_ms if last_accessed_at_ms is not None else now_ms
        accessed_at = min(max(accessed_at, state.at_ms), now_ms)
        access_energy = energy_at(new_accesses * ACCESS_ENERGY, decay, (now_ms - accessed_at) / MS_PER_HOUR)
    energy = energy_at(state.energy, decay, (now_ms - state.at_ms) / MS_PER_HOUR, access_energy)
    tier = state.tier
    change = TierChange.STAY
    threshold = PROMOTE_AT.get(tier)
    if tier is Tier.WORKING and session_boundary:
        threshold = SESSION_BOUNDARY_PROMOTE_AT
    if threshold is not None and energy >= threshold:
        tier, change = NEXT_TIER[tier], TierChange.PROMOTED
    elif energy < EXPIRE_BELOW and expirable:
        change = TierChange.EXPIRED
    after = EnergyState(tier, energy, now_ms, max(access_count, state.access_count))
    return TierDecision(change, state, after)


def initial_state(created_at_ms: int) -> EnergyState:
    """A crystal never evaluated: 1.0 in working as of its creation, no access counted yet."""
    return EnergyState(Tier.WORKING, INITIAL_ENERGY, created_at_ms, 0)
