"""`crystalmesh mcp` driven by a client nobody here wrote: the official TypeScript SDK's Client
(tests/support/mcp_ts_client.cjs, `@modelcontextprotocol/sdk` from tools/), started by the
test as a real process that spawns `crystalmesh mcp` over stdio against a running node.

It lists tools, resources and resource templates, lists the agent's skills with the SEP-2640
``skills/list`` method and reads each ``SKILL.md``, and calls tools: the answers must agree
with the node itself and with the digests the server publishes.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from node.service import NodeService
from tests.support.tools import missing_tool

REPO = Path(__file__).resolve().parents[3]
SCRIPT = REPO / "tests" / "support" / "mcp_ts_client.cjs"
NODE_MODULES = REPO / "tools" / "node_modules"
SKILL_MD = """---
name: rotate-tls-certs
description: Rotate the TLS certificates of the ingress before they expire. Use when a cert is within 14 days.
---
# Rotate certificates

1. Issue new certificates with the ACME client.
2. Reload the ingress.
"""



async def ts_client(data_dir: Path, calls: list[dict[str, Any]],
                    subscribe: list[str] | None = None) -> dict[str, Any]:
    node_bin = shutil.which("node")
    if node_bin is None or not (NODE_MODULES / "@modelcontextprotocol" / "sdk").is_dir():
        missing_tool("node and @modelcontextprotocol/sdk in tools/ (scripts/setup installs them)")
    plan = {"command": sys.executable, "args": ["-m", "node.cli.main", "--data-dir", str(data_dir), "mcp"],
            "env": dict(os.environ) | {"PYTHONPATH": str(REPO)}, "cwd": str(REPO), "calls": calls,
            "subscribe": subscribe or []}
    with trio.fail_after(180):
        done = await trio.run_process([node_bin, str(SCRIPT), json.dumps(plan)], capture_stdout=True,
                                      capture_stderr=True, check=False,
                                      env=dict(os.environ) | {"NODE_PATH": str(NODE_MODULES)})
    assert done.returncode == 0, done.stderr.decode()[-3000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


async def test_the_typescript_sdk_client_lists_reads_and_calls(node: NodeService) -> None:
    crystal = await node.memory.add_from_request({"text": SKILL_MD, "type": "skill", "scope": "public"})
    seen = await ts_client(node.config.data_dir, [
        {"tool": "skill_record_execution",
         "arguments": {"crystal_id": crystal.id, "success": True, "reward": 0.8, "note": "certs renewed"}},
        {"tool": "memory_add", "arguments": {"text": "The ingress runs on port 8443", "type": "fact"}},
        {"tool": "skill_publish", "arguments": {"crystal_id": crystal.id}},
        {"tool": "memory_dream", "arguments": {}},
    ], subscribe=["crystalmesh://working/default/MEMORY.md", "crystalmesh://working/default/notes.md"])

    assert seen["server"]["name"] == "crystalmesh"
    assert seen["capabilities"]["resources"]["subscribe"] is True, seen["capabilities"]
    tools = {tool["name"]: tool for tool in seen["tools"]}
    assert {"skill_record_execution", "skill_crystallize", "bounty_post", "bounty_list", "bounty_fulfil",
            "listing_reprice", "listing_unpublish", "skill_report_outcome", "memory_search",
            "skill_buy"} <= set(tools)
    assert tools["skill_record_execution"]["required"] == ["crystal_id", "success"]

    uris = {resource["uri"] for resource in seen["resources"]}
    skill_uri = "skill://rotate-tls-certs/SKILL.md"
    assert {"crystalmesh://working/default/MEMORY.md", "crystalmesh://working/default/notes.md",
            "skill://index.json", skill_uri} <= uris
    assert {template["uriTemplate"] for template in seen["templates"]} >= {
        "crystalmesh://working/{namespace}/MEMORY.md"}
    [entry] = seen["skills"]
    assert entry["uri"] == skill_uri and entry["frontmatter"]["name"] == "rotate-tls-certs"
    text = seen["reads"][skill_uri]
    assert text == SKILL_MD.strip()  # the memory keeps the text without its trailing newline
    assert entry["resources"] == [{"uri": skill_uri, "size": len(text.encode()),
                                   "digest": "sha256:" + hashlib.sha256(text.encode()).hexdigest()}]

    recorded, added, publish, dreamt = seen["calls"]
    assert not recorded.get("isError") and recorded["structuredContent"]["executions"] == 1
    assert not added.get("isError") and added["structuredContent"]["outcome"] == "created"
    # One recorded run is not a track record: the listing gate refuses, as a tool error.
    assert publish["isError"] and "Traceback" not in json.dumps(publish)
    stored = await node.memory.get(crystal.id)
    assert stored.execution.executions == 1
    # Over stdio with the 2025 protocol: the note and the dream were announced to the subscriber,
    # and the dream reported its progress to a client that asked (onprogress sends a token).
    assert not dreamt.get("isError") and dreamt["structuredContent"]["status"] == "written"
    assert {"crystalmesh://working/default/MEMORY.md", "crystalmesh://working/default/notes.md"} <= set(
        seen["updated"])
    # (The TS client runs notification handlers a microtask late and drops progress that comes
    # right before the response, so only the first step is certain to be seen here.)
    first_step = seen["progress"][3][0]
    assert (first_step["progress"], first_step["total"]) == (0, 2) and "dreaming" in first_step["message"]


async def test_working_memory_resources_through_the_python_sdk_client(node: NodeService) -> None:
    """MEMORY.md and the pending notes as resources (the official Python SDK's Client, in process)."""
    from mcp import Client
    from mcp_types import TextResourceContents

    from node.agent import build_server
    from node.api import ApiClient

    server = build_server(lambda: ApiClient(f"http://127.0.0.1:{node.api_port}", node.api_token))

    async def read(client: Client, uri: str) -> str:
        content = (await client.read_resource(uri)).contents[0]
        assert isinstance(content, TextResourceContents)
        return content.text

    async with Client(server) as client:
        empty = await read(client, "crystalmesh://working/default/notes.md")
        assert "No pending notes" in empty
        added = await client.call_tool("memory_add", {"text": "Jonas prefers tabs over spaces",
                                                      "type": "preference", "importance": 0.9})
        assert not added.is_error
        await client.call_tool("memory_add", {"text": "The planner owns the release calendar",
                                              "namespace": "agent:planner"})
        notes = await read(client, "crystalmesh://working/default/notes.md")
        assert "- [0.90] Jonas prefers tabs over spaces" in notes
        planner = await read(client, "crystalmesh://working/agent:planner/notes.md")
        assert "release calendar" in planner and "tabs" not in planner
        dreamt = await client.call_tool("memory_dream", {})
        assert not dreamt.is_error
        # the dream's insight of the preference, linked to the note (issue 35); nothing proposed
        assert dreamt.structured_content["insights"]["created"] == 1
        proposed = await client.call_tool("memory_directive_proposals", {})
        assert not proposed.is_error and proposed.structured_content["proposals"] == []
        memory_md = await read(client, "crystalmesh://working/default/MEMORY.md")
        assert memory_md == (await node.working.state("default"))["memory_md"] and memory_md
        with pytest.raises(Exception, match="namespace"):
            await client.read_resource("crystalmesh://working/Not..A-Namespace/notes.md")
