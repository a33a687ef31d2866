"""MCP that keeps up (issue 34, delivery 6): subscriptions to working memory and the skill index,
and progress of long tools, seen by the official Python SDK's ``Client`` against a running node.

Both eras of the protocol: a 2025 client (``mode="legacy"``: ``resources/subscribe`` and
``notifications/resources/updated`` over JSON-RPC) and a 2026-07-28 client (the default:
``subscriptions/listen`` streams). Changes are made through the node's API, as another
agent or the node's own schedule would make them, never through the MCP server itself.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import trio
from mcp import Client
from mcp.client.subscriptions import ResourceUpdated, Subscription
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ResourceUpdatedNotification

from node.agent import build_server
from node.agent.mcp_progress import Progress
from node.api import ApiClient
from node.service import NodeService
from tests.support.wait import wait_until_async

MEMORY_MD = "crystalmesh://working/default/MEMORY.md"
NOTES = "crystalmesh://working/default/notes.md"
PLANNER_NOTES = "crystalmesh://working/agent:planner/notes.md"
INDEX = "skill://index.json"
WAIT_S = 30
SKILL_MD = """---
name: rotate-tls-certs
description: Rotate the TLS certificates of the ingress before they expire.
---
# Rotate certificates

1. Issue new certificates with the ACME client.
2. Reload the ingress.
"""



def api(node: NodeService) -> ApiClient:
    return ApiClient(f"http://127.0.0.1:{node.api_port}", node.api_token)


async def through_api(node: NodeService, operation: Any) -> Any:
    """One call of the node's HTTP API from a worker thread (the way another process writes)."""
    def blocking() -> Any:
        client = api(node)
        try:
            return operation(client)
        finally:
            client.close()
    return await trio.to_thread.run_sync(blocking)


async def next_event(subscription: Subscription) -> ResourceUpdated:
    with trio.fail_after(WAIT_S):
        async for event in subscription:
            assert isinstance(event, ResourceUpdated)
            return event
    raise AssertionError("the subscription ended")


async def test_a_listen_stream_hears_of_its_resources_and_of_nothing_else(node: NodeService) -> None:
    server = build_server(lambda: api(node))
    async with Client(server) as client:
        capabilities = client.session.server_capabilities
        assert capabilities is not None and capabilities.resources is not None
        assert capabilities.resources.subscribe is True
        async with client.listen(resource_subscriptions=[PLANNER_NOTES, MEMORY_MD]) as planner, \
                client.listen(resource_subscriptions=[NOTES]) as default:
            # A note in the default namespace: the scratch changed, MEMORY.md did not.
            await through_api(node, lambda c: c.memory_note("Jonas prefers tabs", 0.9, "default"))
            assert await next_event(default) == ResourceUpdated(uri=NOTES)
            # Then one in the planner's namespace: its stream hears of that first, so it never
            # heard of the default note (one stream delivers in order).
            await through_api(node, lambda c: c.memory_note("The planner owns the calendar", 0.8,
                                                            "agent:planner"))
            assert await next_event(planner) == ResourceUpdated(uri=PLANNER_NOTES)
            # A dream rewrites MEMORY.md and empties the default scratch.
            dreamt = await through_api(node, lambda c: c.memory_dream("default"))
            assert dreamt["status"] == "written", dreamt
            assert await next_event(planner) == ResourceUpdated(uri=MEMORY_MD)
            assert await next_event(default) == ResourceUpdated(uri=NOTES)
            text = (await client.read_resource(MEMORY_MD)).contents[0]
            assert "tabs" in getattr(text, "text", "")
        await wait_until_async(lambda: not server.watch.uris(), WAIT_S, "closed streams to unwatch")


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # the 2025 era, on purpose
async def test_a_2025_client_subscribes_unsubscribes_and_leaves(node: NodeService) -> None:
    server = build_server(lambda: api(node))
    updates: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            updates.append(str(message.params.uri))

    async with Client(server, mode="legacy", message_handler=on_message) as client:
        capabilities = client.session.server_capabilities
        assert capabilities is not None and capabilities.resources is not None
        assert capabilities.resources.subscribe is True
        await client.subscribe_resource(MEMORY_MD)
        await client.subscribe_resource(NOTES)
        await client.unsubscribe_resource(NOTES)  # from now on, notes are nobody's business here
        await client.subscribe_resource(PLANNER_NOTES)
        with pytest.raises(Exception, match="not a resource that can be subscribed"):
            await client.subscribe_resource("file:///etc/passwd")

        await through_api(node, lambda c: c.memory_note("The ingress runs on port 8443", 0.9, "default"))
        dreamt = await through_api(node, lambda c: c.memory_dream("default"))
        assert dreamt["status"] == "written", dreamt
        await wait_until_async(lambda: MEMORY_MD in updates, WAIT_S, "MEMORY.md updated")
        # Two planner notes, each after the default changes: the second one's update comes from a
        # later poll than any default change, and one connection delivers in order; so when it is
        # here, an update of the unsubscribed default notes would be here too.
        for count, text in enumerate(("The planner owns the calendar", "The planner ships on Fridays"), 1):
            await through_api(node, lambda c, text=text: c.memory_note(text, 0.8, "agent:planner"))
            await wait_until_async(lambda count=count: updates.count(PLANNER_NOTES) >= count, WAIT_S,
                                   "the planner's notes updated")
        assert NOTES not in updates, updates
        assert updates.count(MEMORY_MD) == 1, updates
    # The connection is gone: its subscriptions went with it, and the poll carries on.
    await wait_until_async(lambda: not server.watch.uris(), WAIT_S, "the closed connection to unwatch")
    await through_api(node, lambda c: c.memory_note("Nobody listens to this", 0.5, "default"))
    await server.watch.poll()


