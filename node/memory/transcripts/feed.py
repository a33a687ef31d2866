"""The caller's side of transcript ingest: read the file here, send it to the node in chunks.

The node never opens a path a request names, so whoever holds the file (the CLI, the
MCP server, a hook) reads it in its own process: :func:`feed_transcript` asks the node
where it stopped on this transcript (``read_cursor``), starts from there when the file
is the one it was reading (same :func:`~node.memory.transcripts.lines.fingerprint`, not
shorter than that point) and from the start otherwise, and sends chunks of complete
lines (``send``), each stored by the node in one transaction with its cursor. The API
client sends them over HTTP; with no node running ``LocalNode`` passes the node's own
function: one implementation, two transports. Memory stays bounded by one chunk.

Light on purpose (no numpy, no store): the MCP server and the hooks import it.
"""

from __future__ import annotations

import os
import stat
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from node.errors import CrystalmeshError
from node.memory.transcripts.lines import CHUNK_BYTES, chunks, fingerprint

Json = dict[str, Any]
CONFLICT_RETRIES = 3  # another ingest of the same file moved the cursor: start again from its point


class TranscriptRefused(CrystalmeshError, ValueError):
    """A transcript (or a chunk of one) cannot be read as asked; nothing of it was stored."""

    http_status = 400
    code = "transcript_refused"
    exit_code = 1


class TranscriptConflict(CrystalmeshError):
    """A chunk does not start where the node stopped on that transcript (another ingest moved on)."""

    http_status = 409
    code = "transcript_conflict"
    exit_code = 1


@dataclass(frozen=True)
class TranscriptChunk:
    """Complete lines of a transcript as the node receives them.

    ``transcript`` names the file (its absolute path: a key, never opened by the node);
    ``fingerprint`` is the file's; ``data`` starts at byte ``offset`` and the file is
    consumed up to ``end_offset`` (past the data when one over-long line was left out).
    """

    transcript: str
    fingerprint: str
    offset: int
    data: bytes
    end_offset: int
    format: str | None = None
    namespace: str | None = None


SUMS = ("messages_read", "added", "already_stored", "bytes_read", "sidechain_turns", "chunks")
COUNTS = ("skipped", "dropped", "redacted")


def empty_summary(transcript: str, namespace: str | None, cursor: Json) -> Json:
    """The summary of reading nothing new: where the node stands on ``transcript``."""
    return {"transcript": transcript, "namespace": cursor.get("namespace", namespace),
            "session_id": cursor.get("session_id"), "format": cursor.get("format"),
            "offset": int(cursor.get("offset") or 0), **dict.fromkeys(SUMS, 0), **{name: {} for name in COUNTS}}


def merge_summary(total: Json, chunk: Json) -> Json:
    """``total`` with one chunk's result added in."""
    for name in SUMS:
        total[name] = int(total.get(name) or 0) + int(chunk.get(name) or 0)
    for name in COUNTS:
        counts = Counter(total.get(name) or {})
        counts.update(chunk.get(name) or {})
        total[name] = dict(counts)
    for name in ("session_id", "format", "namespace"):
        total[name] = chunk.get(name) or total.get(name)
    total["offset"] = chunk.get("offset", total.get("offset"))
    return total


def feed_transcript(path: str, read_cursor: Callable[[str, str | None], Json], send: Callable[[TranscriptChunk], Json], *,
                    format: str | None = None, namespace: str | None = None,
                    progress: Callable[[int, int], None] | None = None,
                    chunk_bytes: int = CHUNK_BYTES) -> Json:
    """Send what the node has not read of the transcript at ``path``; the summary of what it stored.

    ``progress(offset reached, file size)`` after each chunk. Raises :class:`TranscriptRefused`
    for a path that is not a readable regular file.
    """
    transcript = os.path.abspath(path)
    started = time.perf_counter()
    try:
        file = open(transcript, "rb")  # noqa: SIM115 - closed below, after the type check
    except OSError as error:
        raise TranscriptRefused(f"cannot read {path}: {error.strerror or error}") from error
    with file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise TranscriptRefused(f"{path} is not a regular file")
        size = info.st_size  # what the host appends while this runs is for the next ingest
        mark = fingerprint(file)
        summary: Json | None = None
        for attempt in range(CONFLICT_RETRIES):
            cursor = read_cursor(transcript, namespace)
            known = cursor.get("fingerprint") == mark and 0 <= int(cursor.get("offset") or 0) <= size
            start = int(cursor.get("offset") or 0) if known else 0
            if summary is None:
                summary = empty_summary(transcript, namespace, cursor if known else {})
            summary["offset"] = start
            try:
                for piece in chunks(file, start, chunk_bytes, limit=size):
                    result = send(TranscriptChunk(transcript, mark, piece.offset, piece.data, piece.end_offset,
                                        format, namespace))
                    merge_summary(summary, result)
                    if progress is not None:
                        progress(piece.end_offset, size)
            except Exception as error:  # TranscriptConflict here, the API client's error with its code there
                if getattr(error, "code", None) != TranscriptConflict.code or attempt == CONFLICT_RETRIES - 1:
                    raise
                continue
            break
    assert summary is not None
    summary["total_s"] = round(time.perf_counter() - started, 3)
    return summary
