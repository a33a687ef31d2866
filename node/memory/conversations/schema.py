"""The ``conversations`` concept's table: where each ingested turn came from (its own migrations).

Kept beside the crystals, like ``knowledge``: a turn is an ordinary crystal
(text, vector, governance), and this row says which conversation, session and
position it had and the id its file gave it (``source_id``, LoCoMo's ``dia_id``).
The primary key (namespace, conversation, source_id) makes re-ingesting a file
add nothing; a row goes when its crystal is purged (``ON DELETE CASCADE``).
"""

from __future__ import annotations

from node.db import Migration

CONCEPT = "conversations"

MIGRATIONS: list[Migration] = [
    # 1: one row per ingested turn
    [
        """
        CREATE TABLE conversation_turns (
            namespace TEXT NOT NULL,
            conversation TEXT NOT NULL,
            source_id TEXT NOT NULL,
            crystal_id TEXT NOT NULL REFERENCES crystals(id) ON DELETE CASCADE,
            speaker TEXT NOT NULL,
            session TEXT NOT NULL,
            session_index INTEGER NOT NULL,
            turn_index INTEGER NOT NULL,
            session_date TEXT,
            at_ms INTEGER,
            ingested_at_ms INTEGER NOT NULL,
            PRIMARY KEY (namespace, conversation, source_id)
        )
        """,
        "CREATE INDEX conversation_turns_crystal ON conversation_turns(crystal_id)",
        "CREATE INDEX conversation_turns_order ON conversation_turns("
        "namespace, conversation, session_index, turn_index)",
    ],
]

SCHEMA_VERSION = len(MIGRATIONS)
