"""Session transcripts ingested into a real store and index (node.memory.transcripts), read from the
file as ``LocalNode`` does: each kept message a traceable turn, a grown file adds only what is new,
a replaced or truncated file is read again without duplicates, hostile lines and secrets never stored,
and a big transcript streamed in bounded memory."""

from __future__ import annotations

import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from node.crystals import Origin, Source
from node.memory import (
    SearchRequest,
    TranscriptChunk,
    TranscriptConflict,
    TranscriptRefused,
    feed_transcript,
    ingest_transcript_chunk,
    neighbours,
    transcript_cursor,
)
from node.memory.facade import Memory
from tests.support.sessions.transcripts import (
    SESSION,
    claude_code_transcript,
    codex_rollout,
    jsonl,
    messages_transcript,
    write_transcript,
)


def ingest(memory: Memory, path: Path, **options: Any) -> dict[str, Any]:
    """``LocalNode.memory_ingest_transcript``: the file read here, each chunk stored by the node's function."""
    return feed_transcript(str(path), lambda key, space: transcript_cursor(memory, key, space),
                           lambda chunk: ingest_transcript_chunk(memory, chunk), **options)


def turns(memory: Memory) -> list[Any]:
    return memory.db.all("SELECT * FROM conversation_turns ORDER BY conversation, turn_index")


def search(memory: Memory, query: str, k: int = 3) -> list[dict[str, Any]]:
    return [hit.to_dict() for hit in memory.search(SearchRequest(query, k=k, record_access=False))]


def test_a_claude_code_session_becomes_traceable_turns(memory: Memory, tmp_path: Path) -> None:
    path = write_transcript(tmp_path / f"{SESSION}.jsonl", claude_code_transcript(40, sidechain_every=3))
    report = ingest(memory, path)
    assert report["format"] == "claude-code" and report["session_id"] == SESSION
    assert report["added"] == report["messages_read"] > 0 and report["already_stored"] == 0
    assert report["offset"] == path.stat().st_size == report["bytes_read"]
    assert report["dropped"]["thinking"] > 0 and report["dropped"]["progress"] > 0
    assert report["dropped"]["file-history-snapshot"] > 0 and report["skipped"] == {}
    assert report["sidechain_turns"] > 0

    rows = turns(memory)
    assert len(rows) == report["added"]
    assert [row["turn_index"] for row in rows] == list(range(len(rows)))  # one session, in file order
    assert {row["conversation"] for row in rows} == {f"session:{SESSION}"}
    assert {row["speaker"] for row in rows} == {"user", "assistant", "tool", "summary"}

    hit = search(memory, "tool Read facade.py")[0]
    crystal = memory.get(hit["id"])
    assert crystal.source is Source.SESSIONS and crystal.origin is Origin.SESSION
    assert crystal.path == f"session:{SESSION}" and crystal.valid_from_ms is not None
    assert hit["turn"]["session"] == SESSION and hit["turn"]["at_ms"] == crystal.valid_from_ms
    texts = [memory.get(row["crystal_id"]).text for row in rows]
    assert not any("Let me look at the code first" in text for text in texts)  # thinking never stored
    assert any(text.startswith("(2026-03-14 09:") and "[subagent a0003] assistant" in text for text in texts)
    assert not any("\x1b" in text for text in texts)
    around = neighbours(memory, hit["id"], window=1)
    assert len(around["turns"]) == 3


def test_each_format_is_detected_and_kept(memory: Memory, tmp_path: Path) -> None:
    codex = write_transcript(tmp_path / "rollout-2026-03-14T09-00-00-0199a213-81c0-7800-8aa1-bbab2a035a53.jsonl",
                             codex_rollout())
    report = ingest(memory, codex)
    assert (report["format"], report["session_id"]) == ("codex", "0199a213-81c0-7800-8aa1-bbab2a035a53")
    assert report["added"] == 6 and report["redacted"] == {"secret": 1}
    assert report["dropped"]["reasoning"] == 1 and report["dropped"]["event_msg"] == 3
    plain = write_transcript(tmp_path / "chat.jsonl", messages_transcript())
    report = ingest(memory, plain, namespace="user:jonas")
    assert (report["format"], report["session_id"], report["added"]) == ("messages", "chat", 3)
    # The question and its answer both come back; conversation fusion (node/memory/search/sessions.py)
    # may rank the question that echoes the query first.
    hits = memory.search(SearchRequest("which port does staging listen on", k=2, namespaces=("user:jonas",)))
    assert any("7411" in hit.crystal.text for hit in hits)
    forced = write_transcript(tmp_path / "forced.jsonl", messages_transcript())
    assert ingest(memory, forced, format="codex")["added"] == 0  # forced: read as Codex, nothing is a Codex item


