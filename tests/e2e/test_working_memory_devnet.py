"""Working memory on a running node: the CLI through the node's API, the MCP tools over stdio,
a hostile request that changes nothing, and a node killed right after a note."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from node.api.client import ApiError
from tests.support.devnet import Devnet

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
NODE = "node-1"


@pytest.fixture(scope="module")
def devnet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Devnet]:
    with Devnet(tmp_path_factory.mktemp("working") / "devnet", 1, with_chain=False) as net:
        yield net


def cli_json(devnet: Devnet, *args: str) -> Any:
    import json

    done = devnet.cli("--json", *args, node=NODE)
    return json.loads(done.stdout)


def test_cli_goes_through_the_running_node(devnet: Devnet) -> None:
    noted = cli_json(devnet, "memory", "note", "User's name is Ada, prefers short answers",
                     "--importance", "0.9")
    assert noted["crystal"] == "indexed" and noted["namespace"] == "default"
    hits = devnet.api(NODE).post("/v1/crystals/search", {"query": "Ada short answers", "k": 3})["hits"]
    assert hits[0]["id"] == noted["crystal_id"]
    context = cli_json(devnet, "memory", "context", "--window", "64000")["context"]
    assert "(importance: 0.9) User's name is Ada" in context
    dream = cli_json(devnet, "memory", "dream")
    assert dream["status"] == "written" and dream["consumed_notes"] >= 1
    context = cli_json(devnet, "memory", "context")["context"]
    assert "## The Bond (Oxytocin-Weighted)" in context and "Ada" in context
    assert "Unsynthesized Notes" not in context


@pytest.mark.parametrize("body", [
    {"text": "", "importance": 0.5},
    {"text": "ok", "importance": 1.5},
    {"text": "ok", "importance": "0.5x"},
    {"text": "ok", "namespace": "../../etc"},
    {"text": "x" * 5000},
    {"text": "ok", "unknown": 1},
])
def test_hostile_notes_are_400_and_write_nothing(devnet: Devnet, body: dict[str, Any]) -> None:
    scratch = devnet.data_dir(NODE) / "memory" / "default" / "scratch.md"
    before = scratch.read_bytes() if scratch.exists() else b""
    with pytest.raises(ApiError) as refused:
        devnet.api(NODE).post("/v1/memory/notes", body)
    assert refused.value.status == 400
    assert (scratch.read_bytes() if scratch.exists() else b"") == before
    assert devnet.api(NODE).get("/v1/status")  # the node is still up


async def test_mcp_memory_add_is_the_working_memory_note(devnet: Devnet) -> None:
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "node.cli.main", "--dir", str(devnet.dir), "--node", NODE, "mcp"],
        env=dict(os.environ) | {"PYTHONPATH": str(REPO)}, cwd=str(REPO))
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = {tool.name for tool in (await session.list_tools()).tools}
        assert {"memory_add", "memory_context", "memory_dream"} <= tools
        assert "working_memory_note" not in tools  # one tool, not two
        added = await session.call_tool("memory_add", {"text": "Deploy freeze until Monday", "importance": 0.9})
        assert not added.is_error and added.structured_content
        assert added.structured_content["importance"] == 0.9
        assert added.structured_content["outcome"] == "created" and added.structured_content["id"]
        skill = await session.call_tool("memory_add", {"text": "Skill: restart the queue worker",
                                                       "type": "skill"})
        assert not skill.is_error and "note_id" not in (skill.structured_content or {})
        context = await session.call_tool("memory_context", {"window_tokens": 32000})
        assert "Deploy freeze until Monday" in str(context.structured_content)
        dreamt = await session.call_tool("memory_dream", {})
        assert not dreamt.is_error and dreamt.structured_content["status"] == "written"


def test_a_note_acknowledged_before_kill_9_survives(devnet: Devnet) -> None:
    noted = cli_json(devnet, "memory", "note", "Acknowledged just before the crash", "--importance", "0.7")
    devnet.kill_node(NODE)
    devnet.restart_node(NODE)
    context = cli_json(devnet, "memory", "context")["context"]
    assert "Acknowledged just before the crash" in context
    hits = devnet.api(NODE).post("/v1/crystals/search", {"query": "acknowledged before the crash", "k": 3})["hits"]
    assert hits[0]["id"] == noted["crystal_id"]
