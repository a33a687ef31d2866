"""The local API of a node running in the test's trio run, called as any client would (bearer token)."""

from __future__ import annotations

from typing import Any

import httpx

from node.service import NodeService


async def call(node: NodeService, method: str, path: str, body: Any = None,
               params: dict[str, Any] | None = None) -> httpx.Response:
    """One request to ``node``'s API with its token; ``body`` as JSON, ``params`` as the query."""
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{node.api_port}", timeout=60,
                                 headers={"authorization": f"Bearer {node.api_token}"}) as client:
        return await client.request(method, path, json=body, params=params)
