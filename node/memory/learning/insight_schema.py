"""Tables of dream insights, dream marks and directive proposals (seeds 000 / 001 / 003).

Their own concept, beside ``knowledge``: an insight's confidence is an ordinary
knowledge row (provenance ``dream``); these tables hold what only a dream
knows — which crystals an insight was read from, when it was last sighted,
which crystals each dream processed (seed 000's ``dreamCount`` /
``lastDreamedAt``), and the directives an LLM proposed for the user to confirm.
A row goes with its crystal (``ON DELETE CASCADE``); an insight's source ids
stay even after the source is purged (they are its lineage, as in the
provenance DAG).
"""

from __future__ import annotations

from node.db import Migration

CONCEPT = "insights"

MIGRATIONS: list[Migration] = [
    # 1: insights and their sources, dream marks, directive proposals
    [
        """
        CREATE TABLE dream_insights (
            crystal_id TEXT PRIMARY KEY REFERENCES crystals(id) ON DELETE CASCADE,
            namespace TEXT NOT NULL,
            kind TEXT NOT NULL,
            born_at_ms INTEGER NOT NULL,
            last_seen_ms INTEGER NOT NULL,
            sightings INTEGER NOT NULL DEFAULT 1,
            confirmed_at_ms INTEGER,
            classified_by TEXT NOT NULL
        )
        """,
        "CREATE INDEX dream_insights_namespace ON dream_insights(namespace, kind)",
        """
        CREATE TABLE dream_insight_sources (
            insight_id TEXT NOT NULL REFERENCES crystals(id) ON DELETE CASCADE,
            source_id TEXT NOT NULL,
            added_at_ms INTEGER NOT NULL,
            PRIMARY KEY (insight_id, source_id)
        )
        """,
        "CREATE INDEX dream_insight_sources_source ON dream_insight_sources(source_id)",
        """
        CREATE TABLE dream_marks (
            crystal_id TEXT PRIMARY KEY REFERENCES crystals(id) ON DELETE CASCADE,
            dream_count INTEGER NOT NULL,
            last_dreamed_at_ms INTEGER NOT NULL
        )
        """,
        """
        CREATE TABLE directive_proposals (
            id TEXT PRIMARY KEY,
            namespace TEXT NOT NULL,
            text TEXT NOT NULL,
            source_ids_json TEXT NOT NULL,
            proposed_at_ms INTEGER NOT NULL,
            status TEXT NOT NULL,
            decided_at_ms INTEGER,
            crystal_id TEXT,
            UNIQUE (namespace, text)
        )
        """,
    ],
]
