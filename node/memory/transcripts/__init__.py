"""Session transcripts as input: a host's JSONL transcript becomes memories, read as it grows.

Claude Code session JSONL, Codex CLI rollouts and plain ``{role, content, timestamp}``
lines (``parse``, told apart by ``detect_format``) become one memory per message worth
keeping: text, a tool call as one line, a tool result shortened; thinking, progress and
bookkeeping dropped; terminal codes stripped and secrets redacted before anything is
stored. The caller reads the file (``feed_transcript``: the node never opens a path a
request names) and sends chunks of complete lines; the node stores each chunk with its
cursor in one transaction (``ingest_transcript_chunk``), so a grown file adds only its new
messages and a crash between chunks loses and repeats nothing.

Rule: outside this package, import only the names below (``node/face.py``;
enforced by ``scripts/check_layers.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from node.face import face

if TYPE_CHECKING:
    from node.memory.transcripts.feed import TranscriptChunk as TranscriptChunk
    from node.memory.transcripts.feed import TranscriptConflict as TranscriptConflict
    from node.memory.transcripts.feed import TranscriptRefused as TranscriptRefused
    from node.memory.transcripts.feed import feed_transcript as feed_transcript
    from node.memory.transcripts.ingest import ingest_transcript_chunk as ingest_transcript_chunk
    from node.memory.transcripts.ingest import parse_chunk as parse_chunk
    from node.memory.transcripts.ingest import prepare_new as prepare_new
    from node.memory.transcripts.ingest import select_new as select_new
    from node.memory.transcripts.ingest import start_chunk as start_chunk
    from node.memory.transcripts.ingest import store_chunk as store_chunk
    from node.memory.transcripts.ingest import transcript_cursor as transcript_cursor
    from node.memory.transcripts.lines import CHUNK_BYTES as CHUNK_BYTES
    from node.memory.transcripts.lines import MAX_LINE_BYTES as MAX_LINE_BYTES
    from node.memory.transcripts.parse import Format as Format
    from node.memory.transcripts.schema import CONCEPT as CONCEPT
    from node.memory.transcripts.schema import MIGRATIONS as MIGRATIONS

__getattr__ = face(__name__)
