"""Claude Code as the hook tests see it: a session transcript written in its JSONL shape, and a
hook command run the way Claude Code runs one (through a shell, the hook JSON on stdin).

The transcript lines follow the shape Claude Code documents and writes under
``~/.claude/projects/<project>/<session id>.jsonl``: one JSON object per line with
``type`` (``user`` / ``assistant`` / others), ``uuid``, ``parentUuid``, ``sessionId``,
``timestamp``, ``cwd`` and a ``message`` holding the API message (``role``,
``content`` as a string or a list of ``text`` / ``tool_use`` / ``tool_result`` blocks).
Written here from that description; no real session is copied.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
START = datetime(2026, 11, 2, 9, 30, tzinfo=UTC)


def transcript_lines(session_id: str, turns: Sequence[tuple[str, str]], start_index: int = 0,
                     cwd: str = "/home/dev/project") -> list[str]:
    """JSONL lines for ``turns`` of (role, text), with a tool call and its result after each
    assistant answer and a progress event (both as Claude Code writes them)."""
    lines = []
    parent: str | None = None
    for index, (role, text) in enumerate(turns, start=start_index):
        at = (START + timedelta(minutes=index)).isoformat().replace("+00:00", "Z")
        entry_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{session_id}/{index}"))
        content: object = text if role == "user" else [{"type": "text", "text": text}]
        message = {"role": role, "content": content}
        if role == "assistant":
            message |= {"id": f"msg_{index:04d}", "model": "claude-sonnet-4-5", "type": "message"}
        lines.append(json.dumps({"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": cwd,
                                 "sessionId": session_id, "version": "2.0.14", "type": role,
                                 "message": message, "uuid": entry_id, "timestamp": at}))
        parent = entry_id
    return lines


def write_transcript(path: Path, session_id: str, turns: Sequence[tuple[str, str]], append: bool = False,
                     start_index: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a" if append else "w", encoding="utf-8") as out:
        for line in transcript_lines(session_id, turns, start_index):
            out.write(line + "\n")
    return path


def hook_input(event: str, session_id: str, transcript: Path | str | None, cwd: str = "/home/dev/project",
               **extra: object) -> bytes:
    """The JSON Claude Code writes to a hook's stdin."""
    body: dict[str, object] = {"session_id": session_id, "transcript_path": str(transcript) if transcript else None,
                               "cwd": cwd, "hook_event_name": event, "permission_mode": "default"}
    return json.dumps(body | extra).encode()


def hook_env(home: Path) -> dict[str, str]:
    """The environment of a hook run: this checkout's code, HOME and CRYSTALMESH_HOME in the test."""
    env = {name: value for name, value in os.environ.items() if not name.startswith("CRYSTALMESH_")}
    return env | {"PYTHONPATH": str(REPO), "HOME": str(home), "CRYSTALMESH_HOME": str(home / ".crystalmesh")}


def hook_argv(data_dir: Path) -> list[str]:
    return [sys.executable, "-m", "node.cli.main", "--data-dir", str(data_dir), "hook", "claude-code"]


def run_hook_command(command: str, stdin: bytes, env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    """Run a settings.json hook ``command`` as Claude Code does: ``sh -c``, the JSON on stdin."""
    return subprocess.run(command, shell=True, input=stdin, capture_output=True, env=env, timeout=60, check=False)
