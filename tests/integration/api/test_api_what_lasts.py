"""Pins, explicit importance and consolidation previews through a real node: API and MCP (issue 35)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from node.service import NodeService

ORDINARY = "the coffee machine on the third floor was descaled on a tuesday"



async def post(node: NodeService, path: str, body: Any) -> httpx.Response:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{node.api_port}", timeout=30) as client:
        return await client.post(path, json=body, headers={"authorization": f"Bearer {node.api_token}"})


async def test_pin_explicit_importance_and_a_dry_run_through_the_api(node: NodeService) -> None:
    ordinary = (await post(node, "/v1/crystals", {"text": ORDINARY})).json()
    said = await post(node, "/v1/crystals", {"text": "the user's name is Priya", "importance": 0.8})
    assert said.status_code == 200 and said.json()["governance"]["importanceFloor"] == 0.8
    kept = await post(node, "/v1/crystals", {"text": "the office wifi is cm-guest", "lifespan": "permanent"})
    assert kept.json()["governance"]["lifespanPolicy"] == "permanent"
    note = (await post(node, "/v1/memory/notes", {"text": "the API migration deadline is March 20",
                                                   "importance": 0.7})).json()

    total = (await node.memory.stats())["total"]
    preview = await post(node, "/v1/memory/consolidate", {"at": "+90d", "dry_run": True})
    assert preview.status_code == 200, preview.text
    forgotten = {item["id"] for item in preview.json()["forgotten"]}
    assert forgotten == {ordinary["id"]} and preview.json()["dry_run"] is True
    assert (await node.memory.stats())["total"] == total
    assert (await node.memory.detail(ordinary["id"]))["lifecycle"] == "generated"

    pinned = await post(node, f"/v1/crystals/{ordinary['id']}/lifespan", {"lifespan": "permanent"})
    assert pinned.status_code == 200 and pinned.json()["changed"] is True
    again = (await post(node, "/v1/memory/consolidate", {"at": "+90d", "dry_run": True})).json()
    assert again["forgotten"] == []
    real = (await post(node, "/v1/memory/consolidate", {"at": "+90d"})).json()
    assert real["forgotten"] == [] and real["dry_run"] is False
    assert (await node.memory.detail(note["crystal_id"]))["lifecycle"] != "expired"


@pytest.mark.parametrize(("path", "body"), [
    ("/v1/crystals/{id}/lifespan", {"lifespan": "ttl"}),
    ("/v1/crystals/{id}/lifespan", {"lifespan": "permanent", "extra": 1}),
    ("/v1/crystals/{id}/lifespan", {}),
    ("/v1/crystals/{id}/lifespan", ["permanent"]),
    ("/v1/memory/consolidate", {"at": "yesterday"}),
    ("/v1/memory/consolidate", {"at": "2020-01-01"}),
    ("/v1/memory/consolidate", {"at": "+90d", "dry_run": "yes"}),
    ("/v1/memory/consolidate", {"at": "+90d", "dry_run": True, "purge": True}),
    ("/v1/memory/consolidate", {"at": 90}),
    ("/v1/crystals", {"text": "x", "importance": 2}),
    ("/v1/crystals", {"text": "x", "lifespan": "forever"}),
    ("/v1/memory/notes", {"text": "x", "lifespan": "ttl"}),
])
async def test_crafted_pin_and_consolidate_requests_are_refused_and_change_nothing(
        node: NodeService, path: str, body: Any) -> None:
    crystal = (await post(node, "/v1/crystals", {"text": ORDINARY})).json()
    before = (await node.memory.stats(), await node.memory.detail(crystal["id"]))
    response = await post(node, path.format(id=crystal["id"]), body)
    assert response.status_code in (400, 422), response.text
    after = (await node.memory.stats(), await node.memory.detail(crystal["id"]))
    assert after == before


async def test_pin_of_an_unknown_memory_is_404(node: NodeService) -> None:
    response = await post(node, "/v1/crystals/no-such-memory/lifespan", {"lifespan": "permanent"})
    assert response.status_code == 404


async def test_mcp_pins_and_previews(node: NodeService) -> None:
    from node.agent.mcp_server import build_server
    from node.api.client import ApiClient

    server = build_server(lambda: ApiClient(f"http://127.0.0.1:{node.api_port}", node.api_token))
    added = await server.call_tool("memory_add", {"text": ORDINARY, "type": "general"})
    assert added.structured_content is not None
    crystal_id = added.structured_content["id"]
    # A note (the seed's working_memory_note) is explicit: only ordinary material is previewed as lost.
    ordinary = (await post(node, "/v1/crystals", {"text": "the lift was serviced in may"})).json()
    preview = await server.call_tool("memory_consolidate_preview", {"at": "+90d"})
    assert preview.structured_content is not None
    assert [item["id"] for item in preview.structured_content["forgotten"]] == [ordinary["id"]]
    pinned = await server.call_tool("memory_pin", {"id": ordinary["id"]})
    assert pinned.structured_content == {"id": ordinary["id"], "lifespan": "permanent", "changed": True}
    preview = await server.call_tool("memory_consolidate_preview", {"at": "+90d"})
    assert preview.structured_content is not None and preview.structured_content["forgotten"] == []
    unpinned = await server.call_tool("memory_pin", {"id": ordinary["id"], "pinned": False})
    assert unpinned.structured_content is not None and unpinned.structured_content["lifespan"] == "decay"
    permanent = await server.call_tool("memory_add", {"text": "the user keeps a cat named Io", "permanent": True})
    assert permanent.structured_content is not None
    stored = await node.memory.detail(permanent.structured_content["id"])
    assert stored["governance"]["lifespanPolicy"] == "permanent"
    assert (await node.memory.detail(crystal_id))["governance"]["importanceFloor"] == 0.7
