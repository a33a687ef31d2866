"""The operator's audit log: one JSON line per act, appended, never rewritten.

Every operator undo (a weather lift, a manual ban or unban, a revoked endorsement)
is written to ``<data dir>/audit.jsonl`` once it took effect, so a node's owner
can see later who undid what and why. The file is opened with ``O_APPEND`` and
fsynced per entry: an entry is either whole on disk or absent after a crash.
Reading is bounded (the last ``MAX_TAIL_BYTES``) and skips a line that does not
parse, since the data dir may have been touched by anything.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from node.crystals import now_ms

MAX_TAIL_BYTES = 1 << 20
MAX_DETAIL_CHARS = 1024


class AuditLog:
    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, action: str, target: str, detail: dict[str, Any] | None = None,
               actor: str = "operator") -> dict[str, Any]:
        """Write one entry (blocking: call it off the event loop); returns it."""
        entry = {"at_ms": now_ms(), "action": action, "target": target, "actor": actor,
                 "detail": {key: str(value)[:MAX_DETAIL_CHARS] for key, value in (detail or {}).items()}}
        line = (json.dumps(entry, ensure_ascii=True, sort_keys=True) + "\n").encode()
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            os.write(fd, line)
            os.fsync(fd)
        finally:
            os.close(fd)
        return entry

    def tail(self, limit: int = 100) -> list[dict[str, Any]]:
        """The newest ``limit`` entries, oldest first."""
        try:
            with open(self.path, "rb") as handle:
                size = handle.seek(0, os.SEEK_END)
                handle.seek(max(0, size - MAX_TAIL_BYTES))
                data = handle.read(MAX_TAIL_BYTES)
        except FileNotFoundError:
            return []
        entries = []
        for line in data.splitlines()[-limit:] if limit > 0 else []:
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and isinstance(entry.get("action"), str):
                entries.append(entry)
        return entries
