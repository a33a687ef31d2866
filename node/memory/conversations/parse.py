"""A conversation file read whole and judged whole, before anything is stored.

The file is untrusted (a download, an export from another tool, a peer's
transcript), so :func:`read_conversation` refuses it with one clear
:class:`ConversationRefused` unless every part is sound:

* size at most ``MAX_CONVERSATION_BYTES`` and at most ``MAX_TURNS`` turns;
* strict UTF-8 (a BOM is allowed); no lone surrogates (``"\\ud800"`` escapes decode to
  one); terminal escape codes and other control characters are stripped from every text
  (:func:`node.memory.conversations.clean.strip_controls`), never a reason to refuse the
  file: real sessions carry them in pasted tool output;
* nesting at most ``MAX_JSON_DEPTH``, proved by a linear scan *before* ``json.loads``
  recurses: py_ecc raises the recursion limit, so a deep document would
  otherwise overflow the C stack instead of raising ``RecursionError``
  (the API's body guard, ``node.api.guards``, scans the same way);
* one of the accepted shapes, every turn with a speaker and some text, ids unique.

Accepted shapes (docs/memory.md, "Conversations"):

* LoCoMo's (Maharana et al., ACL 2024): ``speaker_a``, ``speaker_b``, ``session_N``
  lists of ``{speaker, dia_id, text[, blip_caption]}`` and ``session_N_date_time``
  (or ``events_session_N.date``); also wrapped as ``{"sample_id", "conversation": {...}}``;
* a JSON list of turns, or ``{"id": ..., "turns": [...]}``, or JSONL (one turn a line),
  a turn being ``{speaker, text[, time][, session][, id]}`` (``id`` also as ``dia_id``
  or ``source_id``; ``time`` ISO 8601 or LoCoMo's stamp).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from node.errors import CrystalmeshError
from node.memory.conversations.clean import strip_controls
from node.memory.conversations.dates import parse_when, stamp_text
from protocol.codec import json_too_deep

MAX_CONVERSATION_BYTES = 8 * 1024 * 1024
MAX_TURNS = 20_000
MAX_JSON_DEPTH = 16
MAX_TURN_CHARS = 16_384  # a spoken turn; the stored memory adds its date, speaker and caption
MAX_LABEL_CHARS = 200  # speaker, session, ids, dates
_SESSION_KEY = re.compile(r"session_(\d{1,6})")


class ConversationRefused(CrystalmeshError, ValueError):
    """A conversation file was refused whole; nothing of it was stored."""

    http_status = 400
    code = "conversation_refused"
    exit_code = 1


@dataclass(frozen=True)
class Turn:
    """One turn, checked: who said what, when, in which session, under which id in its file."""

    source_id: str
    speaker: str
    text: str
    session: str
    session_index: int  # sessions in file order, from 0
    turn_index: int  # turns in session order, from 0
    session_date: str | None  # as the file writes it (LoCoMo) or written from the turn's time
    at: datetime | None  # the session's (or the turn's own) time
    caption: str | None = None  # a shared photo's caption (LoCoMo's blip_caption)
    own_time: bool = False  # ``at`` is this turn's own time, not its session's


@dataclass(frozen=True)
class Conversation:
    """A whole file's turns and the key that makes re-ingesting it a no-op."""

    key: str  # "id:<the file's conversation id>" or "sha256:<digest of the file's bytes>"
    turns: list[Turn]
    speakers: tuple[str, ...]
    sessions: int


def _label(value: Any, where: str, required: bool = True) -> str | None:
    if value is None and not required:
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise ConversationRefused(f"{where} must be a non-empty string")
    if len(value) > MAX_LABEL_CHARS:
        raise ConversationRefused(f"{where} is longer than {MAX_LABEL_CHARS} characters")
    cleaned = _clean(value, where).strip()
    if not cleaned:
        raise ConversationRefused(f"{where} must be a non-empty string")
    return cleaned


def _clean(value: str, where: str) -> str:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ConversationRefused(f"{where} is not valid text (a lone UTF-16 surrogate)") from error
    return strip_controls(value)


def _text(value: Any, where: str, required: bool) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise ConversationRefused(f"{where} must be a string")
    if len(value) > MAX_TURN_CHARS:
        raise ConversationRefused(f"{where} is longer than {MAX_TURN_CHARS} characters")
    return " ".join(_clean(value, where).split())


def _decode(data: bytes) -> Any:
    if len(data) > MAX_CONVERSATION_BYTES:
        raise ConversationRefused(f"the file is {len(data)} bytes; at most {MAX_CONVERSATION_BYTES} are read")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise ConversationRefused(f"the file is not UTF-8 (invalid byte at offset {error.start})") from error
    if not text.strip():
        raise ConversationRefused("the file is empty")
    if json_too_deep(data, MAX_JSON_DEPTH):
        raise ConversationRefused(f"the file nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        return json.loads(text)  # depth bounded above: cannot recurse past MAX_JSON_DEPTH
    except ValueError as whole:
        problem = str(whole)[:120]
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) < 2:
        raise ConversationRefused(f"the file is not JSON: {problem}")
    if len(lines) > MAX_TURNS:
        raise ConversationRefused(f"the file has more than {MAX_TURNS} turns")
    rows = []
    for number, line in enumerate(lines, 1):
        try:
            rows.append(json.loads(line))
        except ValueError as error:
            raise ConversationRefused(
                f"the file is neither JSON nor JSONL (line {number}: {str(error)[:120]})") from error
    return rows


