"""Claude Code as the hook tests see it: a session transcript that grows, and a hook command run
the way Claude Code runs one (through a shell, the hook JSON on stdin).

Transcript lines come from ``tests.support.sessions.transcripts.claude_code_line`` (the envelope Claude
Code writes around each message, written from its documentation; no real session is copied).
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

from tests.support.sessions.transcripts import claude_code_line

REPO = Path(__file__).resolve().parents[3]
START = datetime(2026, 11, 2, 9, 30, tzinfo=UTC)


def write_session(path: Path, session_id: str, turns: Sequence[tuple[str, str]], start_index: int = 0) -> Path:
    """Append ``turns`` of (role, text) to the transcript at ``path``, one minute apart, chained by
    ``parentUuid`` as Claude Code writes them (``start_index`` continues an earlier call)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as out:
        for index, (role, text) in enumerate(turns, start=start_index):
            line_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{session_id}/{index}"))
            parent = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{session_id}/{index - 1}")) if index else None
            content: object = text if role == "user" else [{"type": "text", "text": text}]
            line = claude_code_line(role, content, at=START + timedelta(minutes=index), session_id=session_id,
                                    line_id=line_id, parent=parent)
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
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
