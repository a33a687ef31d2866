"""Repository of learned knowledge: confidence rows, fact sources, energy tiers.

Holds no policy: :mod:`node.memory.learning.learning` decides, this module reads and
writes, each write in one transaction together with its audit rows.
"""

from __future__ import annotations

import json
import logging
import math
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from node.memory.learning.confidence import clamp
from node.memory.learning.energy import EnergyState, Tier
from node.memory.learning.knowledge_schema import CONCEPT, MIGRATIONS

if TYPE_CHECKING:
    from node.db import Database

log = logging.getLogger(__name__)


class Provenance(StrEnum):
    LOCAL = "local"  # rated or flagged on this node
    CONSOLIDATED = "consolidated"  # a fact folded from this node's episodes
    IMPORTED = "imported"  # inherited through a testament
    BOUGHT = "bought"  # delivered by a seller on the market (signer: the seller's key)
    EXECUTED = "executed"  # an own skill whose confidence its recorded runs set (no demurrage)
    DREAM = "dream"  # an insight a dream extracted (floor 0.3 while it lives)


@dataclass(frozen=True)
class KnowledgeRow:
    crystal_id: str
    confidence: float  # at reference_ms
    reference_ms: int
    episode_count: int
    generation: int
    provenance: Provenance
    signer: str | None
    namespace: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "confidence_at_reference": self.confidence,
            "reference_ms": self.reference_ms,
            "episode_count": self.episode_count,
            "generation": self.generation,
            "provenance": self.provenance.value,
            "signer": self.signer,
            "namespace": self.namespace,
        }


def _row(row: sqlite3.Row) -> KnowledgeRow:
    # The database file may have been tampered with: an unreadable row counts as
    # a doubtful local one (confidence 0 evicts it) instead of stopping the node.
    try:
        return KnowledgeRow(
            crystal_id=str(row["crystal_id"]),
            confidence=clamp(float(row["confidence"])),
            reference_ms=int(row["reference_ms"]),
            episode_count=max(1, int(row["episode_count"])),
            generation=max(0, int(row["generation"])),
            provenance=Provenance(row["provenance"]),
            signer=None if row["signer"] is None else str(row["signer"]),
            namespace=str(row["namespace"] or ""),
        )
    except (TypeError, ValueError) as error:
        log.warning("knowledge row %s is corrupt (%s); treated as confidence 0", row["crystal_id"], error)
        return KnowledgeRow(str(row["crystal_id"]), 0.0, 0, 1, 0, Provenance.LOCAL, None, "")


def _energy(row: sqlite3.Row) -> EnergyState | None:
    try:
        energy = float(row["energy"])
        if not math.isfinite(energy) or energy < 0:
            raise ValueError(f"energy {energy}")
        return EnergyState(Tier(row["tier"]), energy, int(row["at_ms"]), int(row["access_count"]))
    except (TypeError, ValueError) as error:
        log.warning("energy row %s is corrupt (%s); it starts again as new", row["crystal_id"], error)
        return None


def audit(
    conn: sqlite3.Connection,
    crystal_id: str | None,
    action: str,
    at_ms: int,
    from_state: str | None = None,
    to_state: str | None = None,
    detail: dict[str, Any] | None = None,
) -> None:
    """One row of the crystals' audit log, inside the caller's transaction."""
    conn.execute(
        "INSERT INTO memory_audit_log(at_ms, crystal_id, action, from_state, to_state, detail_json) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (at_ms, crystal_id, action, from_state, to_state, json.dumps(detail or {}, sort_keys=True)),
    )


UPSERT = (
    "INSERT INTO knowledge(crystal_id, confidence, reference_ms, episode_count, generation, "
    "provenance, signer, namespace) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT(crystal_id) DO UPDATE SET confidence=excluded.confidence, "
    "reference_ms=excluded.reference_ms, episode_count=excluded.episode_count, "
    "generation=excluded.generation, provenance=excluded.provenance, signer=excluded.signer, "
    "namespace=excluded.namespace"
)


def upsert(conn: sqlite3.Connection, row: KnowledgeRow) -> None:
    conn.execute(
        UPSERT,
        (
            row.crystal_id,
            row.confidence,
            row.reference_ms,
            row.episode_count,
            row.generation,
            row.provenance.value,
            row.signer,
            row.namespace,
        ),
    )


def link_sources(conn: sqlite3.Connection, fact_id: str, episode_ids: Iterable[str], at_ms: int) -> None:
    conn.executemany(
        "INSERT OR IGNORE INTO knowledge_sources(episode_id, fact_id, added_at_ms) VALUES (?, ?, ?)",
        [(episode_id, fact_id, at_ms) for episode_id in episode_ids],
    )


