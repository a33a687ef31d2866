"""Indexed files with a node running: ``memory.index_paths`` in node.toml kept in sync by the node
itself, ``memory index`` through the API (the caller reads, the node stores), and hostile
requests refused with nothing stored."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio

from node.api.client import ApiClient
from node.config import load_config, save_config
from node.init import init_node
from node.service import NodeService
from tests.support.api import call
from tests.support.wait import wait_until_async


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    root = tmp_path / "notes"
    root.mkdir()
    (root / "deploy.md").write_text("# Deploy\n\nShip with the okapirun pipeline.\n\n## Rollback\n\n"
                                    "Pull the aardwolf lever.\n")
    return root


@pytest.fixture
async def node(tmp_path: Path, notes: Path, nursery: trio.Nursery) -> AsyncIterator[NodeService]:
    init_node(tmp_path / "node", name="indexer", embedder="hashing")
    config = load_config(tmp_path / "node", environ={})
    config.memory.index_paths = [str(notes)]
    config.memory.index_interval_s = 1
    save_config(config)  # the operator's node.toml names the folder
    service = NodeService(load_config(tmp_path / "node", environ={}))
    await nursery.start(service.run)
    yield service



async def texts(node: NodeService, query: str) -> list[str]:
    response = await call(node, "POST", "/v1/crystals/search", {"query": query, "k": 5})
    return [hit["crystal"]["text"] for hit in response.json()["hits"] if query in hit["crystal"]["text"]]


async def test_a_running_node_keeps_its_index_paths_in_sync(node: NodeService, notes: Path) -> None:
    await wait_until_async(lambda: texts(node, "aardwolf"), timeout_s=60, what="the folder indexed")
    (notes / "deploy.md").write_text((notes / "deploy.md").read_text().replace("aardwolf", "pangolix"))
    (notes / "new.md").write_text("# New\n\nThe tarsierix runbook.\n")
    await wait_until_async(lambda: texts(node, "pangolix"), timeout_s=60, what="the edit re-synced")
    await wait_until_async(lambda: texts(node, "tarsierix"), timeout_s=60, what="the new file indexed")
    assert await texts(node, "aardwolf") == []  # the old version is closed
    hit = (await call(node, "POST", "/v1/crystals/search", {"query": "pangolix", "k": 1})).json()["hits"][0]
    versions = (await call(node, "GET", f"/v1/crystals/{hit['id']}/history")).json()["versions"]
    assert [v["version"] for v in versions] == [1, 2]
    (notes / "new.md").unlink()
    await wait_until_async(lambda: _gone(node, "tarsierix"), timeout_s=60, what="the removed file retired")


async def _gone(node: NodeService, query: str) -> bool:
    return await texts(node, query) == []


async def test_memory_index_through_the_api_reads_here_and_resyncs(node: NodeService, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.py").write_text("def sloth():\n    return 'the slothwave routine'\n")
    client = ApiClient(f"http://127.0.0.1:{node.api_port}", node.api_token)
    try:
        first = await trio.to_thread.run_sync(lambda: client.memory_index([str(other)], namespace="agent:coder"))
        assert (first["files"]["indexed"], first["chunks"]["added"]) == (1, 1)
        again = await trio.to_thread.run_sync(lambda: client.memory_index([str(other)], namespace="agent:coder"))
        assert (again["files"]["indexed"], again["files"]["unchanged"]) == (0, 1)
        (other / "a.py").write_text("def sloth():\n    return 'the slothwave routine, faster'\n")
        edited = await trio.to_thread.run_sync(lambda: client.memory_index([str(other)], namespace="agent:coder"))
        assert edited["chunks"]["versioned"] == 1
    finally:
        client.close()
    hits = (await call(node, "POST", "/v1/crystals/search",
                       {"query": "slothwave", "k": 3, "namespace": "agent:coder"})).json()["hits"]
    assert [h["crystal"]["text"].endswith("faster'") for h in hits] == [True]


@pytest.mark.parametrize("body", [
    {"documents": [{"path": "relative.md", "size": 1, "mtime_ns": 1, "content_b64": "YQ=="}]},
    {"documents": [{"path": "/x\n.md", "size": 1, "mtime_ns": 1, "content_b64": "YQ=="}]},
    {"documents": [{"path": "/x.md", "size": 1, "mtime_ns": 1, "content_b64": "not base64!"}]},
    {"documents": [{"path": "/x.md", "size": 1, "mtime_ns": 1, "content_b64": "QUJ"}]},
    {"documents": [{"path": "/x.md", "size": -1, "mtime_ns": 1, "content_b64": "YQ=="}]},
    {"documents": [], "removed": {"/x.md": "because"}},
    {"documents": [], "namespace": "Not A Namespace"},
    {"documents": [{"path": "/" + "a" * 5000, "size": 1, "mtime_ns": 1, "content_b64": "YQ=="}]},
    {"documents": [], "extra": 1},
], ids=["relative", "control", "alphabet", "padding", "size", "reason", "namespace", "long-path", "extra"])
async def test_a_hostile_sync_request_is_refused_and_stores_nothing(node: NodeService,
                                                                  body: dict[str, Any]) -> None:
    await wait_until_async(lambda: texts(node, "aardwolf"), timeout_s=60, what="the folder indexed")
    before = (await call(node, "GET", "/v1/memory/status")).json()["total"]
    response = await call(node, "POST", "/v1/memory/files/sync", body)
    assert response.status_code in (400, 422), response.text
    assert (await call(node, "GET", "/v1/memory/status")).json()["total"] == before


async def test_the_sync_route_never_opens_the_paths_it_is_given(node: NodeService, tmp_path: Path) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("# Secret\n\nThe mongoosix password.\n")
    body = {"documents": [{"path": str(secret), "size": 10, "mtime_ns": 1,
                           "content_b64": base64.b64encode(b"# Given\n\nOnly the civetrix words.\n").decode()}]}
    response = await call(node, "POST", "/v1/memory/files/sync", body)
    assert response.status_code == 200, response.text
    assert await texts(node, "civetrix") and await texts(node, "mongoosix") == []
