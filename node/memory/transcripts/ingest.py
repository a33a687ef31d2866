"""The node's side of transcript ingest: a chunk of lines becomes turns, stored with its cursor.

Runs with a :class:`node.memory.facade.Memory` in five steps; ``AsyncMemory`` runs
the two that read or write the database on its single writer and the CPU ones
(parsing, classifying, embedding) on worker threads:
:func:`start_chunk` checks the chunk against the cursor, :func:`parse_chunk` parses
its lines (``parse``: cleaned, redacted), :func:`select_new` keeps the messages not
stored yet, :func:`prepare_new` makes and embeds their crystals, and
:func:`store_chunk` writes the crystals, their ``conversation_turns`` rows and the
cursor's advance in one transaction, so a crash between chunks neither loses nor
repeats a message.

Each message is a crystal with ``source=sessions``, ``origin=session``,
``path="session:<session id>"``, ``valid_from`` the message's time and the default
lifespan (ordinary material decays, as the seeds say; what the user states as a
directive is kept by the directive path, not here), and a turn row with
``conversation="session:<id>"``, ``session=<id>``, ``speaker=<role>``, the next
``turn_index`` of that session and ``source_id`` the host's message id (Claude Code's
``uuid``) or a digest of its line. That row's key (namespace, conversation,
source_id) is what makes a message stored once, whatever the cursor says.
"""

from __future__ import annotations

import re
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from node.crystals import Crystal, Origin, SemanticType, Source, now_ms
from node.memory.conversations import TurnMemory, embed_plan
from node.memory.namespaces import validate_namespace
from node.memory.transcripts.feed import TranscriptChunk, TranscriptConflict, TranscriptRefused
from node.memory.transcripts.lines import MAX_LINE_BYTES, split_lines
from node.memory.transcripts.parse import (
    Context,
    Format,
    Message,
    Skip,
    declared_session,
    detect_format,
    parse_line,
    session_from_key,
)

if TYPE_CHECKING:
    from node.db import Database

Beside = Callable[[sqlite3.Connection, list[Any]], None]
MAX_TRANSCRIPT_CHARS = 4096  # the transcript's key (its path): a label, never opened here
MAX_CHUNK_BYTES = 1024 * 1024  # a chunk in memory at once (the API's body limit bounds it further)
_FINGERPRINT = re.compile(r"[0-9a-f]{64}")
_QUERY_BATCH = 500  # ids per "IN (...)" look-up




@dataclass
class ChunkPlan:
    """A checked chunk: its messages, those not stored yet as crystals, then their vectors."""

    chunk: TranscriptChunk
    namespace: str
    format: str  # "" while no line has told it (every line so far skipped)
    session_id: str
    messages: list[Message]
    todo: list[Message]
    crystals: list[Crystal]
    skipped: Counter[str]
    dropped: Counter[str]
    redacted: Counter[str]
    started: float
    vectors: np.ndarray | None = None
    windows: list[np.ndarray | None] = field(default_factory=list)
    embedded: float = 0.0


def _cursor(db: Database | sqlite3.Connection, namespace: str, transcript: str) -> sqlite3.Row | None:
    sql = "SELECT * FROM transcript_cursors WHERE namespace=? AND transcript=?"
    if isinstance(db, sqlite3.Connection):
        row: sqlite3.Row | None = db.execute(sql, (namespace, transcript)).fetchone()
        return row
    return db.one(sql, (namespace, transcript))


def _check_transcript(transcript: str) -> str:
    if not isinstance(transcript, str) or not transcript or len(transcript) > MAX_TRANSCRIPT_CHARS:
        raise TranscriptRefused(f"a transcript is named by 1 to {MAX_TRANSCRIPT_CHARS} characters")
    if not transcript.isprintable():
        raise TranscriptRefused("a transcript's name holds a control character")
    return transcript


def transcript_cursor(memory: TurnMemory, transcript: str, namespace: str | None = None) -> dict[str, Any]:
    """Where the node stopped on ``transcript`` (offset 0 and no fingerprint if never read)."""
    space = validate_namespace(namespace)
    row = _cursor(memory.db, space, _check_transcript(transcript))
    if row is None:
        return {"transcript": transcript, "namespace": space, "offset": 0, "fingerprint": None,
                "format": None, "session_id": None, "messages": 0}
    return {"transcript": transcript, "namespace": space, "offset": row["offset"],
            "fingerprint": row["fingerprint"], "format": row["format"] or None,
            "session_id": row["session_id"], "messages": row["messages"], "updated_at_ms": row["updated_at_ms"]}