def test_a_grown_transcript_adds_only_its_new_messages(memory: Memory, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    lines = claude_code_transcript(60)
    path = tmp_path / f"{SESSION}.jsonl"
    data = jsonl(lines[:30])
    path.write_bytes(data + jsonl(lines[30:31])[:-25])  # the host is still writing line 31
    first = ingest(memory, path)
    assert first["offset"] == len(data)  # the partial line is left for next time
    before = len(turns(memory))

    path.write_bytes(jsonl(lines))
    seen: list[int] = []
    real = memory.embed_windows
    monkeypatch.setattr(memory, "embed_windows", lambda texts, packed=False: (seen.append(len(texts)), real(texts, packed))[1])
    second = ingest(memory, path)
    assert second["bytes_read"] == len(jsonl(lines)) - len(data)
    assert second["added"] == len(turns(memory)) - before > 0 and second["already_stored"] == 0
    assert sum(seen) == second["added"]  # only the new messages were embedded
    assert [row["turn_index"] for row in turns(memory)] == list(range(len(turns(memory))))

    third = ingest(memory, path)
    assert (third["added"], third["messages_read"], third["bytes_read"]) == (0, 0, 0)


def test_a_replaced_or_truncated_transcript_is_read_again_without_duplicates(
        memory: Memory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lines = claude_code_transcript(30)
    path = write_transcript(tmp_path / f"{SESSION}.jsonl", lines)
    stored = ingest(memory, path)["added"]

    write_transcript(path, lines[:10])  # truncated: shorter than where the node stopped
    real = memory.embed_windows
    embedded: list[int] = []
    monkeypatch.setattr(memory, "embed_windows",
                        lambda texts, packed=False: (embedded.append(len(texts)), real(texts, packed))[1])
    again = ingest(memory, path)
    assert again["bytes_read"] == path.stat().st_size and again["added"] == 0
    assert again["already_stored"] == again["messages_read"] > 0
    assert sum(embedded) == 0  # known by id before anything is embedded

    other = claude_code_transcript(12, session_id="9e1f0000-0000-4000-8000-000000000001", seed=99)
    write_transcript(path, other)  # another session at the same path: a new first line
    replaced = ingest(memory, path)
    assert replaced["session_id"] == "9e1f0000-0000-4000-8000-000000000001"
    assert replaced["added"] == replaced["messages_read"] > 0
    assert len(turns(memory)) == stored + replaced["added"]


def test_hostile_lines_are_skipped_with_a_count(memory: Memory, tmp_path: Path) -> None:
    good = claude_code_transcript(6)
    hostile = [
        b"[" * 5000 + b"]" * 5000,  # nesting
        b'{"type": "user", "uuid": "u1", "message": {"content": "caf\xe9"}}',  # invalid UTF-8
        b"not json at all",
        b'["a", "list"]',
        b'{"type": "user", "uuid": "u2", "sessionId": "s", "message": "no blocks"}',
        b'{"type": "user", "uuid": "u3", "sessionId": "s", "message": {"content": ' + b'"' + b"x" * (600 * 1024)
        + b'"}}',  # over the line limit
    ]
    data = jsonl(good[:3]) + b"\n".join(hostile) + b"\n" + jsonl(good[3:])
    path = tmp_path / f"{SESSION}.jsonl"
    path.write_bytes(data)
    report = ingest(memory, path)
    assert report["skipped"] == {"too_deep": 1, "invalid_utf8": 1, "not_json": 1, "not_object": 1,
                                 "malformed": 1, "too_long": 1}
    assert report["offset"] == len(data)
    assert report["added"] == len(turns(memory)) == report["messages_read"]
    (tmp_path / "clean").mkdir()
    clean = write_transcript(tmp_path / "clean" / f"{SESSION}.jsonl", good)
    again = ingest(memory, clean)  # the same session without the hostile lines: every message already stored
    assert again["added"] == 0 and again["already_stored"] == report["added"]


def test_control_characters_never_refuse_a_session(memory: Memory, tmp_path: Path) -> None:
    line = {"type": "user", "uuid": "u-ansi", "sessionId": SESSION, "timestamp": "2026-03-14T09:00:00Z",
            "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                                                     "content": "\x1b[1;32m42 passed\x1b[0m\x07 in 0.3s\r\x00"}]}}
    path = write_transcript(tmp_path / f"{SESSION}.jsonl", [line])
    report = ingest(memory, path)
    assert report["added"] == 1 and report["skipped"] == {}
    assert memory.get(turns(memory)[0]["crystal_id"]).text == "(2026-03-14 09:00) tool result: 42 passed in 0.3s"


def test_secrets_in_tool_output_are_redacted_and_counted(memory: Memory, tmp_path: Path) -> None:
    env_dump = ("OPENAI_API_KEY=sk-proj-Ab3dE6gH9jK2mN5pQ8sT1vW4yZ7x\n"
                "DATABASE_URL=postgres://app:s3cretPassw0rd@db.internal:5432/app\n"
                "GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123456789AB\nDEBUG=true")
    lines = [
        {"type": "assistant", "uuid": "a-1", "sessionId": SESSION, "timestamp": "2026-03-14T09:00:00Z",
         "message": {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "Bash",
                                                       "input": {"command": "cat .env"}}]}},
        {"type": "user", "uuid": "u-1", "sessionId": SESSION, "timestamp": "2026-03-14T09:00:01Z",
         "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": env_dump}]}},
    ]
    path = write_transcript(tmp_path / f"{SESSION}.jsonl", lines)
    report = ingest(memory, path)
    assert report["redacted"] == {"api_key": 2, "connection_string": 1}
    stored = " ".join(row[0] for row in memory.db.all("SELECT text FROM crystals"))
    for secret in ("sk-proj-Ab3dE6", "s3cretPassw0rd", "ghp_abcdefghij"):
        assert secret not in stored
    assert "OPENAI_API_KEY=[redacted api_key]" in stored and "DEBUG=true" in stored


