"""Memory that learns through a real node's HTTP API: feedback, session end, testament, budget context."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
import pytest

from node.service import NodeService
from protocol.testament import open_testament


async def call(node: NodeService, path: str, body: Any, method: str = "POST") -> httpx.Response:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{node.api_port}", timeout=30) as client:
        return await client.request(method, path, json=body,
                                    headers={"authorization": f"Bearer {node.api_token}"})


async def test_feedback_session_budget_and_testament_round_trip(node: NodeService) -> None:
    added = (await call(node, "/v1/crystals", {"text": "warning: wallet 0xdead is a honeypot",
                                               "type": "warning"})).json()
    rated = await call(node, "/v1/memory/feedback", {"id": added["id"], "verdict": "wrong"})
    assert rated.status_code == 200 and rated.json()["confidence"] == 0.5
    detail = (await call(node, f"/v1/crystals/{added['id']}", None, method="GET")).json()
    assert detail["knowledge"]["confidence"] == 0.5
    assert (await call(node, "/v1/memory/feedback", {"id": added["id"], "verdict": "meh"})).status_code == 400
    assert (await call(node, "/v1/memory/feedback", {"id": "nope", "verdict": "useful"})).status_code == 404
    ended = await call(node, "/v1/memory/session/end", {})
    assert ended.status_code == 200 and ended.json()["policy"] == "importance"
    status = (await call(node, "/v1/memory/status", None, method="GET")).json()
    assert status["tiers"]["last_session_end_ms"] == ended.json()["at_ms"]

    budget = await call(node, "/v1/memory/context/budget", {"query": "pay wallet 0xdead", "budget_tokens": 100})
    assert budget.status_code == 200 and budget.json()["blocks"][0]["kind"] == "warnings"
    assert (await call(node, "/v1/memory/context/budget", {"query": "x", "budget_tokens": -1})).status_code == 400

    past = await call(node, "/v1/crystals/search", {"query": "wallet honeypot", "as_of_ms": 1})
    assert past.status_code == 200 and past.json()["hits"] == []  # nothing was valid in 1970
    now = await call(node, "/v1/crystals/search", {"query": "wallet honeypot"})
    assert [h["id"] for h in now.json()["hits"]] == [added["id"]]

    exported = (await call(node, "/v1/memory/testament/export", {})).json()
    data = base64.b64decode(exported["testament_b64"])
    assert open_testament(data).signer_peer_id == node.identity.peer_id
    again = await call(node, "/v1/memory/testament/import", {"testament_b64": exported["testament_b64"]})
    assert again.status_code == 200 and again.json()["already_known"] == 1


@pytest.mark.parametrize("payload", ["not base64!", base64.b64encode(b"\xa1" * 64).decode(), "QUJD"])
async def test_a_bad_testament_is_a_400_and_changes_nothing(node: NodeService, payload: str) -> None:
    before = (await call(node, "/v1/memory/status", None, method="GET")).json()["total"]
    response = await call(node, "/v1/memory/testament/import", {"testament_b64": payload})
    assert response.status_code == 400, response.text
    assert "error" in json.loads(response.text)
    assert (await call(node, "/v1/memory/status", None, method="GET")).json()["total"] == before


async def test_mcp_tools_reach_the_node(node: NodeService) -> None:
    """The MCP server (anyio, as in ``crystalmesh mcp``) calls the real node's API."""
    from node.agent.mcp_server import build_server
    from node.api.client import ApiClient

    added = (await call(node, "/v1/crystals", {"text": "warning: bridge X drains funds", "type": "warning"})).json()
    server = build_server(lambda: ApiClient(f"http://127.0.0.1:{node.api_port}", node.api_token))
    names = {tool.name for tool in await server.list_tools()}
    assert {"memory_feedback", "memory_session_end", "memory_context_budget"} <= names
    rated = await server.call_tool("memory_feedback", {"id": added["id"], "verdict": "wrong"})
    assert rated.structured_content is not None and rated.structured_content["confidence"] == 0.5
    ended = await server.call_tool("memory_session_end", {})
    assert ended.structured_content is not None and ended.structured_content["policy"] == "importance"
    context = await server.call_tool("memory_context_budget", {"query": "bridge funds", "budget_tokens": 80})
    assert context.structured_content is not None
    assert context.structured_content["blocks"][0]["kind"] == "warnings"
