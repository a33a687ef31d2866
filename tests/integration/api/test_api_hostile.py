"""Issue 12 rows 1, 5, 8 and 9 against a real node (NodeService: store, index, libp2p host,
hypercorn-trio API) over real HTTP on 127.0.0.1: hostile bodies and headers get a 4xx, nothing
is written, and the node keeps serving."""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from node.config import load_config
from node.init import init_node
from node.service import NodeService


@pytest.fixture
async def node(tmp_path: Path, nursery: trio.Nursery) -> AsyncIterator[NodeService]:
    init_node(tmp_path / "node", name="hostile", embedder="hashing")
    config = load_config(tmp_path / "node", environ={})
    service = NodeService(config)
    await nursery.start(service.run)
    yield service


def base(node: NodeService) -> str:
    return f"http://127.0.0.1:{node.api_port}"


async def request(node: NodeService, method: str, path: str, *, body: bytes | None = None,
                  headers: dict[str, str] | None = None, auth: bool = True) -> httpx.Response:
    sent = dict(headers or {})
    if auth:
        sent.setdefault("authorization", f"Bearer {node.api_token}")
    async with httpx.AsyncClient(base_url=base(node), timeout=30) as client:
        return await client.request(method, path, content=body, headers=sent)


async def still_serves(node: NodeService) -> None:
    response = await request(node, "GET", "/v1/status")
    assert response.status_code == 200 and response.json()["peer_id"] == node.identity.peer_id


async def total(node: NodeService) -> int:
    return int((await request(node, "GET", "/v1/memory/status")).json()["total"])


async def test_deeply_nested_json_is_refused_not_a_crash(node: NodeService) -> None:
    from node.service import SAFE_RECURSION_LIMIT

    assert sys.getrecursionlimit() <= SAFE_RECURSION_LIMIT  # reset after py_ecc raised it
    deep = b"[" * 90_000
    for content_type in ("text/plain", "application/json"):
        response = await request(node, "POST", "/dashboard/login", body=deep,
                                 headers={"content-type": content_type}, auth=False)
        assert 400 <= response.status_code < 500
    response = await request(node, "POST", "/v1/crystals", body=b'{"text": ' + deep + b"}",
                             headers={"content-type": "application/json"})
    assert response.status_code == 400 and "deeper" in response.json()["error"]
    await still_serves(node)


async def test_dns_rebinding_host_is_refused(node: NodeService) -> None:
    for path in ("/metrics", "/dashboard", "/v1/status"):
        response = await request(node, "GET", path, headers={"host": "evil.example"})
        assert response.status_code == 421
    assert (await request(node, "GET", "/metrics", auth=False)).status_code == 200


async def test_cross_origin_state_change_is_refused(node: NodeService) -> None:
    before = await total(node)
    body = json.dumps({"text": "written by a web page"}).encode()
    for headers in ({"origin": "http://evil.example", "content-type": "application/json"},
                    {"sec-fetch-site": "cross-site", "content-type": "application/json"},
                    {"content-type": "text/plain"}):
        response = await request(node, "POST", "/v1/crystals", body=body, headers=headers)
        assert response.status_code in (403, 415), headers
    assert await total(node) == before


async def test_a_claimed_huge_body_is_refused_at_once(node: NodeService) -> None:
    def raw() -> bytes:
        with socket.create_connection(("127.0.0.1", node.api_port), timeout=30) as sock:
            sock.sendall(b"POST /v1/crystals HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                         b"Content-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n{"
                         % node.api_port)
            return sock.recv(4096)

    answer = await trio.to_thread.run_sync(raw)
    assert answer.startswith(b"HTTP/1.1 413")
    await still_serves(node)


@pytest.mark.parametrize(("path", "body", "field"), [
    ("/v1/crystals", {"text": "x", "ttl_ms": "soon"}, "ttl_ms"),
    ("/v1/crystals", {"text": "x", "type": "nonsense"}, "type"),
    ("/v1/crystals", {"text": "x", "scope": "everyone"}, "scope"),
    ("/v1/crystals", {"text": "x", "type": "skill", "tags": 5}, "tags"),
    ("/v1/crystals", {"text": "\ud800 lone surrogate"}, "surrogate"),
    ("/v1/crystals/search", {"query": "x", "k": "ten"}, "k"),
    ("/v1/crystals/search", {"query": "x", "k": "10"}, "k"),
    ("/v1/crystals/search", {"query": "x", "min_relevance": 1.5}, "min_relevance"),
    ("/v1/purchases", {"listing_id": "abc", "max_price_micro_usdc": 1.5}, "max_price_micro_usdc"),
    ("/v1/purchases", {"listing_id": "abc", "max_price_micro_usdc": True}, "max_price_micro_usdc"),
    ("/v1/crystals", {"text": "x", "owner": "someone"}, "owner"),
    ("/v1/crystals/search", {"query": "x", "types": ["nonsense"]}, "types"),
    ("/v1/skills/whatever/executions", {"success": True, "reward": "high"}, "reward"),
])
async def test_bad_fields_are_4xx_naming_the_field_and_write_nothing(
        node: NodeService, path: str, body: dict, field: str) -> None:
    before = await total(node)
    response = await request(node, "POST", path, body=json.dumps(body).encode(),
                             headers={"content-type": "application/json"})
    assert 400 <= response.status_code < 500, response.text
    assert field in response.json()["error"]
    assert await total(node) == before
    consolidated = await request(node, "POST", "/v1/memory/consolidate", body=b"{}",
                                 headers={"content-type": "application/json"})
    assert consolidated.status_code == 200  # maintenance keeps working (row 5)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children,
                                                                      max_size=4),
    max_leaves=12,
)
BODIES = st.dictionaries(st.sampled_from(["text", "type", "scope", "ttl_ms", "tags", "category",
                                          "path", "query", "k", "types", "extra"]),
                         JSON_VALUES, max_size=5)


async def test_generated_bodies_never_give_5xx(node: NodeService) -> None:
    bodies: list[bytes] = []

    @settings(max_examples=80, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(BODIES)
    def collect(body: dict) -> None:
        bodies.append(json.dumps(body).encode())

    collect()
    async with httpx.AsyncClient(base_url=base(node), timeout=30,
                                 headers={"authorization": f"Bearer {node.api_token}",
                                          "content-type": "application/json"}) as client:
        for body in bodies:
            for path in ("/v1/crystals", "/v1/crystals/search"):
                response = await client.post(path, content=body)
                assert response.status_code < 500, (path, body, response.text)
    await still_serves(node)


async def test_a_slow_body_ends_in_408(node: NodeService, monkeypatch: pytest.MonkeyPatch) -> None:
    from node.api import guards

    monkeypatch.setattr(guards, "BODY_TIMEOUT_S", 0.5)
    before = await total(node)

    def raw() -> bytes:
        with socket.create_connection(("127.0.0.1", node.api_port), timeout=30) as sock:
            sock.sendall(b"POST /v1/crystals HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n"
                         b"Authorization: Bearer %s\r\nContent-Type: application/json\r\n"
                         b"Content-Length: 20\r\n\r\n{\"text\": "
                         % (node.api_port, node.api_token.encode()))
            return sock.recv(4096)  # the rest of the body never comes

    answer = await trio.to_thread.run_sync(raw)
    assert answer.startswith(b"HTTP/1.1 408")
    assert await total(node) == before
    await still_serves(node)
