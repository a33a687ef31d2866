"""Versions of what ``crystalmesh mcp`` serves as resources, so a subscriber learns of a change cheaply.

The MCP server (a client of the local API) keeps the version of every resource a client
subscribed to and asks the node for fresh versions every second or so while any
subscription is open; a different version is a ``notifications/resources/updated``.
A version is a tag, not content: comparing tags must cost the node far less than
serving the resource, or polling would be worse than re-reading.

- MEMORY.md and the scratch notes are files (``node.memory.working.working``): their
  version is the file's identity, size and modification time from one ``lstat``, never
  its bytes (the scratch may hold megabytes). Every write of working memory either
  appends (size and mtime change) or replaces the file by rename (a new inode), so a
  change always shows; a spurious change (a rewrite of equal bytes) costs one
  notification and one re-read, never a missed update.
- The skill index (``skill://index.json``) is derived from the current skill crystals of
  the default namespace: its version is ``node.memory.versions.list_version`` of that
  list (their ids, since a new text or scope is a new id, and run counts, in order:
  everything the index entries carry that can change).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from node.memory.working.working import WorkingMemory

ABSENT = "absent"
SKILL_INDEX_LIMIT = 200  # node.agent.mcp_resources.MAX_SKILLS: what the index lists


def file_version(path: Path) -> str:
    """``inode-size-mtime_ns`` (hex) of ``path`` without following a link; ``absent`` if missing."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return ABSENT
    if not stat.S_ISREG(info.st_mode):
        return "not-a-file"  # working memory refuses links too (durable.open_nofollow)
    return f"{info.st_ino:x}-{info.st_size:x}-{info.st_mtime_ns:x}"


def working_versions(working: WorkingMemory) -> dict[str, str]:
    """The versions of one namespace's ``MEMORY.md`` and pending notes (its scratch file)."""
    return {"memory_md": file_version(working.state_path), "notes": file_version(working.scratch.path)}
