"""The short origin a table shows for each kind of hit (node.memory.search.origin, pure)."""

from __future__ import annotations

from node.memory.search import origin_label
from node.memory.search.origin import session_id_of


def test_labels() -> None:
    assert origin_label({"source": "session", "session_id": "ab12cd34-5678", "turn": 14},
                        "2026-11-28 12:40") == "session ab12cd…#14 2026-11-28 12:40"
    assert origin_label({"source": "session", "session_id": "abc", "turn": None}) == "session abc"
    assert origin_label({"source": "file", "path": "docs/x.md", "start_line": 10, "end_line": 24}) == "docs/x.md:10-24"
    assert origin_label({"source": "file", "path": "docs/x.md", "start_line": 3, "end_line": 3}) == "docs/x.md:3"
    assert origin_label({"source": "skill", "skill_id": "3f9c0a1b-aaaa", "version": 2}) == "skill 3f9c0a1b v2"
    assert origin_label({"source": "memory", "memory_id": "x"}) == "memory"


def test_session_ids() -> None:
    assert session_id_of("session:5d0c2a8e", "5d0c2a8e") == "5d0c2a8e"  # a transcript: the host's id
    assert session_id_of("sha256:abc", "3") == "sha256:abc/3"  # a conversation: which of its sessions