def _check_chunk(chunk: TranscriptChunk) -> int:
    """How many over-long lines the chunk leaves out (0 or 1); :class:`TranscriptRefused` if unsound."""
    _check_transcript(chunk.transcript)
    if not _FINGERPRINT.fullmatch(chunk.fingerprint or ""):
        raise TranscriptRefused("fingerprint must be the sha256 (hex) of the file's first line")
    if chunk.offset < 0 or len(chunk.data) > MAX_CHUNK_BYTES:
        raise TranscriptRefused(f"a chunk starts at an offset >= 0 and holds at most {MAX_CHUNK_BYTES} bytes")
    if chunk.data and not chunk.data.endswith(b"\n"):
        raise TranscriptRefused("a chunk holds complete lines only (it ends with a newline)")
    gap = chunk.end_offset - chunk.offset - len(chunk.data)
    if gap < 0 or 0 < gap <= MAX_LINE_BYTES:
        raise TranscriptRefused("end_offset must be the chunk's end, or past one line over the size limit")
    if chunk.format is not None and chunk.format not in {member.value for member in Format}:
        raise TranscriptRefused(f"format must be one of {', '.join(member.value for member in Format)}")
    return 1 if gap else 0


def _check_continues(row: sqlite3.Row | None, chunk: TranscriptChunk) -> None:
    """A chunk starts the file again (offset 0) or continues exactly where the node stopped on it."""
    if chunk.offset == 0:
        return
    if row is None or row["fingerprint"] != chunk.fingerprint or row["offset"] != chunk.offset:
        where = "nothing of it" if row is None else f"up to byte {row['offset']} of a file with fingerprint " \
            f"{row['fingerprint'][:12]}…"
        raise TranscriptConflict(f"this chunk starts at byte {chunk.offset} but the node has read {where}; "
                                 "ask for the cursor and send from there")


def _known_ids(db: Database, namespace: str, messages: Sequence[Message]) -> set[tuple[str, str]]:
    by_conversation: dict[str, list[str]] = {}
    for message in messages:
        by_conversation.setdefault(f"session:{message.session_id}", []).append(message.source_id)
    known: set[tuple[str, str]] = set()
    for conversation, ids in by_conversation.items():
        for start in range(0, len(ids), _QUERY_BATCH):
            batch = ids[start:start + _QUERY_BATCH]
            rows = db.all(f"SELECT source_id FROM conversation_turns WHERE namespace=? AND conversation=? "
                          f"AND source_id IN ({','.join('?' * len(batch))})", (namespace, conversation, *batch))
            known.update((conversation, row[0]) for row in rows)
    return known


@dataclass(frozen=True)
class ChunkStart:
    """A chunk checked against the node's cursor on its transcript: what parsing it needs."""

    chunk: TranscriptChunk
    namespace: str
    left_out: int  # over-long lines the client did not send (0 or 1)
    format: str  # the cursor's when the chunk continues, else ""
    session_id: str  # likewise


def start_chunk(memory: TurnMemory, chunk: TranscriptChunk) -> ChunkStart:
    """Check a chunk and that it starts the file again or continues where the node stopped
    (:class:`TranscriptRefused`, :class:`TranscriptConflict`). Reads the database: on its thread."""
    left_out = _check_chunk(chunk)
    space = validate_namespace(chunk.namespace)
    row = _cursor(memory.db, space, chunk.transcript)
    _check_continues(row, chunk)
    continuing = row is not None and chunk.offset > 0
    return ChunkStart(chunk, space, left_out, row["format"] if continuing and row is not None else "",
                      row["session_id"] if continuing and row is not None else "")


def parse_chunk(start: ChunkStart) -> ChunkPlan:
    """Every line of the chunk parsed (cleaned, redacted) into messages. CPU only, no database:
    ``AsyncMemory`` runs it off the single writer."""
    started = time.perf_counter()
    chunk = start.chunk
    lines = split_lines(chunk.data)
    format_name = chunk.format or start.format or (detected.value if (detected := detect_format(lines)) else "")
    session_id = start.session_id or (declared_session(lines, Format(format_name)) if format_name else None) \
        or session_from_key(chunk.transcript)
    skipped: Counter[str] = Counter({Skip.TOO_LONG.value: start.left_out} if start.left_out else {})
    dropped: Counter[str] = Counter()
    redacted: Counter[str] = Counter()
    messages: list[Message] = []
    if not format_name:
        reasons = [parse_line(raw, Context(Format.MESSAGES, session_id)).skipped for raw in lines]
        if any(reason is None for reason in reasons):
            raise TranscriptRefused(f"cannot tell the format of {chunk.transcript}: pass a format "
                                    f"({', '.join(member.value for member in Format)})")
        skipped.update(str(reason) for reason in reasons)  # every line hostile: counted, and passed over
    else:
        context = Context(Format(format_name), session_id)
        for raw in lines:
            result = parse_line(raw, context)
            if result.skipped is not None:
                skipped[result.skipped.value] += 1
                continue
            dropped.update(result.dropped)
            redacted.update(result.redacted)
            messages.extend(result.messages)
            if result.session_id:  # Codex names its session once, in session_meta
                context.session_id = result.session_id
        session_id = context.session_id
    return ChunkPlan(chunk, start.namespace, format_name, session_id, messages, [], [], skipped, dropped,
                     redacted, started)


