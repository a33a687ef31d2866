"""Through a real node: search and the budgeted context by ``sources`` (a wrong one is a 400), each hit's
origin, and ``GET /v1/memory/export`` streamed to a 0600 file by the typed client, then restored offline."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import httpx
import pytest
import trio

from node.api import ApiClient
from node.config import load_config
from node.memory import SearchRequest, import_path
from node.memory.facade import Memory
from node.service import NodeService


async def test_sources_origins_and_the_streamed_export(node: NodeService, tmp_path: Path) -> None:
    base = f"http://127.0.0.1:{node.api_port}"
    async with httpx.AsyncClient(base_url=base, timeout=30,
                                 headers={"authorization": f"Bearer {node.api_token}"}) as client:
        for body in ({"text": "the release checklist lives in docs/release.md"},
                     {"text": "Skill: write the release checklist from the changelog", "type": "skill",
                      "scope": "private"},
                     {"text": "a secret note: the release signing key is in the vault"}):
            assert (await client.post("/v1/crystals", json=body)).status_code == 200
        hits = (await client.post("/v1/crystals/search", json={"query": "release checklist",
                                                               "sources": ["skills"]})).json()["hits"]
        assert [hit["origin"]["source"] for hit in hits] == ["skill"]
        everything = (await client.post("/v1/crystals/search", json={"query": "release checklist"})).json()["hits"]
        assert {hit["origin"]["source"] for hit in everything} == {"skill", "memory"}
        refused = await client.post("/v1/crystals/search", json={"query": "release", "sources": ["session"]})
        assert refused.status_code == 400 and refused.json()["code"] == "bad_request"
        budget = (await client.post("/v1/memory/context/budget", json={
            "query": "release checklist", "budget_tokens": 500, "sources": ["memory"]})).json()
        assert {item["origin"]["source"] for block in budget["blocks"] for item in block["items"]} == {"memory"}
        assert (await client.post("/v1/memory/context/budget", json={
            "query": "release", "budget_tokens": 500, "sources": ["disk"]})).status_code == 400

        streamed = await client.get("/v1/memory/export")
        assert streamed.status_code == 200 and streamed.headers["content-type"] == "application/x-ndjson"
        lines = streamed.content.splitlines()
        assert json.loads(lines[0])["counts"]["crystals"] == 3 == len(lines) - 1
    async with httpx.AsyncClient(base_url=base, timeout=30) as stranger:
        assert (await stranger.get("/v1/memory/export")).status_code == 401

    exported = tmp_path / "memory.jsonl"

    def export() -> dict[str, object]:
        api = ApiClient(base, node.api_token)
        try:
            return api.memory_export(str(exported))
        finally:
            api.close()

    summary = await trio.to_thread.run_sync(export)
    assert summary["crystals"] == 3 and summary["bytes"] == exported.stat().st_size
    assert stat.S_IMODE(exported.stat().st_mode) == 0o600
    assert exported.read_bytes().splitlines()[1:] == lines[1:]

    restored = Memory(load_config(tmp_path / "restored", overrides={"memory": {"embedder": "hashing"}}, environ={}))
    try:
        assert import_path(restored, exported)["imported"] == 3
        found = restored.search(SearchRequest("release checklist", record_access=False))
        assert {hit.crystal.id for hit in found} == {hit["id"] for hit in everything}
    finally:
        restored.close()


async def test_mcp_tools_take_source_and_give_origins(node: NodeService) -> None:
    """The MCP server (as ``crystalmesh mcp`` runs it) passes ``source`` on and returns each hit's origin."""
    from mcp.server.mcpserver.exceptions import ToolError

    from node.agent.mcp_server import build_server

    server = build_server(lambda: ApiClient(f"http://127.0.0.1:{node.api_port}", node.api_token))
    for text, kind in (("the deploy runbook is in docs/deploy.md", "general"),
                       ("Skill: deploy with a canary first", "skill")):
        await server.call_tool("memory_add", {"text": text, "type": kind})
    found = await server.call_tool("memory_search", {"query": "deploy", "source": ["skills"]})
    assert found.structured_content is not None
    assert [hit["origin"]["source"] for hit in found.structured_content["hits"]] == ["skill"]
    context = await server.call_tool("memory_context_budget", {"query": "deploy", "budget_tokens": 500,
                                                               "source": ["memory"]})
    assert context.structured_content is not None
    items = [item for block in context.structured_content["blocks"] for item in block["items"]]
    assert items and {item["origin"]["source"] for item in items} == {"memory"}
    with pytest.raises(ToolError):
        await server.call_tool("memory_search", {"query": "deploy", "source": ["disk"]})