class KnowledgeStore:
    """Reads and writes of the ``knowledge`` concept over the node's one database."""

    def __init__(self, db: Database) -> None:
        self.db = db
        db.migrate(CONCEPT, MIGRATIONS)

    # --- confidence ---------------------------------------------------------------------------
    def get(self, crystal_id: str) -> KnowledgeRow | None:
        row = self.db.one("SELECT * FROM knowledge WHERE crystal_id=?", (crystal_id,))
        return None if row is None else _row(row)

    def rows(self, crystal_ids: Sequence[str] | None = None) -> dict[str, KnowledgeRow]:
        if crystal_ids is None:
            found = self.db.all("SELECT * FROM knowledge")
        else:
            found = []
            ids = list(dict.fromkeys(crystal_ids))
            for start in range(0, len(ids), 500):
                chunk = ids[start : start + 500]
                marks = ",".join("?" * len(chunk))
                found += self.db.all(f"SELECT * FROM knowledge WHERE crystal_id IN ({marks})", chunk)
        return {row["crystal_id"]: _row(row) for row in found}

    def set_confidence(self, row: KnowledgeRow, action: str, at_ms: int, detail: dict[str, Any]) -> None:
        with self.db.transaction() as conn:
            upsert(conn, row)
            audit(conn, row.crystal_id, action, at_ms, None, f"{row.confidence:.6f}", detail)

    # --- facts --------------------------------------------------------------------------------
    def sources(self, fact_id: str) -> list[str]:
        rows = self.db.all(
            "SELECT episode_id FROM knowledge_sources WHERE fact_id=? ORDER BY added_at_ms, episode_id",
            (fact_id,),
        )
        return [row[0] for row in rows]

    def unconsolidated_episodes(self) -> list[sqlite3.Row]:
        """Live episodes of this node's own not yet folded into a fact: id, created_at_ms, path.

        An inherited (or bought) episode is evidence someone else already counted: its
        testament's fact came with it. Replaying it would reinforce that fact, or give birth to
        a new one, without a single new observation; only the node's own episodes fold."""
        return self.db.all(
            "SELECT c.id, c.created_at_ms, c.path FROM crystals c "
            "LEFT JOIN knowledge_sources s ON s.episode_id = c.id "
            "LEFT JOIN knowledge k ON k.crystal_id = c.id "
            "WHERE c.semantic_type='episode' AND c.lifecycle NOT IN ('expired', 'archived') "
            "AND s.episode_id IS NULL AND (k.provenance IS NULL OR k.provenance NOT IN (?, ?))",
            (Provenance.IMPORTED.value, Provenance.BOUGHT.value),
        )

    def fact_rows(self) -> list[sqlite3.Row]:
        """Live facts (consolidated here or inherited) with their namespace and own embedding."""
        return self.db.all(
            "SELECT k.crystal_id, k.namespace, c.embedding FROM knowledge k "
            "JOIN crystals c ON c.id = k.crystal_id "
            "WHERE c.semantic_type='fact' AND c.lifecycle NOT IN ('expired', 'archived')"
        )

    def source_embeddings(self, fact_ids: Sequence[str]) -> dict[str, list[bytes]]:
        out: dict[str, list[bytes]] = {}
        for start in range(0, len(fact_ids), 500):
            chunk = list(fact_ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            for row in self.db.all(
                "SELECT s.fact_id, c.embedding FROM knowledge_sources s JOIN crystals c ON c.id = s.episode_id "
                f"WHERE s.fact_id IN ({marks}) AND c.embedding IS NOT NULL",
                chunk,
            ):
                out.setdefault(row[0], []).append(row[1])
        return out

    def embeddings(self, crystal_ids: Sequence[str]) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for start in range(0, len(crystal_ids), 500):
            chunk = list(crystal_ids[start : start + 500])
            marks = ",".join("?" * len(chunk))
            for row in self.db.all(
                f"SELECT id, embedding FROM crystals WHERE id IN ({marks}) AND embedding IS NOT NULL", chunk
            ):
                out[row[0]] = row[1]
        return out

    # --- energy -------------------------------------------------------------------------------
    def energy_states(self) -> dict[str, EnergyState]:
        states = {row["crystal_id"]: _energy(row) for row in self.db.all("SELECT * FROM memory_energy")}
        return {crystal_id: state for crystal_id, state in states.items() if state is not None}

    def tier_counts(self) -> dict[str, int]:
        """Live crystals per tier; a crystal never evaluated counts as working (where it starts)."""
        counts = {tier.value: 0 for tier in Tier}
        for row in self.db.all(
            "SELECT COALESCE(e.tier, 'working') AS tier, COUNT(*) AS n FROM crystals c "
            "LEFT JOIN memory_energy e ON e.crystal_id = c.id "
            "WHERE c.lifecycle NOT IN ('expired', 'archived') GROUP BY 1"
        ):
            counts[row["tier"]] = int(row["n"])
        return counts