def _turn(raw: Any, where: str, session: str, session_index: int, turn_index: int,
          session_date: str | None, at: datetime | None, default_id: str, own_time: bool = False) -> Turn:
    if not isinstance(raw, dict):
        raise ConversationRefused(f"{where} must be an object with speaker and text")
    speaker = _label(raw.get("speaker"), f"{where}.speaker")
    text = _text(raw.get("text"), f"{where}.text", required=True)
    caption = _text(raw.get("blip_caption"), f"{where}.blip_caption", required=False)
    if not text and not caption:
        raise ConversationRefused(f"{where}.text is empty")
    ids = [raw[key] for key in ("dia_id", "source_id", "id") if raw.get(key) is not None]
    source_id = _label(ids[0], f"{where}.id") if ids else default_id
    return Turn(str(source_id), str(speaker), text or "", session, session_index, turn_index,
                session_date, at, caption or None, own_time)


def _session_time(value: Any, where: str) -> tuple[str | None, datetime | None]:
    written = _label(value, where, required=False)
    if written is None:
        return None, None
    at = parse_when(written)
    if at is None:
        raise ConversationRefused(f"{where} is not a date we read: {written[:60]!r}")
    return written, at


def _locomo(data: dict[str, Any]) -> list[Turn]:
    numbers = sorted(int(match.group(1)) for key in data
                     if (match := _SESSION_KEY.fullmatch(key)) and isinstance(data[key], list))
    if not numbers:
        raise ConversationRefused("a LoCoMo file needs session_N lists of turns")
    turns: list[Turn] = []
    for session_index, number in enumerate(numbers):
        raw_turns = data[f"session_{number}"]
        stamp = data.get(f"session_{number}_date_time")
        events = data.get(f"events_session_{number}")
        if stamp is None and isinstance(events, dict):
            stamp = events.get("date")
        written, at = _session_time(stamp, f"session_{number}_date_time")
        if len(turns) + len(raw_turns) > MAX_TURNS:
            raise ConversationRefused(f"the file has more than {MAX_TURNS} turns")
        for turn_index, raw in enumerate(raw_turns):
            turns.append(_turn(raw, f"session_{number}[{turn_index}]", str(number), session_index,
                               turn_index, written, at, f"D{number}:{turn_index + 1}"))
    return turns


def _plain(rows: list[Any]) -> list[Turn]:
    if len(rows) > MAX_TURNS:
        raise ConversationRefused(f"the file has more than {MAX_TURNS} turns")
    sessions: dict[str, int] = {}
    counts: dict[str, int] = {}
    turns: list[Turn] = []
    for number, raw in enumerate(rows):
        where = f"turn {number + 1}"
        if not isinstance(raw, dict):
            raise ConversationRefused(f"{where} must be an object with speaker and text")
        session = _label(raw.get("session", "1"), f"{where}.session") or "1"
        session_index = sessions.setdefault(session, len(sessions))
        turn_index = counts.get(session, 0)
        counts[session] = turn_index + 1
        written, at = _session_time(raw.get("time"), f"{where}.time")
        if written is not None and at is not None:
            written = stamp_text(at, with_time="T" in written or ":" in written)
        turns.append(_turn(raw, where, session, session_index, turn_index, written, at,
                           f"{session}:{turn_index + 1}", own_time=at is not None))
    return turns


def read_conversation(data: bytes) -> Conversation:
    """Every turn of a conversation file, or :class:`ConversationRefused` (see the module docstring)."""
    parsed = _decode(data)
    file_id: Any = None
    if isinstance(parsed, dict) and isinstance(parsed.get("conversation"), dict):
        file_id = parsed.get("sample_id")
        parsed = parsed["conversation"]
    if isinstance(parsed, dict) and isinstance(parsed.get("turns"), list):
        file_id = parsed.get("id", parsed.get("conversation_id"))
        turns = _plain(parsed["turns"])
    elif isinstance(parsed, dict):
        turns = _locomo(parsed)
    elif isinstance(parsed, list):
        if parsed and isinstance(parsed[0], dict) and "conversation" in parsed[0]:
            raise ConversationRefused("the file holds several conversations; ingest one per file")
        turns = _plain(parsed)
    else:
        raise ConversationRefused("a conversation file is a JSON object, a JSON list of turns or JSONL")
    if not turns:
        raise ConversationRefused("the file has no turns")
    seen: set[str] = set()
    for turn in turns:
        if turn.source_id in seen:
            raise ConversationRefused(f"turn id {turn.source_id!r} appears twice")
        seen.add(turn.source_id)
    label = _label(file_id, "conversation id", required=False)
    key = f"id:{label}" if label else "sha256:" + hashlib.sha256(data).hexdigest()
    speakers = tuple(dict.fromkeys(turn.speaker for turn in turns))
    return Conversation(key, turns, speakers, len({turn.session for turn in turns}))