def test_a_chunk_that_does_not_continue_is_a_conflict_and_stores_nothing(memory: Memory, tmp_path: Path) -> None:
    data = jsonl(claude_code_transcript(8))
    path = tmp_path / f"{SESSION}.jsonl"
    path.write_bytes(data)
    report = ingest(memory, path)
    cursor = transcript_cursor(memory, str(path))
    assert cursor["offset"] == report["offset"] == len(data)
    before = len(turns(memory))
    with pytest.raises(TranscriptConflict):
        ingest_transcript_chunk(memory, TranscriptChunk(str(path), cursor["fingerprint"], 10, b"{}\n", 13))
    with pytest.raises(TranscriptConflict):
        ingest_transcript_chunk(memory, TranscriptChunk(str(path), "0" * 64, len(data), b"{}\n", len(data) + 3))
    for bad in (TranscriptChunk(str(path), "zz", 0, b"{}\n", 3),  # not a fingerprint
                TranscriptChunk(str(path), "0" * 64, 0, b"{}", 2),  # not whole lines
                TranscriptChunk(str(path), "0" * 64, 0, b"{}\n", 10),  # a gap that is no over-long line
                TranscriptChunk("a\x00b", "0" * 64, 0, b"{}\n", 3),
                TranscriptChunk(str(path), "0" * 64, 0, b"{}\n", 3, format="word")):
        with pytest.raises(TranscriptRefused):
            ingest_transcript_chunk(memory, bad)
    assert len(turns(memory)) == before and transcript_cursor(memory, str(path))["offset"] == len(data)


def test_a_file_of_an_unknown_shape_is_refused_whole(memory: Memory, tmp_path: Path) -> None:
    path = tmp_path / "odd.jsonl"
    path.write_bytes(b'{"speaker": "a", "text": "hello"}\n')
    with pytest.raises(TranscriptRefused, match="format"):
        ingest(memory, path)
    assert turns(memory) == [] and transcript_cursor(memory, str(path))["offset"] == 0
    with pytest.raises(TranscriptRefused):
        ingest(memory, tmp_path)  # a directory
    with pytest.raises(TranscriptRefused):
        ingest(memory, tmp_path / "missing.jsonl")


def test_a_big_transcript_is_streamed_in_bounded_memory(memory: Memory, tmp_path: Path) -> None:
    path = tmp_path / f"{SESSION}.jsonl"
    lines = claude_code_transcript(1500)
    write_transcript(path, lines)
    size = path.stat().st_size
    assert size >= 3 * 1024 * 1024
    del lines
    sent: list[int] = []
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        report = feed_transcript(str(path), lambda key, space: transcript_cursor(memory, key, space),
                                 lambda chunk: (sent.append(len(chunk.data)), {"offset": chunk.end_offset,
                                                                                "added": 0})[1],
                                 chunk_bytes=600 * 1024)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert report["offset"] == size and sum(sent) == size and len(sent) >= 5
    assert peak < 4 * 600 * 1024  # a few chunks' worth, never the file
    full = ingest(memory, path)
    assert full["offset"] == size and full["chunks"] >= 5 and full["skipped"] == {}
    assert json.dumps(full)  # a plain summary
