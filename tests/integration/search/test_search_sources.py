"""Search by source (memory, sessions, files, skills) in a real store and index, and every hit's origin
(node.memory.search.origin): session + turn + time, file + lines, skill id, or the stored memory."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from node.cli.local import LocalNode
from node.config import load_config
from node.crystals import Origin, Source
from node.memory import (
    SearchRequest,
    add_from_request,
    export_to_path,
    import_path,
    ingest_conversation,
)
from node.memory.facade import Memory
from node.memory.search import MemoryInputError
from tests.support.sessions.conversations import locomo_bytes
from tests.support.sessions.transcripts import (
    SESSION,
    START,
    claude_code_transcript,
    write_transcript,
)


def hits(memory: Memory, query: str, k: int = 10, sources: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    return [hit.to_dict() for hit in memory.search(SearchRequest(query, k=k, record_access=False,
                                                                 sources=sources))]


def test_a_source_filter_returns_only_that_source_and_still_k_hits(memory: Memory) -> None:
    """300 memories match the question better than any file chunk: filtered after the candidates
    were cut, no file would be left; filtered where the candidates are listed, k of them come back."""
    memory.add_crystals([memory.prepare(f"deploy checklist step {n}: run the deploy checklist") for n in range(300)])
    memory.add_crystals([memory.prepare(f"notes on the deploy of service {n}", source=Source.FILES,
                                        origin=Origin.INDEXED, path=f"/repo/docs/service{n}.md",
                                        start_line=n + 1, end_line=n + 5) for n in range(12)])

    found = hits(memory, "deploy checklist", k=10, sources=("files",))
    assert len(found) == 10
    assert {hit["crystal"]["source"] for hit in found} == {"files"}
    assert all(hit["origin"]["source"] == "file" for hit in found)
    unfiltered = hits(memory, "deploy checklist", k=10)
    assert {hit["crystal"]["source"] for hit in unfiltered} == {"memory"}  # the files are not in its top 10
    both = hits(memory, "deploy checklist", k=20, sources=("files", "memory"))
    assert len(both) == 20


def test_origin_of_a_file_chunk_a_skill_and_a_memory(memory: Memory) -> None:
    memory.add("the retry budget is three attempts", source=Source.FILES, origin=Origin.INDEXED,
               path="/repo/docs/retries.md", start_line=10, end_line=24)
    skill = add_from_request(memory, {"text": "Skill: retry a flaky request three times with backoff",
                                      "type": "skill", "scope": "private"})
    plain = memory.add("the retry policy was agreed on Monday")

    by_id = {hit["id"]: hit for hit in hits(memory, "retry")}
    file_hit = next(hit for hit in by_id.values() if hit["crystal"]["source"] == "files")
    assert file_hit["origin"] == {"source": "file", "path": "/repo/docs/retries.md", "start_line": 10,
                                  "end_line": 24}
    assert skill.source is Source.SKILLS  # a skill added as memory is found under "skills"
    assert by_id[skill.id]["origin"] == {"source": "skill", "skill_id": skill.memory_id, "version": 1}
    assert by_id[plain.id]["origin"] == {"source": "memory", "memory_id": plain.id, "version": 1,
                                         "at_ms": plain.valid_from_ms, "path": None}
    assert [hit["id"] for hit in hits(memory, "retry", sources=("skills",))] == [skill.id]


def test_origin_of_a_conversation_turn_and_of_a_transcript_turn(memory: Memory) -> None:
    ingest_conversation(memory, locomo_bytes())
    turn = hits(memory, "charity race for mental health", k=1, sources=("sessions",))[0]
    conversation = turn["turn"]["conversation"]
    assert turn["origin"] == {"source": "session", "session_id": f"{conversation}/1", "turn": 1,
                              "at_ms": 1683554161000, "speaker": "Melanie", "source_id": "D1:2"}

    # A transcript turn as the transcripts ingest stores it (shared contract, issue 34): its row names
    # the conversation "session:<id>", and the origin names the host's session id.
    crystal = memory.prepare("user: please pin the numpy version in the lockfile", origin=Origin.SESSION,
                             source=Source.SESSIONS, path="session:ab12cd34", valid_from_ms=1795000000000)

    def row(conn: sqlite3.Connection, results: list[Any]) -> None:
        conn.execute("INSERT INTO conversation_turns(namespace, conversation, source_id, crystal_id, speaker, "
                     "session, session_index, turn_index, session_date, at_ms, ingested_at_ms) "
                     "VALUES ('default', 'session:ab12cd34', 'msg-14', ?, 'user', 'ab12cd34', 0, 14, NULL, "
                     "1795000000000, 1795000000000)", (results[0].id,))

    memory.add_crystals([crystal], beside=row)
    found = hits(memory, "pin the numpy version", k=1, sources=("sessions",))[0]
    assert found["origin"] == {"source": "session", "session_id": "ab12cd34", "turn": 14,
                               "at_ms": 1795000000000, "speaker": "user", "source_id": "msg-14"}


def test_an_unknown_source_is_refused(memory: Memory) -> None:
    memory.add("anything at all")
    with pytest.raises(MemoryInputError, match=r"unknown source 'session'.*memory, sessions, files, skills"):
        memory.search(SearchRequest("anything", sources=("session",)))


def test_a_real_transcript_ingest_names_its_session(memory: Memory, tmp_path: Path) -> None:
    """A Claude Code transcript ingested as ``LocalNode`` does: its hits name the host's session id,
    and the turn and time of the message; an export carries them to a fresh node."""
    path = write_transcript(tmp_path / "session.jsonl", claude_code_transcript(40))
    assert LocalNode(lambda: memory).memory_ingest_transcript(str(path))["added"] > 0
    found = hits(memory, "why does the deploy script fail on the staging host", k=5, sources=("sessions",))
    assert found and all(hit["origin"]["source"] == "session" and hit["origin"]["session_id"] == SESSION
                         for hit in found)
    assert all(isinstance(hit["origin"]["turn"], int) for hit in found)
    timed = [hit["origin"]["at_ms"] for hit in found if hit["origin"]["speaker"] != "summary"]  # a summary has none
    assert timed and all(at_ms >= START.timestamp() * 1000 for at_ms in timed)
    assert {hit["origin"]["speaker"] for hit in found} <= {"user", "assistant", "tool", "summary"}

    export_to_path(memory, tmp_path / "memory.jsonl")
    fresh = Memory(load_config(tmp_path / "fresh", overrides={"memory": {"embedder": "hashing"}}, environ={}))
    try:
        import_path(fresh, tmp_path / "memory.jsonl")
        again = hits(fresh, "why does the deploy script fail on the staging host", k=5, sources=("sessions",))
        assert [(hit["id"], hit["origin"]) for hit in again] == [(hit["id"], hit["origin"]) for hit in found]
    finally:
        fresh.close()
