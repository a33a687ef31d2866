"""The ``files`` concept's tables: what each indexed file and chunk became (its own migrations).

Kept beside the crystals, like ``conversation_turns``: a chunk is an ordinary
crystal (text, vector, governance, versions), and these rows say which file and
which chunk of it it holds, so a re-sync compares without reading the crystals
or embedding anything:

* ``indexed_files``: per (namespace, path) the size and mtime (ns) it had when
  last read and how many chunks it gave; a file whose size and mtime are the same
  and whose chunks are all still current is not read again.
* ``indexed_chunks``: per (namespace, path, chunk key) the current crystal, its
  memory and the SHA-256 of its text, and the lines it covers. The row goes when
  its crystal is purged (``ON DELETE CASCADE``); the file's count then no longer
  matches, so the next sync reads the file again and restores the chunk.
"""

from __future__ import annotations

from node.db import Migration

CONCEPT = "files"

MIGRATIONS: list[Migration] = [
    # 1: indexed files and their chunks
    [
        """
        CREATE TABLE indexed_files (
            namespace TEXT NOT NULL,
            path TEXT NOT NULL,
            size INTEGER NOT NULL,
            mtime_ns INTEGER NOT NULL,
            chunks INTEGER NOT NULL,
            indexed_at_ms INTEGER NOT NULL,
            PRIMARY KEY (namespace, path)
        )
        """,
        """
        CREATE TABLE indexed_chunks (
            namespace TEXT NOT NULL,
            path TEXT NOT NULL,
            chunk_key TEXT NOT NULL,
            crystal_id TEXT NOT NULL REFERENCES crystals(id) ON DELETE CASCADE,
            memory_id TEXT NOT NULL,
            hash TEXT NOT NULL,
            start_line INTEGER NOT NULL,
            end_line INTEGER NOT NULL,
            PRIMARY KEY (namespace, path, chunk_key)
        )
        """,
        "CREATE INDEX indexed_chunks_crystal ON indexed_chunks(crystal_id)",
    ],
]

SCHEMA_VERSION = len(MIGRATIONS)