async def test_the_skill_index_follows_new_skills_and_their_runs(node: NodeService) -> None:
    server = build_server(lambda: api(node))
    async with Client(server) as client, client.listen(resource_subscriptions=[INDEX]) as index:
        crystal = await node.memory.add_from_request({"text": SKILL_MD, "type": "skill", "scope": "public"})
        assert await next_event(index) == ResourceUpdated(uri=INDEX)
        await through_api(node, lambda c: c.record_execution(crystal.id, True, 0.9))
        assert await next_event(index) == ResourceUpdated(uri=INDEX)
        served = (await client.read_resource(INDEX)).contents[0]
        assert '"io.crystalmesh/executions": 1' in getattr(served, "text", "")


async def test_memory_dream_reports_its_progress(node: NodeService) -> None:
    server = build_server(lambda: api(node))
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with Client(server) as client:
        await client.call_tool("memory_add", {"text": "Jonas prefers tabs over spaces", "type": "preference"})
        result = await client.call_tool("memory_dream", {}, progress_callback=on_progress)
        assert not result.is_error, result.content
        quiet = await client.call_tool("memory_dream", {})  # no token: no progress, same tool
        assert not quiet.is_error
    assert seen[0][:2] == (0, 2) and "dreaming" in (seen[0][2] or "")
    assert seen[-1][:2] == (2, 2) and (seen[-1][2] or "").startswith("dream written")
    values = [progress for progress, _, _ in seen]
    assert values == sorted(set(values))  # strictly increasing, as the protocol requires


async def test_catalogue_publish_reports_each_batch(node: NodeService) -> None:
    crystal = await node.memory.add_from_request({"text": SKILL_MD, "type": "skill", "scope": "public"})
    for _ in range(3):
        await through_api(node, lambda c: c.record_execution(crystal.id, True, 0.9))
    server = build_server(lambda: api(node))
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with Client(server, mode="legacy") as client:  # notifications/progress over JSON-RPC
        result = await client.call_tool("skill_publish_catalogue", {"crystal_ids": [crystal.id]},
                                        progress_callback=on_progress)
        assert not result.is_error, result.content
        assert isinstance(result.structured_content, dict)
        assert len(result.structured_content["published"]) == 1
    assert seen[0][:2] == (0, 1)
    assert (1, 1) in [(progress, total) for progress, total, _ in seen]  # the batch, reported


