"""What a host writes to a hook's stdin, checked before anything acts on it.

Claude Code runs a command hook with one JSON object on stdin (its hooks
reference): every event carries ``session_id``, ``transcript_path``, ``cwd`` and
``hook_event_name``; ``SessionStart`` adds ``source`` (startup, resume, clear,
compact), ``SessionEnd`` a ``reason``, ``PreCompact`` a ``trigger``. The bytes are
untrusted: the size is capped, the nesting depth is measured before ``json.loads``
recurses, and a transcript path is used only if it is an absolute path to a regular
``.jsonl`` file outside the data dir and outside ``/proc`` and ``/sys`` (a hook must
never be talked into storing ``/proc/self/environ`` or the node's own keys as memory).
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from node.errors import CrystalmeshError
from protocol import codec

# Claude Code's inputs are a few hundred bytes; ``Stop`` may carry the last assistant message.
MAX_HOOK_INPUT_BYTES = 1024 * 1024
MAX_HOOK_INPUT_DEPTH = 16
MAX_PATH_CHARS = 4096
_SESSION_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
_FORBIDDEN_ROOTS = ("/proc", "/sys", "/dev")

CONTEXT_EVENTS = frozenset({"SessionStart"})
"""Events whose answer is the bootstrap context on stdout."""
INGEST_EVENTS = frozenset({"PreCompact", "Stop", "SubagentStop", "SessionEnd", "agent-turn-complete"})
"""Events that queue the transcript for ingestion (``agent-turn-complete`` is Codex's notify)."""
SESSION_END_EVENTS = frozenset({"SessionEnd"})
"""Events that also mark a session boundary for the energy tiers (``session end``)."""


class HookInputRefused(CrystalmeshError, ValueError):
    """Hook input that is not what the host documents (too large, too deep, wrong shape)."""

    code = "hook_input_refused"


@dataclass(frozen=True)
class HookEvent:
    host: str  # "claude-code" or "codex"
    event: str  # the host's event name (hook_event_name, or Codex's notification type)
    session_id: str
    transcript_path: str | None
    cwd: str | None = None


def optional_text(value: object, field: str, limit: int = MAX_PATH_CHARS) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or len(value) > limit or "\x00" in value:
        raise HookInputRefused(f"{field} must be a string of at most {limit} characters")
    return value


def session_id_of(value: object) -> str:
    if not isinstance(value, str) or not _SESSION_ID.fullmatch(value):
        raise HookInputRefused("session_id must be 1 to 128 letters, digits, '.', '_', ':' or '-'")
    return value


def load_json_object(data: bytes, what: str, max_bytes: int = MAX_HOOK_INPUT_BYTES,
                     max_depth: int = MAX_HOOK_INPUT_DEPTH) -> dict[str, object]:
    """``data`` as one JSON object within the size and depth limits (``protocol.codec``)."""
    try:
        return codec.load_json_object(data, what, max_bytes, max_depth)
    except codec.JsonRefused as refused:
        raise HookInputRefused(str(refused)) from None


def parse_claude_code_input(data: bytes) -> HookEvent:
    """The hook input Claude Code wrote on stdin."""
    value = load_json_object(data, "hook input")
    event = value.get("hook_event_name")
    if not isinstance(event, str) or not event.isascii() or not event.isalnum() or len(event) > 64:
        raise HookInputRefused("hook_event_name must be an event name such as SessionStart")
    return HookEvent("claude-code", event, session_id_of(value.get("session_id")),
                     optional_text(value.get("transcript_path"), "transcript_path"), optional_text(value.get("cwd"), "cwd"))


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def checked_transcript(path: str, data_dir: Path) -> Path:
    """``path`` resolved, if a hook may read it: absolute, a regular ``.jsonl`` file, not in the
    data dir (its keys and database) nor in ``/proc``, ``/sys`` or ``/dev``."""
    if not os.path.isabs(path):
        raise HookInputRefused("transcript_path must be absolute")
    real = os.path.realpath(path)
    if not real.lower().endswith(".jsonl"):
        raise HookInputRefused("transcript_path must name a .jsonl transcript")
    if any(_inside(real, root) for root in _FORBIDDEN_ROOTS) or _inside(real, os.path.realpath(data_dir)):
        raise HookInputRefused("transcript_path points into a place a hook never reads")
    try:
        mode = os.stat(real).st_mode
    except OSError as error:
        raise HookInputRefused(f"transcript_path cannot be read: {error.strerror}") from None
    if not stat.S_ISREG(mode):
        raise HookInputRefused("transcript_path is not a regular file")
    return Path(real)
