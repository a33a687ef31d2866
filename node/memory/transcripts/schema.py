"""The ``transcripts`` concept's table: how far each transcript file has been read (its own migrations).

One row per (namespace, transcript): the byte offset consumed (the start of the first
line not yet read), the fingerprint of the file it was read from (``lines.fingerprint``),
the format and the host's session id found there, and how many messages it gave. The row
is written in the same transaction as the turns of the chunk that moved it, so a crash
between chunks neither loses nor repeats a message.
"""

from __future__ import annotations

from node.db import Migration

CONCEPT = "transcripts"

MIGRATIONS: list[Migration] = [
    # 1: one cursor per transcript
    [
        """
        CREATE TABLE transcript_cursors (
            namespace TEXT NOT NULL,
            transcript TEXT NOT NULL,
            offset INTEGER NOT NULL,
            fingerprint TEXT NOT NULL,
            format TEXT NOT NULL,
            session_id TEXT NOT NULL,
            messages INTEGER NOT NULL DEFAULT 0,
            updated_at_ms INTEGER NOT NULL,
            PRIMARY KEY (namespace, transcript)
        )
        """,
    ],
]