async def test_a_long_call_sends_heartbeats_and_a_failing_client_never_fails_the_tool() -> None:
    """The heartbeat of ``Progress.during`` on the SDK's real path (a tool of a bare MCPServer)."""
    server: MCPServer[Any] = MCPServer("heartbeat")
    beats = trio.Event()
    seen: list[tuple[float, str | None]] = []

    @server.tool()
    async def slow(ctx: Context[Any, Any]) -> str:
        progress = Progress(ctx, total=1, heartbeat_s=0.01)
        await progress.step(0, "started")
        result = await progress.during(lambda: _until(beats), "waiting for the node")
        await progress.step(1, "done")
        return result

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))
        if len(seen) >= 4:
            beats.set()

    async def broken(progress: float, total: float | None, message: str | None) -> None:
        beats.set()
        raise httpx.ReadError("the client went away")

    async with Client(server) as client:
        with trio.fail_after(WAIT_S):
            result = await client.call_tool("slow", {}, progress_callback=on_progress)
        assert not result.is_error and result.structured_content == {"result": "ok"}
        assert [message for _, message in seen[1:4]] == ["waiting for the node (0 s)"] * 3
        assert 0 < seen[1][0] < seen[2][0] < seen[3][0] < 1 and seen[-1] == (1, "done")
        beats = trio.Event()
        survived = await client.call_tool("slow", {}, progress_callback=broken)
        assert not survived.is_error and survived.structured_content == {"result": "ok"}


async def _until(event: trio.Event) -> str:
    await event.wait()
    return "ok"


async def test_the_versions_endpoint_refuses_what_it_must(node: NodeService) -> None:
    base = f"http://127.0.0.1:{node.api_port}/v1/memory/working/versions"
    headers = {"Authorization": f"Bearer {node.api_token}"}

    def get(params: Any, with_token: bool = True) -> httpx.Response:
        return httpx.get(base, params=params, headers=headers if with_token else {}, timeout=10)

    answer = await trio.to_thread.run_sync(lambda: get({"namespace": ["default", "agent:x"], "skills": "true"}))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert set(body["namespaces"]) == {"default", "agent:x"} and isinstance(body["skills"], str)
    assert body["namespaces"]["agent:x"] == {"memory_md": "absent", "notes": "absent"}
    assert (await trio.to_thread.run_sync(lambda: get({}, with_token=False))).status_code == 401
    for hostile in ({"namespace": "../../etc"}, {"namespace": [f"agent:{i}" for i in range(65)]},
                    {"namespace": "default", "extra": "1"}):
        refused = await trio.to_thread.run_sync(lambda hostile=hostile: get(hostile))
        assert 400 <= refused.status_code < 500, (hostile, refused.status_code)
    assert not (node.config.data_dir / "etc").exists()


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
async def test_subscriptions_are_bounded(node: NodeService) -> None:
    """A client cannot make the server poll without limit: 64 namespaces at most, then refused."""
    server = build_server(lambda: api(node))
    async with Client(server, mode="legacy") as client:
        for index in range(64):
            await client.subscribe_resource(f"crystalmesh://working/agent:a{index}/notes.md")
        with pytest.raises(Exception, match="at most 64 namespaces"):
            await client.subscribe_resource("crystalmesh://working/agent:one-too-many/notes.md")
        await client.unsubscribe_resource("crystalmesh://working/agent:a0/notes.md")
        await client.subscribe_resource("crystalmesh://working/agent:one-too-many/MEMORY.md")
        with pytest.raises(Exception, match="not a resource"):
            await client.subscribe_resource("crystalmesh://working/../../etc/notes.md")
        assert len(server.watch.keys()) == 64
    async with Client(server) as client:
        with pytest.raises(Exception, match="at most 64 namespaces"):
            async with client.listen(resource_subscriptions=[
                    f"crystalmesh://working/agent:b{index}/MEMORY.md" for index in range(65)]):
                pass
