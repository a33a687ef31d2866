"""Codex CLI: its ``notify`` program and where its rollout transcripts live.

Codex (``~/.codex/config.toml``: ``notify = ["crystalmesh", "hook", "codex"]``) runs the
program after each agent turn with one JSON argument: ``{"type": "agent-turn-complete",
"thread-id", "turn-id", "cwd", "input-messages", "last-assistant-message"}``. It names no
transcript; the session's rollout is ``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread
id>.jsonl`` (``CODEX_HOME`` defaults to ``~/.codex``), found here by the thread id.
"""

from __future__ import annotations

import os
from pathlib import Path

from node.capture.hook_input import (
    HookEvent,
    HookInputRefused,
    load_json_object,
    optional_text,
    session_id_of,
)


def codex_home() -> Path:
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex").expanduser()


def parse_codex_notify(argument: str) -> HookEvent:
    """The notification Codex passed as the program's last argument."""
    value = load_json_object(argument.encode("utf-8", errors="replace"), "codex notification")
    kind = value.get("type")
    if not isinstance(kind, str) or len(kind) > 64:
        raise HookInputRefused("a codex notification has a type such as agent-turn-complete")
    return HookEvent("codex", kind, session_id_of(value.get("thread-id")), None, optional_text(value.get("cwd"), "cwd"))


def find_codex_rollout(thread_id: str, home: Path | None = None) -> Path | None:
    """The newest rollout file of ``thread_id`` (a checked session id: no glob characters)."""
    session_id_of(thread_id)
    sessions = (home or codex_home()) / "sessions"
    found = sorted(sessions.glob(f"*/*/*/rollout-*-{thread_id}.jsonl"))
    return found[-1] if found else None

