"""Where a search hit came from, in one shape per source (issue 34's "every hit says its origin").

A hit's ``origin`` lets a reader go back to the thing itself: a transcript's
session and turn, a file's lines, a skill's id and version, or the memory that
was stored. It is derived, never stored: from the crystal's own columns
(``source``, ``path``, ``start_line`` / ``end_line``, the skill fields) and, for
a conversation or transcript turn, from the ``conversation_turns`` row that
:func:`node.memory.conversations.attach_turns` put on the hit.

* session: ``{"source": "session", "session_id", "turn", "at_ms", "speaker", "source_id"}``.
  A transcript's turn (conversation ``session:<id>``) names the host's session
  id; a LoCoMo-style conversation's turn names ``<conversation>/<session>``.
* file: ``{"source": "file", "path", "start_line", "end_line"}`` (1-based, inclusive).
* skill: ``{"source": "skill", "skill_id", "version"}``: the stable skill id (its first
  version's id until it is listed) and the skill's version.
* memory: ``{"source": "memory", "memory_id", "version", "at_ms", "path"}``.

Pure functions of plain values: no I/O.
"""

from __future__ import annotations

from typing import Any

from node.crystals import KNOWLEDGE_TYPES, Crystal, Source

TRANSCRIPT_PREFIX = "session:"  # a transcript's conversation key (node.memory.transcripts, issue 34)


def session_id_of(conversation: str, session: str) -> str:
    """The session a turn belongs to: a transcript's own id, else ``<conversation>/<session>``."""
    if conversation.startswith(TRANSCRIPT_PREFIX):
        return conversation[len(TRANSCRIPT_PREFIX):] or session
    return f"{conversation}/{session}"


def origin_of(crystal: Crystal, turn: dict[str, Any] | None) -> dict[str, Any]:
    """The ``origin`` object of a hit on ``crystal`` (``turn``: its conversation row, if any)."""
    if turn is not None:
        return {"source": "session",
                "session_id": session_id_of(str(turn.get("conversation") or ""), str(turn.get("session") or "")),
                "turn": turn.get("turn_index"), "at_ms": turn.get("at_ms"), "speaker": turn.get("speaker"),
                "source_id": turn.get("source_id")}
    if crystal.source is Source.FILES:
        return {"source": "file", "path": crystal.path, "start_line": crystal.start_line,
                "end_line": crystal.end_line}
    if crystal.source is Source.SKILLS or crystal.semantic_type in KNOWLEDGE_TYPES:
        return {"source": "skill", "skill_id": crystal.stable_skill_id or crystal.memory_id,
                "version": crystal.skill_version}
    if crystal.source is Source.SESSIONS:  # a session's memory without its turn row (one ingested elsewhere)
        path = crystal.path or ""
        return {"source": "session",
                "session_id": path[len(TRANSCRIPT_PREFIX):] if path.startswith(TRANSCRIPT_PREFIX) else None,
                "turn": None, "at_ms": crystal.valid_from_ms, "speaker": None, "source_id": None}
    return {"source": "memory", "memory_id": crystal.memory_id, "version": crystal.version,
            "at_ms": crystal.valid_from_ms, "path": crystal.path}


def origin_label(origin: dict[str, Any], when: str = "") -> str:
    """A short column for a table: ``session ab12…#14 <when>``, ``docs/x.md:10-24``, ``skill <id>``.

    ``when`` is the caller's rendering of ``at_ms`` (the CLI's local time format).
    """
    source = origin.get("source")
    if source == "session":
        session = str(origin.get("session_id") or "?")
        short = session if len(session) <= 8 else session[:6] + "…"
        turn = origin.get("turn")
        return " ".join(part for part in (f"session {short}" + (f"#{turn}" if turn is not None else ""), when)
                        if part)
    if source == "file":
        path = str(origin.get("path") or "?")
        start, end = origin.get("start_line"), origin.get("end_line")
        lines = "" if start is None else f":{start}" + (f"-{end}" if end is not None and end != start else "")
        return path + lines
    if source == "skill":
        return f"skill {str(origin.get('skill_id') or '?')[:8]} v{origin.get('version')}"
    return "memory"


__all__ = ["origin_label", "origin_of", "session_id_of"]