def select_new(memory: TurnMemory, plan: ChunkPlan) -> ChunkPlan:
    """The plan's messages not stored yet (by id: whatever the cursor says, a message is stored
    once). Reads the database: on its thread."""
    known = _known_ids(memory.db, plan.namespace, plan.messages)
    for message in plan.messages:
        key = (f"session:{message.session_id}", message.source_id)
        if key not in known:
            known.add(key)  # the same id twice in one chunk is stored once
            plan.todo.append(message)
    return plan


def prepare_new(memory: TurnMemory, plan: ChunkPlan) -> ChunkPlan:
    """A crystal for each new message (classified, its influence computed), then embedded. CPU
    only: ``AsyncMemory`` runs it off the single writer."""
    plan.crystals = [memory.prepare(message.turn_text(), semantic_type=SemanticType.GENERAL,
                                    origin=Origin.SESSION, source=Source.SESSIONS,
                                    path=f"session:{message.session_id}", namespace=plan.namespace,
                                    valid_from_ms=message.at_ms) for message in plan.todo]
    return embed_plan(memory, plan)


def write_chunk(conn: sqlite3.Connection, plan: ChunkPlan, results: Sequence[Any]) -> int:
    """The turn rows of a chunk's new crystals and the cursor's advance (inside the caller's
    transaction); how many turns were added. Raises :class:`TranscriptConflict` (rolling all of
    it back) if another ingest moved the cursor since the chunk was planned."""
    chunk = plan.chunk
    row = _cursor(conn, plan.namespace, chunk.transcript)
    _check_continues(row, chunk)
    at = now_ms()
    next_index: dict[str, int] = {}
    added = 0
    for message, result in zip(plan.todo, results, strict=True):
        conversation = f"session:{message.session_id}"
        if conversation not in next_index:
            last = conn.execute("SELECT MAX(turn_index) FROM conversation_turns WHERE namespace=? AND conversation=?",
                                (plan.namespace, conversation)).fetchone()[0]
            next_index[conversation] = 0 if last is None else int(last) + 1
        inserted = conn.execute(
            "INSERT OR IGNORE INTO conversation_turns(namespace, conversation, source_id, crystal_id, speaker, "
            "session, session_index, turn_index, session_date, at_ms, ingested_at_ms) "
            "VALUES (?, ?, ?, ?, ?, ?, 0, ?, NULL, ?, ?)",
            (plan.namespace, conversation, message.source_id, result.id, message.role.value, message.session_id,
             next_index[conversation], message.at_ms, at))
        if inserted.rowcount:
            added += 1
            next_index[conversation] += 1
    same_file = row is not None and row["fingerprint"] == chunk.fingerprint
    earlier = row["messages"] if row is not None and same_file else 0
    conn.execute(
        "INSERT INTO transcript_cursors(namespace, transcript, offset, fingerprint, format, session_id, messages, "
        "updated_at_ms) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(namespace, transcript) DO UPDATE SET "
        "offset=excluded.offset, fingerprint=excluded.fingerprint, format=excluded.format, "
        "session_id=excluded.session_id, messages=excluded.messages, updated_at_ms=excluded.updated_at_ms",
        (plan.namespace, chunk.transcript, chunk.end_offset, chunk.fingerprint, plan.format, plan.session_id,
         earlier + added, at))
    return added


def store_chunk(memory: TurnMemory, plan: ChunkPlan) -> dict[str, Any]:
    """Write the chunk (crystals, turn rows, cursor) in one transaction; what it added."""
    added = [0]

    def beside(conn: sqlite3.Connection, results: list[Any]) -> None:
        added[0] = write_chunk(conn, plan, results)

    if plan.crystals:
        memory.add_crystals(plan.crystals, plan.vectors, plan.windows, beside=beside)
    else:
        with memory.db.transaction() as conn:
            beside(conn, [])
    chunk = plan.chunk
    return {"transcript": chunk.transcript, "namespace": plan.namespace, "session_id": plan.session_id,
            "format": plan.format or None, "messages_read": len(plan.messages), "added": added[0],
            "already_stored": len(plan.messages) - added[0], "skipped": dict(plan.skipped),
            "dropped": dict(plan.dropped), "redacted": dict(plan.redacted), "offset": chunk.end_offset,
            "bytes_read": chunk.end_offset - chunk.offset,
            "sidechain_turns": sum(1 for message in plan.todo if message.agent is not None), "chunks": 1,
            "total_s": round(time.perf_counter() - plan.started, 3)}


def ingest_transcript_chunk(memory: TurnMemory, chunk: TranscriptChunk) -> dict[str, Any]:
    """Store one chunk: :func:`start_chunk`, :func:`parse_chunk`, :func:`select_new`,
    :func:`prepare_new`, :func:`store_chunk` (``AsyncMemory`` runs the same steps, those without
    the database off its writer); raises :class:`TranscriptRefused` or :class:`TranscriptConflict`
    with nothing stored."""
    plan = select_new(memory, parse_chunk(start_chunk(memory, chunk)))
    return store_chunk(memory, prepare_new(memory, plan))
