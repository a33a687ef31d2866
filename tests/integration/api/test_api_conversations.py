"""Conversations through a real node's HTTP API and its MCP server: ingest, hits traced to the
transcript, neighbours, re-ingest, and hostile files refused with nothing stored."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from node.service import NodeService
from tests.support.api import call
from tests.support.sessions.conversations import jsonl_bytes, locomo_bytes


def encoded(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


async def total(node: NodeService) -> int:
    return int((await call(node, "GET", "/v1/memory/status")).json()["total"])


async def test_ingest_search_neighbours_through_the_api(node: NodeService) -> None:
    response = await call(node, "POST", "/v1/memory/conversations",
                          {"content_b64": encoded(locomo_bytes()), "namespace": "user:caroline"})
    assert response.status_code == 200, response.text
    assert (response.json()["added"], response.json()["turns"]) == (7, 7)
    again = (await call(node, "POST", "/v1/memory/conversations",
                        {"content_b64": encoded(locomo_bytes()), "namespace": "user:caroline"})).json()
    assert again["added"] == 0 and await total(node) == 7

    hits = (await call(node, "POST", "/v1/crystals/search",
                       {"query": "pottery classes", "namespace": "user:caroline", "k": 2})).json()["hits"]
    assert hits[0]["source_id"] == "D2:1" and hits[0]["turn"]["speaker"] == "Melanie"
    assert hits[0]["crystal"]["text"].endswith("[yesterday = 24 May 2023]")
    around = await call(node, "GET", f"/v1/crystals/{hits[0]['id']}/neighbours", params={"window": 1})
    assert around.status_code == 200
    assert [t["source_id"] for t in around.json()["turns"]] == ["D2:1", "D2:2"]
    assert (await call(node, "GET", f"/v1/crystals/{hits[0]['id']}/neighbours",
                       params={"window": 99})).status_code == 400


@pytest.mark.parametrize("body", [
    {"content_b64": encoded(b'[{"speaker": "a", "text": "x\\ud800"}]')},
    {"content_b64": encoded(b'[{"speaker": "a", "text": "caf\xe9"}]')},
    {"content_b64": encoded(b"[" * 3000 + b"]" * 3000)},
    {"content_b64": encoded(b'{"not": "a conversation"}')},
    {"content_b64": "not base64!"},
    {"content_b64": "QUJ"},  # bad padding
    {"content_b64": encoded(jsonl_bytes()), "namespace": "Not A Namespace"},
], ids=["surrogate", "utf8", "deep", "shape", "alphabet", "padding", "namespace"])
async def test_a_hostile_conversation_is_a_400_and_stores_nothing(node: NodeService, body: dict[str, Any]) -> None:
    response = await call(node, "POST", "/v1/memory/conversations", body)
    assert response.status_code in (400, 422), response.text
    assert "error" in response.json() or "detail" in response.json()
    assert await total(node) == 0


async def test_a_conversation_over_the_body_limit_is_a_413(node: NodeService) -> None:
    turns = b"\n".join(b'{"speaker": "a", "text": "%d"}' % number for number in range(40_000))
    response = await call(node, "POST", "/v1/memory/conversations", {"content_b64": encoded(turns)})
    assert response.status_code == 413 and await total(node) == 0


async def test_mcp_tools_ingest_and_trace(node: NodeService, tmp_path: Path) -> None:
    """The MCP server (anyio, as in ``crystalmesh mcp``) reads the file and calls the real node's API."""
    from mcp.server.mcpserver.exceptions import ToolError

    from node.agent.mcp_server import build_server
    from node.api.client import ApiClient

    server = build_server(lambda: ApiClient(f"http://127.0.0.1:{node.api_port}", node.api_token))
    names = {tool.name for tool in await server.list_tools()}
    assert {"memory_ingest_conversation", "memory_neighbours"} <= names
    transcript = tmp_path / "standup.jsonl"
    transcript.write_bytes(jsonl_bytes())
    ingested = await server.call_tool("memory_ingest_conversation", {"path": str(transcript)})
    assert ingested.structured_content is not None and ingested.structured_content["added"] == 3
    found = await server.call_tool("memory_search", {"query": "flaky migration"})
    assert found.structured_content is not None
    hit = found.structured_content["hits"][0]
    assert (hit["source_id"], hit["speaker"], hit["session"]) == ("standup-14:2", "ben", "standup-14")
    around = await server.call_tool("memory_neighbours", {"id": hit["id"], "window": 1})
    assert around.structured_content is not None
    assert [t["source_id"] for t in around.structured_content["turns"]] == ["standup-14:1", "standup-14:2"]

    bad = tmp_path / "bad.json"
    bad.write_bytes(b'[{"speaker": "a", "text": "x\\ud800"}]')
    with pytest.raises(ToolError, match="surrogate"):
        await server.call_tool("memory_ingest_conversation", {"path": str(bad)})
    with pytest.raises(ToolError, match="absolute path"):
        await server.call_tool("memory_ingest_conversation", {"path": "standup.jsonl"})
    assert await total(node) == 3
