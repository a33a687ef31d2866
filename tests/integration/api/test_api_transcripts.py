"""Session transcripts through a real node's HTTP API and its MCP server: the client reads the file and
sends chunks from the node's cursor; malformed bodies and chunks that do not continue are refused with
nothing stored; MCP reports progress per chunk."""

from __future__ import annotations

import base64
import hashlib
from pathlib import Path
from typing import Any

import pytest
import trio

from node.service import NodeService
from tests.support.api import call
from tests.support.sessions.transcripts import (
    SESSION,
    claude_code_transcript,
    jsonl,
    write_transcript,
)


async def turn_count(node: NodeService) -> int:
    row = await node.memory.run(node.memory.db.one, "SELECT COUNT(*) FROM conversation_turns")
    return int(row[0]) if row else 0


def chunk_body(data: bytes, offset: int = 0, **fields: Any) -> dict[str, Any]:
    first = data[:data.find(b"\n") + 1]
    return {"transcript": "/home/dev/.claude/projects/app/session.jsonl",
            "fingerprint": hashlib.sha256(first).hexdigest(), "offset": offset,
            "end_offset": offset + len(data), "data_b64": base64.b64encode(data).decode("ascii")} | fields


async def test_chunks_and_cursor_through_the_api(node: NodeService) -> None:
    data = jsonl(claude_code_transcript(20))
    half = data[:data.find(b"\n", len(data) // 2) + 1]
    rest = data[len(half):]
    cursor = await call(node, "GET", "/v1/memory/transcripts/cursor",
                        params={"transcript": "/home/dev/.claude/projects/app/session.jsonl"})
    assert cursor.status_code == 200 and cursor.json()["offset"] == 0 and cursor.json()["fingerprint"] is None

    first = await call(node, "POST", "/v1/memory/transcripts", chunk_body(half))
    assert first.status_code == 200, first.text
    assert first.json()["offset"] == len(half) and first.json()["added"] > 0
    fingerprint = chunk_body(half)["fingerprint"]
    stale = await call(node, "POST", "/v1/memory/transcripts", chunk_body(rest, offset=len(half) - 1,
                                                                          fingerprint=fingerprint))
    assert stale.status_code == 409 and stale.json()["code"] == "transcript_conflict"
    second = await call(node, "POST", "/v1/memory/transcripts", chunk_body(rest, offset=len(half),
                                                                           fingerprint=fingerprint))
    assert second.status_code == 200 and second.json()["offset"] == len(data)
    cursor = (await call(node, "GET", "/v1/memory/transcripts/cursor",
                         params={"transcript": "/home/dev/.claude/projects/app/session.jsonl"})).json()
    assert (cursor["offset"], cursor["fingerprint"], cursor["format"]) == (len(data), fingerprint, "claude-code")
    assert cursor["messages"] == first.json()["added"] + second.json()["added"] == await turn_count(node)
    # the file is not named after its session: the id comes from the lines, the title line's too
    assert cursor["session_id"] == SESSION
    conversations = await node.memory.run(node.memory.db.all, "SELECT DISTINCT conversation FROM conversation_turns")
    assert [row[0] for row in conversations] == [f"session:{SESSION}"]


@pytest.mark.parametrize("fields", [
    {"data_b64": "not base64!"},
    {"data_b64": "QUJ"},  # bad padding
    {"fingerprint": "xyz"},
    {"offset": -1},
    {"end_offset": 3},  # shorter than the data
    {"format": "word"},
    {"namespace": "Not A Namespace"},
    {"transcript": ""},
    {"transcript": "a\u0000b"},
    {"data_b64": base64.b64encode(b'{"type": "user"}').decode("ascii")},  # not ending in a newline
    {"unknown": 1},
], ids=["alphabet", "padding", "fingerprint", "offset", "end", "format", "namespace", "empty", "control",
        "partial", "extra"])
async def test_a_malformed_chunk_is_refused_and_stores_nothing(node: NodeService, fields: dict[str, Any]) -> None:
    data = jsonl(claude_code_transcript(4))
    response = await call(node, "POST", "/v1/memory/transcripts", chunk_body(data) | fields)
    assert response.status_code in (400, 422), response.text
    assert await turn_count(node) == 0


async def test_the_api_client_and_the_mcp_tool_read_the_file_from_the_cursor(node: NodeService,
                                                                              tmp_path: Path) -> None:
    from mcp import Client
    from mcp.server.mcpserver.exceptions import ToolError

    from node.agent import build_server
    from node.api import ApiClient

    lines = claude_code_transcript(400)
    path = write_transcript(tmp_path / f"{SESSION}.jsonl", lines[:300])
    client = ApiClient(f"http://127.0.0.1:{node.api_port}", node.api_token)
    try:
        seen: list[tuple[int, int]] = []
        report = await trio.to_thread.run_sync(lambda: client.memory_ingest_transcript(
            str(path), progress=lambda done, total: seen.append((done, total))))
    finally:
        client.close()
    assert report["offset"] == path.stat().st_size and report["chunks"] >= 1
    assert seen[-1] == (path.stat().st_size, path.stat().st_size)
    stored = await turn_count(node)
    assert report["added"] == stored > 0

    write_transcript(path, lines)  # the session went on
    server = build_server(lambda: ApiClient(f"http://127.0.0.1:{node.api_port}", node.api_token))
    progress: list[float] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(done)

    async with Client(server) as mcp:
        result = await mcp.call_tool("memory_ingest_transcript", {"path": str(path)}, progress_callback=on_progress)
        assert not result.is_error and result.structured_content is not None
        grown = result.structured_content
        assert grown["bytes_read"] == path.stat().st_size - report["offset"]
        assert grown["added"] == await turn_count(node) - stored > 0 and grown["already_stored"] == 0
        assert progress and progress[-1] == path.stat().st_size
        again = await mcp.call_tool("memory_ingest_transcript", {"path": str(path)})
        assert again.structured_content is not None and again.structured_content["added"] == 0
    with pytest.raises(ToolError, match="absolute path"):
        await server.call_tool("memory_ingest_transcript", {"path": "session.jsonl"})
    with pytest.raises(ToolError, match="cannot read"):
        await server.call_tool("memory_ingest_transcript", {"path": str(tmp_path / "missing.jsonl")})
