"""Tables of learned knowledge (seed 003/004) and their migrations.

Kept beside the crystals rather than inside them: a crystal's text and
embedding never change, while its confidence, its supporting episodes and its
energy tier move at every consolidation cycle. Every row belongs to a crystal
and disappears with it (``ON DELETE CASCADE`` when a crystal is purged).
"""

from __future__ import annotations

from collections.abc import Sequence

CONCEPT = "knowledge"

MIGRATIONS: list[Sequence[str]] = [
    # 1: confidence (facts, warnings, imported and rated crystals), fact sources, energy tiers
    [
        """
        CREATE TABLE knowledge (
            crystal_id TEXT PRIMARY KEY REFERENCES crystals(id) ON DELETE CASCADE,
            confidence REAL NOT NULL,
            reference_ms INTEGER NOT NULL,
            episode_count INTEGER NOT NULL DEFAULT 1,
            generation INTEGER NOT NULL DEFAULT 0,
            provenance TEXT NOT NULL,
            signer TEXT,
            namespace TEXT NOT NULL DEFAULT ''
        )
        """,
        """
        CREATE TABLE knowledge_sources (
            episode_id TEXT PRIMARY KEY REFERENCES crystals(id) ON DELETE CASCADE,
            fact_id TEXT NOT NULL,
            added_at_ms INTEGER NOT NULL
        )
        """,
        "CREATE INDEX knowledge_sources_fact ON knowledge_sources(fact_id)",
        """
        CREATE TABLE memory_energy (
            crystal_id TEXT PRIMARY KEY REFERENCES crystals(id) ON DELETE CASCADE,
            tier TEXT NOT NULL,
            energy REAL NOT NULL,
            at_ms INTEGER NOT NULL,
            access_count INTEGER NOT NULL
        )
        """,
        "CREATE INDEX memory_energy_tier ON memory_energy(tier)",
    ],
]
