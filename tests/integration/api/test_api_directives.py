"""Directives and bought knowledge as an agent sees them through a real node: API and MCP."""

from __future__ import annotations

from typing import Any

import httpx

from node.crystals import content_hash
from node.market.book.listings import StoredListing
from node.market.purchase.skill_import import imported_skill
from node.service import NodeService
from protocol.purchase import Delivery
from tests.fixtures.messages import SELLER, T0_MS, sample_listing

SKILL = "urgent fail error crash: parse the nginx access logs and count the 5xx lines"



async def search(node: NodeService, query: str) -> list[dict[str, Any]]:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{node.api_port}", timeout=30) as client:
        response = await client.post("/v1/crystals/search", json={"query": query},
                                     headers={"authorization": f"Bearer {node.api_token}"})
    assert response.status_code == 200, response.text
    return list(response.json()["hits"])


async def test_a_directive_note_and_a_bought_skill_are_marked_in_api_and_mcp_results(node: NodeService) -> None:
    from node.agent.mcp_server import build_server
    from node.api.client import ApiClient

    server = build_server(lambda: ApiClient(f"http://127.0.0.1:{node.api_port}", node.api_token))
    added = await server.call_tool("memory_add", {"text": "the user never wants semicolons",
                                                  "type": "directive", "importance": 0.75})
    assert added.structured_content is not None and added.structured_content["note_id"]
    stored = StoredListing(listing=sample_listing(), seller_key=SELLER.public_key, issued_at_ms=T0_MS,
                           received_at_ms=T0_MS, superseded_by=None, own_crystal_id=None, envelope=b"")
    delivery = Delivery("0f" * 16, stored.listing.listing_id, SKILL, content_hash(SKILL), "0x" + "ab" * 32)
    before = (await node.memory.status())["hormones"]
    await node.memory.add_prepared(imported_skill(stored, delivery, ()))  # the buyer's ingest step
    assert (await node.memory.status())["hormones"]["cortisol"] == before["cortisol"]

    said = (await search(node, "semicolons"))[0]
    assert said["crystal"]["epistemicLayer"] == "directive" and said["crystal"]["provenance"] == "own"
    skill = (await search(node, "nginx access logs 5xx"))[0]
    assert (skill["crystal"]["provenance"], skill["crystal"]["seller"]) == ("bought", SELLER.public_key.hex())

    found = await server.call_tool("memory_search", {"query": "nginx access logs 5xx"})
    assert found.structured_content is not None
    hit = found.structured_content["hits"][0]
    assert (hit["provenance"], hit["seller"], hit["layer"]) == ("bought", SELLER.public_key.hex(), "world_fact")
    found = await server.call_tool("memory_search", {"query": "semicolons"})
    assert found.structured_content is not None
    assert found.structured_content["hits"][0]["layer"] == "directive"
