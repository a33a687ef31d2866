"""``POST /v1/crystals/search`` through a real node: each hit's relevance, and ``min_relevance`` applied."""

from __future__ import annotations

import httpx

from node.service import NodeService


async def test_search_returns_relevance_and_applies_min_relevance(node: NodeService) -> None:
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{node.api_port}", timeout=30,
                                 headers={"authorization": f"Bearer {node.api_token}"}) as client:
        for text in ("the release checklist lives in docs/release.md", "the release train leaves on Tuesdays",
                     "my sister's bakery opens at seven"):
            assert (await client.post("/v1/crystals", json={"text": text})).status_code == 200
        hits = (await client.post("/v1/crystals/search", json={"query": "release checklist"})).json()["hits"]
        assert len(hits) == 3 and all(0.0 <= hit["relevance"] <= 1.0 for hit in hits)
        top = hits[0]["relevance"]
        assert top > hits[-1]["relevance"]
        kept = (await client.post("/v1/crystals/search",
                                  json={"query": "release checklist", "min_relevance": top})).json()["hits"]
        assert [hit["id"] for hit in kept] == [hit["id"] for hit in hits if hit["relevance"] >= top]
        refused = await client.post("/v1/crystals/search", json={"query": "release checklist", "min_relevance": 2})
        assert refused.status_code in (400, 422)
