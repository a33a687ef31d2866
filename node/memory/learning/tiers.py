"""Applying the energy policy (seed 004) to a node's memory: evaluate, promote, expire, audit.

With ``memory.policy = "energy"`` this decides which crystals expire (instead
of seed 000's importance threshold): every live crystal is brought to the
present with :func:`node.memory.learning.energy.evaluate`; promotions are written to the
audit log as ``tier_promoted`` and expiries as lifecycle transitions with the
reason ``energy_expired``, all in one transaction. ``memory session end``
evaluates at once with the session-boundary threshold.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from node.crystals import Governance, Lifecycle, LifespanPolicy, SemanticType, now_ms
from node.memory.learning.energy import EnergyState, Tier, TierChange, evaluate, initial_state
from node.memory.learning.knowledge import audit

if TYPE_CHECKING:
    from node.memory.learning.learning import Learning
    from node.memory.owner import MemoryOwner as Memory

log = logging.getLogger(__name__)

LAST_SESSION_END_META = "last_session_end_ms"
NEVER_EXPIRE_TYPES = frozenset({SemanticType.SKILL.value, SemanticType.WARNING.value,
                                SemanticType.DIRECTIVE.value})


@dataclass
class TierReport:
    evaluated: int = 0
    promoted: list[dict[str, Any]] = field(default_factory=list)
    expired: list[str] = field(default_factory=list)
    session_boundary: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "evaluated": self.evaluated,
            "promoted": list(self.promoted),
            "expired": list(self.expired),
            "session_boundary": self.session_boundary,
        }


def _expirable(row: Any) -> bool:
    """Only ordinary decaying material runs out of energy: never a skill, warning or directive,
    a frozen, pinned (``permanent``) or TTL crystal, nor an explicit note (an importance floor:
    seed 004's working tier would otherwise forget what the user said within five hours)."""
    if row["semantic_type"] in NEVER_EXPIRE_TYPES or row["lifecycle"] == Lifecycle.FROZEN.value:
        return False
    governance = Governance.from_dict(json.loads(row["governance_json"]))
    return governance.lifespan_policy is LifespanPolicy.DECAY and not governance.explicit


def run_tiers(memory: Memory, learning: Learning, at_ms: int, *, session_boundary: bool = False,
              apply: bool = True) -> TierReport:
    """Evaluate every live crystal's energy at ``at_ms``; apply promotions and expiries atomically
    (``apply=False``: report them, write nothing; ``consolidate --dry-run``)."""
    report = TierReport(session_boundary=session_boundary)
    states = learning.knowledge.energy_states()
    updates: list[EnergyState] = []
    ids: list[str] = []
    transitions: list[tuple[str, str, str, str]] = []
    promotions: list[tuple[str, Tier, Tier, float]] = []
    for row in memory.store.consolidation_rows():
        crystal_id = row["id"]
        state = states.get(crystal_id) or initial_state(int(row["created_at_ms"]))
        decision = evaluate(
            state,
            at_ms,
            int(row["access_count"]),
            row["last_accessed_at_ms"],
            session_boundary=session_boundary,
            expirable=_expirable(row),
        )
        report.evaluated += 1
        ids.append(crystal_id)
        updates.append(decision.after)
        if decision.change is TierChange.PROMOTED:
            promotions.append((crystal_id, state.tier, decision.after.tier, decision.after.energy))
        elif decision.change is TierChange.EXPIRED:
            transitions.append((crystal_id, row["lifecycle"], Lifecycle.EXPIRED.value, "energy_expired"))
    if apply:
        _apply(memory, ids, updates, promotions, transitions, at_ms, session_boundary)
    report.promoted = [
        {"id": i, "from": b.value, "to": a.value, "energy": round(e, 6)} for i, b, a, e in promotions
    ]
    report.expired = [t[0] for t in transitions]
    return report


def _apply(memory: Memory, ids: list[str], updates: list[EnergyState],
           promotions: list[tuple[str, Tier, Tier, float]], transitions: list[tuple[str, str, str, str]],
           at_ms: int, session_boundary: bool) -> None:
    with memory.db.transaction() as conn:
        conn.executemany(
            "INSERT INTO memory_energy(crystal_id, tier, energy, at_ms, access_count) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(crystal_id) DO UPDATE SET tier=excluded.tier, energy=excluded.energy, "
            "at_ms=excluded.at_ms, access_count=excluded.access_count",
            [(i, s.tier.value, s.energy, s.at_ms, s.access_count) for i, s in zip(ids, updates, strict=True)],
        )
        for crystal_id, before, after, energy in promotions:
            audit(conn, crystal_id, "tier_promoted", at_ms, before.value, after.value,
                  {"energy": round(energy, 6), "session_boundary": session_boundary})
        if transitions:
            memory.store.apply_consolidation([], transitions, [], at_ms)


def end_session(memory: Memory, learning: Learning, at_ms: int | None = None) -> dict[str, Any]:
    """Mark a session boundary; under the energy policy, evaluate tiers with the 1.5 threshold now."""
    at = at_ms if at_ms is not None else now_ms()
    memory.store.set_meta(LAST_SESSION_END_META, str(at))
    out: dict[str, Any] = {"at_ms": at, "policy": memory.config.memory.policy}
    if memory.config.memory.policy == "energy":
        out["tiers"] = run_tiers(memory, learning, at, session_boundary=True).to_dict()
    return out


def tier_status(memory: Memory, learning: Learning) -> dict[str, Any]:
    last = memory.store.get_meta(LAST_SESSION_END_META)
    return {
        "policy": memory.config.memory.policy,
        "tiers": learning.knowledge.tier_counts(),
        "last_session_end_ms": int(last) if last else None,
    }
